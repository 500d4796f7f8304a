//! A pipeline from its `DatasetDef`, the same way for tasks and snapshot
//! stream writers: a tfdata pipeline as it is, or a TensorFlow graph
//! translated by `tfdata-graph`.

use std::sync::Arc;

use tfdata_core::{Error, Result};
use tfdata_dataset::autoshard::{StaticPolicy, auto_shard};
use tfdata_dataset::pipeline::from_pipeline_def;
use tfdata_proto::data as wire;

/// How a task's elements go on TensorFlow's wire (`GetElement`).
#[derive(Clone, Debug, Default)]
pub struct ServedForm {
    /// As Snappy-compressed `CompressedElement`s (the dataset asked for
    /// compression and the dispatcher did not turn it off).
    pub compress: bool,
    /// Components a TensorFlow graph serves as `DT_VARIANT` SparseTensors or
    /// RaggedTensors, which the pipeline carries in their string form.
    pub sparse_variants: Arc<[usize]>,
}

impl From<bool> for ServedForm {
    fn from(compress: bool) -> Self {
        ServedForm {
            compress,
            sparse_variants: Arc::from([]),
        }
    }
}

/// A task's pipeline and how its elements are to be served:
/// a tfdata pipeline as it is, or a TensorFlow graph translated
/// (`tfdata-graph`); either rewritten for static sharding. The dispatcher's
/// `worker_index` here is the static shard index: this worker's position
/// in `worker_addresses`.
pub(crate) fn build_dataset(
    dataset_def: &wire::DatasetDef,
    static_policy: Option<StaticPolicy>,
    num_workers: i64,
    shard_index: i64,
) -> Result<(tfdata_dataset::Dataset, ServedForm)> {
    let shard = |root: &tfdata_proto::tfdata::pipeline::OpDef| match static_policy {
        Some(policy) => auto_shard(root, policy, num_workers, shard_index),
        None => Ok(root.clone()),
    };
    match &dataset_def.tfdata_pipeline {
        Some(pipeline) => {
            let root = pipeline
                .root
                .as_ref()
                .ok_or_else(|| Error::InvalidArgument("pipeline has no root op".into()))?;
            let dataset = match static_policy {
                None => from_pipeline_def(pipeline)?,
                Some(_) => from_pipeline_def(&tfdata_proto::tfdata::pipeline::PipelineDef {
                    root: Some(shard(root)?),
                    ..pipeline.clone()
                })?,
            };
            Ok((dataset, pipeline.compress.into()))
        }
        None => {
            let translated = tfdata_graph::translate_bytes(&dataset_def.graph)?;
            let dataset = match static_policy {
                None => translated.dataset.clone(),
                Some(_) => translated.rewritten(shard)?,
            };
            Ok((
                dataset,
                ServedForm {
                    compress: translated.compressed,
                    sparse_variants: translated.sparse_variants.into(),
                },
            ))
        }
    }
}
