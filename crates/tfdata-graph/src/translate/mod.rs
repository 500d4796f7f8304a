//! (being written) TensorFlow dataset graphs to tfdata datasets.

use tfdata_core::{Error, Result};
use tfdata_dataset::Dataset;
use tfdata_proto::tensorflow::GraphDef;

/// A translated graph.
pub struct Translated {
    /// The pipeline, without TensorFlow's trailing compression map.
    pub dataset: Dataset,
    /// The graph ended in the `CompressElement` map TensorFlow's clients
    /// add for `compression="AUTO"`: serve its elements compressed.
    pub compressed: bool,
}

/// Translates a serialized `GraphDef` (`DatasetDef.graph`).
pub fn translate_bytes(graph: &[u8]) -> Result<Translated> {
    translate(&crate::graph::decode_graph(graph)?)
}

/// Translates a dataset graph into a tfdata pipeline.
pub fn translate(_graph: &GraphDef) -> Result<Translated> {
    Err(Error::Unimplemented("not yet".into()))
}
