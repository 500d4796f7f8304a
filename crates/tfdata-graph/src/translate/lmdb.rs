//! `LMDBDataset` and `ExperimentalLMDBDataset`: TensorFlow 2.21 removed
//! LMDB support, and both kernels refuse every input (before looking at the
//! file names, whatever their rank) with Unimplemented. A worker refuses
//! them the same way when the node runs, rather than read databases
//! TensorFlow's own workers cannot.

use tfdata_proto::tensorflow::NodeDef;

use super::node::handle;
use crate::function::CompiledNode;
use crate::kernels::lmdb_removed;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef) -> Option<CompiledNode> {
    if !matches!(node.op.as_str(), "LMDBDataset" | "ExperimentalLMDBDataset") {
        return None;
    }
    Some(handle(|_| Err(lmdb_removed()), node))
}
