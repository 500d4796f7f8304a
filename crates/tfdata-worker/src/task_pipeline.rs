//! A task's pipeline, loaded: its definition checked against this worker,
//! its `DatasetDef` found (in the task, in the dataset file the dispatcher
//! wrote, or asked of the dispatcher), built off the runtime
//! ([`crate::pipeline`]), with split providers for dynamic sharding, and
//! compression as the dispatcher decided it.

use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tfdata_client::DispatcherClient;
use tfdata_core::{DatasetId, Error, IterationId, Result, TaskId};
use tfdata_dataset::autoshard::StaticPolicy;
use tfdata_proto::data::{self as wire, processing_mode_def::ShardingPolicy, task_def};
use tfdata_rpc::CancellationToken;
use tfdata_rpc::metrics::Histogram;
use tfdata_rpc::retry::retry;

use crate::lane_task::LaneSource;
use crate::pipeline::{self, ServedForm};
use crate::splits::RemoteSplitProvider;
use crate::task::TaskRunner;

/// What loading a task's pipeline needs of its worker.
pub(crate) struct PipelineLoader<'a> {
    pub dispatcher: &'a DispatcherClient,
    /// This worker's address: tasks for another are refused.
    pub worker_address: &'a str,
    /// Each dispatcher call's deadline (`dispatcher_timeout`).
    pub timeout: Duration,
    pub shutdown: &'a CancellationToken,
    /// `tfdata_worker_get_split_duration_seconds`, for the split providers.
    pub get_split_duration: &'a Histogram,
}

impl PipelineLoader<'_> {
    /// Checks a task definition and finds its `DatasetDef`; also the
    /// task's sharding policy and its static form.
    async fn definition(
        &self,
        runner: &TaskRunner,
    ) -> Result<(wire::DatasetDef, i32, Option<StaticPolicy>)> {
        let def = &runner.def;
        if def.worker_address != self.worker_address {
            return Err(Error::Internal(format!(
                "task {} is for worker {:?} but this worker is {:?}",
                def.task_id, def.worker_address, self.worker_address
            )));
        }
        let policy = def
            .processing_mode_def
            .map_or(ShardingPolicy::Off as i32, |m| m.sharding_policy);
        let static_policy = match ShardingPolicy::try_from(policy) {
            Ok(ShardingPolicy::Off | ShardingPolicy::Dynamic) => None,
            Ok(ShardingPolicy::File) => Some(StaticPolicy::File),
            Ok(ShardingPolicy::Data) => Some(StaticPolicy::Data),
            Ok(ShardingPolicy::FileOrData) => Some(StaticPolicy::FileOrData),
            Ok(ShardingPolicy::Hint) => Some(StaticPolicy::Hint),
            Err(_) => {
                return Err(Error::InvalidArgument(format!(
                    "task {}: unknown sharding policy {policy}",
                    def.task_id
                )));
            }
        };

        let dataset_id = DatasetId(def.dataset_id.clone());
        let dataset_def = match &def.dataset {
            Some(task_def::Dataset::DatasetDef(d)) => d.clone(),
            Some(task_def::Dataset::Path(path)) => {
                // A local path or an object-store URL (an object-store
                // work_dir); blocking I/O either way.
                let path = path.clone();
                let read = tokio::task::spawn_blocking(move || read_dataset_file(&path))
                    .await
                    .map_err(|e| Error::Internal(format!("dataset read failed: {e}")))?;
                match read {
                    Ok(d) => d,
                    // The file may be on a disk this worker cannot see.
                    Err(e) => {
                        tracing::debug!(error = %e, "reading the dataset file failed; asking the dispatcher");
                        self.fetch_dataset_def(&dataset_id).await?
                    }
                }
            }
            None => self.fetch_dataset_def(&dataset_id).await?,
        };
        Ok((dataset_def, policy, static_policy))
    }

    /// A deterministic read's task: its definition, built once to check it
    /// (and to learn how elements are served) but not run; no split
    /// providers (lanes deal the splits themselves).
    pub(crate) async fn load_lane_source(&self, runner: &TaskRunner) -> Result<LaneSource> {
        let (dataset_def, policy, _) = self.definition(runner).await?;
        if policy != ShardingPolicy::Dynamic as i32 {
            return Err(Error::InvalidArgument(format!(
                "task {}: a deterministic read (tfdata_deterministic) needs the DYNAMIC sharding \
                 policy, got {policy}",
                runner.def.task_id
            )));
        }
        let checked = dataset_def.clone();
        let (_, mut form) =
            tokio::task::spawn_blocking(move || pipeline::build_dataset(&checked, None, 0, 0))
                .await
                .map_err(|e| Error::Internal(format!("building the pipeline failed: {e}")))??;
        let dataset_id = DatasetId(runner.def.dataset_id.clone());
        form.compress = form.compress && !self.compression_disabled(&dataset_id).await?;
        Ok(LaneSource {
            fingerprint: tfdata_dataset::splits::lanes::fingerprint(&dataset_def.encode_to_vec()),
            dataset_def,
            form,
        })
    }

    /// An autocache profile of the task's pipeline
    /// ([`crate::autocache::profile_task`]), measured off the async
    /// threads; a failure is the profile's `error`.
    pub(crate) async fn autocache_profile(
        &self,
        runner: &TaskRunner,
    ) -> wire::TfdataAutocacheProfile {
        let task = runner.def.clone();
        let failed = |e: String| wire::TfdataAutocacheProfile {
            task_id: task.task_id,
            dataset_id: task.dataset_id.clone(),
            error: e,
            ..Default::default()
        };
        let dataset_def = match self.definition(runner).await {
            Ok((def, _, _)) => def,
            Err(e) => return failed(e.to_string()),
        };
        let profiled = task.clone();
        tokio::task::spawn_blocking(move || crate::autocache::profile_task(&profiled, &dataset_def))
            .await
            .unwrap_or_else(|e| failed(format!("autocache profiling panicked: {e}")))
    }

    /// Checks a task definition and loads its pipeline.
    pub(crate) async fn load(
        &self,
        runner: &TaskRunner,
    ) -> Result<(
        tfdata_dataset::Dataset,
        tfdata_dataset::IterContext,
        ServedForm,
    )> {
        let def = &runner.def;
        let (dataset_def, policy, static_policy) = self.definition(runner).await?;
        let dataset_id = DatasetId(def.dataset_id.clone());
        // Translating a TensorFlow graph compiles its functions and may
        // glob files: not on an RPC thread.
        let (num_workers, shard_index) = (def.num_workers, def.worker_index);
        let (dataset, mut form) = tokio::task::spawn_blocking(move || {
            pipeline::build_dataset(&dataset_def, static_policy, num_workers, shard_index)
        })
        .await
        .map_err(|e| Error::Internal(format!("building the pipeline failed: {e}")))??;
        // The dispatcher refuses these jobs when it makes them; a
        // dispatcher that does not (TensorFlow's, for caches) meets this
        // check, in TensorFlow's words.
        let cardinality = dataset.cardinality();
        if def.num_consumers.is_some() && cardinality >= 0 {
            return Err(Error::FailedPrecondition(format!(
                "Round robin reads require that the input dataset has infinite cardinality, but \
                 the dataset has cardinality {cardinality}. Consider adding a `.repeat()` \
                 transformation to the dataset."
            )));
        }
        if def.use_cross_trainer_cache && cardinality >= 0 {
            return Err(Error::InvalidArgument(format!(
                "Cross-trainer caching requires the input dataset to be infinite. Got input with \
                 cardinality {cardinality}"
            )));
        }
        let mut ctx = tfdata_dataset::IterContext::new();
        if policy == ShardingPolicy::Dynamic as i32 {
            let sources = dataset.sources();
            if sources.len() as i64 != def.num_split_providers {
                return Err(Error::FailedPrecondition(format!(
                    "task {}: the dataset has {} sources but the dispatcher has {} split providers",
                    def.task_id,
                    sources.len(),
                    def.num_split_providers
                )));
            }
            for (split_provider_index, source) in sources.iter().enumerate() {
                let provider = Arc::new(RemoteSplitProvider {
                    dispatcher: self.dispatcher.clone(),
                    runtime: tokio::runtime::Handle::current(),
                    iteration_id: IterationId(def.iteration_id),
                    split_provider_index: split_provider_index as i64,
                    repetition: Default::default(),
                    received: Default::default(),
                    worker_address: self.worker_address.to_string(),
                    timeout: self.timeout,
                    cancel: self.shutdown.clone(),
                    task_id: TaskId(def.task_id),
                    delivered: Default::default(),
                    ledger: Arc::clone(&runner.ledger),
                    exhausted: Default::default(),
                    get_split_duration: self.get_split_duration.clone(),
                    leases: Default::default(),
                });
                runner.ledger.add_provider(Arc::clone(&provider));
                ctx.split_providers.insert(source.op_key(), provider);
            }
        }
        form.compress = form.compress && !self.compression_disabled(&dataset_id).await?;
        Ok((dataset, ctx, form))
    }

    /// Whether the dispatcher recorded that compression is off at runtime for
    /// this dataset (the first proposal wins; ours is "keep it").
    async fn compression_disabled(&self, dataset_id: &DatasetId) -> Result<bool> {
        use wire::disable_compression_at_runtime_response::Decision;
        let request = wire::DisableCompressionAtRuntimeRequest {
            dataset_id: dataset_id.0.clone(),
            disable_compression_at_runtime: false,
        };
        let response = retry(
            &self.dispatcher.target(),
            Some(self.timeout),
            self.shutdown,
            || {
                self.dispatcher
                    .disable_compression_at_runtime(request.clone())
            },
        )
        .await?;
        Ok(matches!(
            response.decision,
            Some(Decision::CompressionDisabledAtRuntime(true))
        ))
    }

    async fn fetch_dataset_def(&self, dataset_id: &DatasetId) -> Result<wire::DatasetDef> {
        let request = wire::GetDatasetDefRequest {
            dataset_id: dataset_id.0.clone(),
        };
        let response = retry(
            &self.dispatcher.target(),
            Some(self.timeout),
            self.shutdown,
            || self.dispatcher.get_dataset_def(request.clone()),
        )
        .await?;
        response.dataset_def.ok_or_else(|| {
            Error::Internal(format!(
                "dispatcher returned no definition for dataset {dataset_id}"
            ))
        })
    }
}

/// Reads a dataset file the dispatcher wrote (`<work_dir>/datasets/<id>`):
/// a local path, a `file://` URL or an object-store URL, through the io
/// layer (whose object-store client is configured from this process's
/// environment). Exactly one complete TFRecord holding a `DatasetDef`.
fn read_dataset_file(path: &str) -> Result<wire::DatasetDef> {
    use tfdata_core::tfrecord::{self, Tail};
    let bytes = tfdata_dataset::io::read_all(path)?;
    let records = match tfrecord::read_records(path, &bytes)? {
        (records, Tail::Clean) => records,
        (_, Tail::Torn { offset }) => {
            return Err(Error::DataLoss {
                location: format!("{path} at offset {offset}"),
                reason: "record truncated".into(),
            });
        }
    };
    let [record] = records.as_slice() else {
        return Err(Error::DataLoss {
            location: path.to_string(),
            reason: format!("expected one record, found {}", records.len()),
        });
    };
    wire::DatasetDef::decode(record.clone()).map_err(|e| Error::DataLoss {
        location: path.to_string(),
        reason: format!("not a DatasetDef: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dataset_files_read_from_paths_and_urls() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1000");
        let def = wire::DatasetDef {
            graph: bytes::Bytes::from_static(b"\x0a\x03abc"),
            tfdata_pipeline: None,
        };
        let mut buf = Vec::new();
        tfdata_core::tfrecord::write_record(&mut buf, &def.encode_to_vec()).unwrap();
        std::fs::write(&path, &buf).unwrap();
        let local = path.to_str().unwrap();
        assert_eq!(read_dataset_file(local).unwrap(), def);
        assert_eq!(read_dataset_file(&format!("file://{local}")).unwrap(), def);

        // Truncated: an error naming the file, never a panic.
        std::fs::write(&path, &buf[..buf.len() - 2]).unwrap();
        let err = read_dataset_file(local).unwrap_err();
        assert!(matches!(err, Error::DataLoss { .. }), "{err}");
        assert!(err.to_string().contains(local), "{err}");
        let missing = format!("{}/missing", dir.path().display());
        let err = read_dataset_file(&missing).unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{err}");
        let err = read_dataset_file("hdfs://namenode/x").unwrap_err();
        assert!(err.to_string().contains("hdfs"), "{err}");
    }
}
