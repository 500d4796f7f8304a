//! Datasets: registration (the definition, checked in `requests`, is
//! written to the store outside the state lock), definitions for workers, metadata, and the runtime
//! compression decision.

use tfdata_core::{DatasetId, Error, Result};
use tfdata_proto::data::{self as wire, update::UpdateType};

use super::Dispatcher;
use super::errors::{task_failed, unknown_dataset};
use super::requests::{
    DisableCompressionAtRuntime, GetDataServiceMetadata, GetDatasetDef, GetOrRegisterDataset,
};

impl Dispatcher {
    pub(crate) async fn get_dataset_def(
        &self,
        req: GetDatasetDef,
    ) -> Result<wire::GetDatasetDefResponse> {
        let id = req.dataset_id;
        let known = self.ledger.read(|g| g.state.dataset(&id).is_some()).await?;
        if !known {
            return Err(Error::not_found("dataset", id));
        }
        let store = self.store.clone();
        let def = tokio::task::spawn_blocking(move || store.get(&id))
            .await
            .map_err(|e| task_failed("dataset read", e))??;
        Ok(wire::GetDatasetDefResponse {
            dataset_def: Some(def),
        })
    }

    /// `GetOrRegisterDataset`: the id of an equal registered dataset, or a
    /// new one. The definition is validated and written before the state
    /// lock is taken; registrations are serialised among themselves so the
    /// id chosen stays free meanwhile.
    pub(crate) async fn get_or_register_dataset(
        &self,
        req: GetOrRegisterDataset,
    ) -> Result<wire::GetOrRegisterDatasetResponse> {
        let GetOrRegisterDataset {
            def,
            metadata,
            dataset_id,
        } = req;
        // Which workers can run a graph; a graph walk, so not under the
        // lock and not on an RPC thread.
        let support = if def.tfdata_pipeline.is_none() {
            let graph = def.graph.clone();
            tokio::task::spawn_blocking(move || graph_support(&graph))
                .await
                .map_err(|e| task_failed("graph check", e))?
        } else {
            GraphSupport::default()
        };
        let _registering = self.registration.lock().await;
        let (existing, next_id) = self
            .ledger
            .read(|g| {
                let existing = dataset_id.as_ref().and_then(|id| {
                    let ds = g.state.dataset(id)?;
                    Some(ds.metadata.clone())
                });
                (existing, g.state.next_dataset_id())
            })
            .await?;
        if let (Some(id), Some(existing)) = (&dataset_id, &existing) {
            check_same_metadata(&id.0, existing, &metadata)?;
            return Ok(wire::GetOrRegisterDatasetResponse {
                dataset_id: id.0.clone(),
            });
        }
        let id = dataset_id.unwrap_or(next_id);
        let store = self.store.clone();
        let is_pipeline = def.tfdata_pipeline.is_some();
        let (put_id, put_def) = (id.clone(), def);
        tokio::task::spawn_blocking(move || store.put(&put_id, &put_def))
            .await
            .map_err(|e| task_failed("dataset write", e))??;
        let mut txn = self.ledger.begin().await;
        txn.apply(UpdateType::RegisterDataset(wire::RegisterDatasetUpdate {
            dataset_id: id.0.clone(),
            metadata: Some(metadata),
            tfdata_pipeline: is_pipeline,
            tfdata_workers_run_graph: !is_pipeline && support.unsupported_ops.is_empty(),
            tfdata_unsupported_ops: support.unsupported_ops,
            tfdata_tensorflow_cannot_run: !is_pipeline && support.tensorflow_cannot_run,
            ..Default::default()
        }))?;
        txn.commit().await?;
        tracing::info!(dataset = %id, "dataset registered");
        Ok(wire::GetOrRegisterDatasetResponse { dataset_id: id.0 })
    }

    pub(crate) async fn get_data_service_metadata(
        &self,
        req: GetDataServiceMetadata,
    ) -> Result<wire::GetDataServiceMetadataResponse> {
        let metadata = self
            .ledger
            .read(|g| {
                g.state
                    .dataset(&req.dataset_id)
                    .map(|ds| ds.metadata.clone())
            })
            .await?
            .ok_or_else(|| unknown_dataset(&req.dataset_id.0))?;
        Ok(wire::GetDataServiceMetadataResponse {
            metadata: Some(metadata),
        })
    }

    /// The number of elements a dataset's tasks produce, as its workers
    /// will see it (−1 infinite, −2 unknown): a tfdata pipeline's own
    /// cardinality, read from its definition (a registration need not say,
    /// and a worker checks the pipeline it builds); for a TensorFlow graph,
    /// the cardinality TensorFlow computed when it registered the graph.
    pub(super) async fn dataset_cardinality(&self, id: &DatasetId) -> Result<i64> {
        let (is_pipeline, registered) = self
            .ledger
            .read(|g| {
                g.state
                    .dataset(id)
                    .map(|ds| (ds.is_pipeline, ds.metadata.cardinality))
            })
            .await?
            .ok_or_else(|| unknown_dataset(&id.0))?;
        if !is_pipeline {
            return Ok(registered);
        }
        let (store, id) = (self.store.clone(), id.clone());
        tokio::task::spawn_blocking(move || {
            let def = store.get(&id)?;
            let pipeline = def.tfdata_pipeline.ok_or_else(|| {
                Error::Internal(format!(
                    "dataset {id} was registered as a pipeline but has none"
                ))
            })?;
            Ok(tfdata_dataset::pipeline::from_pipeline_def(&pipeline)?.cardinality())
        })
        .await
        .map_err(|e| task_failed("dataset read", e))?
    }

    pub(crate) async fn disable_compression_at_runtime(
        &self,
        req: DisableCompressionAtRuntime,
    ) -> Result<wire::DisableCompressionAtRuntimeResponse> {
        use wire::disable_compression_at_runtime_response::Decision;
        let mut txn = self.ledger.begin().await;
        let ds = txn
            .state
            .dataset(&req.dataset_id)
            .ok_or_else(|| unknown_dataset(&req.dataset_id.0))?;
        let decision =
            if ds.metadata.compression == wire::data_service_metadata::Compression::Off as i32 {
                Decision::NoCompressionToDisable(true)
            } else if let Some(decided) = ds.compression_disabled_at_runtime {
                Decision::CompressionDisabledAtRuntime(decided)
            } else {
                txn.apply(UpdateType::CompressionDisabledAtRuntime(
                    wire::CompressionDisabledAtRuntimeUpdate {
                        dataset_id: req.dataset_id.0.clone(),
                        compression_disabled: req.disable,
                    },
                ))?;
                Decision::CompressionDisabledAtRuntime(req.disable)
            };
        txn.commit().await?;
        Ok(wire::DisableCompressionAtRuntimeResponse {
            decision: Some(decision),
        })
    }
}

/// A dataset re-registered under an existing id must describe the same data.
fn check_same_metadata(
    id: &str,
    existing: &wire::DataServiceMetadata,
    new: &wire::DataServiceMetadata,
) -> Result<()> {
    let mut diffs = Vec::new();
    if existing.element_spec != new.element_spec {
        diffs.push("element_spec".to_string());
    }
    if existing.compression != new.compression {
        diffs.push(format!(
            "compression (existing {}, requested {})",
            existing.compression, new.compression
        ));
    }
    if existing.cardinality != new.cardinality {
        diffs.push(format!(
            "cardinality (existing {}, requested {})",
            existing.cardinality, new.cardinality
        ));
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "a dataset with id {id} is already registered with different metadata: {}",
            diffs.join(", ")
        )))
    }
}

/// Bound on the unsupported ops kept per dataset (they are listed in an
/// error message, and journaled).
const MAX_UNSUPPORTED_OPS_KEPT: usize = 64;

/// Which workers can run a TensorFlow graph.
#[derive(Debug, Default, PartialEq)]
pub(super) struct GraphSupport {
    /// The ops tfdata workers cannot run (empty: they can run it). A graph
    /// that does not decode is kept for TensorFlow's workers, which will
    /// say what is wrong with it.
    pub unsupported_ops: Vec<String>,
    /// The graph has tfdata's private ops (an autocache's load).
    pub tensorflow_cannot_run: bool,
}

pub(super) fn graph_support(graph: &[u8]) -> GraphSupport {
    let decoded = tfdata_graph::decode_graph(graph);
    let tensorflow_cannot_run = decoded
        .as_ref()
        .is_ok_and(tfdata_graph::autocache::has_private_ops);
    let unsupported_ops = match decoded.and_then(|g| tfdata_graph::unsupported_ops(&g)) {
        Ok(mut ops) => {
            ops.truncate(MAX_UNSUPPORTED_OPS_KEPT);
            ops
        }
        Err(e) => {
            let why: String = e.to_string().chars().take(200).collect();
            vec![format!("(the graph cannot be read: {why})")]
        }
    };
    GraphSupport {
        unsupported_ops,
        tensorflow_cannot_run,
    }
}
