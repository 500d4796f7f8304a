//! Dataset nodes of random sources and selection among datasets:
//! `RandomDataset` (`Dataset.random`) and `DirectedInterleaveDataset`
//! (`sample_from_datasets`, `choose_from_datasets`).

use tfdata_core::Result;
use tfdata_dataset::Dataset;
use tfdata_proto::tensorflow::NodeDef;

use super::node::handle;
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    Ok(Some(match node.op.as_str() {
        // RandomDatasetV2, with its seed generator, is seeds.rs's.
        "RandomDataset" | "ExperimentalRandomDataset" => handle(
            |mut i| {
                let seed = i.int("seed")?;
                let seed2 = i.int("seed2")?;
                Ok(Dataset::random(seed, seed2, false))
            },
            node,
        ),
        "DirectedInterleaveDataset" | "ExperimentalDirectedInterleaveDataset" => {
            let stop = attrs.bool_or("stop_on_empty_dataset", false)?;
            handle(
                move |mut i| {
                    let selector = i.next("selector_input_dataset")?;
                    let selector = selector.into_dataset("DirectedInterleaveDataset selector")?;
                    let inputs = i
                        .take(None)?
                        .into_iter()
                        .map(|v| v.into_dataset("DirectedInterleaveDataset data input"))
                        .collect::<Result<Vec<_>>>()?;
                    let ds = Dataset::directed_interleave(selector, inputs, stop);
                    // Checked here, as TensorFlow's kernel checks on construction.
                    ds.validate()?;
                    Ok(ds)
                },
                node,
            )
        }
        _ => return Ok(None),
    }))
}
