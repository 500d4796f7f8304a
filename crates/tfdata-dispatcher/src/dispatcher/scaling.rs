//! The scaling controller in the dispatcher (docs/operations.md,
//! "Scaling"): every `scaling_period` the maintenance loop calls
//! [`Dispatcher::scaling_step`], which measures an [`Observation`] under the
//! state lock and steps the pure [`ScalingController`]; `GetScalingAdvice`
//! ([`Dispatcher::scaling_advice`]) answers its last decision within the
//! caller's bounds. Like the load it reads, this is not state: not
//! journaled, it starts again from the live workers after a restart.

use std::collections::HashMap;
use std::time::Duration;

use tfdata_core::IterationClientId;
use tfdata_proto::data::TfdataReaderStats;

use super::Dispatcher;
use super::txn::Guarded;
use crate::metrics::ScalingLabels;
use crate::overview::ScalingOverview;
use crate::scaling::{Bounds, Decision, Observation, ScalingController};

/// The controller and what it needs between two steps.
pub(crate) struct Scaling {
    controller: ScalingController,
    /// Each reader's cumulative figures at the last step: a period's wait
    /// and consumption are the differences, so one decision sees the whole
    /// period and not the last heartbeat's half second.
    previous: HashMap<IterationClientId, TfdataReaderStats>,
    /// The controller's time is measured from here (µs, dispatcher clock).
    origin_micros: i64,
}

impl Scaling {
    pub fn new(period: Duration, now_micros: i64) -> Self {
        Scaling {
            controller: ScalingController::new(period),
            previous: HashMap::new(),
            origin_micros: now_micros,
        }
    }
}

impl Dispatcher {
    /// One decision of the scaling controller, from what the dispatcher
    /// measures now; counted in the metrics and logged when it changes the
    /// target.
    pub async fn scaling_step(&self) -> Decision {
        let now = self.clock.now_micros();
        let txn = self.ledger.begin().await;
        let mut scaling = self.scaling.lock().unwrap_or_else(|e| e.into_inner());
        let observation = observe(&txn, &mut scaling.previous);
        drop(txn);
        let elapsed =
            Duration::from_micros(now.saturating_sub(scaling.origin_micros).max(0) as u64);
        let decision = scaling.controller.step(elapsed, observation);
        drop(scaling);
        let m = self.metrics();
        m.target_workers.set(decision.target_workers);
        for (direction, outcome) in &decision.judged {
            m.scaling_decisions
                .get_or_create(&ScalingLabels {
                    direction: direction.as_str(),
                    outcome: outcome.as_str(),
                })
                .inc();
        }
        if decision.changed {
            tracing::info!(
                target_workers = decision.target_workers,
                live_workers = decision.live_workers,
                estimate = decision.estimate,
                phase = decision.phase.as_str(),
                reason = %decision.reason,
                "scaling: new target"
            );
        } else {
            tracing::debug!(
                target_workers = decision.target_workers,
                phase = decision.phase.as_str(),
                reason = %decision.reason,
                "scaling: target held"
            );
        }
        decision
    }

    /// `GetScalingAdvice`: the last decision within `bounds` (kept for the
    /// decisions to come); the first call before any step runs one.
    pub async fn scaling_advice(&self, bounds: Bounds) -> Decision {
        {
            let mut scaling = self.scaling.lock().unwrap_or_else(|e| e.into_inner());
            scaling.controller.set_bounds(bounds);
            if let Some(last) = scaling.controller.last() {
                self.metrics().target_workers.set(last.target_workers);
                return last.clone();
            }
        }
        self.scaling_step().await
    }

    /// How often the controller decides (`DispatcherConfig::scaling_period`).
    pub fn scaling_period(&self) -> Duration {
        self.config.scaling_period
    }

    /// The controller's last decision, its period and bounds, for the
    /// status views.
    pub(crate) fn scaling_overview(&self) -> ScalingOverview {
        let scaling = self.scaling.lock().unwrap_or_else(|e| e.into_inner());
        ScalingOverview {
            period: scaling.controller.period(),
            bounds: scaling.controller.bounds(),
            decision: scaling.controller.last().cloned(),
        }
    }
}

/// What the controller is shown: live workers (neither lost nor
/// draining: a draining worker is on its way out), TensorFlow's estimate
/// when measured, and the readers' wait and demand over the period.
fn observe(
    g: &Guarded,
    previous: &mut HashMap<IterationClientId, TfdataReaderStats>,
) -> Observation {
    let live_workers = g
        .state
        .workers()
        .iter()
        .filter(|w| !w.lost && !g.liveness.is_draining(&w.address))
        .count() as i64;
    let demand = g.load.demand(&g.state);
    let readers = g.state.clients().count();
    // Per reader over the period: seconds waited, elements consumed,
    // seconds lived (its own clock).
    let mut starvations = Vec::new();
    let (mut waited, mut consumed, mut consumed_per_second) = (0.0, 0.0, 0.0);
    let mut now: HashMap<IterationClientId, TfdataReaderStats> = HashMap::new();
    for (client, load) in g.load.readers() {
        let Some(totals) = load.totals else { continue };
        now.insert(*client, totals);
        let window = previous.get(client).and_then(|before| {
            let seconds = totals.lifetime_seconds - before.lifetime_seconds;
            (seconds > 0.0).then(|| {
                (
                    (totals.wait_seconds - before.wait_seconds).max(0.0),
                    totals
                        .elements_consumed
                        .saturating_sub(before.elements_consumed) as f64,
                    seconds,
                )
            })
        });
        // A reader new this period: its last heartbeat interval's rates.
        let window = window.or_else(|| {
            load.rates
                .map(|r| (r.starvation_ratio, r.elements_per_second, 1.0))
        });
        if let Some((wait, elements, seconds)) = window {
            starvations.push((wait / seconds).min(1.0));
            waited += wait;
            consumed += elements;
            consumed_per_second += elements / seconds;
        }
    }
    *previous = now;
    let starvation = if starvations.is_empty() {
        0.0
    } else {
        starvations.iter().sum::<f64>() / starvations.len() as f64
    };
    // The demand is what the trainers would take (TensorFlow's 1 / target
    // processing time), not what they got: a starved reader's consumption
    // is capped by the workers.
    let wanted: f64 = demand
        .iterations
        .iter()
        .map(|d| d.consumption_per_second)
        .sum();
    Observation {
        live_workers,
        estimate: demand.measured.then_some(demand.optimal_workers),
        readers,
        starvation,
        // A reader that waited a whole period for nothing counts its wait
        // as one element's.
        wait_seconds_per_element: if waited > 0.0 {
            waited / consumed.max(1.0)
        } else {
            0.0
        },
        consumption_per_second: if wanted > 0.0 {
            wanted
        } else {
            consumed_per_second
        },
    }
}
