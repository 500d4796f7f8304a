//! The `scaling/model` lines: what 100 and 1,000 workers would need,
//! computed from what this run measured.
//!
//! From the grid's cells, per workload: the workers' CPU per item (median
//! over the cells; CPU per item moves less with the machine's other load
//! than throughput does), the readers' CPU per item, the most cores one
//! reader process was seen to use, and the payload bytes per item. From the
//! dispatcher calibration (the `dispatcher-capacity` load generator against
//! our dispatcher at a few sizes): the dispatcher's CPU per heartbeat and a
//! reader's heartbeat answer size, each as a line in the worker count
//! (a reader's answer lists one task per worker).
//!
//! Then, for W workers of `worker_cores` cores each: the workers deliver
//! W × cores / (CPU per item) items/s; the readers need that × their CPU
//! per item in cores, that is so many reader processes of `reader_cores`
//! cores each (one by default: a reader's client runtime, which receives
//! and decodes, is one thread); the data plane carries items/s × payload bytes; the dispatcher
//! answers every reader's heartbeat each second and every worker's each 30
//! s (TensorFlow's defaults), at the fitted CPU per call, and sends each
//! reader its answer. The same dispatcher figures are given for the
//! `dispatcher-capacity` shape (10 readers per worker), whatever the data
//! rate. Everything scales linearly from one machine's measurement: no
//! network, NUMA or switch limits are modelled.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::workload::Workload;
use crate::capacity::DispatcherLoad;

/// What one cell of the grid measured, as the model uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct CellCosts {
    pub workload: Workload,
    pub workers: usize,
    pub readers: usize,
    pub items: u64,
    pub payload_bytes: u64,
    /// Wall seconds of the whole read (go to the last reader's end).
    pub seconds: f64,
    /// All worker processes' CPU over the read.
    pub worker_cpu_seconds: Option<f64>,
    /// All readers' CPU over their reads.
    pub reader_cpu_seconds: f64,
}

/// A workload's measured costs per item.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadCosts {
    pub workload: Workload,
    pub worker_cpu_us_per_item: f64,
    pub worker_cpu_us_per_item_range: (f64, f64),
    pub reader_cpu_us_per_item: f64,
    /// The most cores one reader process was seen to use, averaged over a
    /// read (how close the readers came to their limit; not used to size).
    pub reader_cores_per_reader_seen: f64,
    pub payload_bytes_per_item: f64,
    pub cells: usize,
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

impl WorkloadCosts {
    /// The costs of `workload` from its cells (`None` without a cell that
    /// measured its workers' CPU).
    pub fn from_cells(workload: Workload, cells: &[CellCosts]) -> Option<Self> {
        let cells: Vec<&CellCosts> = cells
            .iter()
            .filter(|c| c.workload == workload && c.items > 0 && c.seconds > 0.0)
            .collect();
        let per_item = |cpu: f64, c: &CellCosts| cpu * 1e6 / c.items as f64;
        // Process CPU times come in clock ticks: a short cell may show none.
        // One tick is then the bound (not zero, which would model a free
        // worker and infinite throughput).
        let tick = 1.0 / crate::measure::USER_HZ;
        let worker: Vec<f64> = cells
            .iter()
            .filter_map(|c| c.worker_cpu_seconds.map(|cpu| per_item(cpu.max(tick), c)))
            .collect();
        let range = (
            worker.iter().copied().fold(f64::INFINITY, f64::min),
            worker.iter().copied().fold(0.0, f64::max),
        );
        let items: u64 = cells.iter().map(|c| c.items).sum();
        let bytes: u64 = cells.iter().map(|c| c.payload_bytes).sum();
        Some(WorkloadCosts {
            workload,
            worker_cpu_us_per_item: median(worker)?,
            worker_cpu_us_per_item_range: range,
            reader_cpu_us_per_item: median(
                cells
                    .iter()
                    .map(|c| per_item(c.reader_cpu_seconds, c))
                    .collect(),
            )?,
            reader_cores_per_reader_seen: cells
                .iter()
                .map(|c| c.reader_cpu_seconds / c.seconds / c.readers as f64)
                .fold(0.0, f64::max),
            payload_bytes_per_item: bytes as f64 / items as f64,
            cells: cells.len(),
        })
    }
}

/// `y = intercept + slope × x` through the points by least squares; one
/// point, or a falling line (noise: a larger cluster costs no less per call),
/// gives their mean as a flat line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    pub intercept: f64,
    pub slope: f64,
}

impl Line {
    pub fn fit(points: &[(f64, f64)]) -> Option<Line> {
        let n = points.len() as f64;
        if points.is_empty() {
            return None;
        }
        let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
        let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
        let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
        let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
        if slope <= 0.0 {
            return Some(Line {
                intercept: mean_y,
                slope: 0.0,
            });
        }
        Some(Line {
            intercept: mean_y - slope * mean_x,
            slope,
        })
    }

    pub fn at(&self, x: f64) -> f64 {
        (self.intercept + self.slope * x).max(0.0)
    }
}

/// The dispatcher's measured costs, as lines in the worker count.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatcherCosts {
    /// Dispatcher CPU µs per heartbeat (reader's or worker's) it answered.
    pub us_per_call: Line,
    /// Bytes of a reader's heartbeat answer.
    pub answer_bytes: Line,
    /// The calibration's worker counts.
    pub workers_measured: Vec<usize>,
}

impl DispatcherCosts {
    pub fn fit(loads: &[DispatcherLoad]) -> Option<Self> {
        let loads: Vec<&DispatcherLoad> = loads
            .iter()
            .filter(|l| l.client_heartbeats_per_second > 0.0)
            .collect();
        let calls = |l: &DispatcherLoad| {
            l.client_heartbeats_per_second
                + l.worker_heartbeats_per_second
                + l.get_splits_per_second
        };
        let us_per_call: Vec<(f64, f64)> = loads
            .iter()
            .map(|l| (l.workers as f64, l.dispatcher_cores * 1e6 / calls(l)))
            .collect();
        let answer: Vec<(f64, f64)> = loads
            .iter()
            .map(|l| (l.workers as f64, l.answer_bytes))
            .collect();
        Some(DispatcherCosts {
            us_per_call: Line::fit(&us_per_call)?,
            answer_bytes: Line::fit(&answer)?,
            workers_measured: loads.iter().map(|l| l.workers).collect(),
        })
    }
}

/// The cluster the model sizes.
#[derive(Debug, Clone)]
pub struct ModelOptions {
    pub workers: Vec<usize>,
    pub worker_cores: f64,
    /// Cores each reader process has.
    pub reader_cores: f64,
    pub client_heartbeat: Duration,
    pub worker_heartbeat: Duration,
    /// The `dispatcher-capacity` shape the dispatcher figures are also given for.
    pub readers_per_worker: usize,
}

/// What a dispatcher does for `workers` workers and `readers` readers.
fn dispatcher_figures(
    d: &DispatcherCosts,
    o: &ModelOptions,
    workers: usize,
    readers: f64,
) -> (f64, f64, f64) {
    let reader_calls = readers / o.client_heartbeat.as_secs_f64();
    let calls = reader_calls + workers as f64 / o.worker_heartbeat.as_secs_f64();
    let cores = calls * d.us_per_call.at(workers as f64) / 1e6;
    let control_bytes = reader_calls * d.answer_bytes.at(workers as f64);
    (calls, cores, control_bytes)
}

/// One `scaling/model` line for `workload` at `workers` workers.
pub fn line(
    costs: &WorkloadCosts,
    dispatcher: Option<&DispatcherCosts>,
    o: &ModelOptions,
    workers: usize,
) -> (Map<String, Value>, String) {
    let w = costs.workload;
    let items_per_second = workers as f64 * o.worker_cores * 1e6 / costs.worker_cpu_us_per_item;
    let data_bytes = items_per_second * costs.payload_bytes_per_item;
    let reader_cores = items_per_second * costs.reader_cpu_us_per_item / 1e6;
    let readers = (reader_cores / o.reader_cores).ceil().max(1.0);
    let mut r = Map::new();
    r.insert("scenario".into(), json!("scaling/model"));
    r.insert("workload".into(), json!(w.name()));
    r.insert("workers".into(), json!(workers));
    r.insert("worker_cores".into(), json!(o.worker_cores));
    r.insert("cores_per_reader".into(), json!(o.reader_cores));
    r.insert("value".into(), json!(w.value(items_per_second)));
    r.insert("unit".into(), json!(w.unit()));
    r.insert("item".into(), json!(w.item()));
    r.insert("items_per_second".into(), json!(items_per_second));
    r.insert("data_plane_mb_per_second".into(), json!(data_bytes / 1e6));
    r.insert(
        "data_plane_mb_per_second_per_worker".into(),
        json!(data_bytes / workers as f64 / 1e6),
    );
    r.insert("reader_cores".into(), json!(reader_cores));
    r.insert("readers".into(), json!(readers));
    r.insert(
        "data_plane_mb_per_second_per_reader".into(),
        json!(data_bytes / readers / 1e6),
    );
    r.insert(
        "inputs".into(),
        json!({
            "worker_cpu_us_per_item": costs.worker_cpu_us_per_item,
            "worker_cpu_us_per_item_range": [costs.worker_cpu_us_per_item_range.0, costs.worker_cpu_us_per_item_range.1],
            "reader_cpu_us_per_item": costs.reader_cpu_us_per_item,
            "reader_cores_per_reader_seen": costs.reader_cores_per_reader_seen,
            "payload_bytes_per_item": costs.payload_bytes_per_item,
            "cells": costs.cells,
        }),
    );
    let mut summary = format!(
        "scaling/model {:>8} {workers:>5} workers × {} core: {:.3e} {}/s, data plane {:.0} MB/s, {readers:.0} readers ({reader_cores:.1} cores)",
        w.name(),
        o.worker_cores,
        items_per_second,
        w.item(),
        data_bytes / 1e6,
    );
    if let Some(d) = dispatcher {
        let (calls, cores, control) = dispatcher_figures(d, o, workers, readers);
        let shape_readers = (workers * o.readers_per_worker) as f64;
        let (shape_calls, shape_cores, shape_control) =
            dispatcher_figures(d, o, workers, shape_readers);
        r.insert("dispatcher_calls_per_second".into(), json!(calls));
        r.insert("dispatcher_cores".into(), json!(cores));
        r.insert("control_plane_mb_per_second".into(), json!(control / 1e6));
        r.insert(
            format!("at_{}_readers_per_worker", o.readers_per_worker),
            json!({
                "readers": shape_readers,
                "dispatcher_calls_per_second": shape_calls,
                "dispatcher_cores": shape_cores,
                "control_plane_mb_per_second": shape_control / 1e6,
            }),
        );
        if let Some(inputs) = r.get_mut("inputs").and_then(Value::as_object_mut) {
            inputs.insert(
                "dispatcher_us_per_call".into(),
                json!(d.us_per_call.at(workers as f64)),
            );
            inputs.insert(
                "answer_bytes".into(),
                json!(d.answer_bytes.at(workers as f64)),
            );
            inputs.insert(
                "dispatcher_workers_measured".into(),
                json!(d.workers_measured),
            );
        }
        summary += &format!(
            "; dispatcher {cores:.3} cores, control plane {:.2} MB/s (at {} readers/worker: {shape_cores:.2} cores, {:.0} MB/s)",
            control / 1e6,
            o.readers_per_worker,
            shape_control / 1e6
        );
    }
    (r, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(workers: usize, readers: usize, worker_cpu: f64) -> CellCosts {
        CellCosts {
            workload: Workload::Small,
            workers,
            readers,
            items: 1_000_000,
            payload_bytes: 8_000_000,
            seconds: 1.0,
            worker_cpu_seconds: Some(worker_cpu),
            reader_cpu_seconds: 0.5 * readers as f64,
        }
    }

    #[test]
    fn costs_are_medians_per_item() {
        let cells = [cell(1, 1, 1.0), cell(2, 2, 2.0), cell(4, 1, 3.0)];
        let c = WorkloadCosts::from_cells(Workload::Small, &cells).unwrap();
        assert_eq!(c.worker_cpu_us_per_item, 2.0);
        assert_eq!(c.worker_cpu_us_per_item_range, (1.0, 3.0));
        assert_eq!(c.reader_cpu_us_per_item, 0.5);
        assert_eq!(c.reader_cores_per_reader_seen, 0.5);
        assert_eq!(c.payload_bytes_per_item, 8.0);
        assert!(WorkloadCosts::from_cells(Workload::Large, &cells).is_none());
    }

    #[test]
    fn lines_fit_and_never_fall() {
        let l = Line::fit(&[(10.0, 20.0), (20.0, 40.0)]).unwrap();
        assert!((l.at(100.0) - 200.0).abs() < 1e-9);
        let flat = Line::fit(&[(10.0, 40.0), (20.0, 20.0)]).unwrap();
        assert_eq!(flat.at(1000.0), 30.0);
        assert_eq!(Line::fit(&[(5.0, 7.0)]).unwrap().at(500.0), 7.0);
        assert!(Line::fit(&[]).is_none());
    }

    #[test]
    fn the_model_follows_the_measured_costs() {
        let costs = WorkloadCosts::from_cells(Workload::Small, &[cell(1, 1, 1.0)]).unwrap();
        let load = |workers: usize, cores: f64, bytes: f64| DispatcherLoad {
            workers,
            readers: workers * 10,
            sustained: true,
            dispatcher_cores: cores,
            worker_heartbeats_per_second: 0.0,
            client_heartbeats_per_second: (workers * 10) as f64,
            get_splits_per_second: 0.0,
            answer_bytes: bytes,
        };
        // 10 µs per call at 10 workers, 20 at 20; answers of 60 bytes a task.
        let d = DispatcherCosts::fit(&[load(10, 0.001, 600.0), load(20, 0.004, 1200.0)]).unwrap();
        let o = ModelOptions {
            workers: vec![100],
            worker_cores: 1.0,
            reader_cores: 0.5,
            client_heartbeat: Duration::from_secs(1),
            worker_heartbeat: Duration::from_secs(30),
            readers_per_worker: 10,
        };
        let (r, summary) = line(&costs, Some(&d), &o, 100);
        // 1 µs of worker CPU per element: 1 M elements/s per worker core.
        assert_eq!(r["items_per_second"], json!(100e6));
        assert_eq!(r["data_plane_mb_per_second"], json!(800.0));
        assert_eq!(r["data_plane_mb_per_second_per_worker"], json!(8.0));
        // 0.5 µs of reader CPU per element, readers of 0.5 cores: 100.
        assert_eq!(r["reader_cores"], json!(50.0));
        assert_eq!(r["readers"], json!(100.0));
        // 100 reader beats/s + 100/30 worker beats/s at 100 µs each.
        let cores = r["dispatcher_cores"].as_f64().unwrap();
        assert!(
            (cores - (100.0 + 100.0 / 30.0) * 100e-6).abs() < 1e-9,
            "{cores}"
        );
        let control = r["control_plane_mb_per_second"].as_f64().unwrap();
        assert!((control - 100.0 * 6000.0 / 1e6).abs() < 1e-9);
        assert_eq!(r["at_10_readers_per_worker"]["readers"], json!(1000.0));
        assert!(summary.contains("100 readers"), "{summary}");
        // Without the calibration, the data plane is still modelled.
        let (r, _) = line(&costs, None, &o, 1000);
        assert_eq!(r["readers"], json!(1000.0));
        assert!(r.get("dispatcher_cores").is_none());
    }
}
