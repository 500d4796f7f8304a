//! What the worker tells about its pace: the figures its heartbeats carry
//! (each task's processing time per element, as TensorFlow's workers send
//! it, and tfdata's cumulative [`TfdataWorkerStats`]) and the gauges and
//! running totals of its metrics, all computed from its tasks when asked
//! (a heartbeat, a scrape), never on the element path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tfdata_core::TaskId;
use tfdata_proto::data::{ActiveTask, TfdataWorkerStats};

use crate::metrics::WorkerMetrics;
use crate::producer::buffer::PipelineTimes;
use crate::task::TaskRunner;

/// The worker's pace bookkeeping.
#[derive(Debug, Default)]
pub struct Pace {
    pub metrics: Arc<WorkerMetrics>,
    /// Each task's times at the last heartbeat, so processing times cover
    /// the last interval.
    reported: Mutex<HashMap<TaskId, PipelineTimes>>,
    /// Busy and full time of tasks no longer held, so totals never drop.
    retired: Mutex<(Duration, Duration)>,
}

impl Pace {
    pub fn new(metrics: Arc<WorkerMetrics>) -> Self {
        Pace {
            metrics,
            reported: Mutex::default(),
            retired: Mutex::default(),
        }
    }

    /// `ActiveTask`s for a heartbeat: each task's pipeline time per element
    /// (ns) over the interval since the last heartbeat (over its life if it
    /// made nothing since; 0 before its first element).
    pub fn active_tasks(&self, tasks: &[Arc<TaskRunner>]) -> Vec<ActiveTask> {
        let mut reported = lock(&self.reported);
        let mut now_reported = HashMap::with_capacity(tasks.len());
        let active = tasks
            .iter()
            .map(|task| {
                let id = task.task_id();
                let times = task.pipeline_times();
                let before = reported.get(&id).copied().unwrap_or_default();
                let made = times.produced.saturating_sub(before.produced);
                let processing_time_nsec = if made > 0 {
                    times.busy.saturating_sub(before.busy).as_nanos() as f64 / made as f64
                } else if times.produced > 0 {
                    times.busy.as_nanos() as f64 / times.produced as f64
                } else {
                    0.0
                };
                now_reported.insert(id, times);
                ActiveTask {
                    task_id: id.0,
                    processing_time_nsec,
                }
            })
            .collect();
        *reported = now_reported;
        active
    }

    /// A task leaves the worker: its times stay in the totals.
    pub fn retire(&self, task: &TaskRunner) {
        let times = task.pipeline_times();
        let mut retired = lock(&self.retired);
        retired.0 += times.busy;
        retired.1 += times.full;
    }

    /// Pipeline busy and full seconds so far, over every task ever held.
    fn pipeline_seconds(&self, tasks: &[Arc<TaskRunner>]) -> (f64, f64) {
        let (mut busy, mut full) = *lock(&self.retired);
        for task in tasks {
            let times = task.pipeline_times();
            busy += times.busy;
            full += times.full;
        }
        (busy.as_secs_f64(), full.as_secs_f64())
    }

    /// The cumulative figures a heartbeat carries; also brings the metrics'
    /// running totals up to date.
    pub fn stats(&self, tasks: &[Arc<TaskRunner>]) -> TfdataWorkerStats {
        let m = &self.metrics;
        let (busy, full) = self.pipeline_seconds(tasks);
        WorkerMetrics::catch_up(&m.pipeline_busy, busy);
        WorkerMetrics::catch_up(&m.buffer_full, full);
        WorkerMetrics::catch_up_count(
            &m.webdataset_skipped_samples,
            tfdata_dataset::webdataset::skipped_samples(),
        );
        WorkerMetrics::catch_up_count(
            &m.webdataset_ignored_members,
            tfdata_dataset::webdataset::ignored_members(),
        );
        TfdataWorkerStats {
            elements_sent: m.stream.elements.get() + m.get_element.elements.get(),
            bytes_sent: m.stream.bytes.get() + m.get_element.bytes.get(),
            pipeline_busy_seconds: m.pipeline_busy.get(),
            buffer_full_seconds: m.buffer_full.get(),
            credit_wait_seconds: m.credit_wait.get(),
        }
    }

    /// Sets the gauges from `tasks` and encodes every metric in `format`.
    pub fn encode(&self, tasks: &[Arc<TaskRunner>], format: tfdata_rpc::metrics::Format) -> String {
        let m = &self.metrics;
        self.stats(tasks);
        m.tasks.set(tasks.len() as i64);
        let (elements, bytes) = tasks.iter().fold((0, 0), |(e, b), task| {
            let (te, tb) = task.buffered();
            (e + te, b + tb)
        });
        m.buffered_elements.set(elements as i64);
        m.buffered_bytes.set(bytes as i64);
        m.encode(format)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
