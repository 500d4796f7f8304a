//! `autoscale-model` (issue 36 item 4): the dispatcher's real
//! [`ScalingController`] driven in simulation at 100 and 1,000 workers.
//! Nothing here decides: each period the simulation computes what the
//! dispatcher would observe and calls `ScalingController::step`, exactly as
//! `dispatcher::scaling` does, and applies the target the way a cluster
//! would (new workers live after a start-up latency, drained ones gone
//! after a drain time).
//!
//! The simulated world, its assumptions said:
//! * each worker serves `worker_rate` elements/s (from the `autoscale`
//!   run's measurement, or a flag), multiplied each period by a noise
//!   factor in `1 ± noise` (seeded: runs repeat);
//! * demand steps like the `autoscale` run (1×, 2×, 4×, 1× by default),
//!   where 1× needs a quarter of the modelled size, so the 4× step needs
//!   the whole of it; the bounds are min 1, max 2× the size;
//! * the readers report their demand truthfully: the estimate is
//!   TensorFlow's formula (summed consumption rates over the mean worker
//!   rate, rounded up) with TensorFlow's cap of min(4× current,
//!   current + 500), current being the live workers, computed by the
//!   dispatcher's own `scaling::estimate` functions;
//! * readers starve in proportion to the unmet demand (`1 - supply /
//!   demand`), and wait `readers × (1/supply - 1/demand)` s per element;
//! * scale-down drains every removed worker at once (a cluster: the HPA or
//!   a Kubernetes rollout; the local supervisor drains one at a time,
//!   which the `autoscale` run measures).

use std::time::Duration;

use anyhow::{Result, bail};
use serde_json::{Map, Value, json};
use tfdata_dispatcher::scaling::estimate as tf_estimate;
use tfdata_dispatcher::{Bounds, Observation, ScalingController};

/// The simulation's time step: fine against the periods (seconds) and the
/// start-up latencies (a second or more) it resolves.
const TICK: Duration = Duration::from_millis(100);

/// What the model needs to know about a worker and the cluster.
#[derive(Debug, Clone)]
pub struct ModelOptions {
    pub sizes: Vec<usize>,
    /// Elements/s one worker serves.
    pub worker_rate: f64,
    /// Seconds from a raised target to the new worker serving.
    pub startup_seconds: f64,
    /// Seconds a drained worker keeps serving before it is gone.
    pub drain_seconds: f64,
    pub period: Duration,
    /// Demand multipliers, one per step, of the 1× demand.
    pub steps: Vec<f64>,
    pub step_periods: u32,
    /// The ± fraction of per-period noise on each worker's rate.
    pub noise: f64,
    /// Where `worker_rate` and `startup_seconds` came from, for the report.
    pub source: String,
}

impl ModelOptions {
    pub fn check(&self) -> Result<()> {
        if self.sizes.is_empty() || self.sizes.iter().any(|&s| s < 4) {
            bail!("--model-workers must be counts of at least 4 (1× demand needs a quarter)");
        }
        if !(self.worker_rate.is_finite() && self.worker_rate > 0.0) {
            bail!("the modelled worker rate must be a positive number of elements/s");
        }
        if !(self.startup_seconds >= 0.0 && self.drain_seconds >= 0.0) {
            bail!("start-up and drain times must be non-negative");
        }
        if self.steps.is_empty() || self.steps.iter().any(|m| !(m.is_finite() && *m > 0.0)) {
            bail!("demand steps must be positive multipliers");
        }
        if !(0.0..0.5).contains(&self.noise) {
            bail!("--model-noise must be in [0, 0.5)");
        }
        if self.period.is_zero() || self.step_periods < 4 {
            bail!("the model needs a positive period and at least 4 periods per step");
        }
        Ok(())
    }
}

/// A seeded generator (xorshift64*): the same noise in every run.
struct Noise(u64);

impl Noise {
    fn factor(&mut self, amplitude: f64) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let unit = (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
        1.0 + amplitude * (2.0 * unit - 1.0)
    }
}

/// TensorFlow's estimate, by the dispatcher's own functions
/// (`scaling::estimate`): `readers` readers sharing `demand`, `live` workers
/// each serving `worker_rate`, then TensorFlow's cap against the live count.
fn estimate(demand: f64, readers: usize, worker_rate: f64, live: i64) -> i64 {
    let consumption = vec![demand / readers.max(1) as f64; readers.max(1)];
    let workers = vec![worker_rate; live.max(1) as usize];
    let raw = tf_estimate::iteration_estimate(&consumption, &workers).map_or(1, |e| e.workers);
    tf_estimate::bounded(raw, live)
}

/// One demand step's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    pub multiplier: f64,
    pub demand: f64,
    /// The fewest workers whose nominal rate meets the demand.
    pub needed: i64,
    /// The goal band: [needed, needed + 1], widened by the noise (with
    /// ±5% throughput, 95 or 105 workers of a nominal 100 may be right).
    pub band: (i64, i64),
    /// Seconds from the step until the live workers are within `band` for
    /// good (to the end of the step); `None`: never settled.
    pub settled_seconds: Option<f64>,
    /// Seconds from the step until supply first met 95% of demand.
    pub met_seconds: Option<f64>,
    pub max_live: i64,
    pub max_target: i64,
    pub final_live: i64,
    /// Target changes after settling (oscillation at steady demand).
    pub changes_after_settled: u32,
    pub starvation_first_period: f64,
    pub starvation_last_period: f64,
}

/// The simulated cluster: live workers, workers starting (ready times) and
/// workers draining (gone times).
struct Cluster {
    live: i64,
    starting: Vec<f64>,
    draining: Vec<f64>,
}

impl Cluster {
    fn apply(&mut self, target: i64, now: f64, options: &ModelOptions) {
        let coming = self.live + self.starting.len() as i64;
        if target > coming {
            for _ in 0..target - coming {
                self.starting.push(now + options.startup_seconds);
            }
        } else if target < coming {
            let mut excess = coming - target;
            // Workers not yet started are cancelled first (nothing to drain).
            while excess > 0 && self.starting.pop().is_some() {
                excess -= 1;
            }
            for _ in 0..excess.min(self.live) {
                self.live -= 1;
                self.draining.push(now + options.drain_seconds);
            }
        }
    }

    fn advance(&mut self, now: f64) {
        let before = self.starting.len();
        self.starting.retain(|&ready| ready > now);
        self.live += (before - self.starting.len()) as i64;
        self.draining.retain(|&gone| gone > now);
    }

    /// Workers serving: live and still draining (a draining worker finishes
    /// what it holds; it does not count as live for the controller).
    fn serving(&self) -> i64 {
        self.live + self.draining.len() as i64
    }
}

/// Runs the model at `size` workers.
pub fn simulate(size: usize, options: &ModelOptions) -> Vec<StepResult> {
    let base = options.worker_rate * (size as f64 / 4.0);
    let readers = (size / 10).max(1);
    let mut controller = ScalingController::new(options.period);
    let max = 2 * size as i64;
    controller.set_bounds(Bounds {
        min: 1,
        max: Some(max),
    });
    let mut noise = Noise(0x9E37_79B9_7F4A_7C15 ^ size as u64);
    let mut cluster = Cluster {
        live: 1,
        starting: Vec::new(),
        draining: Vec::new(),
    };
    let period = options.period.as_secs_f64();
    let step_seconds = period * f64::from(options.step_periods);
    let ticks_per_period = (options.period.as_nanos() / TICK.as_nanos()).max(1) as u64;
    let mut results = Vec::new();
    let mut now = 0.0f64;
    let mut tick: u64 = 0;
    let mut target = 1i64;
    for &multiplier in &options.steps {
        let demand = base * multiplier;
        let needed = (demand / options.worker_rate).ceil() as i64;
        let started = now;
        let mut samples: Vec<(f64, i64, i64, f64, bool)> = Vec::new(); // t, live, target, starvation, changed
        let mut period_rate = options.worker_rate * noise.factor(options.noise);
        while now - started < step_seconds {
            cluster.advance(now);
            let supply = cluster.serving() as f64 * period_rate;
            let starvation = (1.0 - supply / demand).max(0.0);
            let mut changed = false;
            if tick.is_multiple_of(ticks_per_period) && tick > 0 {
                let consumption = supply.min(demand);
                let wait = if supply < demand && supply > 0.0 {
                    readers as f64 * (1.0 / supply - 1.0 / demand)
                } else {
                    0.0
                };
                let decision = controller.step(
                    Duration::from_secs_f64(now),
                    Observation {
                        live_workers: cluster.live,
                        estimate: Some(estimate(demand, readers, period_rate, cluster.live)),
                        readers,
                        starvation,
                        wait_seconds_per_element: wait,
                        consumption_per_second: consumption,
                    },
                );
                changed = decision.target_workers != target;
                target = decision.target_workers;
                cluster.apply(target, now, options);
                period_rate = options.worker_rate * noise.factor(options.noise);
            }
            samples.push((now - started, cluster.live, target, starvation, changed));
            now += TICK.as_secs_f64();
            tick += 1;
        }
        let band = (
            ((needed as f64) * (1.0 - options.noise)).floor() as i64,
            ((needed as f64) * (1.0 + options.noise)).ceil() as i64 + 1,
        );
        results.push(summarize(
            multiplier, demand, needed, band, period, &samples,
        ));
    }
    results
}

fn summarize(
    multiplier: f64,
    demand: f64,
    needed: i64,
    band: (i64, i64),
    period: f64,
    samples: &[(f64, i64, i64, f64, bool)],
) -> StepResult {
    let within = |live: i64| live >= band.0 && live <= band.1;
    // The last sample outside the goal; settled just after it.
    let settled_seconds = match samples.iter().rposition(|s| !within(s.1)) {
        None => Some(0.0),
        Some(i) if i + 1 < samples.len() => Some(samples[i + 1].0),
        Some(_) => None,
    };
    let met_seconds = samples.iter().find(|s| s.3 <= 0.05).map(|s| s.0);
    let changes_after_settled = settled_seconds.map_or(0, |t| {
        samples.iter().filter(|s| s.0 > t && s.4).count() as u32
    });
    let mean_starvation = |from: f64, to: f64| {
        let window: Vec<f64> = samples
            .iter()
            .filter(|s| s.0 >= from && s.0 < to)
            .map(|s| s.3)
            .collect();
        window.iter().sum::<f64>() / window.len().max(1) as f64
    };
    let end = samples.last().map_or(0.0, |s| s.0);
    StepResult {
        multiplier,
        demand,
        needed,
        band,
        settled_seconds,
        met_seconds,
        max_live: samples.iter().map(|s| s.1).max().unwrap_or(0),
        max_target: samples.iter().map(|s| s.2).max().unwrap_or(0),
        final_live: samples.last().map_or(0, |s| s.1),
        changes_after_settled,
        starvation_first_period: mean_starvation(0.0, period),
        starvation_last_period: mean_starvation(end - period, end + 1.0),
    }
}

/// Runs the model at every size and reports each step.
pub fn run(
    options: &ModelOptions,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    options.check()?;
    let period = options.period.as_secs_f64();
    for &size in &options.sizes {
        let results = simulate(size, options);
        let mut summary = format!(
            "autoscale-model, {size} workers ({}; worker {:.1} elements/s, start-up {:.1} s, \
             drain {:.1} s, period {period:.1} s, noise ±{:.0}%)\n  step  demand/s  needed  band     \
             settled(s)  periods  met(s)  max live  max target  final  changes  starv first/last\n",
            options.source,
            options.worker_rate,
            options.startup_seconds,
            options.drain_seconds,
            options.noise * 100.0
        );
        for (i, r) in results.iter().enumerate() {
            let settled_periods = r.settled_seconds.map(|s| s / period);
            summary.push_str(&format!(
                "  {:>3}x  {:>8.0}  {:>6}  {:>7}  {:>10}  {:>7}  {:>6}  {:>8}  {:>10}  {:>5}  {:>7}  {:>5.1}%/{:.1}%\n",
                r.multiplier,
                r.demand,
                r.needed,
                format!("{}-{}", r.band.0, r.band.1),
                r.settled_seconds.map_or("never".into(), |s| format!("{s:.1}")),
                settled_periods.map_or("-".into(), |p| format!("{p:.1}")),
                r.met_seconds.map_or("never".into(), |s| format!("{s:.1}")),
                r.max_live,
                r.max_target,
                r.final_live,
                r.changes_after_settled,
                r.starvation_first_period * 100.0,
                r.starvation_last_period * 100.0,
            ));
            let mut report = Map::new();
            report.insert("scenario".into(), json!("autoscale-model"));
            report.insert("workers".into(), json!(size));
            report.insert("step".into(), json!(i));
            report.insert("multiplier".into(), json!(r.multiplier));
            report.insert("demand_per_second".into(), json!(r.demand));
            report.insert("needed_workers".into(), json!(r.needed));
            report.insert("goal_band".into(), json!([r.band.0, r.band.1]));
            report.insert("value".into(), json!(r.settled_seconds));
            report.insert(
                "unit".into(),
                json!("s to settle within [needed, needed+1]"),
            );
            report.insert("settled_periods".into(), json!(settled_periods));
            report.insert("met_seconds".into(), json!(r.met_seconds));
            report.insert("max_live_workers".into(), json!(r.max_live));
            report.insert("overshoot_workers".into(), json!(r.max_live - r.needed));
            report.insert("max_target_workers".into(), json!(r.max_target));
            report.insert("final_live_workers".into(), json!(r.final_live));
            report.insert(
                "changes_after_settled".into(),
                json!(r.changes_after_settled),
            );
            report.insert(
                "starvation_first_period".into(),
                json!(r.starvation_first_period),
            );
            report.insert(
                "starvation_last_period".into(),
                json!(r.starvation_last_period),
            );
            report.insert("worker_rate".into(), json!(options.worker_rate));
            report.insert("startup_seconds".into(), json!(options.startup_seconds));
            report.insert("drain_seconds".into(), json!(options.drain_seconds));
            report.insert("period_seconds".into(), json!(period));
            report.insert("noise".into(), json!(options.noise));
            report.insert("source".into(), json!(options.source));
            let line = if i + 1 == results.len() {
                std::mem::take(&mut summary)
            } else {
                String::new()
            };
            emit(report, line)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> ModelOptions {
        ModelOptions {
            sizes: vec![100],
            worker_rate: 50.0,
            startup_seconds: 1.0,
            drain_seconds: 1.0,
            period: Duration::from_secs(5),
            steps: vec![1.0, 2.0, 4.0, 1.0],
            step_periods: 12,
            noise: 0.03,
            source: "test".into(),
        }
    }

    #[test]
    fn the_estimate_is_capped_like_tensorflows() {
        assert_eq!(estimate(1000.0, 3, 10.0, 10), 40); // 4× current
        assert_eq!(estimate(100_000.0, 10, 1.0, 1000), 1500); // current + 500
        assert_eq!(estimate(50.0, 1, 10.0, 10), 5);
    }

    #[test]
    fn the_cluster_starts_and_drains_with_latency() {
        let o = options();
        let mut c = Cluster {
            live: 1,
            starting: Vec::new(),
            draining: Vec::new(),
        };
        c.apply(4, 0.0, &o);
        c.advance(0.5);
        assert_eq!(c.live, 1);
        c.advance(1.0);
        assert_eq!(c.live, 4);
        c.apply(2, 2.0, &o);
        assert_eq!((c.live, c.serving()), (2, 4));
        c.advance(3.0);
        assert_eq!(c.serving(), 2);
    }

    #[test]
    fn the_noise_is_seeded_and_bounded() {
        let mut a = Noise(7);
        let mut b = Noise(7);
        for _ in 0..1000 {
            let f = a.factor(0.1);
            assert_eq!(f, b.factor(0.1));
            assert!((0.9..=1.1).contains(&f));
        }
    }
}
