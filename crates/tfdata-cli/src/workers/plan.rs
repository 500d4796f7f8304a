//! The supervisor's decisions, without processes or clocks of their own:
//! which target to follow given the dispatcher's answer, what to do to
//! reach it, and whether a dead worker may be started again. The loop in
//! [`super`] feeds them what it observed and carries out what they say.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What the last call to `GetScalingAdvice` gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The controller's target and its one-sentence reason.
    Advice { target: i64, reason: String },
    /// The dispatcher answered UNIMPLEMENTED: it has no scaling controller
    /// (a TensorFlow dispatcher, or a tfdata one older than issue 36).
    NoController,
    /// No answer (unreachable, timed out, another error).
    Unreachable,
}

/// The bounds the supervisor was started with (`--min`, `--max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub min: usize,
    pub max: usize,
}

impl Bounds {
    pub fn new(min: usize, max: usize) -> Result<Bounds, String> {
        if max == 0 {
            return Err("--max must be at least 1".into());
        }
        if min > max {
            return Err(format!("--min ({min}) must not exceed --max ({max})"));
        }
        if max > MAX_LOCAL_WORKERS {
            return Err(format!(
                "--max ({max}) is above {MAX_LOCAL_WORKERS}, the most local workers one supervisor runs"
            ));
        }
        Ok(Bounds { min, max })
    }

    fn clamp(self, n: i64) -> usize {
        usize::try_from(n).unwrap_or(0).clamp(self.min, self.max)
    }
}

/// The most workers one supervisor runs: each is a process with its own
/// pipelines on one machine; past a few dozen the machine, not the count,
/// is the limit.
pub const MAX_LOCAL_WORKERS: usize = 256;

/// The worker count to converge to, given the dispatcher's answer and the
/// count running now (draining workers excluded). Advice is clamped to
/// the bounds (the dispatcher clamps too; a supervisor never trusts a peer
/// with its machine). Without a controller the supervisor keeps `min`
/// workers. Without an answer it keeps what runs (within the bounds): a
/// dispatcher restart or a network blip must not start or stop workers.
pub fn target(answer: &Answer, running: usize, bounds: Bounds) -> usize {
    match answer {
        Answer::Advice { target, .. } => bounds.clamp(*target),
        Answer::NoController => bounds.min,
        Answer::Unreachable => running.clamp(bounds.min, bounds.max),
    }
}

/// One step towards the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Start this many workers.
    Start(usize),
    /// Drain the workers in these slots (SIGTERM) and wait for them to exit.
    Drain(Vec<usize>),
    /// At the target, or the surplus is draining already: nothing to do now.
    Hold,
}

/// The step from `running` slots (draining ones excluded) towards
/// `target`. All surplus workers drain at once: the controller asked for
/// the new count after it saw the readers fed, and a draining worker hands
/// its splits to the others whether one or several drain, so draining them
/// one after another only stretched a step down over several drain
/// timeouts (3.1 scaling periods for 4 -> 1 in the autoscale bench).
/// Workers already draining are not in `running`, so a step is never
/// asked twice. The highest slots go first, so slots (and base-port + slot
/// ports) stay packed from 0.
pub fn step(target: usize, running: &[usize]) -> Step {
    if running.len() < target {
        Step::Start(target - running.len())
    } else if running.len() > target {
        let mut slots = running.to_vec();
        slots.sort_unstable_by(|a, b| b.cmp(a));
        slots.truncate(running.len() - target);
        Step::Drain(slots)
    } else {
        Step::Hold
    }
}

/// The lowest `n` slots not in `used`.
pub fn free_slots(used: &[usize], n: usize) -> Vec<usize> {
    (0..).filter(|s| !used.contains(s)).take(n).collect()
}

/// A bound on restarts of workers that died on their own: at most
/// `limit` starts after deaths in any window of `window`. A worker that
/// cannot start (a bad flag, a port in use) then costs `limit` attempts
/// a minute, logged, instead of a busy loop.
#[derive(Debug)]
pub struct RestartBudget {
    limit: usize,
    window: Duration,
    deaths: VecDeque<Instant>,
}

impl RestartBudget {
    pub fn new(limit: usize, window: Duration) -> RestartBudget {
        RestartBudget {
            limit,
            window,
            deaths: VecDeque::new(),
        }
    }

    /// Records an unexpected exit at `now`.
    pub fn record_death(&mut self, now: Instant) {
        self.deaths.push_back(now);
        // Only the window's deaths matter; the queue stays within `limit + 1`.
        while self.deaths.len() > self.limit + 1 {
            self.deaths.pop_front();
        }
    }

    /// Deaths within the window ending at `now`.
    pub fn recent(&mut self, now: Instant) -> usize {
        while self
            .deaths
            .front()
            .is_some_and(|&t| now.saturating_duration_since(t) >= self.window)
        {
            self.deaths.pop_front();
        }
        self.deaths.len()
    }

    /// Whether a new worker may start at `now`: fewer than `limit` deaths
    /// in the window.
    pub fn allows_start(&mut self, now: Instant) -> bool {
        self.recent(now) < self.limit
    }
}

/// The delay before the next call after `failures` failed calls in a row:
/// the poll interval doubled per failure, at most `cap`.
pub fn backoff(poll: Duration, failures: u32, cap: Duration) -> Duration {
    if failures == 0 {
        return poll;
    }
    let factor = 1u32 << failures.min(16);
    poll.saturating_mul(factor).min(cap.max(poll))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(min: usize, max: usize) -> Bounds {
        Bounds::new(min, max).unwrap()
    }

    fn advice(target: i64) -> Answer {
        Answer::Advice {
            target,
            reason: "r".into(),
        }
    }

    #[test]
    fn bounds_are_checked() {
        assert!(Bounds::new(1, 0).is_err());
        assert!(Bounds::new(3, 2).unwrap_err().contains("--min (3)"));
        assert!(Bounds::new(0, MAX_LOCAL_WORKERS + 1).is_err());
        assert_eq!(bounds(0, 4), Bounds { min: 0, max: 4 });
    }

    #[test]
    fn advice_is_followed_within_the_bounds() {
        assert_eq!(target(&advice(3), 1, bounds(1, 4)), 3);
        assert_eq!(target(&advice(9), 1, bounds(1, 4)), 4);
        assert_eq!(target(&advice(0), 3, bounds(1, 4)), 1);
        assert_eq!(target(&advice(-5), 3, bounds(2, 4)), 2);
    }

    #[test]
    fn without_a_controller_min_workers_run() {
        assert_eq!(target(&Answer::NoController, 3, bounds(2, 4)), 2);
        assert_eq!(target(&Answer::NoController, 0, bounds(2, 4)), 2);
    }

    #[test]
    fn without_an_answer_the_running_workers_stay() {
        assert_eq!(target(&Answer::Unreachable, 3, bounds(1, 4)), 3);
        // But never outside the bounds (at start, nothing runs yet).
        assert_eq!(target(&Answer::Unreachable, 0, bounds(1, 4)), 1);
        assert_eq!(target(&Answer::Unreachable, 6, bounds(1, 4)), 4);
    }

    #[test]
    fn steps_start_all_missing_and_drain_all_surplus_from_the_top() {
        assert_eq!(step(3, &[0]), Step::Start(2));
        assert_eq!(step(1, &[0, 2, 1]), Step::Drain(vec![2, 1]));
        assert_eq!(step(0, &[3, 0, 5]), Step::Drain(vec![5, 3, 0]));
        // The draining ones are not running: the rest is at the target.
        assert_eq!(step(1, &[0]), Step::Hold);
        assert_eq!(step(2, &[0, 1]), Step::Hold);
        assert_eq!(step(0, &[]), Step::Hold);
        // A target raised mid-drain is met by starting.
        assert_eq!(step(3, &[0, 1]), Step::Start(1));
    }

    #[test]
    fn free_slots_fill_gaps_first() {
        assert_eq!(free_slots(&[0, 2], 3), vec![1, 3, 4]);
        assert_eq!(free_slots(&[], 2), vec![0, 1]);
        assert!(free_slots(&[0], 0).is_empty());
    }

    #[test]
    fn restarts_are_bounded_per_window() {
        let t0 = Instant::now();
        let mut budget = RestartBudget::new(2, Duration::from_secs(60));
        assert!(budget.allows_start(t0));
        budget.record_death(t0);
        assert!(budget.allows_start(t0));
        budget.record_death(t0 + Duration::from_secs(1));
        assert!(!budget.allows_start(t0 + Duration::from_secs(2)));
        assert!(!budget.allows_start(t0 + Duration::from_secs(59)));
        // The first death leaves the window: one start is allowed again.
        assert!(budget.allows_start(t0 + Duration::from_secs(60)));
        assert_eq!(budget.recent(t0 + Duration::from_secs(61)), 0);
    }

    #[test]
    fn backoff_doubles_to_a_cap() {
        let poll = Duration::from_millis(500);
        let cap = Duration::from_secs(30);
        assert_eq!(backoff(poll, 0, cap), poll);
        assert_eq!(backoff(poll, 1, cap), Duration::from_secs(1));
        assert_eq!(backoff(poll, 3, cap), Duration::from_secs(4));
        assert_eq!(backoff(poll, 40, cap), cap);
        // A poll interval above the cap is never shortened.
        assert_eq!(
            backoff(Duration::from_secs(60), 2, cap),
            Duration::from_secs(60)
        );
    }
}
