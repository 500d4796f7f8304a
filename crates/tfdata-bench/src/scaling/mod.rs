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

mod model;
mod reader;
mod workload;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use tfdata::{Compression, DispatchServer, DispatcherConfig, register_dataset};

use crate::capacity::{self, CapacityOptions};
use crate::child::Server;
use crate::data::ImageData;
use crate::measure;
use crate::pipeline::PipelineOptions;
pub use model::ModelOptions;
use model::{CellCosts, DispatcherCosts, WorkloadCosts};
pub use reader::serve_reader;
use reader::{ReaderProcess, ReaderSpec, steady_rate};
use workload::Share;
pub use workload::Workload;

/// How long reader processes may take to connect.
const READY_LIMIT: Duration = Duration::from_secs(60);
/// How long one cell's read may take.
const CELL_LIMIT: Duration = Duration::from_secs(600);
/// The share of the items the aggregate rate is measured between.
const STEADY_FROM: f64 = 0.1;
const STEADY_TO: f64 = 0.9;

#[derive(Debug, Clone)]
pub struct ScalingOptions {
    pub workers: Vec<usize>,
    pub readers: Vec<usize>,
    pub workloads: Vec<Workload>,
    /// Elements per cell, shared by its workers.
    pub small_elements: u64,
    pub large_elements: u64,
    /// Batches of `pipeline.batch_size` examples per cell.
    pub pipeline_batches: u64,
    pub pipeline: PipelineOptions,
    pub images: Option<ImageData>,
    /// The dispatcher calibration (its `workers` ladder); `None`: none,
    /// and the model has no dispatcher figures.
    pub calibration: Option<CapacityOptions>,
    pub model: ModelOptions,
}

type Emit<'a> = &'a mut dyn FnMut(Map<String, Value>, String) -> Result<()>;

/// Our dispatcher in this process and `workers` worker processes; the
/// workers stop (stdin closed, waited for) before the dispatcher.
struct Cluster {
    workers: Vec<Server>,
    dispatcher: DispatchServer,
}

impl Cluster {
    fn start(workers: usize) -> Result<Self> {
        let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
        let mut cluster = Cluster {
            workers: Vec::new(),
            dispatcher,
        };
        for k in 1..=workers {
            let mut command = Command::new(std::env::current_exe()?);
            command
                .arg(crate::service::SERVE_WORKER_FLAG)
                .arg(cluster.dispatcher.address())
                .stdout(Stdio::null());
            let dispatcher = &cluster.dispatcher;
            let server = Server::start_quiet(command, "a worker process", || {
                dispatcher.num_workers() >= k
            })?;
            cluster.workers.push(server);
        }
        Ok(cluster)
    }

    fn worker_cpu_seconds(&self) -> Option<f64> {
        self.workers
            .iter()
            .map(|w| measure::cpu_seconds_of(&w.child.id().to_string()))
            .sum()
    }
}

/// What one cell measured.
struct Cell {
    costs: CellCosts,
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
    bench_threads: Option<std::collections::BTreeMap<u64, f64>>,
    machine: Option<f64>,
}

impl Sample {
    fn take(cluster: &Cluster) -> Self {
        Sample {
            at: Instant::now(),
            workers: cluster.worker_cpu_seconds(),
            bench_threads: measure::thread_cpu_seconds("self"),
            machine: measure::machine_busy_seconds(),
        }
    }
}

pub fn run(o: &ScalingOptions, emit: Emit) -> Result<()> {
    let mut cells = Vec::new();
    for &workers in &o.workers {
        let cluster = Cluster::start(workers)?;
        for &workload in &o.workloads {
            let (total, items_per_element) = match workload {
                Workload::Small => (o.small_elements, 1),
                Workload::Large => (o.large_elements, 1),
                Workload::Pipeline => (o.pipeline_batches, u64::try_from(o.pipeline.batch_size)?),
            };
            let share = Share::new(total, workers as u64, items_per_element)
                .with_context(|| format!("scaling/{}", workload.name()))?;
            let dataset = workload::dataset(workload, &share, o.images.as_ref(), &o.pipeline)?;
            let target = cluster.dispatcher.target();
            let dataset_id = register_dataset(&target, &dataset, Compression::Auto, None)?;
            for &readers in &o.readers {
                let spec = ReaderSpec {
                    target: target.clone(),
                    dataset_id: dataset_id.clone(),
                    job_name: format!("scaling-{}-{workers}w-{readers}r", workload.name()),
                    workload,
                    batch_size: o.pipeline.batch_size,
                };
                eprintln!(
                    "tfdata-bench: scaling/{}: {workers} workers, {readers} readers ...",
                    workload.name()
                );
                let cell = measure_cell(&cluster, &spec, &share, readers)
                    .with_context(|| format!("{workers} workers, {readers} readers"))?;
                let (report, summary) = cell_report(&cell, &share);
                emit(report, summary)?;
                cells.push(cell);
            }
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
    share: &Share,
    readers: usize,
) -> Result<Cell> {
    let mut processes = (0..readers)
        .map(|_| ReaderProcess::start(spec))
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
    let delta = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| b - a);
    let worker_cpu = delta(before.workers, after.workers);
    let dispatcher_cpu = before
        .bench_threads
        .as_ref()
        .zip(after.bench_threads.as_ref())
        .map(|(a, b)| measure::thread_cpu_delta(a, b));
    let reader_cpu: f64 = results.iter().map(|r| r.cpu_seconds).sum();
    let other_cores = delta(before.machine, after.machine).map(|busy| {
        let ours = worker_cpu.unwrap_or(0.0) + reader_cpu + dispatcher_cpu.unwrap_or(0.0);
        ((busy - ours) / seconds).max(0.0)
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

fn cell_report(cell: &Cell, share: &Share) -> (Map<String, Value>, String) {
    let c = &cell.costs;
    let w = c.workload;
    let per_item = |cpu: Option<f64>| cpu.map(|s| s * 1e6 / c.items as f64);
    let cores = |cpu: Option<f64>| cpu.map(|s| s / c.seconds);
    let mut r = Map::new();
    r.insert("scenario".into(), json!(format!("scaling/{}", w.name())));
    r.insert("workers".into(), json!(c.workers));
    r.insert("readers".into(), json!(c.readers));
    r.insert("value".into(), json!(cell.value));
    r.insert("unit".into(), json!(w.unit()));
    r.insert(
        "window".into(),
        json!(if cell.steady_seconds.is_some() {
            "10-90% of the items"
        } else {
            "whole read (too few checkpoints for 10-90%)"
        }),
    );
    r.insert("window_seconds".into(), json!(cell.steady_seconds));
    r.insert(
        "whole_read_value".into(),
        json!(w.value(c.items as f64 / c.seconds)),
    );
    r.insert("seconds".into(), json!(c.seconds));
    r.insert("item".into(), json!(w.item()));
    r.insert("items".into(), json!(c.items));
    r.insert("elements".into(), json!(share.elements()));
    r.insert(
        "elements_per_worker".into(),
        json!(share.elements_per_worker),
    );
    r.insert("items_per_reader".into(), json!(cell.per_reader_items));
    r.insert("payload_bytes".into(), json!(c.payload_bytes));
    r.insert(
        "worker_cpu_us_per_item".into(),
        json!(per_item(c.worker_cpu_seconds)),
    );
    r.insert(
        "reader_cpu_us_per_item".into(),
        json!(per_item(Some(c.reader_cpu_seconds))),
    );
    r.insert(
        "dispatcher_cpu_us_per_item".into(),
        json!(per_item(cell.dispatcher_cpu_seconds)),
    );
    r.insert(
        "worker_cpu_cores".into(),
        json!(cores(c.worker_cpu_seconds)),
    );
    r.insert(
        "reader_cpu_cores".into(),
        json!(cores(Some(c.reader_cpu_seconds))),
    );
    r.insert(
        "dispatcher_cpu_cores".into(),
        json!(cores(cell.dispatcher_cpu_seconds)),
    );
    r.insert("other_processes_cpu_cores".into(), json!(cell.other_cores));
    r.insert("load_average_1m".into(), json!(cell.load_average));
    r.insert(
        "cores".into(),
        json!(std::thread::available_parallelism().map_or(1, |n| n.get())),
    );
    let summary = format!(
        "scaling/{:<8} {} workers {} readers: {:>10.1} {} (whole read {:.1}); CPU µs/{}: workers {:.2}, readers {:.2}, dispatcher {:.4}; others {:.2} cores, load {:.1}",
        w.name(),
        c.workers,
        c.readers,
        cell.value,
        w.unit(),
        w.value(c.items as f64 / c.seconds),
        w.item(),
        per_item(c.worker_cpu_seconds).unwrap_or(f64::NAN),
        per_item(Some(c.reader_cpu_seconds)).unwrap_or(f64::NAN),
        per_item(cell.dispatcher_cpu_seconds).unwrap_or(f64::NAN),
        cell.other_cores.unwrap_or(f64::NAN),
        cell.load_average.unwrap_or(f64::NAN),
    );
    (r, summary)
}
