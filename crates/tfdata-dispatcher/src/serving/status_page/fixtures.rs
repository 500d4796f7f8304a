//! Hand-made reports for the renderers' tests: every table with one row,
//! and a verdict of "add workers".

use std::time::Duration;

use super::report::{
    DatasetRow, IterationRow, ReaderRow, SnapshotRow, StatusReport, WorkerRow, WorkerState,
};
use super::verdict::{Evidence, judge};
use crate::overview::{Demand, ReaderRates, WorkerRates};

/// Markup that would run script if a page let it through unescaped.
pub const HOSTILE: &str = r#""><img src=x onerror=alert(1)><script>alert(2)</script>&"#;

/// A live tfdata worker with every figure known.
pub fn worker(address: &str, state: WorkerState, speed: f64) -> WorkerRow {
    WorkerRow {
        address: address.into(),
        state,
        tfdata: true,
        tasks: 2,
        last_heartbeat_age: Some(Duration::from_millis(300)),
        rates: Some(WorkerRates {
            elements_per_second: speed,
            bytes_per_second: speed * 8.0,
            buffer_full_ratio: 0.02,
            credit_wait_per_second: 0.0,
        }),
        elements_sent: Some(123_456),
        bytes_sent: Some(987_654),
        processing_time_nsec: Some(20e6),
        heartbeat_warning: None,
        reorder_wait: None,
        reorder_window: None,
    }
}

/// A report of `workers` whose job, dataset, snapshot path and error are
/// all `name`.
pub fn report(workers: Vec<WorkerRow>, name: &str) -> StatusReport {
    StatusReport {
        taken_at_micros: 1_796_130_245_000_000,
        fault_tolerant: true,
        journal_failed: false,
        verdict: judge(&Evidence {
            readers_reporting: 1,
            starvation_mean: 0.8,
            starvation_max: 0.8,
            workers_reporting: workers.len(),
            live_workers: workers.len(),
            optimal_workers: 12,
            demand_measured: true,
            ..Default::default()
        }),
        demand: Demand {
            optimal_workers: 12,
            measured: true,
            iterations: vec![],
        },
        scaling: Default::default(),
        workers,
        readers: vec![ReaderRow {
            client: 3000,
            iteration: 2000,
            job_name: name.into(),
            rates: Some(ReaderRates {
                starvation_ratio: 0.8,
                elements_per_second: 50.0,
                bytes_per_second: 400.0,
            }),
            trainer_elements_per_second: Some(1e4),
            elements_consumed: Some(5_000),
            bytes_received: Some(40_000),
        }],
        iterations: vec![IterationRow {
            iteration: 2000,
            job_id: 1000,
            job_name: name.into(),
            dataset_id: name.into(),
            processing_mode: "distributed_epoch".into(),
            deterministic: None,
            repetition: 0,
            finished: false,
            readers: 1,
            tasks: 3,
            splits_produced: 40,
            splits_total: Some(100),
            elements_consumed: 5_000,
            starvation_mean: Some(0.8),
            consumed_per_second: Some(50.0),
        }],
        datasets: vec![DatasetRow {
            id: name.into(),
            cardinality: -2,
            compression: "snappy".into(),
            runs_on: "tfdata",
            jobs: 1,
        }],
        snapshots: vec![SnapshotRow {
            path: name.into(),
            state: "error",
            error: name.into(),
            splits_assigned: 3,
            splits_total: 10,
            streams_done: 1,
            streams: 2,
        }],
        autocache: Vec::new(),
        jobs: 1,
        active_tasks: 3,
        pending_tasks: 0,
    }
}
