//! `WindowOp`: a dataset of the elements given as tensors, `output_types`
//! components each, in order (TensorFlow's own building block for the
//! datasets `window` yields). It is built as the engine's encoded window
//! (`tfdata_dataset::ops::window`), the form `window`'s datasets take.

use tfdata_core::{Element, Error, Result};
use tfdata_dataset::Dataset;
use tfdata_proto::tensorflow::NodeDef;

use super::node::{handle, tensors};
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;

/// The node compiled, if it is this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    if node.op != "WindowOp" {
        return Ok(None);
    }
    let n = attrs.dtypes("output_types")?.len();
    if n == 0 {
        return Err(attrs.error("output_types is empty"));
    }
    Ok(Some(handle(
        move |mut i| {
            let inputs = tensors(i.take(None)?, "WindowOp inputs")?;
            // Consecutive groups of `n` inputs are the elements; a partial
            // group at the end is dropped, as TensorFlow drops it.
            let rows: Vec<Element> = inputs
                .chunks_exact(n)
                .map(|c| Element::new(c.to_vec()))
                .collect();
            if rows.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "WindowOp: {} inputs make no element of {n} components (an empty window is \
                     not supported)",
                    inputs.len()
                )));
            }
            let pairs = tfdata_dataset::ops::window::encode_rows("WindowOp", &rows)?;
            Dataset::window_from_pairs(pairs)
        },
        node,
    )))
}
