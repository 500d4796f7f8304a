//! `TfdataAutocacheLoadDataset` (`crate::autocache::LOAD_OP`): tfdata's
//! private op that a dispatcher puts in place of a cached prefix of a
//! TensorFlow graph. It is the engine's `load` of the cache (a complete
//! distributed snapshot at `path`): element spec and compression from the
//! snapshot's metadata, its chunks the splits in distributed_epoch.

use tfdata_core::Result;
use tfdata_dataset::Dataset;
use tfdata_proto::tensorflow::NodeDef;

use super::node::handle;
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;

/// The node compiled, if it is this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    if node.op != crate::autocache::LOAD_OP {
        return Ok(None);
    }
    let path = attrs.string("path")?.to_string();
    if path.is_empty() {
        return Err(attrs.error("path is empty"));
    }
    // The cache is complete before a graph reading it is registered: no
    // waiting for it.
    Ok(Some(handle(move |_| Ok(Dataset::load(&path, false)), node)))
}
