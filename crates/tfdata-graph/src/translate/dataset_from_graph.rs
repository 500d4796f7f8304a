//! `DatasetFromGraph`: a dataset from a serialized `GraphDef` (what
//! `tf.data`'s serialization writes), translated as a worker translates a
//! registered graph, inside the function running the node.
//!
//! Bytes that do not parse fail with TensorFlow's "Could not parse
//! GraphDef". A graph whose elements the engine would carry differently
//! from TensorFlow (one ending in TensorFlow's compression map, or serving
//! SparseTensor variants) is refused (Unimplemented) rather than read with
//! other elements. Graphs nested in graphs are followed a few levels deep.

use std::cell::Cell;
use std::sync::Arc;

use prost::Message;
use tfdata_core::Error;
use tfdata_proto::tensorflow::{GraphDef, NodeDef};

use super::node::Inputs;
use crate::function::CompiledNode;
use crate::value::Value;

/// How deep `DatasetFromGraph` nodes may nest inside the graphs they read.
const MAX_NESTING: usize = 4;

thread_local! {
    static NESTING: Cell<usize> = const { Cell::new(0) };
}

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef) -> Option<CompiledNode> {
    if node.op != "DatasetFromGraph" {
        return None;
    }
    let (name, op) = (node.name.clone(), node.op.clone());
    Some(CompiledNode {
        outputs: vec![("handle".into(), 1)],
        run: Arc::new(move |values| {
            let mut i = Inputs::new(values, &name, &op);
            let t = i.tensor("graph_def")?;
            let bytes = match t.string_values() {
                Ok([one]) if t.shape().is_empty() => one.clone(),
                _ => return Err(i.err("input `graph_def` must be a scalar string")),
            };
            // Parsed here first for TensorFlow's message on bad bytes.
            if GraphDef::decode(bytes.as_ref()).is_err() {
                return Err(Error::InvalidArgument("Could not parse GraphDef".into()));
            }
            let depth = NESTING.with(|n| n.get());
            if depth >= MAX_NESTING {
                return Err(i.err(format!(
                    "graphs nest more than {MAX_NESTING} DatasetFromGraph nodes deep"
                )));
            }
            NESTING.with(|n| n.set(depth + 1));
            let translated = super::translate_bytes(&bytes);
            NESTING.with(|n| n.set(depth));
            let translated = translated?;
            if translated.compressed || !translated.sparse_variants.is_empty() {
                return Err(Error::Unimplemented(
                    "DatasetFromGraph: a graph ending in TensorFlow's compression map or serving \
                     SparseTensor variants is not supported inside a function"
                        .into(),
                ));
            }
            Ok(vec![Value::Dataset(translated.dataset)])
        }),
    })
}
