//! `/api/status`: the page's figures as JSON for scripts, every row (the
//! page caps its tables; this does not), raw numbers in base units
//! (seconds, bytes, ratios from 0 to 1). A number that is not known is
//! `null`. docs/operations.md describes the fields.

use serde_json::{Value, json};

use super::report::StatusReport;

/// The report as a JSON document.
pub fn status(report: &StatusReport) -> Value {
    let s = report.summary();
    let v = &report.verdict;
    let e = &v.evidence;
    json!({
        "taken_at_micros": report.taken_at_micros,
        "fault_tolerant": report.fault_tolerant,
        "journal_failed": report.journal_failed,
        "protocol_version": tfdata_proto::DATA_SERVICE_VERSION,
        "verdict": {
            "bottleneck": v.bottleneck.key(),
            "label": v.bottleneck.label(),
            "headline": v.headline,
            "reasons": v.reasons,
            "evidence": {
                "readers_reporting": e.readers_reporting,
                "starvation_mean": e.starvation_mean,
                "starvation_max": e.starvation_max,
                "workers_reporting": e.workers_reporting,
                "buffer_full_mean": e.buffer_full_mean,
                "credit_wait_seconds_per_second": e.credit_wait_mean,
                "live_workers": e.live_workers,
                "optimal_workers": e.optimal_workers,
                "demand_measured": e.demand_measured,
            },
        },
        "summary": {
            "live_workers": s.live_workers,
            "stale_workers": s.stale_workers,
            "lost_workers": s.lost_workers,
            "tensorflow_workers": s.tensorflow_workers,
            "elements_per_second": s.elements_per_second,
            "bytes_per_second": s.bytes_per_second,
            "readers": s.readers,
            "datasets": report.datasets.len(),
            "jobs": report.jobs,
            "active_iterations": s.active_iterations,
            "finished_iterations": s.finished_iterations,
            "active_tasks": report.active_tasks,
            "pending_tasks": report.pending_tasks,
            "snapshots": report.snapshots.len(),
        },
        "demand": {
            "optimal_workers": report.demand.optimal_workers,
            "measured": report.demand.measured,
            "iterations": report.demand.iterations.iter().map(|d| json!({
                "iteration": d.iteration.0,
                "consumption_per_second": d.consumption_per_second,
                "worker_throughput_per_second": d.worker_throughput_per_second,
                "reporting_workers": d.reporting_workers,
                "workers": d.workers,
            })).collect::<Vec<_>>(),
        },
        "scaling": super::scaling::json(&report.scaling),
        "workers": report.workers.iter().map(|w| json!({
            "address": w.address,
            "state": w.state.label(),
            "kind": if w.tfdata { "tfdata" } else { "tensorflow" },
            "tasks": w.tasks,
            "last_heartbeat_age_seconds": w.last_heartbeat_age.map(|a| a.as_secs_f64()),
            "elements_per_second": w.rates.map(|r| r.elements_per_second),
            "bytes_per_second": w.rates.map(|r| r.bytes_per_second),
            "buffer_full_ratio": w.rates.map(|r| r.buffer_full_ratio),
            "credit_wait_seconds_per_second": w.rates.map(|r| r.credit_wait_per_second),
            "processing_time_seconds": w.processing_time_nsec.map(|n| n / 1e9),
            "elements_sent": w.elements_sent,
            "bytes_sent": w.bytes_sent,
            "heartbeat_warning": w.heartbeat_warning,
            "reorder_wait_seconds_last_minute": w.reorder_wait.map(|d| d.as_secs_f64()),
            "reorder_window_elements": w.reorder_window.map(|(elements, _)| elements),
            "reorder_window_limit": w.reorder_window.map(|(_, limit)| limit),
        })).collect::<Vec<_>>(),
        "readers": report.readers.iter().map(|r| json!({
            "client": r.client,
            "iteration": r.iteration,
            "job_name": r.job_name,
            "starvation_ratio": r.rates.map(|r| r.starvation_ratio),
            "elements_per_second": r.rates.map(|r| r.elements_per_second),
            "bytes_per_second": r.rates.map(|r| r.bytes_per_second),
            "trainer_elements_per_second": r.trainer_elements_per_second,
            "elements_consumed": r.elements_consumed,
            "bytes_received": r.bytes_received,
        })).collect::<Vec<_>>(),
        "iterations": report.iterations.iter().map(|it| json!({
            "iteration": it.iteration,
            "job_id": it.job_id,
            "job_name": it.job_name,
            "dataset_id": it.dataset_id,
            "processing_mode": it.processing_mode,
            "deterministic_lanes": it.deterministic.map(|d| d.lanes),
            "split_shuffle_seed": it.deterministic.and_then(|d| d.split_shuffle_seed),
            "repetition": it.repetition,
            "finished": it.finished,
            "readers": it.readers,
            "tasks": it.tasks,
            "splits_produced": it.splits_produced,
            "splits_total": it.splits_total,
            "elements_consumed": it.elements_consumed,
            "starvation_mean": it.starvation_mean,
            "elements_per_second": it.consumed_per_second,
        })).collect::<Vec<_>>(),
        "datasets": report.datasets.iter().map(|d| json!({
            "dataset_id": d.id,
            "cardinality": d.cardinality,
            "compression": d.compression,
            "runs_on": d.runs_on,
            "jobs": d.jobs,
        })).collect::<Vec<_>>(),
        "snapshots": report.snapshots.iter().map(|s| json!({
            "path": s.path,
            "state": s.state,
            "error": s.error,
            "splits_assigned": s.splits_assigned,
            "splits_total": (s.splits_total >= 0).then_some(s.splits_total),
            "streams_done": s.streams_done,
            "streams": s.streams,
        })).collect::<Vec<_>>(),
        "autocache": super::autocache::json(&report.autocache),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::status_page::fixtures::{HOSTILE, report, worker};
    use crate::serving::status_page::report::WorkerState;

    #[test]
    fn every_figure_is_there_in_base_units() {
        let r = report(
            vec![
                worker("w-1:5051", WorkerState::Live, 250.0),
                worker("w-2:5051", WorkerState::Lost, 0.0),
            ],
            "train",
        );
        // Through text and back, as a script reads it.
        let v: Value = serde_json::from_str(&status(&r).to_string()).unwrap();
        assert_eq!(v["verdict"]["bottleneck"], "add_workers");
        assert_eq!(v["verdict"]["label"], "add workers");
        assert_eq!(v["verdict"]["evidence"]["starvation_mean"], 0.8);
        assert_eq!(v["verdict"]["evidence"]["optimal_workers"], 12);
        assert_eq!(v["verdict"]["reasons"].as_array().unwrap().len(), 4);
        assert_eq!(v["summary"]["live_workers"], 1);
        assert_eq!(v["summary"]["lost_workers"], 1);
        // A lost worker's rates do not count toward the total.
        assert_eq!(v["summary"]["elements_per_second"], 250.0);
        let w = &v["workers"][0];
        assert_eq!(w["address"], "w-1:5051");
        assert_eq!(w["state"], "live");
        assert_eq!(w["kind"], "tfdata");
        assert_eq!(w["bytes_per_second"], 2000.0);
        assert_eq!(w["last_heartbeat_age_seconds"], 0.3);
        assert_eq!(w["processing_time_seconds"], 0.02);
        assert_eq!(v["workers"][1]["state"], "lost");
        let it = &v["iterations"][0];
        assert_eq!(
            (&it["splits_produced"], &it["splits_total"]),
            (&Value::from(40), &Value::from(100))
        );
        assert_eq!(it["elements_consumed"], 5000);
        assert_eq!(it["processing_mode"], "distributed_epoch");
        assert_eq!(v["readers"][0]["starvation_ratio"], 0.8);
        assert_eq!(v["readers"][0]["trainer_elements_per_second"], 1e4);
        assert_eq!(v["datasets"][0]["cardinality"], -2);
        assert_eq!(v["snapshots"][0]["state"], "error");
        assert_eq!(v["snapshots"][0]["splits_total"], 10);
        assert_eq!(v["snapshots"][0]["streams"], 2);
        assert_eq!(v["protocol_version"], tfdata_proto::DATA_SERVICE_VERSION);
    }

    #[test]
    fn unknown_figures_are_null() {
        let mut r = report(vec![worker("w:1", WorkerState::Live, 1.0)], "job");
        r.workers[0].rates = None;
        r.workers[0].last_heartbeat_age = None;
        r.readers[0].rates = None;
        r.iterations[0].splits_total = None;
        r.snapshots[0].splits_total = -1;
        let v = status(&r);
        assert!(v["workers"][0]["elements_per_second"].is_null());
        assert!(v["workers"][0]["last_heartbeat_age_seconds"].is_null());
        assert!(v["readers"][0]["starvation_ratio"].is_null());
        assert!(v["iterations"][0]["splits_total"].is_null());
        assert!(v["snapshots"][0]["splits_total"].is_null());
    }

    #[test]
    fn strings_round_trip_exactly() {
        // JSON escapes on its own terms; the value a script reads back is
        // the string the network sent, whole (the page is what cuts them).
        let long_hostile = format!("{HOSTILE}{}", "x".repeat(1_000));
        let r = report(vec![worker(HOSTILE, WorkerState::Live, 1.0)], &long_hostile);
        let text = status(&r).to_string();
        assert!(text.contains(r#"\"><img"#), "quotes are escaped: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["workers"][0]["address"], HOSTILE);
        assert_eq!(v["iterations"][0]["job_name"], long_hostile.as_str());
        assert_eq!(v["snapshots"][0]["error"], long_hostile.as_str());
    }
}
