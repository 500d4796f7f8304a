//! A pipeline served from a cache: the candidate's subtree replaced by a
//! `load` of the cache (`snapshot/load.rs`), the ops above it unchanged.

use tfdata_core::{Error, Result};
use tfdata_proto::tfdata::pipeline::{OpDef, PipelineDef};

use super::Candidate;
use super::analyse::main_chain;
use crate::attrs::{Attrs, attrs_to_wire};
use crate::snapshot::load::OP_NAME as LOAD;

/// `def` reading the candidate's output from the cache at `cache_path`
/// (complete: `wait` is false), with `def`'s `compress` flag and format
/// version. The `load` names the path only: its element spec and
/// compression come from the cache's `snapshot.metadata` when the pipeline
/// is validated or read. An error if `candidate` is not a point of `def`'s
/// main chain (an analysis of another pipeline).
pub fn rewrite(def: &PipelineDef, candidate: &Candidate, cache_path: &str) -> Result<PipelineDef> {
    let root = def
        .root
        .as_ref()
        .ok_or_else(|| Error::InvalidArgument("pipeline has no root op".into()))?;
    let chain = main_chain(root);
    let mismatch = || {
        Error::InvalidArgument(format!(
            "autocache candidate {} is not a point of this pipeline",
            candidate.label
        ))
    };
    // The chain is root first; candidates count from its bottom.
    let steps = chain
        .len()
        .checked_sub(candidate.index + 1)
        .ok_or_else(mismatch)?;
    if *chain[steps] != candidate.prefix {
        return Err(mismatch());
    }
    let load = OpDef {
        op: LOAD.to_string(),
        inputs: Vec::new(),
        attrs: attrs_to_wire(&Attrs::new().with("path", cache_path).with("wait", false)),
    };
    let mut new_root = root.clone();
    let mut node = &mut new_root;
    for _ in 0..steps {
        // `main_chain` followed `inputs[0]` this far, so it exists.
        node = node.inputs.first_mut().ok_or_else(mismatch)?;
    }
    *node = load;
    Ok(PipelineDef {
        format_version: def.format_version,
        root: Some(new_root),
        compress: def.compress,
    })
}
