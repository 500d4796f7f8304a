//! The scaling controller (issue 36; docs/operations.md, "Scaling"): how
//! many workers to run, decided every scaling period from what the
//! dispatcher measures. A pure state machine: [`ScalingController::step`]
//! takes the time and an [`Observation`] and returns a [`Decision`]; no
//! I/O, no clock of its own, so the dispatcher runs it on its maintenance
//! loop and `tfdata-bench` drives the same code in simulation.
//!
//! TensorFlow's estimate (`optimal_number_of_workers`) proposes, the
//! readers' measured wait confirms, in the manner of Cachew (USENIX ATC
//! '22): after a change has taken effect and settled for a period, a step
//! up is kept only if it cut the trainers' wait per element by more than
//! [`MIN_IMPROVEMENT`]; otherwise the count goes back and the plateau is
//! remembered until demand or wait moves by [`RECHECK_FACTOR`]. A step down
//! is taken only while readers are fed and is reverted if they starve.
//!
//! [`estimate`]: TensorFlow's estimate itself, as pure functions.

use std::fmt::Write as _;
use std::time::Duration;

mod bounds;
pub mod estimate;

pub use bounds::Bounds;

/// Readers starve when their trainers wait in `next()` at least this
/// fraction of the time: the controller then asks for more workers. 5%
/// leaves room for the waits every reader sees (a task starting, a split
/// boundary) without paying for workers that would not shorten a step.
pub const STARVE_THRESHOLD: f64 = 0.05;
/// Readers are fed when they wait less than this fraction of the time:
/// only then is scaling down considered. Between this and
/// [`STARVE_THRESHOLD`] the controller holds (a dead band), so a count
/// that just meets demand is not pushed up and down by noise.
pub const FED_THRESHOLD: f64 = 0.01;
/// Cachew's constant: a step up is kept when it cut the readers' wait per
/// element by more than this fraction. Less is within measurement noise
/// and not worth the workers.
pub const MIN_IMPROVEMENT: f64 = 0.07;
/// Cachew's re-check rule: a plateau (adding workers did not help) or a
/// floor (removing them starved the readers) holds until the demand
/// (readers' summed consumption rate) or, for a plateau, the wait per
/// element moves by this factor either way. Smaller moves are the same
/// workload, and probing again would only oscillate.
pub const RECHECK_FACTOR: f64 = 1.5;
/// A step up may lead the readers' starvation: when the demand they report
/// (TensorFlow's 1 / target processing time, summed) has risen this factor
/// since the count was last confirmed and the estimate is above the live
/// workers, the controller moves to the estimate at once instead of
/// waiting for the buffers (the workers' and the readers') to run dry and
/// the readers to starve, which took 3-4 periods in the local measurement
/// (docs/performance.md). Cachew's re-check factor: a smaller move is the
/// same workload, and an estimate that is high without a demand step (a
/// bad report) never adds workers this way; a step taken is undone by the
/// scale-down rule when the estimate falls back below the live count.
pub const LEAD_FACTOR: f64 = RECHECK_FACTOR;
/// A step down sheds more than this fraction of the live workers, or
/// none: an estimate less than 10% below the live count holds (below 10
/// workers any whole worker still counts). Throughput that varies by a
/// few percent from period to period (a shared store, a neighbour's
/// load) moves TensorFlow's estimate as much, and each move is a real
/// drain, then a start when the noise turns: in the 100- and 1,000-worker
/// model at +-5% noise the target changed 2-8 times per 2-minute step
/// without the band (docs/performance.md). The cost is at most 10% idle
/// workers after demand drifts down slowly; a drop of demand sheds them.
pub const DOWN_DEAD_BAND: f64 = 0.1;
/// A change that has not taken effect (the live workers did not reach the
/// target) within this many periods is judged on the workers live then:
/// a cluster out of capacity must not freeze the controller.
pub const MAX_WAIT_PERIODS: u32 = 12;
/// The period TensorFlow-like deployments get by default (`DispatcherConfig::scaling_period`).
pub const DEFAULT_SCALING_PERIOD: Duration = Duration::from_secs(5);

/// What the dispatcher measured for one decision.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Observation {
    /// Workers serving: registered, not lost, not draining.
    pub live_workers: i64,
    /// TensorFlow's bounded estimate (`optimal_number_of_workers`), if
    /// some iteration had both rates.
    pub estimate: Option<i64>,
    /// Readers (iteration clients) holding an iteration.
    pub readers: usize,
    /// The readers' mean starvation: fraction of time their trainers
    /// waited in `next()` over the last period.
    pub starvation: f64,
    /// Seconds the readers waited per element consumed over the last
    /// period (Cachew's batch time, per element).
    pub wait_seconds_per_element: f64,
    /// The demand (elements/s), which the re-check rule compares: what
    /// the readers would consume if they never waited (the dispatcher sums
    /// TensorFlow's 1 / target processing time). A measured consumption
    /// works too, but while readers starve it moves with the workers
    /// rather than with the trainers.
    pub consumption_per_second: f64,
}

/// The controller's phase, as `ScalingAdvice.phase` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No readers for a period: the minimum.
    Idle,
    /// No change under way.
    Steady,
    /// A step up waiting to take effect or to be judged.
    ProbingUp,
    /// A step down waiting to take effect or to be judged.
    ProbingDown,
    /// A step was just undone.
    Reverted,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Steady => "steady",
            Phase::ProbingUp => "probing up",
            Phase::ProbingDown => "probing down",
            Phase::Reverted => "reverted",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Up,
    Down,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
        }
    }
}

/// How a change of target ended (the `outcome` label of
/// `tfdata_dispatcher_scaling_decisions_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Confirmed by the readers' wait.
    Kept,
    /// Undone: it did not help (up) or starved the readers (down).
    Reverted,
    /// The readers left before it could be judged.
    Abandoned,
    /// Dropped to the minimum because no reader read for a period.
    Idle,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Kept => "kept",
            Outcome::Reverted => "reverted",
            Outcome::Abandoned => "abandoned",
            Outcome::Idle => "idle",
        }
    }
}

/// One decision: the advice `GetScalingAdvice` answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// How many workers to run now.
    pub target_workers: i64,
    pub live_workers: i64,
    pub estimate: Option<i64>,
    pub phase: Phase,
    /// One sentence: why this target.
    pub reason: String,
    pub starvation: f64,
    pub wait_seconds_per_element: f64,
    /// Changes of target so far (reverts included), and reverts.
    pub decisions: i64,
    pub reverts: i64,
    /// Whether this step changed the target.
    pub changed: bool,
    /// Changes judged (or ended) at this step, for the decisions metric.
    pub judged: Vec<(Direction, Outcome)>,
}

/// A change of target under way.
#[derive(Debug, Clone, Copy)]
struct Probe {
    direction: Direction,
    from: i64,
    to: i64,
    started: Duration,
    /// When the live workers reached the target (reset if they fell back).
    reached: Option<Duration>,
    /// What the readers saw before the change.
    wait: f64,
    demand: f64,
    /// Led by the estimate after a demand step, before the readers
    /// starved ([`LEAD_FACTOR`]): their wait was near 0 before it, so a
    /// cut in it cannot confirm the step; the demand step measured by
    /// the readers did.
    led: bool,
}

/// A count remembered for as long as the workload stays the same: the
/// plateau (no higher: adding did not help) or the floor (no lower:
/// removing starved the readers, or the count below did).
#[derive(Debug, Clone, Copy)]
struct Mark {
    workers: i64,
    demand: f64,
    /// For a plateau: the wait per element there. A floor is kept on
    /// demand alone (fed readers' wait is near 0: any ratio is noise).
    wait: Option<f64>,
}

impl Mark {
    fn moved(&self, obs: &Observation) -> bool {
        moved(self.demand, obs.consumption_per_second)
            || self
                .wait
                .is_some_and(|wait| moved(wait, obs.wait_seconds_per_element))
    }
}

fn moved(before: f64, now: f64) -> bool {
    let (low, high) = if before <= now {
        (before, now)
    } else {
        (now, before)
    };
    if high <= 0.0 {
        return false;
    }
    low <= 0.0 || high / low >= RECHECK_FACTOR
}

/// The scaling controller (see the module docs).
#[derive(Debug, Clone)]
pub struct ScalingController {
    period: Duration,
    bounds: Bounds,
    /// `None` before the first step.
    target: Option<i64>,
    phase: Phase,
    probe: Option<Probe>,
    plateau: Option<Mark>,
    floor: Option<Mark>,
    /// The demand when the current count was last confirmed (kept, or
    /// held with readers fed): a lead step needs demand to have moved
    /// [`LEAD_FACTOR`] from it.
    confirmed_demand: Option<f64>,
    readerless_since: Option<Duration>,
    decisions: i64,
    reverts: i64,
    last: Option<Decision>,
}

impl ScalingController {
    /// A controller stepped every `period` (the settle time of a change).
    pub fn new(period: Duration) -> Self {
        ScalingController {
            period,
            bounds: Bounds::default(),
            target: None,
            phase: Phase::Steady,
            probe: None,
            plateau: None,
            floor: None,
            confirmed_demand: None,
            readerless_since: None,
            decisions: 0,
            reverts: 0,
            last: None,
        }
    }

    pub fn period(&self) -> Duration {
        self.period
    }

    pub fn bounds(&self) -> Bounds {
        self.bounds
    }

    /// The last decision, if any step ran.
    pub fn last(&self) -> Option<&Decision> {
        self.last.as_ref()
    }

    /// Sets the callers' bounds (the last ones given hold). The target is
    /// clamped at once, so a caller never sees advice outside its bounds;
    /// a change under way is cut to them (and dropped if nothing is left
    /// of it).
    pub fn set_bounds(&mut self, bounds: Bounds) {
        if bounds == self.bounds {
            return;
        }
        self.bounds = bounds;
        if let Some(probe) = &mut self.probe {
            probe.to = bounds.clamp(probe.to);
            if probe.to == probe.from {
                self.probe = None;
                self.phase = Phase::Steady;
            }
        }
        if let Some(target) = self.target {
            let clamped = bounds.clamp(target);
            self.target = Some(clamped);
            if let Some(last) = &mut self.last
                && last.target_workers != clamped
            {
                last.target_workers = clamped;
                last.reason = format!(
                    "{} (clamped to the bounds: min {}, max {})",
                    last.reason,
                    bounds.min,
                    bounds.max.map_or("none".into(), |m| m.to_string())
                );
            }
        }
    }

    /// One decision at `now` (any monotonic time; only differences are
    /// used) from `obs`.
    pub fn step(&mut self, now: Duration, obs: Observation) -> Decision {
        let obs = sanitized(obs);
        let mut step = Step {
            judged: Vec::new(),
            changed: false,
            reason: String::new(),
        };
        let target = *self
            .target
            .get_or_insert_with(|| self.bounds.clamp(obs.live_workers));
        let clamped = self.bounds.clamp(target);
        if clamped != target {
            self.target = Some(clamped);
        }
        if obs.readers == 0 {
            self.without_readers(now, &mut step);
        } else {
            self.readerless_since = None;
            if self.phase == Phase::Idle {
                self.phase = Phase::Steady;
            }
            self.with_readers(now, &obs, &mut step);
        }
        let decision = Decision {
            target_workers: self.target.unwrap_or(self.bounds.min),
            live_workers: obs.live_workers,
            estimate: obs.estimate,
            phase: self.phase,
            reason: step.reason,
            starvation: obs.starvation,
            wait_seconds_per_element: obs.wait_seconds_per_element,
            decisions: self.decisions,
            reverts: self.reverts,
            changed: step.changed,
            judged: step.judged,
        };
        self.last = Some(decision.clone());
        decision
    }

    fn target(&self) -> i64 {
        self.target.unwrap_or(self.bounds.min)
    }

    fn change(&mut self, to: i64, step: &mut Step) {
        if self.target() != to {
            self.target = Some(to);
            self.decisions += 1;
            step.changed = true;
        }
    }

    fn without_readers(&mut self, now: Duration, step: &mut Step) {
        let since = *self.readerless_since.get_or_insert(now);
        let idle_for = now.saturating_sub(since);
        if idle_for < self.period && self.phase != Phase::Idle {
            step.reason = format!(
                "no readers for {}: idle (the minimum, {}) after {}",
                secs(idle_for),
                self.bounds.min,
                secs(self.period)
            );
            return;
        }
        if let Some(probe) = self.probe.take() {
            step.judged.push((probe.direction, Outcome::Abandoned));
        }
        self.plateau = None;
        self.floor = None;
        self.confirmed_demand = None;
        let min = self.bounds.min;
        if self.target() > min {
            step.judged.push((Direction::Down, Outcome::Idle));
        }
        self.change(min, step);
        self.phase = Phase::Idle;
        step.reason = format!(
            "no readers for {}: the minimum ({min})",
            secs(idle_for.max(self.period))
        );
    }

    fn with_readers(&mut self, now: Duration, obs: &Observation, step: &mut Step) {
        if self.plateau.is_some_and(|m| m.moved(obs)) {
            self.plateau = None;
            let _ = write!(
                step.reason,
                "demand or wait moved {RECHECK_FACTOR}x since the plateau: re-checking; "
            );
        }
        if self.floor.is_some_and(|m| m.moved(obs)) {
            self.floor = None;
            let _ = write!(
                step.reason,
                "demand moved {RECHECK_FACTOR}x since the floor was set: re-checking; "
            );
        }
        if let Some(probe) = self.probe
            && !self.judge(now, probe, obs, step)
        {
            return;
        }
        self.propose(now, obs, step);
    }

    /// Judges the change under way; true when the controller may propose
    /// another at once (the change was kept).
    fn judge(
        &mut self,
        now: Duration,
        mut probe: Probe,
        obs: &Observation,
        step: &mut Step,
    ) -> bool {
        let live = obs.live_workers;
        let reached = match probe.direction {
            Direction::Up => live >= probe.to,
            Direction::Down => live <= probe.to,
        };
        probe.reached = match (reached, probe.reached) {
            (true, Some(at)) => Some(at),
            (true, None) => Some(now),
            (false, _) => None,
        };
        self.probe = Some(probe);
        let settled = probe
            .reached
            .is_some_and(|at| now.saturating_sub(at) >= self.period);
        let overdue = now.saturating_sub(probe.started) >= self.period * MAX_WAIT_PERIODS;
        if !settled && !overdue {
            let _ = if reached {
                write!(
                    step.reason,
                    "{} workers live: settling for {} before judging {} -> {}",
                    live,
                    secs(self.period),
                    probe.from,
                    probe.to
                )
            } else {
                write!(
                    step.reason,
                    "waiting for the change {} -> {} to take effect ({live} live)",
                    probe.from, probe.to
                )
            };
            return false;
        }
        self.probe = None;
        let overdue_note = if settled {
            String::new()
        } else {
            format!(
                " (judged on {live} live workers: the target was not reached in {})",
                secs(self.period * MAX_WAIT_PERIODS)
            )
        };
        match probe.direction {
            Direction::Up => {
                let cut = if probe.wait > 0.0 {
                    (probe.wait - obs.wait_seconds_per_element) / probe.wait
                } else {
                    0.0
                };
                // A demand-led step is kept once settled: the readers'
                // wait was near 0 before it, so its fall cannot confirm it.
                if cut > MIN_IMPROVEMENT || probe.led {
                    step.judged.push((Direction::Up, Outcome::Kept));
                    self.confirmed_demand = Some(obs.consumption_per_second);
                    // The count it started from starved (or would have) at this demand.
                    self.floor = Some(Mark {
                        workers: (probe.from + 1).min(probe.to),
                        demand: probe.demand,
                        wait: None,
                    });
                    self.phase = Phase::Steady;
                    let why = if cut > MIN_IMPROVEMENT {
                        format!(
                            "the wait per element fell {:.0}% (> {:.0}%)",
                            cut * 100.0,
                            MIN_IMPROVEMENT * 100.0
                        )
                    } else {
                        format!("led by a {LEAD_FACTOR}x demand step before the readers starved")
                    };
                    let _ = write!(
                        step.reason,
                        "{} -> {} kept: {why}{overdue_note}; ",
                        probe.from, probe.to
                    );
                    true
                } else {
                    step.judged.push((Direction::Up, Outcome::Reverted));
                    self.reverts += 1;
                    self.change(probe.from, step);
                    self.plateau = Some(Mark {
                        workers: probe.from,
                        demand: probe.demand,
                        wait: Some(probe.wait),
                    });
                    self.phase = Phase::Reverted;
                    let _ = write!(
                        step.reason,
                        "{} -> {} reverted: the wait per element fell {:.0}% (not > {:.0}%){overdue_note}; \
                         not past {} again until demand or wait moves {RECHECK_FACTOR}x",
                        probe.from,
                        probe.to,
                        (cut * 100.0).max(0.0),
                        MIN_IMPROVEMENT * 100.0,
                        probe.from
                    );
                    false
                }
            }
            Direction::Down => {
                if obs.starvation >= STARVE_THRESHOLD {
                    step.judged.push((Direction::Down, Outcome::Reverted));
                    self.reverts += 1;
                    self.change(probe.from, step);
                    self.floor = Some(Mark {
                        workers: probe.from,
                        demand: probe.demand,
                        wait: None,
                    });
                    self.phase = Phase::Reverted;
                    let _ = write!(
                        step.reason,
                        "{} -> {} reverted: readers starve {:.1}% (>= {:.0}%){overdue_note}; \
                         not below {} again until demand moves {RECHECK_FACTOR}x",
                        probe.from,
                        probe.to,
                        obs.starvation * 100.0,
                        STARVE_THRESHOLD * 100.0,
                        probe.from
                    );
                    false
                } else {
                    step.judged.push((Direction::Down, Outcome::Kept));
                    self.confirmed_demand = Some(obs.consumption_per_second);
                    self.phase = Phase::Steady;
                    let _ = write!(
                        step.reason,
                        "{} -> {} kept: readers still fed ({:.1}% starved){overdue_note}; ",
                        probe.from,
                        probe.to,
                        obs.starvation * 100.0
                    );
                    true
                }
            }
        }
    }

    fn propose(&mut self, now: Duration, obs: &Observation, step: &mut Step) {
        let target = self.target();
        let live = obs.live_workers;
        let estimate = obs
            .estimate
            .map_or("no estimate".to_string(), |e| format!("estimate {e}"));
        if obs.starvation >= STARVE_THRESHOLD {
            if live < target {
                self.phase = Phase::Steady;
                let _ = write!(
                    step.reason,
                    "readers starve {:.1}%: waiting for {target} workers ({live} live)",
                    obs.starvation * 100.0
                );
                return;
            }
            let mut to = self.bounds.clamp(obs.estimate.unwrap_or(0).max(target + 1));
            let mut held_by = None;
            if let Some(plateau) = self.plateau
                && to > plateau.workers.max(target)
            {
                to = plateau.workers.max(target);
                held_by = Some(plateau.workers);
            }
            if to > target {
                self.start(now, Direction::Up, to, obs, step);
                let _ = write!(
                    step.reason,
                    "readers starve {:.1}% (>= {:.0}%), {estimate}: {target} -> {to}",
                    obs.starvation * 100.0,
                    STARVE_THRESHOLD * 100.0
                );
            } else {
                self.phase = Phase::Steady;
                let why = match held_by {
                    Some(at) => format!(
                        "adding workers past {at} did not help (the plateau holds until demand or wait moves {RECHECK_FACTOR}x)"
                    ),
                    None => format!("at the maximum ({target})"),
                };
                let _ = write!(
                    step.reason,
                    "readers starve {:.1}%, {estimate}, but {why}",
                    obs.starvation * 100.0
                );
            }
            return;
        }
        if self.lead(now, obs, step) {
            return;
        }
        if obs.starvation < FED_THRESHOLD
            && let Some(e) = obs.estimate
            && e < live
            && live <= target
        {
            let band = (DOWN_DEAD_BAND * live as f64).floor() as i64;
            if e >= live - band {
                self.phase = Phase::Steady;
                // Held with readers fed, as below: this count meets the demand.
                self.confirmed_demand
                    .get_or_insert(obs.consumption_per_second);
                let _ = write!(
                    step.reason,
                    "readers fed, estimate {e} within {:.0}% of {live} live: holding {target}",
                    DOWN_DEAD_BAND * 100.0
                );
                return;
            }
            let mut to = self.bounds.clamp(e);
            let mut held_by = None;
            if let Some(floor) = self.floor
                && to < floor.workers
            {
                to = floor.workers;
                held_by = Some(floor.workers);
            }
            if to < target {
                self.start(now, Direction::Down, to, obs, step);
                let _ = write!(
                    step.reason,
                    "readers fed ({:.1}% starved, < {:.0}%), estimate {e} below {live} live: {target} -> {to}",
                    obs.starvation * 100.0,
                    FED_THRESHOLD * 100.0
                );
                return;
            }
            if let Some(at) = held_by {
                self.phase = Phase::Steady;
                let _ = write!(
                    step.reason,
                    "readers fed, estimate {e}, but fewer than {at} starved them at this demand: holding {target}"
                );
                return;
            }
        }
        self.phase = Phase::Steady;
        if obs.starvation < STARVE_THRESHOLD && live >= target {
            // Held with readers fed: this demand is met by this count.
            self.confirmed_demand
                .get_or_insert(obs.consumption_per_second);
        }
        if !step.changed {
            let _ = write!(
                step.reason,
                "readers {} ({:.1}% starved), {estimate}: holding {target}",
                if obs.starvation < STARVE_THRESHOLD {
                    "fed"
                } else {
                    "starve"
                },
                obs.starvation * 100.0
            );
        }
    }

    /// A step up led by the estimate after a demand step ([`LEAD_FACTOR`]),
    /// before the readers starve; true when one was started.
    fn lead(&mut self, now: Duration, obs: &Observation, step: &mut Step) -> bool {
        let (target, live) = (self.target(), obs.live_workers);
        let (Some(e), Some(base)) = (obs.estimate, self.confirmed_demand) else {
            return false;
        };
        if e <= live.max(target) || live < target || base <= 0.0 {
            return false;
        }
        let rise = obs.consumption_per_second / base;
        if rise < LEAD_FACTOR {
            return false;
        }
        let mut to = self.bounds.clamp(e);
        if let Some(plateau) = self.plateau {
            to = to.min(plateau.workers.max(target));
        }
        if to <= target {
            return false;
        }
        self.start(now, Direction::Up, to, obs, step);
        if let Some(probe) = &mut self.probe {
            probe.led = true;
        }
        let _ = write!(
            step.reason,
            "demand rose {rise:.1}x (>= {LEAD_FACTOR}x) since {target} workers were confirmed, \
             estimate {e}: {target} -> {to} before the readers starve"
        );
        true
    }

    fn start(
        &mut self,
        now: Duration,
        direction: Direction,
        to: i64,
        obs: &Observation,
        step: &mut Step,
    ) {
        let from = self.target();
        self.probe = Some(Probe {
            direction,
            from,
            to,
            started: now,
            reached: None,
            wait: obs.wait_seconds_per_element,
            demand: obs.consumption_per_second,
            led: false,
        });
        self.phase = match direction {
            Direction::Up => Phase::ProbingUp,
            Direction::Down => Phase::ProbingDown,
        };
        self.change(to, step);
    }
}

/// What one step accumulates.
struct Step {
    judged: Vec<(Direction, Outcome)>,
    changed: bool,
    reason: String,
}

/// Non-finite or negative figures (a clock step, a bad report) read as 0.
fn sanitized(mut obs: Observation) -> Observation {
    let clean = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
    obs.starvation = clean(obs.starvation).min(1.0);
    obs.wait_seconds_per_element = clean(obs.wait_seconds_per_element);
    obs.consumption_per_second = clean(obs.consumption_per_second);
    obs.live_workers = obs.live_workers.max(0);
    obs.estimate = obs.estimate.filter(|e| *e > 0);
    obs
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests;
