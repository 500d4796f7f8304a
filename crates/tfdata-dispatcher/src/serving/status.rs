//! The dispatcher's introspection service (`tfdata.status.StatusService`):
//! a read-only snapshot of its state for `tfdata status`.

use std::sync::Arc;

use prost::Message;
use tfdata_proto::data::{
    TargetWorkers, data_service_metadata::Compression, processing_mode_def::ShardingPolicy,
};
use tfdata_proto::tfdata::status::{self as wire, status_service_server::StatusService};
use tonic::{Request, Response, Status};

use crate::dispatcher::Dispatcher;

pub struct StatusGrpc(pub Arc<Dispatcher>);

#[tonic::async_trait]
impl StatusService for StatusGrpc {
    async fn get_status(
        &self,
        _r: Request<wire::GetStatusRequest>,
    ) -> Result<Response<wire::GetStatusResponse>, Status> {
        Ok(Response::new(self.0.status().await))
    }
}

fn element_spec_text(bytes: Option<&bytes::Bytes>) -> String {
    let Some(bytes) = bytes else {
        return "unknown".into();
    };
    tfdata_proto::tensorflow::StructuredValue::decode(bytes.clone())
        .ok()
        .and_then(|v| tfdata_dataset::spec_coder::from_structured_value(&v).ok())
        .map_or_else(|| "(not readable)".into(), |s| s.to_string())
}

impl Dispatcher {
    /// A snapshot of the state for people.
    pub async fn status(&self) -> wire::GetStatusResponse {
        let (state, heartbeats) = self.state_and_heartbeats().await;
        let now = self.now_micros();
        wire::GetStatusResponse {
            protocol_version: tfdata_proto::DATA_SERVICE_VERSION,
            fault_tolerant: self.config().fault_tolerant_mode,
            workers: state
                .workers()
                .iter()
                .map(|w| wire::WorkerStatus {
                    address: w.address.to_string(),
                    tags: w.tags.clone(),
                    last_heartbeat_age_ms: heartbeats
                        .get(w.address.as_str())
                        .map_or(-1, |t| (now.saturating_sub(*t) / 1000).max(0)),
                    assigned_tasks: state.tasks_for_worker(&w.address).count() as i64,
                    lost: w.lost,
                })
                .collect(),
            datasets: state
                .datasets()
                .map(|d| wire::DatasetStatus {
                    dataset_id: d.id.0.clone(),
                    compression: Compression::try_from(d.metadata.compression).map_or(
                        "?".into(),
                        |c| {
                            c.as_str_name()
                                .trim_start_matches("COMPRESSION_")
                                .to_string()
                        },
                    ),
                    cardinality: d.metadata.cardinality,
                    element_spec: element_spec_text(d.metadata.element_spec.as_ref()),
                })
                .collect(),
            jobs: state
                .jobs()
                .map(|j| wire::JobStatus {
                    job_id: j.id.0,
                    name: j.name.clone(),
                    dataset_id: j.dataset_id.0.clone(),
                    processing_mode: ShardingPolicy::try_from(j.processing_mode.sharding_policy)
                        .map_or("?".into(), |p| p.as_str_name().to_string()),
                    num_consumers: j.num_consumers,
                    target_workers: TargetWorkers::try_from(j.target_workers).map_or(
                        "?".into(),
                        |t| {
                            t.as_str_name()
                                .trim_start_matches("TARGET_WORKERS_")
                                .to_string()
                        },
                    ),
                    cross_trainer_cache: j.use_cross_trainer_cache,
                })
                .collect(),
            iterations: state
                .iterations()
                .map(|it| wire::IterationStatus {
                    iteration_id: it.id.0,
                    job_id: it.job_id.0,
                    repetition: it.repetition,
                    num_clients: it.num_clients,
                    finished: it.finished,
                    garbage_collected: it.garbage_collected,
                    active_tasks: it.tasks.len() as i64,
                    pending_tasks: it.pending_tasks.len() as i64,
                })
                .collect(),
            tasks: state
                .tasks()
                .map(|t| wire::TaskStatus {
                    task_id: t.id.0,
                    iteration_id: t.iteration_id.0,
                    worker_address: t.worker_address.to_string(),
                    finished: t.finished,
                    starting_round: t.starting_round,
                })
                .collect(),
            snapshots: self.snapshot_statuses(),
        }
    }
}

impl Dispatcher {
    fn snapshot_statuses(&self) -> Vec<wire::SnapshotStatus> {
        use tfdata_proto::data::snapshot_stream_info::State;
        self.distributed_snapshots()
            .progress()
            .into_iter()
            .map(|(path, p)| wire::SnapshotStatus {
                path,
                state: p.mode.describe().into(),
                error: match &p.mode {
                    crate::distributed_snapshot::manager::Mode::Error(status) => {
                        status.message.clone()
                    }
                    _ => String::new(),
                },
                assigned_splits: p.num_assigned_splits,
                total_splits: p.num_total_splits,
                streams: p
                    .streams
                    .iter()
                    .map(|s| wire::SnapshotStreamStatus {
                        index: s.index,
                        state: match State::try_from(s.state) {
                            Ok(State::Done) => "done",
                            Ok(State::Orphan) => "orphan",
                            _ => "assigned",
                        }
                        .into(),
                    })
                    .collect(),
            })
            .collect()
    }
}
