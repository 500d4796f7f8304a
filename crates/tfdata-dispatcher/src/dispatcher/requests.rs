//! Validated requests: each RPC's wire message checked once, as it arrives,
//! and converted (`TryFrom`) into the type its handler takes. A handler
//! cannot see an unchecked request, and every check of a request's own
//! fields (ids, names, known enum values, fields that exclude each other,
//! indices that cannot be negative, paths and addresses that cannot be
//! empty) lives here. Checks against the state (a dataset that exists, a
//! job's parameters, an index within the iteration's split providers) stay
//! with the handlers, which hold the state.
//!
//! Every RPC a handler serves from a request has its type here, the
//! heartbeats included. Where a handler journals the request's fields as
//! they came or hands the request on whole (`Snapshot`, `GetSnapshotSplit`,
//! `GetSplit`, `WorkerHeartbeat`, `ClientHeartbeat`), the type keeps the
//! message, checked, and only lends it out (`wire`, `into_wire`).
//!
//! The codes and words are the ones readers already see: TensorFlow's where
//! it has its own.

use std::collections::BTreeMap;
use std::num::NonZeroI64;
use std::time::Duration;

use tfdata_core::ranges::IndexRanges;
use tfdata_core::{DatasetId, Error, IterationClientId, JobId, TaskId};
use tfdata_proto::data::{self as wire, processing_mode_def::ShardingPolicy};

use crate::state::{
    MAX_RESTORATION_CONSUMERS, WorkerAddress, check_deterministic, consumed_elements,
    normalize_target_workers,
};

/// `GetOrCreateJob`: the job a reader reads a dataset through.
#[derive(Debug, Clone)]
pub(crate) struct GetOrCreateJob {
    pub dataset_id: DatasetId,
    /// Journaled as it came (TensorFlow compares it whole).
    pub mode: wire::ProcessingModeDef,
    /// `mode`'s sharding policy, known to be one TensorFlow defines.
    pub policy: ShardingPolicy,
    /// Never empty; `None` for an anonymous job.
    pub job_name: Option<String>,
    /// A coordinated read's consumers; only with a named job.
    pub num_consumers: Option<NonZeroI64>,
    /// Only with a named job, and not with a coordinated read.
    pub use_cross_trainer_cache: bool,
    /// A known `TargetWorkers` value, UNSPECIFIED read as AUTO.
    pub target_workers: i32,
}

impl TryFrom<wire::GetOrCreateJobRequest> for GetOrCreateJob {
    type Error = Error;

    fn try_from(req: wire::GetOrCreateJobRequest) -> Result<Self, Error> {
        let mode = req.processing_mode_def.unwrap_or_default();
        let policy = ShardingPolicy::try_from(mode.sharding_policy).map_err(|_| {
            Error::Internal(format!(
                "invalid sharding policy {} (expected 0..=5: OFF, DYNAMIC, FILE, DATA, FILE_OR_DATA, HINT)",
                mode.sharding_policy
            ))
        })?;
        let target_workers = normalize_target_workers(req.target_workers);
        if wire::TargetWorkers::try_from(req.target_workers).is_err() {
            return Err(Error::InvalidArgument(format!(
                "invalid target_workers {}",
                req.target_workers
            )));
        }
        if req.job_name.as_deref() == Some("") {
            return Err(Error::InvalidArgument("job_name must not be empty".into()));
        }
        let num_consumers = match req.num_consumers {
            None => None,
            Some(n) => Some(NonZeroI64::new(n).filter(|n| n.get() > 0).ok_or_else(|| {
                Error::InvalidArgument(format!("num_consumers must be positive, got {n}"))
            })?),
        };
        // TensorFlow's readers refuse these combinations before they ask
        // (`ValidateDataServiceParams`, `distribute`'s checks); a reader
        // that does not is refused here, in the same words, rather than
        // left waiting for consumers that can never meet.
        if let Some(n) = num_consumers {
            if req.job_name.is_none() {
                return Err(Error::InvalidArgument(format!(
                    "`job_name` must be set when setting `num_consumers`. num_consumers was set \
                     to {n}."
                )));
            }
            if target_workers == wire::TargetWorkers::Local as i32 {
                return Err(Error::InvalidArgument(
                    "Coordinated reads require non-local workers, but `target_workers` is \
                     \"LOCAL\"."
                        .into(),
                ));
            }
            if req.use_cross_trainer_cache {
                return Err(Error::InvalidArgument(format!(
                    "Cross-trainer caching does not support coordinated reads. Got number of \
                     coordinated consumers: {n}"
                )));
            }
        }
        if req.use_cross_trainer_cache && req.job_name.is_none() {
            return Err(Error::InvalidArgument(
                "Cross-trainer caching requires named jobs. Got empty `job_name`.".into(),
            ));
        }
        if let Some(d) = &mode.tfdata_deterministic {
            check_deterministic_job(d, mode.sharding_policy, &req)?;
        }
        Ok(GetOrCreateJob {
            dataset_id: DatasetId(req.dataset_id),
            mode,
            policy,
            job_name: req.job_name,
            num_consumers,
            use_cross_trainer_cache: req.use_cross_trainer_cache,
            target_workers,
        })
    }
}

/// A deterministic read (issue 35) is a distributed_epoch job of 1 to
/// `MAX_DETERMINISTIC_LANES` lanes, read by consumers that each merge their
/// own lanes: coordinated reads (rounds across workers) and cross-trainer
/// caches (elements shared by whoever comes first) contradict its order.
fn check_deterministic_job(
    d: &wire::TfdataDeterministic,
    sharding_policy: i32,
    req: &wire::GetOrCreateJobRequest,
) -> Result<(), Error> {
    check_deterministic(sharding_policy, d).map_err(Error::InvalidArgument)?;
    if let Some(n) = req.num_consumers {
        return Err(Error::InvalidArgument(format!(
            "a deterministic read cannot be a coordinated read (num_consumers was set to {n}): \
             its consumers each read every n-th element of the global order already"
        )));
    }
    if req.use_cross_trainer_cache {
        return Err(Error::InvalidArgument(
            "a deterministic read cannot use the cross-trainer cache: the cache hands elements \
             to whichever trainer comes first"
                .into(),
        ));
    }
    Ok(())
}

/// `GetOrRegisterDataset`: a dataset definition to store, or to find
/// under its requested id.
#[derive(Debug, Clone)]
pub(crate) struct GetOrRegisterDataset {
    /// A tfdata pipeline that decodes, or a TensorFlow graph (not empty).
    pub def: wire::DatasetDef,
    pub metadata: wire::DataServiceMetadata,
    /// Never empty.
    pub dataset_id: Option<DatasetId>,
}

impl TryFrom<wire::GetOrRegisterDatasetRequest> for GetOrRegisterDataset {
    type Error = Error;

    fn try_from(req: wire::GetOrRegisterDatasetRequest) -> Result<Self, Error> {
        let def = req.dataset.unwrap_or_default();
        match &def.tfdata_pipeline {
            // Reject a bad pipeline now, not on a worker later.
            Some(p) => {
                tfdata_dataset::pipeline::from_pipeline_def(p)?;
            }
            None if def.graph.is_empty() => {
                return Err(Error::InvalidArgument(
                    "the dataset has neither a TensorFlow graph nor a tfdata pipeline".into(),
                ));
            }
            None => {}
        }
        if req.dataset_id.as_deref() == Some("") {
            return Err(Error::InvalidArgument(
                "requested dataset_id is empty".into(),
            ));
        }
        Ok(GetOrRegisterDataset {
            def,
            metadata: req.metadata.unwrap_or_default(),
            dataset_id: req.dataset_id.map(DatasetId),
        })
    }
}

/// `GetOrCreateIteration`: a reader joins (or starts) an iteration of a
/// job; a restored reader says what it consumed.
#[derive(Debug, Clone)]
pub(crate) struct GetOrCreateIteration {
    pub job_id: JobId,
    pub repetition: i64,
    pub reports_receipts: bool,
    /// A restored distributed_epoch reader's consumed splits and parts of
    /// splits (checked against the job's split providers by the handler).
    pub consumed: Vec<wire::TfdataSplitRanges>,
    pub consumed_pieces: Vec<wire::TfdataSplitPieces>,
    /// A shared job's consumer restored from its checkpoint.
    pub restore: Option<Restore>,
}

/// A consumer of a shared job restored from its checkpoint.
#[derive(Debug, Clone)]
pub(crate) struct Restore {
    /// The iteration and client the checkpoint was taken as; `consumers`
    /// is in `1..=MAX_RESTORATION_CONSUMERS`.
    pub origin: wire::TfdataRestore,
    /// The elements it consumed of each worker, as sent (journaled so).
    pub consumed_elements: Vec<wire::TfdataWorkerRanges>,
    /// The same, decoded.
    pub elements: BTreeMap<WorkerAddress, IndexRanges>,
}

impl TryFrom<wire::GetOrCreateIterationRequest> for GetOrCreateIteration {
    type Error = Error;

    fn try_from(req: wire::GetOrCreateIterationRequest) -> Result<Self, Error> {
        let restore = match req.tfdata_restore {
            None => None,
            Some(origin) => {
                if !(1..=MAX_RESTORATION_CONSUMERS).contains(&origin.consumers) {
                    return Err(Error::InvalidArgument(format!(
                        "a reader checkpoint of {} consumers (1 to {MAX_RESTORATION_CONSUMERS})",
                        origin.consumers
                    )));
                }
                let elements =
                    consumed_elements("GetOrCreateIteration", &req.tfdata_consumed_elements)
                        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
                Some(Restore {
                    origin,
                    consumed_elements: req.tfdata_consumed_elements,
                    elements,
                })
            }
        };
        Ok(GetOrCreateIteration {
            job_id: JobId(req.job_id),
            repetition: req.repetition,
            reports_receipts: req.tfdata_reports_receipts,
            consumed: req.tfdata_consumed,
            consumed_pieces: req.tfdata_consumed_pieces,
            restore,
        })
    }
}

/// `GetDatasetDef`: a worker asks for a dataset's definition.
#[derive(Debug, Clone)]
pub(crate) struct GetDatasetDef {
    pub dataset_id: DatasetId,
}

impl TryFrom<wire::GetDatasetDefRequest> for GetDatasetDef {
    type Error = Error;

    fn try_from(req: wire::GetDatasetDefRequest) -> Result<Self, Error> {
        Ok(GetDatasetDef {
            dataset_id: DatasetId(req.dataset_id),
        })
    }
}

/// `GetDataServiceMetadata`: a reader asks what was registered with a
/// dataset.
#[derive(Debug, Clone)]
pub(crate) struct GetDataServiceMetadata {
    pub dataset_id: DatasetId,
}

impl TryFrom<wire::GetDataServiceMetadataRequest> for GetDataServiceMetadata {
    type Error = Error;

    fn try_from(req: wire::GetDataServiceMetadataRequest) -> Result<Self, Error> {
        Ok(GetDataServiceMetadata {
            dataset_id: DatasetId(req.dataset_id),
        })
    }
}

/// `DisableCompressionAtRuntime`: a reader proposes the runtime
/// compression decision of a dataset; the first proposal stands.
#[derive(Debug, Clone)]
pub(crate) struct DisableCompressionAtRuntime {
    pub dataset_id: DatasetId,
    pub disable: bool,
}

impl TryFrom<wire::DisableCompressionAtRuntimeRequest> for DisableCompressionAtRuntime {
    type Error = Error;

    fn try_from(req: wire::DisableCompressionAtRuntimeRequest) -> Result<Self, Error> {
        Ok(DisableCompressionAtRuntime {
            dataset_id: DatasetId(req.dataset_id),
            disable: req.disable_compression_at_runtime,
        })
    }
}

/// `MaybeRemoveTask`: one consumer of a coordinated read asks for a task's
/// removal in a round (the consumer index is checked against the job's
/// consumers by the handler, which knows the job).
#[derive(Debug, Clone)]
pub(crate) struct MaybeRemoveTask {
    pub task_id: TaskId,
    pub consumer_index: i64,
    pub round: i64,
}

impl TryFrom<wire::MaybeRemoveTaskRequest> for MaybeRemoveTask {
    type Error = Error;

    fn try_from(req: wire::MaybeRemoveTaskRequest) -> Result<Self, Error> {
        Ok(MaybeRemoveTask {
            task_id: TaskId(req.task_id),
            consumer_index: req.consumer_index,
            round: req.round,
        })
    }
}

/// `ReleaseIterationClient`: a reader is done with its iteration.
#[derive(Debug, Clone)]
pub(crate) struct ReleaseIterationClient {
    pub client_id: IterationClientId,
}

impl TryFrom<wire::ReleaseIterationClientRequest> for ReleaseIterationClient {
    type Error = Error;

    fn try_from(req: wire::ReleaseIterationClientRequest) -> Result<Self, Error> {
        Ok(ReleaseIterationClient {
            client_id: IterationClientId(req.iteration_client_id),
        })
    }
}

/// `Snapshot`: start writing a dataset to a path (`distributed_save`).
/// The snapshot manager reads the request whole, so it is kept whole.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    /// `path` is not empty.
    request: wire::SnapshotRequest,
}

impl Snapshot {
    pub fn path(&self) -> &str {
        &self.request.path
    }

    /// The request as sent, checked.
    pub fn wire(&self) -> &wire::SnapshotRequest {
        &self.request
    }
}

impl TryFrom<wire::SnapshotRequest> for Snapshot {
    type Error = Error;

    fn try_from(request: wire::SnapshotRequest) -> Result<Self, Error> {
        if request.path.is_empty() {
            return Err(Error::InvalidArgument("the snapshot path is empty".into()));
        }
        Ok(Snapshot { request })
    }
}

/// `GetSnapshotStreams`: a reader of a snapshot asks for its streams.
#[derive(Debug, Clone)]
pub(crate) struct GetSnapshotStreams {
    /// Never empty.
    pub path: String,
}

impl TryFrom<wire::GetSnapshotStreamsRequest> for GetSnapshotStreams {
    type Error = Error;

    fn try_from(req: wire::GetSnapshotStreamsRequest) -> Result<Self, Error> {
        if req.path.is_empty() {
            return Err(Error::InvalidArgument("the snapshot path is empty".into()));
        }
        Ok(GetSnapshotStreams { path: req.path })
    }
}

/// `GetSnapshotSplit`: a worker writing a snapshot stream asks for the
/// next split of one of its sources. The snapshot manager reads the
/// request whole, so it is kept whole; the indices are checked against the
/// snapshot by the manager.
#[derive(Debug, Clone)]
pub(crate) struct GetSnapshotSplit {
    /// `base_path` and `worker_address` are not empty; `stream_index`,
    /// `source_index` and `repetition_index` are not negative.
    request: wire::GetSnapshotSplitRequest,
}

impl GetSnapshotSplit {
    /// The request as sent, checked.
    pub fn wire(&self) -> &wire::GetSnapshotSplitRequest {
        &self.request
    }
}

impl TryFrom<wire::GetSnapshotSplitRequest> for GetSnapshotSplit {
    type Error = Error;

    fn try_from(request: wire::GetSnapshotSplitRequest) -> Result<Self, Error> {
        if request.base_path.is_empty() {
            return Err(Error::InvalidArgument("the snapshot path is empty".into()));
        }
        if request.worker_address.is_empty() {
            return Err(Error::InvalidArgument(
                "GetSnapshotSplit: the worker address is empty".into(),
            ));
        }
        for (name, index) in [
            ("stream_index", request.stream_index),
            ("source_index", request.source_index),
            ("repetition_index", request.repetition_index),
        ] {
            if index < 0 {
                return Err(Error::InvalidArgument(format!(
                    "GetSnapshotSplit: {name} must not be negative, got {index}"
                )));
            }
        }
        Ok(GetSnapshotSplit { request })
    }
}

/// `GetSplit`: a worker's task asks for the next split of one source of
/// a distributed_epoch iteration. The handler journals the request's
/// fields as they came, so it is kept whole; the split provider index is
/// checked against the iteration by the handler.
#[derive(Debug, Clone)]
pub(crate) struct GetSplit {
    /// `split_provider_index`, `repetition` and `tfdata_task_id` are not
    /// negative (a task id of 0 is TensorFlow's worker, naming none).
    request: wire::GetSplitRequest,
}

impl GetSplit {
    /// The request as sent, checked.
    pub fn wire(&self) -> &wire::GetSplitRequest {
        &self.request
    }
}

impl TryFrom<wire::GetSplitRequest> for GetSplit {
    type Error = Error;

    fn try_from(request: wire::GetSplitRequest) -> Result<Self, Error> {
        for (name, value) in [
            ("split_provider_index", request.split_provider_index),
            ("repetition", request.repetition),
            ("tfdata_task_id", request.tfdata_task_id),
        ] {
            if value < 0 {
                return Err(Error::InvalidArgument(format!(
                    "GetSplit: {name} must not be negative, got {value}"
                )));
            }
        }
        Ok(GetSplit { request })
    }
}

/// `WorkerUpdate`: a worker reports the tasks it finished.
#[derive(Debug, Clone)]
pub(crate) struct WorkerUpdate {
    /// Never empty.
    pub worker_address: String,
    /// The tasks reported completed (updates that are not are progress
    /// only, which the dispatcher does not keep).
    pub completed: Vec<TaskId>,
}

impl TryFrom<wire::WorkerUpdateRequest> for WorkerUpdate {
    type Error = Error;

    fn try_from(req: wire::WorkerUpdateRequest) -> Result<Self, Error> {
        if req.worker_address.is_empty() {
            return Err(Error::InvalidArgument(
                "WorkerUpdate: the worker address is empty".into(),
            ));
        }
        Ok(WorkerUpdate {
            worker_address: req.worker_address,
            completed: req
                .updates
                .iter()
                .filter(|u| u.completed)
                .map(|u| TaskId(u.task_id))
                .collect(),
        })
    }
}

/// `WorkerHeartbeat`: a worker says it is alive, what it runs and how its
/// snapshot streams are doing, and may ask for its answer to be held until
/// there is news for it (`tfdata_hold_ms`, `dispatcher::long_poll`). The
/// handlers read the request's fields (and the snapshot bookkeeping reads
/// it whole), so it is kept whole.
#[derive(Debug, Clone)]
pub(crate) struct WorkerHeartbeat {
    /// `worker_address` is not empty; `tfdata_hold_ms` is not negative.
    request: wire::WorkerHeartbeatRequest,
    /// The hold the worker asked for; `None` for an answer at once (0,
    /// TensorFlow's workers). The news bounds it (`worker_news::MAX_HOLD`).
    pub hold: Option<Duration>,
}

impl WorkerHeartbeat {
    /// The request as sent, checked.
    pub fn wire(&self) -> &wire::WorkerHeartbeatRequest {
        &self.request
    }
}

impl TryFrom<wire::WorkerHeartbeatRequest> for WorkerHeartbeat {
    type Error = Error;

    fn try_from(request: wire::WorkerHeartbeatRequest) -> Result<Self, Error> {
        if request.worker_address.is_empty() {
            return Err(Error::InvalidArgument("worker_address is empty".into()));
        }
        let hold = u64::try_from(request.tfdata_hold_ms).map_err(|_| {
            Error::InvalidArgument(format!(
                "WorkerHeartbeat: tfdata_hold_ms must not be negative, got {}",
                request.tfdata_hold_ms
            ))
        })?;
        Ok(WorkerHeartbeat {
            hold: (hold > 0).then(|| Duration::from_millis(hold)),
            request,
        })
    }
}

/// `ClientHeartbeat`: a reader says it is alive, where its coordinated
/// read is and what it received. Its receipts are checked by the handler,
/// only for the tasks that await them (a report for any other task changes
/// nothing), so the request is kept whole.
#[derive(Debug, Clone)]
pub(crate) struct ClientHeartbeat {
    pub client_id: IterationClientId,
    request: wire::ClientHeartbeatRequest,
}

impl ClientHeartbeat {
    /// The request as sent.
    pub fn into_wire(self) -> wire::ClientHeartbeatRequest {
        self.request
    }
}

impl TryFrom<wire::ClientHeartbeatRequest> for ClientHeartbeat {
    type Error = Error;

    fn try_from(request: wire::ClientHeartbeatRequest) -> Result<Self, Error> {
        Ok(ClientHeartbeat {
            client_id: IterationClientId(request.iteration_client_id),
            request,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(f: impl FnOnce(&mut wire::GetOrCreateJobRequest)) -> Result<GetOrCreateJob, Error> {
        let mut req = wire::GetOrCreateJobRequest {
            dataset_id: "1000".into(),
            job_name: Some("j".into()),
            ..Default::default()
        };
        f(&mut req);
        GetOrCreateJob::try_from(req)
    }

    fn refused(result: Result<GetOrCreateJob, Error>) -> (tonic::Code, String) {
        refused_with(result)
    }

    fn refused_with<T: std::fmt::Debug>(result: Result<T, Error>) -> (tonic::Code, String) {
        let err = result.unwrap_err();
        (err.code(), err.to_string())
    }

    #[test]
    fn a_job_request_is_checked_field_by_field() {
        let ok = job(|_| {}).unwrap();
        assert_eq!(ok.policy, ShardingPolicy::Off);
        assert_eq!(ok.target_workers, wire::TargetWorkers::Auto as i32);
        let (code, msg) = refused(job(|r| {
            r.processing_mode_def = Some(wire::ProcessingModeDef {
                sharding_policy: 9,
                ..Default::default()
            })
        }));
        assert_eq!(code, tonic::Code::Internal);
        assert!(msg.contains("invalid sharding policy 9"), "{msg}");
        let (code, msg) = refused(job(|r| r.target_workers = 7));
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(msg.contains("invalid target_workers 7"), "{msg}");
        let (_, msg) = refused(job(|r| r.job_name = Some(String::new())));
        assert!(msg.contains("job_name must not be empty"), "{msg}");
        for n in [0, -3] {
            let (code, msg) = refused(job(|r| r.num_consumers = Some(n)));
            assert_eq!(code, tonic::Code::InvalidArgument);
            assert!(
                msg.contains(&format!("num_consumers must be positive, got {n}")),
                "{msg}"
            );
        }
    }

    #[test]
    fn coordinated_reads_and_caches_refuse_what_tensorflow_readers_refuse() {
        let (code, msg) = refused(job(|r| {
            r.job_name = None;
            r.num_consumers = Some(2);
        }));
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(
            msg.contains("`job_name` must be set when setting `num_consumers`"),
            "{msg}"
        );
        let (_, msg) = refused(job(|r| {
            r.num_consumers = Some(2);
            r.target_workers = wire::TargetWorkers::Local as i32;
        }));
        assert!(
            msg.contains("Coordinated reads require non-local workers"),
            "{msg}"
        );
        let (_, msg) = refused(job(|r| {
            r.num_consumers = Some(2);
            r.use_cross_trainer_cache = true;
        }));
        assert!(msg.contains("Cross-trainer caching does not support coordinated reads. Got number of coordinated consumers: 2"), "{msg}");
        let (code, msg) = refused(job(|r| {
            r.job_name = None;
            r.use_cross_trainer_cache = true;
        }));
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(
            msg.contains("Cross-trainer caching requires named jobs"),
            "{msg}"
        );
        assert!(job(|r| r.num_consumers = Some(2)).is_ok());
        assert!(job(|r| r.use_cross_trainer_cache = true).is_ok());
    }

    #[test]
    fn a_registration_needs_a_dataset_that_decodes_and_a_non_empty_id() {
        let register = |def: wire::DatasetDef, id: Option<&str>| {
            GetOrRegisterDataset::try_from(wire::GetOrRegisterDatasetRequest {
                dataset: Some(def),
                metadata: None,
                dataset_id: id.map(str::to_string),
            })
        };
        let (code, msg) = refused_with(register(wire::DatasetDef::default(), None));
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(
            msg.contains("neither a TensorFlow graph nor a tfdata pipeline"),
            "{msg}"
        );
        let graph = wire::DatasetDef {
            graph: vec![1, 2, 3].into(),
            tfdata_pipeline: None,
        };
        let (code, msg) = refused_with(register(graph.clone(), Some("")));
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(msg.contains("requested dataset_id is empty"), "{msg}");
        let ok = register(graph, Some("mine")).unwrap();
        assert_eq!(ok.dataset_id, Some(DatasetId("mine".into())));
        let bad_pipeline = wire::DatasetDef {
            graph: Default::default(),
            tfdata_pipeline: Some(Default::default()),
        };
        assert!(register(bad_pipeline, None).is_err());
    }

    #[test]
    fn a_restore_names_its_consumers_and_well_formed_elements() {
        let iteration = |consumers: i64, address: &str| {
            GetOrCreateIteration::try_from(wire::GetOrCreateIterationRequest {
                job_id: 5,
                tfdata_restore: Some(wire::TfdataRestore {
                    consumers,
                    ..Default::default()
                }),
                tfdata_consumed_elements: vec![wire::TfdataWorkerRanges {
                    worker_address: address.into(),
                    ..Default::default()
                }],
                ..Default::default()
            })
        };
        for consumers in [0, MAX_RESTORATION_CONSUMERS + 1] {
            let (code, msg) = refused_with(iteration(consumers, "w:1"));
            assert_eq!(code, tonic::Code::InvalidArgument);
            assert!(
                msg.contains(&format!("a reader checkpoint of {consumers} consumers")),
                "{msg}"
            );
        }
        let (code, _) = refused_with(iteration(2, ""));
        assert_eq!(code, tonic::Code::InvalidArgument);
        let ok = iteration(2, "w:1").unwrap();
        assert_eq!(ok.job_id, JobId(5));
        assert!(ok.restore.is_some());
    }

    #[test]
    fn a_snapshot_needs_a_path() {
        let (code, msg) = refused_with(Snapshot::try_from(wire::SnapshotRequest::default()));
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(msg.contains("the snapshot path is empty"), "{msg}");
        let ok = Snapshot::try_from(wire::SnapshotRequest {
            path: "/snapshots/a".into(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(ok.path(), "/snapshots/a");
    }

    #[test]
    fn a_snapshot_streams_request_needs_a_path() {
        let (code, msg) = refused_with(GetSnapshotStreams::try_from(
            wire::GetSnapshotStreamsRequest::default(),
        ));
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(msg.contains("the snapshot path is empty"), "{msg}");
        let ok = GetSnapshotStreams::try_from(wire::GetSnapshotStreamsRequest {
            path: "/snapshots/a".into(),
        })
        .unwrap();
        assert_eq!(ok.path, "/snapshots/a");
    }

    #[test]
    fn a_snapshot_split_request_names_a_path_a_worker_and_non_negative_indices() {
        let split = |f: fn(&mut wire::GetSnapshotSplitRequest)| {
            let mut req = wire::GetSnapshotSplitRequest {
                worker_address: "w:1".into(),
                base_path: "/snapshots/a".into(),
                stream_index: 1,
                source_index: 0,
                repetition_index: 2,
            };
            f(&mut req);
            GetSnapshotSplit::try_from(req)
        };
        assert_eq!(split(|_| {}).unwrap().wire().repetition_index, 2);
        let (code, msg) = refused_with(split(|r| r.base_path.clear()));
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(msg.contains("the snapshot path is empty"), "{msg}");
        let (code, msg) = refused_with(split(|r| r.worker_address.clear()));
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(msg.contains("the worker address is empty"), "{msg}");
        for (f, name) in [
            (
                (|r| r.stream_index = -1) as fn(&mut wire::GetSnapshotSplitRequest),
                "stream_index",
            ),
            (|r| r.source_index = -1, "source_index"),
            (|r| r.repetition_index = -1, "repetition_index"),
        ] {
            let (code, msg) = refused_with(split(f));
            assert_eq!(code, tonic::Code::InvalidArgument);
            assert!(
                msg.contains(&format!("{name} must not be negative, got -1")),
                "{msg}"
            );
        }
    }

    #[test]
    fn a_split_request_has_non_negative_indices() {
        let split = |f: fn(&mut wire::GetSplitRequest)| {
            let mut req = wire::GetSplitRequest {
                iteration_id: 3,
                repetition: 1,
                split_provider_index: 0,
                tfdata_task_id: 7,
                ..Default::default()
            };
            f(&mut req);
            GetSplit::try_from(req)
        };
        assert_eq!(split(|_| {}).unwrap().wire().tfdata_task_id, 7);
        assert!(split(|r| r.tfdata_task_id = 0).is_ok());
        for (f, name) in [
            (
                (|r| r.split_provider_index = -1) as fn(&mut wire::GetSplitRequest),
                "split_provider_index",
            ),
            (|r| r.repetition = -1, "repetition"),
            (|r| r.tfdata_task_id = -1, "tfdata_task_id"),
        ] {
            let (code, msg) = refused_with(split(f));
            assert_eq!(code, tonic::Code::InvalidArgument);
            assert!(
                msg.contains(&format!("{name} must not be negative, got -1")),
                "{msg}"
            );
        }
    }

    #[test]
    fn a_worker_update_names_its_worker_and_keeps_the_completed_tasks() {
        let update = |address: &str| {
            WorkerUpdate::try_from(wire::WorkerUpdateRequest {
                worker_address: address.into(),
                updates: vec![
                    wire::TaskProgress {
                        task_id: 4,
                        completed: true,
                    },
                    wire::TaskProgress {
                        task_id: 5,
                        completed: false,
                    },
                ],
            })
        };
        let (code, msg) = refused_with(update(""));
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(msg.contains("the worker address is empty"), "{msg}");
        let ok = update("w:1").unwrap();
        assert_eq!(ok.worker_address, "w:1");
        assert_eq!(ok.completed, vec![TaskId(4)]);
    }

    #[test]
    fn a_worker_heartbeat_names_its_worker_and_asks_for_no_negative_hold() {
        let heartbeat = |address: &str, hold_ms: i64| {
            WorkerHeartbeat::try_from(wire::WorkerHeartbeatRequest {
                worker_address: address.into(),
                tfdata_hold_ms: hold_ms,
                ..Default::default()
            })
        };
        let (code, msg) = refused_with(heartbeat("", 0));
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(msg.contains("worker_address is empty"), "{msg}");
        let (code, msg) = refused_with(heartbeat("w:1", -5));
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert!(
            msg.contains("tfdata_hold_ms must not be negative, got -5"),
            "{msg}"
        );
        assert_eq!(heartbeat("w:1", 0).unwrap().hold, None);
        let held = heartbeat("w:1", 250).unwrap();
        assert_eq!(held.hold, Some(Duration::from_millis(250)));
        assert_eq!(held.wire().worker_address, "w:1");
    }

    #[test]
    fn a_client_heartbeat_names_its_client() {
        let ok = ClientHeartbeat::try_from(wire::ClientHeartbeatRequest {
            iteration_client_id: 12,
            current_round: Some(3),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(ok.client_id, IterationClientId(12));
        assert_eq!(ok.into_wire().current_round, Some(3));
    }
}
