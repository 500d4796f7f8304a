//! Dataset nodes that keep, drop or regroup elements: `UniqueDataset`,
//! `TakeWhileDataset`, `IgnoreErrorsDataset`, `RebatchDatasetV2`, with
//! the `Experimental*` names TensorFlow 2.21 still registers for them.

use tfdata_core::Result;
use tfdata_proto::tensorflow::NodeDef;

use super::inline::{self, Bound};
use super::node::{captured, element_args, function, handle};
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler};

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    compiler: &mut Compiler<'_>,
    attrs: &NodeAttrs,
) -> Result<Option<CompiledNode>> {
    Ok(Some(match node.op.as_str() {
        "UniqueDataset" | "ExperimentalUniqueDataset" => handle(
            |mut i| {
                let ds = i.dataset()?.unique();
                // TensorFlow's kernel refuses other inputs on construction.
                ds.validate()?;
                Ok(ds)
            },
            node,
        ),
        "TakeWhileDataset" | "ExperimentalTakeWhileDataset" => {
            let f = function(attrs, "predicate", compiler)?;
            let n = captured(attrs)?;
            let args = element_args(attrs, "predicate", n, compiler)?;
            let node_name = node.name.clone();
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let captured = i.take(Some(n))?;
                    Ok(input.take_while(inline::predicate(Bound {
                        function: f.clone(),
                        captured,
                        node: node_name.clone(),
                        args: args.clone(),
                    })))
                },
                node,
            )
        }
        // `log_warning` only logs.
        "IgnoreErrorsDataset" | "ExperimentalIgnoreErrorsDataset" => {
            handle(|mut i| Ok(i.dataset()?.ignore_errors()), node)
        }
        "RebatchDatasetV2" => handle(
            |mut i| {
                let input = i.dataset()?;
                let sizes = i.tensor("batch_sizes")?;
                if sizes.shape().len() > 1 {
                    return Err(i.err("`batch_sizes` must be a scalar or a vector."));
                }
                let sizes = sizes.to_vec::<i64>().map_err(|e| i.err(e))?;
                let drop = i.bool("drop_remainder")?;
                let ds = input.rebatch(sizes, drop);
                ds.validate()?;
                Ok(ds)
            },
            node,
        ),
        _ => return Ok(None),
    }))
}
