//! `autoscale` (issue 36 item 4): the scaling controller and the local
//! supervisor, measured with real processes. A `tfdata dispatcher` (its
//! scaling period short, `--autoscale-period-ms`, so a 30 s demand step
//! spans many decisions), `tfdata workers --min 1 --max N`, and a
//! simulated trainer in this process reading a distributed_epoch job of
//! `range(...).map(sleep(ms))`: each element costs a worker `ms` of
//! latency and no CPU, so how many workers the trainer needs depends on its
//! demand, not on this machine's 2 cores. The trainer "computes" for
//! 1/demand s per element (a sleep) and its demand steps (1×, 2×, 4×, 1×
//! its start rate by default) every `--autoscale-step-seconds`.
//!
//! Sampled every [`SAMPLE_INTERVAL`]: the dispatcher's advice (target,
//! phase, estimate, from `GetStatus`), the worker processes the supervisor
//! runs (`/proc`), the trainer's elements and time waited in `next()`.
//! Reported per step: the smallest count that meets the demand (each worker
//! serves at most 1000/ms elements/s), the time until the trainer's demand
//! was met for good (no later second in the step with starvation over 5%;
//! the workers' and the reader's buffers can hide a shortfall for seconds
//! after a step up), the time until the worker
//! processes stayed within [needed, needed + 1] to the step's end
//! (settled; the goal is within 3 periods), starvation in the step's first
//! period and its last 10 s, and target changes after settling
//! (oscillation). The measured per-worker throughput and start-up latency
//! are written for `autoscale-model` (see [`model`]).

pub mod model;
mod trainer;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use tfdata_proto::tfdata::status::GetStatusRequest;
use tfdata_proto::tfdata::status::status_service_client::StatusServiceClient;

use crate::procs::{self, Process};
use trainer::Trainer;

/// How often the run samples the dispatcher, the processes and the trainer.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(250);
/// The window over which "demand met" is judged: one second of the
/// trainer's consumption.
const MET_WINDOW: Duration = Duration::from_secs(1);
/// Starvation at or under this is "demand met" (the controller's own
/// starve threshold, `tfdata_dispatcher::scaling::STARVE_THRESHOLD`).
const MET_STARVATION: f64 = 0.05;

#[derive(Debug, Clone)]
pub struct AutoscaleOptions {
    pub tfdata_bin: Option<PathBuf>,
    pub sleep_ms: f64,
    pub base_rate: f64,
    pub steps: Vec<f64>,
    pub step_seconds: f64,
    pub max_workers: usize,
    pub period_ms: u64,
    /// Where the measured worker throughput and start-up latency go, for
    /// `autoscale-model`.
    pub measured_file: PathBuf,
}

impl AutoscaleOptions {
    pub fn check(&self) -> Result<()> {
        if !(self.sleep_ms > 0.0 && self.sleep_ms <= 1000.0) {
            bail!("--autoscale-sleep-ms must be in (0, 1000]");
        }
        if !(self.base_rate.is_finite() && self.base_rate > 0.0) {
            bail!("--autoscale-base-rate must be a positive number of elements/s");
        }
        if self.steps.is_empty() || self.steps.iter().any(|m| !(m.is_finite() && *m > 0.0)) {
            bail!("--autoscale-steps must be positive multipliers");
        }
        if self.step_seconds.is_nan() || self.step_seconds < 5.0 {
            bail!("--autoscale-step-seconds must be at least 5");
        }
        if self.max_workers < 2 {
            bail!("--autoscale-max-workers must be at least 2");
        }
        if self.period_ms < 100 {
            bail!("--autoscale-period-ms must be at least 100");
        }
        let worker_rate = 1000.0 / self.sleep_ms;
        let peak = self.steps.iter().cloned().fold(0.0, f64::max) * self.base_rate;
        if (peak / worker_rate).ceil() as usize > self.max_workers {
            bail!(
                "the peak demand ({peak:.0}/s) needs more than --autoscale-max-workers ({}) \
                 workers of {worker_rate:.0}/s",
                self.max_workers
            );
        }
        Ok(())
    }
}

/// One sample of the run.
#[derive(Debug, Clone, Default)]
struct Sample {
    t: f64,
    /// The step in force.
    step: usize,
    target: i64,
    advice_live: i64,
    estimate: i64,
    phase: String,
    /// Worker processes the supervisor runs.
    processes: i64,
    /// The trainer's totals so far.
    elements: u64,
    waited: f64,
}

/// The dispatcher's advice as `GetStatus` reports it.
async fn advice(
    client: &mut StatusServiceClient<tonic::transport::Channel>,
) -> Result<(i64, i64, i64, String)> {
    let status = tokio::time::timeout(
        Duration::from_secs(5),
        client.get_status(GetStatusRequest {}),
    )
    .await
    .context("GetStatus timed out")??
    .into_inner();
    let s = status.scaling.unwrap_or_default();
    Ok((s.target_workers, s.live_workers, s.estimate, s.phase))
}

pub fn run(
    options: &AutoscaleOptions,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    options.check()?;
    let binary = procs::tfdata_binary(options.tfdata_bin.as_deref())?;
    let scratch = tempfile::tempdir()?;
    let (dispatcher, rest) = Process::start(
        &binary,
        &[
            "dispatcher".into(),
            "--port".into(),
            "0".into(),
            "--scaling-period-ms".into(),
            options.period_ms.to_string(),
            // A drained worker stops heartbeating: forget it soon.
            "--worker-timeout-ms".into(),
            "3000".into(),
        ],
        "tfdata dispatcher listening on port",
        Some(&scratch.path().join("dispatcher.log")),
        "the dispatcher",
    )?;
    let address = format!("localhost:{}", procs::port_of(&rest)?);
    let supervisor = Process::spawn(
        &binary,
        &[
            "workers".into(),
            "--dispatcher-address".into(),
            address.clone(),
            "--min".into(),
            "1".into(),
            "--max".into(),
            options.max_workers.to_string(),
            "--poll-interval-ms".into(),
            "250".into(),
            "--heartbeat-interval-ms".into(),
            "500".into(),
            "--drain-timeout-ms".into(),
            "2000".into(),
        ],
        &scratch.path().join("workers.log"),
        "tfdata workers",
    )?;
    let result = measure(options, &address, &supervisor, scratch.path());
    drop(supervisor);
    drop(dispatcher);
    let samples = result?;
    report(options, &samples, emit)
}

fn measure(
    options: &AutoscaleOptions,
    address: &str,
    supervisor: &Process,
    scratch: &Path,
) -> Result<Vec<Sample>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let channel = tonic::transport::Channel::from_shared(format!("http://{address}"))?;
    let mut client = StatusServiceClient::new(runtime.block_on(channel.connect())?);
    // The supervisor's first worker registers before the trainer starts,
    // so the first step measures scaling, not start-up.
    let deadline = Instant::now() + Duration::from_secs(60);
    while procs::children_of(supervisor.pid()).is_empty() {
        if Instant::now() > deadline {
            bail!(
                "tfdata workers started no worker within 60 s (log: {})",
                scratch.join("workers.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let trainer = Trainer::start(
        &format!("grpc://{address}"),
        options.sleep_ms,
        options.base_rate * options.steps[0],
    )?;
    let started = Instant::now();
    let step = Duration::from_secs_f64(options.step_seconds);
    let mut samples = Vec::new();
    let mut step_index = 0;
    loop {
        let t = started.elapsed();
        let index = (t.as_secs_f64() / step.as_secs_f64()) as usize;
        if index >= options.steps.len() {
            break;
        }
        if index != step_index {
            step_index = index;
            trainer.set_demand(options.base_rate * options.steps[index]);
        }
        if let Some(e) = trainer.failed() {
            bail!("the trainer's read failed: {e}");
        }
        let (target, advice_live, estimate, phase) = runtime.block_on(advice(&mut client))?;
        let (elements, waited) = trainer.totals();
        samples.push(Sample {
            t: t.as_secs_f64(),
            step: index,
            target,
            advice_live,
            estimate,
            phase,
            processes: procs::children_of(supervisor.pid()).len() as i64,
            elements,
            waited,
        });
        let next = started + SAMPLE_INTERVAL * samples.len() as u32;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    trainer.stop();
    Ok(samples)
}

/// One step's figures.
#[derive(Debug, Default)]
struct StepFigures {
    needed: i64,
    met_seconds: Option<f64>,
    settled_seconds: Option<f64>,
    starvation_first_period: f64,
    starvation_last: f64,
    max_processes: i64,
    final_processes: i64,
    changes_after_settled: usize,
}

/// Starvation (time waited over wall time) and elements/s between two samples.
fn window(a: &Sample, b: &Sample) -> (f64, f64) {
    let wall = (b.t - a.t).max(1e-9);
    (
        (b.waited - a.waited) / wall,
        (b.elements - a.elements) as f64 / wall,
    )
}

/// The sample `MET_WINDOW` (or more) before sample `i`, if any.
fn window_start(samples: &[Sample], i: usize) -> Option<&Sample> {
    let t = samples[i].t - MET_WINDOW.as_secs_f64();
    samples[..i].iter().rev().find(|s| s.t <= t + 1e-6)
}

fn figures(options: &AutoscaleOptions, samples: &[Sample], step: usize) -> StepFigures {
    let demand = options.base_rate * options.steps[step];
    let worker_rate = 1000.0 / options.sleep_ms;
    let needed = (demand / worker_rate).ceil() as i64;
    let start = options.step_seconds * step as f64;
    let indices: Vec<usize> = (0..samples.len())
        .filter(|&i| samples[i].step == step)
        .collect();
    let mut f = StepFigures {
        needed,
        ..StepFigures::default()
    };
    let (Some(&first), Some(&last)) = (indices.first(), indices.last()) else {
        return f;
    };
    // Met for good: after the last one-second window (within the step)
    // in which the trainer starved; buffers may hide a shortfall for a
    // while, so the first fed window proves nothing.
    let starved: Vec<(f64, bool)> = indices
        .iter()
        .filter_map(|&i| {
            let from = window_start(samples, i)?;
            (from.t >= start - 1e-6).then(|| {
                (
                    samples[i].t - start,
                    window(from, &samples[i]).0 > MET_STARVATION,
                )
            })
        })
        .collect();
    f.met_seconds = match starved.iter().rposition(|&(_, s)| s) {
        None => starved.first().map(|&(t, _)| t),
        Some(k) if k + 1 < starved.len() => Some(starved[k].0),
        Some(_) => None,
    };
    let within = |p: i64| p >= needed && p <= needed + 1;
    f.settled_seconds = match indices.iter().rposition(|&i| !within(samples[i].processes)) {
        None => Some(samples[first].t - start),
        Some(k) if k + 1 < indices.len() => Some(samples[indices[k + 1]].t - start),
        Some(_) => None,
    };
    let period = options.period_ms as f64 / 1000.0;
    let at = |t: f64| {
        indices
            .iter()
            .copied()
            .find(|&i| samples[i].t >= t)
            .unwrap_or(last)
    };
    f.starvation_first_period = window(&samples[first], &samples[at(start + period)]).0;
    let end = samples[last].t;
    f.starvation_last = window(&samples[at(end - 10.0)], &samples[last]).0;
    f.max_processes = indices
        .iter()
        .map(|&i| samples[i].processes)
        .max()
        .unwrap_or(0);
    f.final_processes = samples[last].processes;
    if let Some(settled) = f.settled_seconds {
        f.changes_after_settled = indices
            .windows(2)
            .filter(|w| {
                samples[w[1]].t - start > settled && samples[w[1]].target != samples[w[0]].target
            })
            .count();
    }
    f
}

/// The per-worker throughput (elements/s) seen while the trainer starved
/// (supply-bound: consumption over live workers), and the start-up latency
/// (seconds from a raised target to as many worker processes), as medians.
fn measured_costs(samples: &[Sample]) -> (Option<f64>, Option<f64>) {
    let mut rates = Vec::new();
    for i in 0..samples.len() {
        if let Some(from) = window_start(samples, i) {
            let (starvation, rate) = window(from, &samples[i]);
            let live = samples[i].advice_live.min(from.advice_live);
            if starvation > 0.2 && live > 0 && samples[i].advice_live == from.advice_live {
                rates.push(rate / live as f64);
            }
        }
    }
    let mut startups = Vec::new();
    for i in 1..samples.len() {
        if samples[i].target > samples[i - 1].target && samples[i].target > samples[i].processes {
            let target = samples[i].target;
            if let Some(j) = (i..samples.len()).find(|&j| samples[j].advice_live >= target) {
                startups.push(samples[j].t - samples[i].t);
            }
        }
    }
    (median(&mut rates), median(&mut startups))
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(values[values.len() / 2])
}

fn report(
    options: &AutoscaleOptions,
    samples: &[Sample],
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    let period = options.period_ms as f64 / 1000.0;
    let mut summary = format!(
        "autoscale: sleep {} ms per element (a worker serves ≤ {:.0}/s), base demand {}/s, \
         steps {:?} every {} s, period {period} s, max {} workers\n  step  demand/s  needed  \
         met(s)  settled(s)  periods  max procs  final  changes  starv first/last\n",
        options.sleep_ms,
        1000.0 / options.sleep_ms,
        options.base_rate,
        options.steps,
        options.step_seconds,
        options.max_workers
    );
    let mut all_settled = true;
    for step in 0..options.steps.len() {
        let f = figures(options, samples, step);
        let settled_periods = f.settled_seconds.map(|s| s / period);
        all_settled &= settled_periods.is_some_and(|p| p <= 3.0 + 1e-9);
        summary.push_str(&format!(
            "  {:>3}x  {:>8.0}  {:>6}  {:>6}  {:>10}  {:>7}  {:>9}  {:>5}  {:>7}  {:>5.1}%/{:.1}%\n",
            options.steps[step],
            options.base_rate * options.steps[step],
            f.needed,
            f.met_seconds.map_or("never".into(), |s| format!("{s:.1}")),
            f.settled_seconds.map_or("never".into(), |s| format!("{s:.1}")),
            settled_periods.map_or("-".into(), |p| format!("{p:.1}")),
            f.max_processes,
            f.final_processes,
            f.changes_after_settled,
            f.starvation_first_period * 100.0,
            f.starvation_last * 100.0
        ));
        let mut r = Map::new();
        r.insert("scenario".into(), json!("autoscale"));
        r.insert("step".into(), json!(step));
        r.insert("multiplier".into(), json!(options.steps[step]));
        r.insert(
            "demand_per_second".into(),
            json!(options.base_rate * options.steps[step]),
        );
        r.insert("needed_workers".into(), json!(f.needed));
        r.insert("value".into(), json!(f.settled_seconds));
        r.insert(
            "unit".into(),
            json!("s to settle within [needed, needed+1]"),
        );
        r.insert("settled_periods".into(), json!(settled_periods));
        r.insert("met_seconds".into(), json!(f.met_seconds));
        r.insert("max_worker_processes".into(), json!(f.max_processes));
        r.insert("final_worker_processes".into(), json!(f.final_processes));
        r.insert(
            "changes_after_settled".into(),
            json!(f.changes_after_settled),
        );
        r.insert(
            "starvation_first_period".into(),
            json!(f.starvation_first_period),
        );
        r.insert("starvation_last_10s".into(), json!(f.starvation_last));
        r.insert("period_seconds".into(), json!(period));
        r.insert("sleep_ms".into(), json!(options.sleep_ms));
        emit(r, String::new())?;
    }
    let (worker_rate, startup) = measured_costs(samples);
    let timeline: Vec<Value> = samples
        .iter()
        .step_by(4)
        .map(|s| {
            json!([
                (s.t * 10.0).round() / 10.0,
                s.target,
                s.advice_live,
                s.processes,
                s.estimate,
                s.phase
            ])
        })
        .collect();
    let measured = json!({
        "worker_rate": worker_rate,
        "startup_seconds": startup,
        "sleep_ms": options.sleep_ms,
        "period_seconds": period,
    });
    if let Some(dir) = options.measured_file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(
        &options.measured_file,
        serde_json::to_string_pretty(&measured)?,
    )?;
    summary.push_str(&format!(
        "  every step settled within 3 periods: {all_settled}; measured worker throughput {} \
         elements/s, start-up {} s (written to {})",
        worker_rate.map_or("-".into(), |r| format!("{r:.1}")),
        startup.map_or("-".into(), |s| format!("{s:.1}")),
        options.measured_file.display()
    ));
    let mut r = Map::new();
    r.insert("scenario".into(), json!("autoscale/summary"));
    r.insert("value".into(), json!(all_settled));
    r.insert("unit".into(), json!("every step settled within 3 periods"));
    r.insert("worker_rate".into(), json!(worker_rate));
    r.insert("startup_seconds".into(), json!(startup));
    r.insert(
        "timeline".into(),
        json!({"columns": ["t", "target", "live", "processes", "estimate", "phase"], "rows": timeline}),
    );
    emit(r, summary)
}
