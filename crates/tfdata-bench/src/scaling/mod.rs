//! `scaling` (issue 16 item 5): aggregate throughput of `small`, `large`
//! and the image pipeline with W worker processes and R reader processes
//! sharing one job, on this machine; then a model of what 100 and 1,000
//! workers would need, from the costs measured ([`model`]).
//!
//! One dispatcher, in the bench process (default configuration, in
//! memory). W workers, each a child process (this binary's hidden
//! `--serve-worker`). For each W the cluster is started once, and each
//! workload registered once: each worker's task serves `total / W`
//! elements (parallel_epochs: every worker runs the whole dataset), so a
//! cell moves about the same data whatever its W. For each R, R reader
//! processes ([`reader`]) read one shared job (`job_name`, parallel_epochs:
//! every worker serves, each element goes to the reader that asks first).
//! They connect, wait for `go`, read to the end; the readers together must
//! receive every element (and for `small` the sum of every value). The
//! figure (`value`) is their aggregate rate between 10 % and 90 % of the
//! items received (the timelines merged), leaving out the iteration's setup
//! and the last reader's tail; `whole_read_value` is the whole read's.
//!
//! Measured per cell from `/proc` over the read: every worker process's
//! CPU (`stat`), the bench process's threads' CPU (`schedstat`, ns: the
//! dispatcher is nearly idle in parallel_epochs), the readers' CPU (each
//! its own), and what other processes of the machine kept busy. Then the
//! dispatcher calibration: the `dispatcher-capacity` load generator
//! (simulated workers and readers at TensorFlow's default intervals)
//! against our dispatcher in a process of its own at
//! `--scaling-dispatcher-workers` sizes, for its CPU per heartbeat and the
//! size of a reader's heartbeat answer.
//!
//! With `--compare-tensorflow`, each row of cells is run again on
//! TensorFlow's cluster ([`cluster`]: its dispatcher, workers and readers
//! each in a process of their own), with TensorFlow's own sizes
//! (`--scaling-tensorflow-*-elements`: its `small` is hundreds of times
//! slower), measured the same way; its figures join ours in each line
//! (`tensorflow`, `ratio`, `tensorflow_*`). The model uses ours only.

mod cluster;
mod model;
mod reader;
mod workload;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

use crate::capacity::{self, CapacityOptions};
use crate::data::ImageData;
use crate::measure;
use crate::pipeline::PipelineOptions;
use cluster::{Cluster, DispatcherClock, Side};
pub use model::ModelOptions;
use model::{CellCosts, DispatcherCosts, WorkloadCosts};
pub use reader::serve_reader;
use reader::{ReaderProcess, ReaderSpec, steady_rate};
use workload::Share;
pub use workload::Workload;

/// How long reader processes may take to connect (TensorFlow's import it first).
const READY_LIMIT: Duration = Duration::from_secs(120);
/// How long one cell's read may take.
const CELL_LIMIT: Duration = Duration::from_secs(600);
/// The share of the items the aggregate rate is measured between.
const STEADY_FROM: f64 = 0.1;
const STEADY_TO: f64 = 0.9;

/// Elements per cell, shared by its workers (`pipeline`: batches).
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub small: u64,
    pub large: u64,
    pub pipeline: u64,
}

impl Sizes {
    fn of(&self, workload: Workload) -> u64 {
        match workload {
            Workload::Small => self.small,
            Workload::Large => self.large,
            Workload::Pipeline => self.pipeline,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ScalingOptions {
    pub workers: Vec<usize>,
    pub readers: Vec<usize>,
    pub workloads: Vec<Workload>,
    pub sizes: Sizes,
    pub pipeline: PipelineOptions,
    pub images: Option<ImageData>,
    /// TensorFlow's side too, through this Python, with these sizes
    /// (its `small` is some 700 times slower than ours).
    pub tensorflow: Option<(std::path::PathBuf, Sizes)>,
    /// The dispatcher calibration (its `workers` ladder); `None`: none,
    /// and the model has no dispatcher figures.
    pub calibration: Option<CapacityOptions>,
    pub model: ModelOptions,
}

type Emit<'a> = &'a mut dyn FnMut(Map<String, Value>, String) -> Result<()>;

/// What one cell measured.
#[derive(Clone)]
struct Cell {
    costs: CellCosts,
    share: Share,
    value: f64,
    steady_seconds: Option<f64>,
    per_reader_items: Vec<u64>,
    dispatcher_cpu_seconds: Option<f64>,
    other_cores: Option<f64>,
    load_average: Option<f64>,
}

/// CPU counters read at both ends of a read.
struct Sample {
    at: Instant,
    workers: Option<f64>,
    dispatcher: DispatcherClock,
    machine: Option<f64>,
}

impl Sample {
    fn take(cluster: &Cluster) -> Self {
        Sample {
            at: Instant::now(),
            workers: cluster.worker_cpu_seconds(),
            dispatcher: cluster.dispatcher_clock(),
            machine: measure::machine_busy_seconds(),
        }
    }
}

/// Every cell of one side with `workers` workers, in the order of
/// `o.workloads` then `o.readers`.
fn run_row(o: &ScalingOptions, side: &Side, sizes: &Sizes, workers: usize) -> Result<Vec<Cell>> {
    let who = match side {
        Side::Ours => "tfdata",
        Side::TensorFlow(_) => "TensorFlow",
    };
    let cluster = Cluster::start(side, workers)?;
    let mut cells = Vec::new();
    for &workload in &o.workloads {
        let items_per_element = match workload {
            Workload::Pipeline => u64::try_from(o.pipeline.batch_size)?,
            Workload::Small | Workload::Large => 1,
        };
        let share = Share::new(sizes.of(workload), workers as u64, items_per_element)
            .with_context(|| format!("scaling/{}", workload.name()))?;
        let dataset_id = cluster.register(workload, &share, o.images.as_ref(), &o.pipeline)?;
        for &readers in &o.readers {
            let spec = ReaderSpec {
                target: cluster.target(),
                dataset_id: dataset_id.clone(),
                job_name: format!("scaling-{}-{workers}w-{readers}r", workload.name()),
                workload,
                batch_size: o.pipeline.batch_size,
            };
            eprintln!(
                "tfdata-bench: scaling/{}: {who}, {workers} workers, {readers} readers ...",
                workload.name()
            );
            let cell = measure_cell(&cluster, &spec, share, readers)
                .with_context(|| format!("{who}, {workers} workers, {readers} readers"))?;
            cells.push(cell);
        }
    }
    Ok(cells)
}

pub fn run(o: &ScalingOptions, emit: Emit) -> Result<()> {
    let mut cells = Vec::new();
    for &workers in &o.workers {
        let ours = run_row(o, &Side::Ours, &o.sizes, workers)?;
        let theirs = match &o.tensorflow {
            Some((python, sizes)) => run_row(o, &Side::TensorFlow(python.clone()), sizes, workers)?
                .into_iter()
                .map(Some)
                .collect(),
            None => vec![None; ours.len()],
        };
        for (cell, tf) in ours.into_iter().zip(theirs) {
            let (report, summary) = cell_report(&cell, tf.as_ref());
            emit(report, summary)?;
            cells.push(cell);
        }
    }
    let dispatcher = match &o.calibration {
        Some(c) => {
            eprintln!("tfdata-bench: scaling: the dispatcher's cost per heartbeat ...");
            let loads = capacity::measure_ours_in_memory(c, &mut |mut r, s| {
                r.insert("scenario".into(), json!("scaling/dispatcher"));
                emit(r, format!("scaling/dispatcher:{s}"))
            })?;
            DispatcherCosts::fit(&loads)
        }
        None => None,
    };
    let costs: Vec<CellCosts> = cells.iter().map(|c| c.costs.clone()).collect();
    for &workload in &o.workloads {
        let Some(workload_costs) = WorkloadCosts::from_cells(workload, &costs) else {
            continue;
        };
        for &workers in &o.model.workers {
            let (r, s) = model::line(&workload_costs, dispatcher.as_ref(), &o.model, workers);
            emit(r, s)?;
        }
    }
    Ok(())
}

fn measure_cell(
    cluster: &Cluster,
    spec: &ReaderSpec,
    share: Share,
    readers: usize,
) -> Result<Cell> {
    let mut processes = (0..readers)
        .map(|_| ReaderProcess::start(cluster.reader_command(&spec.to_json())?))
        .collect::<Result<Vec<_>>>()?;
    for p in &mut processes {
        p.wait_ready(READY_LIMIT)?;
    }
    let load_average = measure::load_average_1m();
    let before = Sample::take(cluster);
    for p in &mut processes {
        p.go()?;
    }
    let deadline = before.at + CELL_LIMIT;
    let results = processes
        .iter_mut()
        .map(|p| p.result(deadline))
        .collect::<Result<Vec<_>>>()?;
    let after = Sample::take(cluster);
    drop(processes);
    let seconds = after.at.duration_since(before.at).as_secs_f64();

    let elements: u64 = results.iter().map(|r| r.elements).sum();
    let items: u64 = results.iter().map(|r| r.items).sum();
    if elements != share.elements() || items != share.items() {
        bail!(
            "the readers received {elements} elements ({items} {}s), expected {} ({})",
            spec.workload.item(),
            share.elements(),
            share.items()
        );
    }
    if spec.workload == Workload::Small {
        let sum: i128 = results.iter().map(|r| i128::from(r.sum)).sum();
        if sum != share.small_sum() as i128 {
            bail!(
                "the readers' values sum to {sum}, not {}: some arrived twice or not at all",
                share.small_sum()
            );
        }
    }
    let timelines: Vec<&[(u64, u64)]> = results.iter().map(|r| r.checkpoints.as_slice()).collect();
    let steady = steady_rate(&timelines, items, STEADY_FROM, STEADY_TO);
    let whole_rate = items as f64 / seconds;
    let worker_cpu = before.workers.zip(after.workers).map(|(a, b)| b - a);
    let dispatcher_cpu = after.dispatcher.seconds_since(&before.dispatcher);
    let reader_cpu: f64 = results.iter().map(|r| r.cpu_seconds).sum();
    let other_cores = before.machine.zip(after.machine).map(|(a, b)| {
        let ours = worker_cpu.unwrap_or(0.0) + reader_cpu + dispatcher_cpu.unwrap_or(0.0);
        ((b - a - ours) / seconds).max(0.0)
    });
    Ok(Cell {
        costs: CellCosts {
            workload: spec.workload,
            workers: share.workers as usize,
            readers,
            items,
            payload_bytes: results.iter().map(|r| r.payload_bytes).sum(),
            seconds,
            worker_cpu_seconds: worker_cpu,
            reader_cpu_seconds: reader_cpu,
        },
        share,
        value: spec
            .workload
            .value(steady.map_or(whole_rate, |(rate, _)| rate)),
        steady_seconds: steady.map(|(_, s)| s),
        per_reader_items: results.iter().map(|r| r.items).collect(),
        dispatcher_cpu_seconds: dispatcher_cpu,
        other_cores,
        load_average,
    })
}

/// The fields of one side's cell, each name with `prefix`.
fn side_fields(r: &mut Map<String, Value>, prefix: &str, cell: &Cell) {
    let c = &cell.costs;
    let w = c.workload;
    let per_item = |cpu: Option<f64>| cpu.map(|s| s * 1e6 / c.items as f64);
    let cores = |cpu: Option<f64>| cpu.map(|s| s / c.seconds);
    let mut put = |key: &str, value: Value| {
        r.insert(format!("{prefix}{key}"), value);
    };
    put(
        "window",
        json!(if cell.steady_seconds.is_some() {
            "10-90% of the items"
        } else {
            "whole read (too few checkpoints for 10-90%)"
        }),
    );
    put("window_seconds", json!(cell.steady_seconds));
    put(
        "whole_read_value",
        json!(w.value(c.items as f64 / c.seconds)),
    );
    put("seconds", json!(c.seconds));
    put("items", json!(c.items));
    put("elements", json!(cell.share.elements()));
    put("elements_per_worker", json!(cell.share.elements_per_worker));
    put("items_per_reader", json!(cell.per_reader_items));
    put("payload_bytes", json!(c.payload_bytes));
    put(
        "worker_cpu_us_per_item",
        json!(per_item(c.worker_cpu_seconds)),
    );
    put(
        "reader_cpu_us_per_item",
        json!(per_item(Some(c.reader_cpu_seconds))),
    );
    put(
        "dispatcher_cpu_us_per_item",
        json!(per_item(cell.dispatcher_cpu_seconds)),
    );
    put("worker_cpu_cores", json!(cores(c.worker_cpu_seconds)));
    put("reader_cpu_cores", json!(cores(Some(c.reader_cpu_seconds))));
    put(
        "dispatcher_cpu_cores",
        json!(cores(cell.dispatcher_cpu_seconds)),
    );
    put("other_processes_cpu_cores", json!(cell.other_cores));
    put("load_average_1m", json!(cell.load_average));
}

fn side_summary(who: &str, cell: &Cell) -> String {
    let c = &cell.costs;
    let w = c.workload;
    let per_item = |cpu: Option<f64>| cpu.map_or(f64::NAN, |s| s * 1e6 / c.items as f64);
    format!(
        "{who:<10} {:>10.1} {} (whole read {:.1}); CPU µs/{}: workers {:.2}, readers {:.2}, dispatcher {:.4}; others {:.2} cores, load {:.1}",
        cell.value,
        w.unit(),
        w.value(c.items as f64 / c.seconds),
        w.item(),
        per_item(c.worker_cpu_seconds),
        per_item(Some(c.reader_cpu_seconds)),
        per_item(cell.dispatcher_cpu_seconds),
        cell.other_cores.unwrap_or(f64::NAN),
        cell.load_average.unwrap_or(f64::NAN),
    )
}

/// One cell's line: ours, and TensorFlow's in the same cell if measured.
fn cell_report(cell: &Cell, tensorflow: Option<&Cell>) -> (Map<String, Value>, String) {
    let c = &cell.costs;
    let w = c.workload;
    let mut r = Map::new();
    r.insert("scenario".into(), json!(format!("scaling/{}", w.name())));
    r.insert("workers".into(), json!(c.workers));
    r.insert("readers".into(), json!(c.readers));
    r.insert("value".into(), json!(cell.value));
    r.insert("unit".into(), json!(w.unit()));
    r.insert("item".into(), json!(w.item()));
    side_fields(&mut r, "", cell);
    r.insert(
        "cores".into(),
        json!(std::thread::available_parallelism().map_or(1, |n| n.get())),
    );
    let mut summary = format!(
        "scaling/{:<8} {} workers {} readers: {}",
        w.name(),
        c.workers,
        c.readers,
        side_summary("tfdata", cell)
    );
    if let Some(tf) = tensorflow {
        r.insert("tensorflow".into(), json!(tf.value));
        let ratio = (tf.value > 0.0).then(|| cell.value / tf.value);
        r.insert("ratio".into(), json!(ratio));
        side_fields(&mut r, "tensorflow_", tf);
        summary += &format!(
            "\n{:34}{}, ratio {:.1}",
            "",
            side_summary("TensorFlow", tf),
            ratio.unwrap_or(f64::NAN)
        );
    }
    (r, summary)
}
