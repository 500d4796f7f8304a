//! The dispatcher's introspection service (`tfdata.status.StatusService`):
//! a read-only status report for `tfdata status`, rendered from the same
//! [`Overview`] the status page renders.

use std::sync::Arc;

use prost::Message;
use tfdata_proto::data::{
    TargetWorkers, data_service_metadata::Compression, processing_mode_def::ShardingPolicy,
};
use tfdata_proto::tfdata::status::{self as wire, status_service_server::StatusService};
use tonic::{Request, Response, Status};

use crate::dispatcher::Dispatcher;
use crate::overview::Overview;
use crate::scaling::{Bounds, Decision};

pub struct StatusGrpc(pub Arc<Dispatcher>);

#[tonic::async_trait]
impl StatusService for StatusGrpc {
    async fn get_status(
        &self,
        _r: Request<wire::GetStatusRequest>,
    ) -> Result<Response<wire::GetStatusResponse>, Status> {
        Ok(Response::new(self.0.status().await))
    }

    async fn get_scaling_advice(
        &self,
        r: Request<wire::GetScalingAdviceRequest>,
    ) -> Result<Response<wire::ScalingAdvice>, Status> {
        let r = r.into_inner();
        let bounds = Bounds::from_request(r.min_workers, r.max_workers)
            .map_err(|reason| Status::invalid_argument(format!("GetScalingAdvice: {reason}")))?;
        let decision = self.0.scaling_advice(bounds).await;
        Ok(Response::new(scaling_advice(
            &decision,
            self.0.scaling_period(),
        )))
    }
}

impl Dispatcher {
    /// The status report `tfdata status` shows.
    pub async fn status(&self) -> wire::GetStatusResponse {
        status_report(&self.overview().await)
    }
}

/// A decision of the scaling controller, as `GetScalingAdvice` answers it.
pub fn scaling_advice(d: &Decision, period: std::time::Duration) -> wire::ScalingAdvice {
    wire::ScalingAdvice {
        target_workers: d.target_workers,
        live_workers: d.live_workers,
        estimate: d.estimate.unwrap_or(0),
        measured: d.estimate.is_some(),
        phase: d.phase.as_str().to_string(),
        reason: d.reason.clone(),
        period_ms: period.as_millis() as i64,
        starvation: d.starvation,
        wait_seconds_per_element: d.wait_seconds_per_element,
        decisions: d.decisions,
        reverts: d.reverts,
    }
}

/// The status report of `overview`, as the status service answers it.
pub fn status_report(overview: &Overview) -> wire::GetStatusResponse {
    wire::GetStatusResponse {
        scaling: overview
            .scaling
            .decision
            .as_ref()
            .map(|d| scaling_advice(d, overview.scaling.period)),
        autocache: overview
            .autocache
            .iter()
            .map(|a| wire::AutocacheStatus {
                dataset_id: a.dataset_id.0.clone(),
                state: a.state.into(),
                reason: a.reason.clone(),
                point: a.point.clone(),
                path: a.path.clone(),
                compute_seconds_per_element: a.compute_seconds_per_element,
                read_seconds_per_element: a.read_seconds_per_element,
                bytes_per_element: a.bytes_per_element,
                jobs_served: a.jobs_served,
            })
            .collect(),
        protocol_version: tfdata_proto::DATA_SERVICE_VERSION,
        fault_tolerant: overview.fault_tolerant,
        workers: overview
            .workers
            .iter()
            .map(|w| wire::WorkerStatus {
                address: w.address.clone(),
                tags: w.tags.clone(),
                last_heartbeat_age_ms: w.last_heartbeat_age_micros.map_or(-1, |a| a / 1000),
                assigned_tasks: w.tasks as i64,
                lost: w.lost,
            })
            .collect(),
        datasets: overview
            .datasets
            .iter()
            .map(|d| wire::DatasetStatus {
                dataset_id: d.id.0.clone(),
                compression: Compression::try_from(d.compression).map_or("?".into(), |c| {
                    c.as_str_name()
                        .trim_start_matches("COMPRESSION_")
                        .to_string()
                }),
                cardinality: d.cardinality,
                element_spec: element_spec_text(d.element_spec.as_ref()),
            })
            .collect(),
        jobs: overview
            .jobs
            .iter()
            .map(|j| wire::JobStatus {
                job_id: j.id.0,
                name: j.name.clone(),
                dataset_id: j.dataset_id.0.clone(),
                processing_mode: ShardingPolicy::try_from(j.sharding_policy)
                    .map_or("?".into(), |p| p.as_str_name().to_string()),
                num_consumers: j.num_consumers,
                target_workers: TargetWorkers::try_from(j.target_workers).map_or("?".into(), |t| {
                    t.as_str_name()
                        .trim_start_matches("TARGET_WORKERS_")
                        .to_string()
                }),
                cross_trainer_cache: j.cross_trainer_cache,
            })
            .collect(),
        iterations: overview
            .iterations
            .iter()
            .map(|it| wire::IterationStatus {
                iteration_id: it.iteration.0,
                job_id: it.job_id.0,
                repetition: it.repetition,
                num_clients: it.num_clients,
                finished: it.finished,
                garbage_collected: it.garbage_collected,
                active_tasks: it.tasks as i64,
                pending_tasks: it.pending_tasks as i64,
            })
            .collect(),
        tasks: overview
            .tasks
            .iter()
            .map(|t| wire::TaskStatus {
                task_id: t.id.0,
                iteration_id: t.iteration.0,
                worker_address: t.worker_address.clone(),
                finished: t.finished,
                starting_round: t.starting_round,
            })
            .collect(),
        snapshots: overview
            .snapshots
            .iter()
            .map(|s| wire::SnapshotStatus {
                path: s.path.clone(),
                state: s.state.into(),
                error: s.error.clone(),
                assigned_splits: s.assigned_splits,
                total_splits: s.total_splits,
                streams: s
                    .streams
                    .iter()
                    .map(|stream| wire::SnapshotStreamStatus {
                        index: stream.index,
                        state: stream.state.into(),
                    })
                    .collect(),
            })
            .collect(),
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tfdata_core::{DatasetId, IterationId, JobId, TaskId};

    use super::*;
    use crate::overview::{
        DatasetOverview, IterationOverview, JobOverview, SnapshotOverview, SnapshotStreamOverview,
        TaskOverview, WorkerOverview,
    };

    fn worker(address: &str, age_micros: Option<i64>) -> WorkerOverview {
        WorkerOverview {
            address: address.into(),
            tags: vec!["gpu".into()],
            lost: age_micros.is_none(),
            tfdata: true,
            tasks: 2,
            last_heartbeat_age_micros: age_micros,
            rates: None,
            totals: None,
            processing_time_nsec: None,
            heartbeat_warning: None,
        }
    }

    /// The status service renders the overview the status page renders:
    /// every row, in the overview's order, with `tfdata status`'s units and
    /// names.
    #[test]
    fn the_status_report_renders_every_row_of_the_overview() {
        let overview = Overview {
            now_micros: 1_000_000,
            fault_tolerant: true,
            journal_failed: false,
            worker_timeout: Duration::from_secs(60),
            workers: vec![worker("a:1", Some(2_500_000)), worker("b:1", None)],
            readers: vec![],
            datasets: vec![DatasetOverview {
                id: DatasetId("7".into()),
                compression: Compression::Snappy as i32,
                cardinality: -1,
                element_spec: None,
                runs_on_tfdata: true,
                runs_on_tensorflow: false,
            }],
            jobs: vec![JobOverview {
                id: JobId(3),
                name: "train".into(),
                dataset_id: DatasetId("7".into()),
                sharding_policy: ShardingPolicy::Dynamic as i32,
                num_consumers: Some(2),
                target_workers: TargetWorkers::Local as i32,
                cross_trainer_cache: false,
                deterministic: None,
            }],
            iterations: vec![IterationOverview {
                iteration: IterationId(4),
                job_id: JobId(3),
                repetition: 1,
                num_clients: 2,
                finished: false,
                garbage_collected: true,
                tasks: 5,
                pending_tasks: 1,
                splits_produced: 0,
                splits_total: None,
                elements_consumed: 0,
                readers: 0,
            }],
            tasks: vec![TaskOverview {
                id: TaskId(9),
                iteration: IterationId(4),
                worker_address: "a:1".into(),
                finished: true,
                starting_round: 6,
            }],
            demand: Default::default(),
            scaling: Default::default(),
            snapshots: vec![SnapshotOverview {
                path: "/s".into(),
                state: "error",
                error: "disk full".into(),
                assigned_splits: 3,
                total_splits: -1,
                streams: vec![SnapshotStreamOverview {
                    index: 0,
                    state: "orphan",
                }],
            }],
            reorder_waits: vec![],
            autocache: vec![],
        };
        let r = status_report(&overview);
        assert!(r.fault_tolerant);
        let workers: Vec<_> = r
            .workers
            .iter()
            .map(|w| (w.address.as_str(), w.last_heartbeat_age_ms, w.lost))
            .collect();
        assert_eq!(workers, [("a:1", 2_500, false), ("b:1", -1, true)]);
        assert_eq!(r.workers[0].tags, ["gpu"]);
        assert_eq!(r.workers[0].assigned_tasks, 2);
        assert_eq!(
            (
                r.datasets[0].compression.as_str(),
                r.datasets[0].cardinality
            ),
            ("SNAPPY", -1)
        );
        assert_eq!(r.datasets[0].element_spec, "unknown");
        let job = &r.jobs[0];
        assert_eq!(
            (
                job.processing_mode.as_str(),
                job.target_workers.as_str(),
                job.num_consumers
            ),
            ("DYNAMIC", "LOCAL", Some(2))
        );
        let it = &r.iterations[0];
        assert!(it.garbage_collected && !it.finished);
        assert_eq!((it.active_tasks, it.pending_tasks), (5, 1));
        assert_eq!((r.tasks[0].task_id, r.tasks[0].starting_round), (9, 6));
        let s = &r.snapshots[0];
        assert_eq!((s.state.as_str(), s.error.as_str()), ("error", "disk full"));
        assert_eq!(s.streams[0].state, "orphan");
    }
}
