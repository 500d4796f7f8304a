//! The worker's heartbeats after registration, and when the next one goes.
//!
//! Against our dispatcher they are a long poll: each asks to be held for up
//! to `heartbeat_interval` or [`MAX_HOLD`], the shorter (`tfdata_hold_ms`),
//! until the dispatcher has news for this worker, and the next one goes as
//! soon as it is answered. So a task, a snapshot stream, or the
//! end of one reaches the worker at once, and the worker still says it is
//! alive at least every `heartbeat_interval`. A dispatcher that does not
//! hold (TensorFlow's, or ours while stopping) answers at once without
//! `tfdata_holds`, and heartbeats then go every `heartbeat_interval`, as
//! TensorFlow's workers send them.
//!
//! News for the dispatcher goes at once too: when a snapshot stream writer
//! ends (done or failed), the heartbeat in flight is dropped and a new one,
//! carrying the stream's end, is sent. (A task's end is reported at once
//! with `WorkerUpdate`, apart from heartbeats.)

use std::sync::Arc;
use std::time::Duration;

use crate::worker::Worker;

/// The longest hold asked for (the dispatcher's own bound too): under the
/// 30 s a load balancer or proxy may give a quiet call.
pub const MAX_HOLD: Duration = Duration::from_secs(10);

/// A heartbeat unanswered this long past its hold has failed (a lost
/// connection usually shows up sooner).
const CALL_MARGIN: Duration = Duration::from_secs(30);

/// The pause after a failed heartbeat; it doubles with each failure in a
/// row, up to `heartbeat_interval`. A dispatcher restarting, or another
/// taking over as leader, is found again within about a second.
const FIRST_RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Answers in a row given at once (`tfdata_at_once`: news was waiting)
/// before the worker paces its heartbeats: a burst of news needs a few, a
/// dispatcher that keeps answering at once (a mistake) does not make the
/// worker spin.
const AT_ONCE_BEFORE_PACING: u32 = 3;
/// The first pause once pacing; it doubles, up to the hold.
const FIRST_PACE: Duration = Duration::from_millis(10);

/// When the next heartbeat goes.
#[derive(Debug)]
pub(crate) struct Schedule {
    interval: Duration,
    /// The dispatcher's last answer said it holds heartbeats (assumed
    /// until answered: the first heartbeat after registration goes at once).
    holds: bool,
    /// Answers in a row given at once.
    answers_at_once: u32,
    /// Failures in a row.
    failures: u32,
}

impl Schedule {
    pub(crate) fn new(interval: Duration) -> Self {
        Schedule {
            interval,
            holds: true,
            answers_at_once: 0,
            failures: 0,
        }
    }

    /// How long the dispatcher may hold a heartbeat: the interval (at
    /// least 1 ms), so the worker still says it is alive that often, and
    /// at most [`MAX_HOLD`].
    pub(crate) fn hold(&self) -> Duration {
        self.interval.clamp(Duration::from_millis(1), MAX_HOLD)
    }

    /// The pause before the next heartbeat; `None` sends it at once.
    pub(crate) fn pause(&self) -> Option<Duration> {
        let doubled = |first: Duration, times: u32, most: Duration| {
            first.saturating_mul(1 << times.min(20)).min(most)
        };
        if self.failures > 0 {
            Some(doubled(FIRST_RETRY_PAUSE, self.failures - 1, self.interval))
        } else if !self.holds {
            Some(self.interval)
        } else if self.answers_at_once >= AT_ONCE_BEFORE_PACING {
            let paced = self.answers_at_once - AT_ONCE_BEFORE_PACING;
            Some(doubled(FIRST_PACE, paced, self.hold()))
        } else {
            None
        }
    }

    /// An answer came; `holds` and `at_once` are its `tfdata_holds` and
    /// `tfdata_at_once`.
    pub(crate) fn answered(&mut self, holds: bool, at_once: bool) {
        self.failures = 0;
        self.holds = holds;
        if holds && at_once {
            self.answers_at_once = self.answers_at_once.saturating_add(1);
        } else {
            self.answers_at_once = 0;
        }
    }

    pub(crate) fn failed(&mut self) {
        self.failures = self.failures.saturating_add(1);
    }
}

impl Worker {
    /// Heartbeats until stopped (see the module docs); failures are logged.
    pub async fn heartbeat_loop(self: Arc<Self>) {
        let mut schedule = Schedule::new(self.config().heartbeat_interval);
        // The dispatcher's news this worker's last applied answer included.
        let mut seen = 0;
        let shutdown = self.shutdown_token().clone();
        loop {
            if let Some(pause) = schedule.pause() {
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    // A stream ended: the dispatcher hears of it now.
                    () = self.news_for_dispatcher().notified() => {}
                    () = shutdown.cancelled() => return,
                }
            }
            let hold = schedule.hold();
            let mut request = self.heartbeat_request();
            request.tfdata_hold_ms = i64::try_from(hold.as_millis()).unwrap_or(i64::MAX);
            request.tfdata_news_seen = seen;
            let call = tokio::time::timeout(
                hold.saturating_add(CALL_MARGIN),
                self.dispatcher().worker_heartbeat(request),
            );
            tokio::select! {
                answer = call => match answer {
                    Ok(Ok(response)) => {
                        schedule.answered(response.tfdata_holds, response.tfdata_at_once);
                        seen = response.tfdata_news_seen;
                        self.heartbeat_answered();
                        self.apply_heartbeat_response(response);
                    }
                    Ok(Err(e)) => {
                        schedule.failed();
                        tracing::warn!(worker = %self.address(), error = %e, "heartbeat to dispatcher failed");
                    }
                    Err(_) => {
                        schedule.failed();
                        tracing::warn!(worker = %self.address(), "heartbeat to dispatcher timed out");
                    }
                },
                // The heartbeat in flight (held, most likely) is dropped: the
                // next one carries the news, and its answer is as good.
                () = self.news_for_dispatcher().notified() => {}
                () = shutdown.cancelled() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_secs(30);

    #[test]
    fn a_holding_dispatcher_is_heartbeated_back_to_back() {
        let mut s = Schedule::new(INTERVAL);
        assert_eq!(s.pause(), None, "the first one goes at once");
        assert_eq!(s.hold(), MAX_HOLD);
        assert_eq!(
            Schedule::new(Duration::from_millis(200)).hold(),
            Duration::from_millis(200)
        );
        s.answered(true, false);
        assert_eq!(s.pause(), None);
        // News answers at once; a few in a row are a burst of news.
        for _ in 0..AT_ONCE_BEFORE_PACING - 1 {
            s.answered(true, true);
            assert_eq!(s.pause(), None);
        }
        // More are paced, doubling up to the hold.
        s.answered(true, true);
        assert_eq!(s.pause(), Some(FIRST_PACE));
        s.answered(true, true);
        assert_eq!(s.pause(), Some(FIRST_PACE * 2));
        for _ in 0..40 {
            s.answered(true, true);
        }
        assert_eq!(s.pause(), Some(MAX_HOLD));
        // A held answer ends the pacing.
        s.answered(true, false);
        assert_eq!(s.pause(), None);
    }

    #[test]
    fn a_dispatcher_that_does_not_hold_is_heartbeated_every_interval() {
        let mut s = Schedule::new(INTERVAL);
        s.answered(false, false);
        assert_eq!(s.pause(), Some(INTERVAL));
        s.answered(false, false);
        assert_eq!(s.pause(), Some(INTERVAL));
        // Ours again (a new leader): back to back.
        s.answered(true, true);
        assert_eq!(s.pause(), None);
    }

    #[test]
    fn failures_are_retried_sooner_than_the_interval() {
        let mut s = Schedule::new(INTERVAL);
        s.failed();
        assert_eq!(s.pause(), Some(FIRST_RETRY_PAUSE));
        s.failed();
        assert_eq!(s.pause(), Some(FIRST_RETRY_PAUSE * 2));
        for _ in 0..10 {
            s.failed();
        }
        assert_eq!(s.pause(), Some(INTERVAL));
        s.answered(false, false);
        assert_eq!(s.pause(), Some(INTERVAL));
        // A short interval bounds every pause.
        let mut s = Schedule::new(Duration::from_millis(200));
        s.failed();
        assert_eq!(s.pause(), Some(Duration::from_millis(200)));
    }
}
