//! `dispatcher-capacity` (issue 16 item 3): the largest cluster one
//! dispatcher serves with every RPC's p99 latency under 50 ms, ours and
//! TensorFlow 2.21's, driven by the same load generator in the same run.
//!
//! Each dispatcher runs in a process of its own: ours is this binary's
//! hidden `--serve-dispatcher` (a `DispatchServer`, default configuration);
//! TensorFlow's is `scripts/tf_dispatcher.py serve` (a `DispatchServer`,
//! default configuration). Each runs fault tolerant (journal in a fresh
//! directory under `--capacity-dir`, default `target/bench-data/capacity`,
//! on the build's disk, so `fdatasync` costs what it costs there) and not.
//!
//! The load ([`generator`]) is a cluster at TensorFlow's default intervals
//! (spec §2: worker `heartbeat_interval_ms` 30 s; the reader's
//! `task_refresh_interval` 1 s): N workers heartbeating with their tasks,
//! `--capacity-readers-per-worker` (10) × N readers of one parallel_epochs
//! job heartbeating, and each worker's distributed_epoch task asking for a
//! split every `--capacity-split-interval-ms` (1 s; a worker finishing one
//! file a second). The dataset is the graph TensorFlow's client registers
//! for `range(2**62)` (from `tf_dispatcher.py graph`), so both dispatchers
//! serve the same requests. N steps up through `--capacity-workers`
//! (10, 25, 50, 100, 250, 500, 1000, 2000), the load growing in place;
//! after each growth `--capacity-warmup-seconds` (3) pass, then every call
//! for `--min-seconds` is measured. A step is *sustained* when no call
//! failed, every reader's answer listed one task per worker, each RPC
//! type's p99 latency is under `--capacity-p99-ms` (50) and each reached
//! 90 % of its offered rate. The first step not sustained ends the ladder.
//!
//! Reported: one JSON line per step and dispatcher (`dispatcher-capacity/step`:
//! per RPC type rate, p50/p99/max, errors; the dispatcher's CPU (cores) and
//! the generator's, and how late the generator sent its calls), and one per
//! mode (`dispatcher-capacity`): the most workers sustained, TensorFlow's,
//! their ratio, and both dispatchers' CPU at TensorFlow's largest
//! sustained load (the same load).

mod generator;
mod heartbeat_codec;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};
use tfdata::{DispatchServer, DispatcherConfig};

use crate::child::Server;
use crate::data::run_python_script;
pub use generator::Intervals;
use generator::{Load, RegisteredDataset, Rpc, Window};

const SCRIPT: &str = "tf_dispatcher.py";

/// Hidden flag: serve our dispatcher until stdin closes.
pub const SERVE_DISPATCHER_FLAG: &str = "--serve-dispatcher";

/// A growth that takes longer than this (registering thousands of readers
/// one journal write each, on a saturated dispatcher) ends the ladder.
const GROW_LIMIT: Duration = Duration::from_secs(180);

#[derive(Debug, Clone)]
pub struct CapacityOptions {
    pub python: PathBuf,
    pub dir: PathBuf,
    /// The ladder of worker counts.
    pub workers: Vec<usize>,
    pub readers_per_worker: usize,
    pub intervals: Intervals,
    pub warmup: Duration,
    pub window: Duration,
    pub p99_limit_ms: f64,
    pub tensorflow: bool,
    /// Fault tolerant, not, or both (in this order).
    pub fault_tolerant: Vec<bool>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Ours,
    TensorFlow,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Ours => "tfdata",
            Side::TensorFlow => "tensorflow",
        }
    }
}

fn mode_name(fault_tolerant: bool) -> &'static str {
    if fault_tolerant {
        "fault-tolerant"
    } else {
        "in-memory"
    }
}

/// One step of the ladder, measured.
#[derive(Debug, Clone)]
struct Step {
    workers: usize,
    readers: usize,
    sustained: bool,
    /// Why not, when not.
    verdict: String,
    setup_seconds: f64,
    window: Option<Window>,
    seconds: f64,
    dispatcher_cores: Option<f64>,
    generator_cores: Option<f64>,
    /// Cores other processes of the machine kept busy meanwhile.
    other_cores: Option<f64>,
    dispatcher_rss_bytes: Option<u64>,
}

/// `--serve-dispatcher [--serve-dispatcher-work-dir DIR]`: our dispatcher
/// with its default configuration (fault tolerant with a work dir); prints
/// `{"address", "pid"}` and serves until stdin closes.
pub fn serve_dispatcher(work_dir: Option<&Path>) -> Result<()> {
    let mut config = DispatcherConfig::default();
    if let Some(dir) = work_dir {
        config.work_dir = Some(dir.display().to_string());
        config.fault_tolerant_mode = true;
    }
    let dispatcher = DispatchServer::new(config)?;
    println!(
        "{}",
        json!({"address": dispatcher.address(), "pid": std::process::id()})
    );
    let mut sink = Vec::new();
    std::io::stdin().read_to_end(&mut sink)?;
    dispatcher.stop();
    Ok(())
}

/// The dataset TensorFlow's client registers for `range(2**62)`.
fn range_graph(python: &Path) -> Result<RegisteredDataset> {
    let line = run_python_script(python, SCRIPT, &["graph".into()])?;
    let v: Value = serde_json::from_str(&line).with_context(|| format!("bad result {line}"))?;
    let hex = |key: &str| -> Result<bytes::Bytes> {
        let text = v[key].as_str().with_context(|| format!("no {key}"))?;
        decode_hex(text).with_context(|| format!("{key} is not hex"))
    };
    Ok(RegisteredDataset::tensorflow_graph(
        hex("graph_hex")?,
        hex("element_spec_hex")?,
    ))
}

fn decode_hex(text: &str) -> Option<bytes::Bytes> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()
        .map(bytes::Bytes::from)
}

pub fn run(
    o: &CapacityOptions,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    let graph = range_graph(&o.python)?;
    for &fault_tolerant in &o.fault_tolerant {
        let ours = run_side(o, Side::Ours, fault_tolerant, &graph, emit)?;
        let tensorflow = if o.tensorflow {
            Some(run_side(o, Side::TensorFlow, fault_tolerant, &graph, emit)?)
        } else {
            None
        };
        let (report, summary) = figure(o, fault_tolerant, &ours, tensorflow.as_deref());
        emit(report, summary)?;
    }
    Ok(())
}

/// One step of our dispatcher's ladder as another scenario uses it
/// (`scaling`'s model): what the dispatcher spent on the calls it served.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatcherLoad {
    pub workers: usize,
    pub readers: usize,
    pub sustained: bool,
    pub dispatcher_cores: f64,
    pub worker_heartbeats_per_second: f64,
    pub client_heartbeats_per_second: f64,
    pub get_splits_per_second: f64,
    /// Mean bytes of a reader's heartbeat answer (it lists every worker's task).
    pub answer_bytes: f64,
}

/// Our dispatcher (in memory, in its own process) through `o.workers`'
/// ladder, the load registering tfdata's `range(2**62)` (no TensorFlow
/// needed): each step is emitted as in `dispatcher-capacity`, and returned
/// (the steps that were measured).
pub fn measure_ours_in_memory(
    o: &CapacityOptions,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<Vec<DispatcherLoad>> {
    let dataset = RegisteredDataset::tfdata_range()?;
    let steps = run_side(o, Side::Ours, false, &dataset, emit)?;
    Ok(steps
        .iter()
        .filter_map(|step| {
            let window = step.window.as_ref()?;
            let rate = |rpc: Rpc| {
                let f = &window.rpcs[rpc as usize];
                (f.calls - f.errors) as f64 / step.seconds
            };
            let answers = window.rpcs[Rpc::ClientHeartbeat as usize].calls
                - window.rpcs[Rpc::ClientHeartbeat as usize].errors;
            Some(DispatcherLoad {
                workers: step.workers,
                readers: step.readers,
                sustained: step.sustained,
                dispatcher_cores: step.dispatcher_cores?,
                worker_heartbeats_per_second: rate(Rpc::WorkerHeartbeat),
                client_heartbeats_per_second: rate(Rpc::ClientHeartbeat),
                get_splits_per_second: rate(Rpc::GetSplit),
                answer_bytes: (answers > 0)
                    .then(|| window.client_answer_bytes as f64 / answers as f64)?,
            })
        })
        .collect())
}

/// The largest sustained step.
fn best(steps: &[Step]) -> Option<&Step> {
    steps.iter().rfind(|s| s.sustained)
}

fn figure(
    o: &CapacityOptions,
    fault_tolerant: bool,
    ours: &[Step],
    tensorflow: Option<&[Step]>,
) -> (Map<String, Value>, String) {
    let value = best(ours).map_or(0, |s| s.workers);
    let mut r = Map::new();
    r.insert("scenario".into(), json!("dispatcher-capacity"));
    r.insert("mode".into(), json!(mode_name(fault_tolerant)));
    r.insert("value".into(), json!(value));
    r.insert("unit".into(), json!("workers"));
    r.insert("readers".into(), json!(value * o.readers_per_worker));
    // Our largest step was sustained: the capacity is at least `value`.
    let capped = ours.last().is_some_and(|s| s.sustained);
    r.insert("at_least".into(), json!(capped));
    r.insert("goal_workers".into(), json!(1000));
    r.insert("goal_met".into(), json!(value >= 1000));
    describe(o, &mut r);
    let mut summary = format!(
        "dispatcher-capacity {:>14}: tfdata sustains {}{value} workers + {} readers",
        mode_name(fault_tolerant),
        if capped { "≥ " } else { "" },
        value * o.readers_per_worker
    );
    if let Some(tf) = tensorflow {
        let tf_best = best(tf);
        let tf_value = tf_best.map_or(0, |s| s.workers);
        r.insert("tensorflow".into(), json!(tf_value));
        r.insert(
            "tensorflow_at_least".into(),
            json!(tf.last().is_some_and(|s| s.sustained)),
        );
        let ratio = (tf_value > 0).then(|| value as f64 / tf_value as f64);
        r.insert("ratio".into(), json!(ratio));
        summary += &format!(", TensorFlow {tf_value}");
        if let Some(ratio) = ratio {
            summary += &format!(" ({ratio:.1}×)");
        }
        // The same load: TensorFlow's largest sustained step, on both.
        if let Some(tf_step) = tf_best
            && let Some(our_step) = ours.iter().find(|s| s.workers == tf_step.workers)
        {
            r.insert("same_load_workers".into(), json!(tf_step.workers));
            r.insert(
                "same_load_dispatcher_cores".into(),
                json!(our_step.dispatcher_cores),
            );
            r.insert(
                "same_load_tensorflow_dispatcher_cores".into(),
                json!(tf_step.dispatcher_cores),
            );
            if let (Some(a), Some(b)) = (our_step.dispatcher_cores, tf_step.dispatcher_cores)
                && a > 0.0
            {
                r.insert("same_load_cpu_ratio".into(), json!(b / a));
                summary += &format!(
                    "; at {} workers TensorFlow's dispatcher uses {b:.2} cores, ours {a:.2} ({:.1}× less)",
                    tf_step.workers,
                    b / a
                );
            }
        }
    }
    (r, summary)
}

fn describe(o: &CapacityOptions, r: &mut Map<String, Value>) {
    r.insert(
        "worker_heartbeat_ms".into(),
        json!(o.intervals.worker_heartbeat.as_millis() as u64),
    );
    r.insert(
        "client_heartbeat_ms".into(),
        json!(o.intervals.client_heartbeat.as_millis() as u64),
    );
    r.insert(
        "split_interval_ms".into(),
        json!(o.intervals.split.map(|d| d.as_millis() as u64)),
    );
    r.insert("readers_per_worker".into(), json!(o.readers_per_worker));
    r.insert("p99_limit_ms".into(), json!(o.p99_limit_ms));
}

/// Starts one dispatcher in its own process: `(server, address, pid)`.
fn start_dispatcher(
    o: &CapacityOptions,
    side: Side,
    work_dir: Option<&Path>,
) -> Result<(Server, String, u32)> {
    let mut command = match side {
        Side::Ours => {
            let mut c = Command::new(std::env::current_exe()?);
            c.arg(SERVE_DISPATCHER_FLAG);
            if let Some(dir) = work_dir {
                c.arg("--serve-dispatcher-work-dir").arg(dir);
            }
            c
        }
        Side::TensorFlow => {
            let mut c = Command::new(&o.python);
            c.arg(crate::data::scripts_dir().join(SCRIPT)).arg("serve");
            if let Some(dir) = work_dir {
                c.arg("--work-dir").arg(dir);
            }
            c
        }
    };
    command.stderr(std::process::Stdio::null());
    let what = format!("{}'s dispatcher", side.name());
    let server = Server::start(command, &what)?;
    let v: Value = serde_json::from_str(&server.first_line)
        .with_context(|| format!("{what} said {:?}", server.first_line))?;
    let address = v["address"].as_str().context("no address")?.to_string();
    let pid = u32::try_from(v["pid"].as_u64().context("no pid")?)?;
    Ok((server, address, pid))
}

fn run_side(
    o: &CapacityOptions,
    side: Side,
    fault_tolerant: bool,
    graph: &RegisteredDataset,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<Vec<Step>> {
    let dir = o
        .dir
        .join(format!("{}-{}", side.name(), mode_name(fault_tolerant)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (server, address, pid) =
        start_dispatcher(o, side, fault_tolerant.then_some(dir.as_path()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let steps = runtime.block_on(async {
        let mut load = Load::connect(&address, o.intervals, graph).await?;
        let mut steps = Vec::new();
        for &workers in &o.workers {
            let step = measure_step(o, &mut load, workers, pid).await;
            let (report, summary) = step_report(o, side, fault_tolerant, &step);
            emit(report, summary)?;
            let sustained = step.sustained;
            steps.push(step);
            if !sustained {
                break;
            }
        }
        anyhow::Ok(steps)
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    steps
}

async fn measure_step(o: &CapacityOptions, load: &mut Load, workers: usize, pid: u32) -> Step {
    let readers = workers * o.readers_per_worker;
    let mut step = Step {
        workers,
        readers,
        sustained: false,
        verdict: String::new(),
        setup_seconds: 0.0,
        window: None,
        seconds: 0.0,
        dispatcher_cores: None,
        generator_cores: None,
        other_cores: None,
        dispatcher_rss_bytes: None,
    };
    let start = Instant::now();
    match tokio::time::timeout(GROW_LIMIT, load.grow(workers, readers)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            step.verdict = format!("setting up the load failed: {e:#}");
            return step;
        }
        Err(_) => {
            step.verdict = format!(
                "registering the load took over {} s (it had {} workers, {} readers)",
                GROW_LIMIT.as_secs(),
                load.workers(),
                load.readers()
            );
            return step;
        }
    }
    step.setup_seconds = start.elapsed().as_secs_f64();
    tokio::time::sleep(o.warmup).await;
    let pid = pid.to_string();
    let cpu = || {
        (
            crate::measure::cpu_seconds_of(&pid),
            crate::measure::process_cpu_seconds(),
            crate::measure::machine_busy_seconds(),
        )
    };
    let (d0, g0, m0) = cpu();
    let start = Instant::now();
    load.stats.start_window();
    tokio::time::sleep(o.window).await;
    let window = load.stats.end_window();
    let seconds = start.elapsed().as_secs_f64();
    let (d1, g1, m1) = cpu();
    step.seconds = seconds;
    step.dispatcher_cores = d0.zip(d1).map(|(a, b)| (b - a) / seconds);
    step.generator_cores = g0.zip(g1).map(|(a, b)| (b - a) / seconds);
    step.other_cores = m0.zip(m1).map(|(a, b)| {
        let ours = step.dispatcher_cores.unwrap_or(0.0) + step.generator_cores.unwrap_or(0.0);
        ((b - a) / seconds - ours).max(0.0)
    });
    step.dispatcher_rss_bytes = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| crate::measure::status_kib(&s, "VmRSS:"))
        .map(|kib| kib * 1024);
    let mut problems = Vec::new();
    for rpc in Rpc::ALL {
        let f = &window.rpcs[rpc as usize];
        let offered = offered_rate(o, rpc, workers, readers);
        if offered == 0.0 {
            continue;
        }
        if let Some(e) = &f.first_error {
            problems.push(format!("{} {} errors, first: {e}", f.errors, rpc.name()));
        }
        if f.p99_ms > o.p99_limit_ms {
            problems.push(format!("{} p99 {:.1} ms", rpc.name(), f.p99_ms));
        }
        // A few calls of slack: at low rates a window holds only a handful.
        let rate = f.calls as f64 / seconds;
        if (f.calls as f64) + 3.0 < 0.9 * offered * seconds {
            problems.push(format!(
                "{} {rate:.0}/s of {offered:.0}/s offered",
                rpc.name()
            ));
        }
    }
    // The generator's own delay inflates every latency it measures: say so,
    // so a step lost to a busy machine is not read as the dispatcher's limit.
    if !problems.is_empty() && window.lag_p99_ms > o.p99_limit_ms / 2.0 {
        problems.push(format!(
            "the generator itself sent calls {:.0} ms late (p99): the machine was busy",
            window.lag_p99_ms
        ));
    }
    step.sustained = problems.is_empty();
    step.verdict = if problems.is_empty() {
        "sustained".into()
    } else {
        problems.join("; ")
    };
    step.window = Some(window);
    step
}

/// Calls per second the load offers of `rpc`.
fn offered_rate(o: &CapacityOptions, rpc: Rpc, workers: usize, readers: usize) -> f64 {
    let per = |n: usize, d: Duration| n as f64 / d.as_secs_f64();
    match rpc {
        Rpc::WorkerHeartbeat => per(workers, o.intervals.worker_heartbeat),
        Rpc::ClientHeartbeat => per(readers, o.intervals.client_heartbeat),
        Rpc::GetSplit => o.intervals.split.map_or(0.0, |d| per(workers, d)),
    }
}

fn step_report(
    o: &CapacityOptions,
    side: Side,
    fault_tolerant: bool,
    step: &Step,
) -> (Map<String, Value>, String) {
    let mut r = Map::new();
    r.insert("scenario".into(), json!("dispatcher-capacity/step"));
    r.insert("implementation".into(), json!(side.name()));
    r.insert("mode".into(), json!(mode_name(fault_tolerant)));
    r.insert("workers".into(), json!(step.workers));
    r.insert("readers".into(), json!(step.readers));
    r.insert("sustained".into(), json!(step.sustained));
    r.insert("verdict".into(), json!(step.verdict));
    r.insert("setup_seconds".into(), json!(step.setup_seconds));
    r.insert("seconds".into(), json!(step.seconds));
    r.insert("dispatcher_cpu_cores".into(), json!(step.dispatcher_cores));
    r.insert("generator_cpu_cores".into(), json!(step.generator_cores));
    r.insert("other_processes_cpu_cores".into(), json!(step.other_cores));
    r.insert(
        "dispatcher_rss_bytes".into(),
        json!(step.dispatcher_rss_bytes),
    );
    let mut line = String::new();
    if let Some(w) = &step.window {
        r.insert("generator_lag_p99_ms".into(), json!(w.lag_p99_ms));
        let answers = &w.rpcs[Rpc::ClientHeartbeat as usize];
        if answers.calls > answers.errors {
            r.insert(
                "client_heartbeat_answer_bytes".into(),
                json!(w.client_answer_bytes as f64 / (answers.calls - answers.errors) as f64),
            );
        }
        let mut rpcs = Map::new();
        for rpc in Rpc::ALL {
            let f = &w.rpcs[rpc as usize];
            let rate = f.calls as f64 / step.seconds;
            rpcs.insert(
                rpc.name().into(),
                json!({
                    "offered_per_second": offered_rate(o, rpc, step.workers, step.readers),
                    "per_second": rate,
                    "p50_ms": f.p50_ms,
                    "p99_ms": f.p99_ms,
                    "max_ms": f.max_ms,
                    "errors": f.errors,
                }),
            );
            line += &format!(" {} {rate:.0}/s p99 {:.1} ms;", rpc.name(), f.p99_ms);
        }
        r.insert("rpcs".into(), Value::Object(rpcs));
    }
    let summary = format!(
        "  {:>10} {:>14} {:>5} workers {:>6} readers:{line} dispatcher {:.2} cores, generator {:.2}, others {:.2}: {}",
        side.name(),
        mode_name(fault_tolerant),
        step.workers,
        step.readers,
        step.dispatcher_cores.unwrap_or(f64::NAN),
        step.generator_cores.unwrap_or(f64::NAN),
        step.other_cores.unwrap_or(f64::NAN),
        step.verdict
    );
    (r, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_decodes_and_refuses_what_is_not_hex() {
        assert_eq!(decode_hex("0aff").unwrap().as_ref(), &[0x0a, 0xff]);
        assert!(decode_hex("0af").is_none());
        assert!(decode_hex("zz").is_none());
        assert_eq!(decode_hex("").unwrap().len(), 0);
    }
}
