//! The round-robin strategy of coordinated reads (spec §5.7): a round
//! starts when all `num_consumers` consumers have asked for it; it takes
//! `num_consumers` elements from the pipeline (waiting up to 100 ms when the
//! request allows skipping) and gives consumer `c` the `c`-th. A round that
//! cannot be filled in time is skipped by everyone; elements already pulled
//! stay buffered for the next round.
//!
//! Elements keep their index in the task's sequence (served with them), so
//! round after round consumer `c` gets the elements `k * n + c`: a
//! coordinated reader's checkpoint counts its rounds per worker by them. A
//! restored coordinated read's task (the definition's
//! `tfdata_consumed_elements`, the first `rounds * n` elements) produces and
//! drops those elements and numbers the rest from there.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use tfdata_core::ranges::IndexRanges;
use tfdata_core::{Error, Result};
use tfdata_proto::data::get_element_response::Element as Payload;
use tokio::sync::{Mutex, Notify};

use super::Next;
use crate::producer::Producer;

/// How long a round waits for elements before it is skipped (TensorFlow's).
pub const ROUND_WAIT: Duration = Duration::from_millis(100);

enum RoundResult {
    /// Each consumer's element, with its index in the task's sequence.
    Elements(Vec<(i64, Payload)>),
    Skipped,
}

struct Round {
    result: RoundResult,
    delivered: HashSet<i64>,
}

#[derive(Default)]
struct State {
    /// Whether any round was requested yet: a task that joins a running read
    /// starts at its agreed round, so the first request sets `next_round`.
    started: bool,
    /// The next round to start; earlier rounds are done.
    next_round: i64,
    /// Consumers that asked for each not-yet-started round.
    waiting: HashMap<i64, HashSet<i64>>,
    /// Done rounds not yet delivered to every consumer.
    done: HashMap<i64, Round>,
    /// Elements pulled for a round that was then skipped, with their indices.
    buffer: VecDeque<(i64, Payload)>,
    /// The index of the next element pulled from the pipeline.
    next_index: i64,
}

pub struct RoundRobin {
    num_consumers: usize,
    state: Mutex<State>,
    round_done: Notify,
    /// Elements consumed before a restore: produced, never served.
    consumed: IndexRanges,
}

impl RoundRobin {
    /// Rounds of `num_consumers` elements that never serve those at
    /// `consumed`.
    pub fn new(num_consumers: usize, consumed: IndexRanges) -> Self {
        RoundRobin {
            num_consumers,
            state: Mutex::new(State::default()),
            round_done: Notify::new(),
            consumed,
        }
    }

    /// The next element of the pipeline that was not consumed before a
    /// restore, with its index; `None` if none came within `wait`.
    async fn pull(
        &self,
        st: &mut State,
        producer: &Producer,
        wait: Option<Duration>,
    ) -> Result<Option<(i64, Payload)>> {
        if let Some(end) = self.consumed.covering(st.next_index) {
            producer.skip(end.saturating_sub(st.next_index) as u64);
            st.next_index = end;
        }
        let Some(payload) = producer.pull(wait).await? else {
            return Ok(None);
        };
        let index = st.next_index;
        st.next_index += 1;
        Ok(Some((index, payload)))
    }

    pub async fn get(
        &self,
        producer: &Producer,
        consumer: i64,
        round: i64,
        allow_skip: bool,
    ) -> Result<Next> {
        let n = self.num_consumers as i64;
        if consumer < 0 || consumer >= n || round < 0 {
            return Err(Error::FailedPrecondition(format!(
                "invalid coordinated read: consumer_index {consumer} (num_consumers {n}), round {round}"
            )));
        }
        loop {
            let mut st = self.state.lock().await;
            if !st.started {
                st.started = true;
                st.next_round = round;
            }
            if let Some(done) = st.done.get_mut(&round) {
                let next = match &done.result {
                    RoundResult::Elements(items) => {
                        let (index, payload) = &items[consumer as usize];
                        Next::Element {
                            payload: payload.clone(),
                            index: *index,
                        }
                    }
                    RoundResult::Skipped => Next::Skip,
                };
                done.delivered.insert(consumer);
                if done.delivered.len() == self.num_consumers {
                    st.done.remove(&round);
                }
                return Ok(next);
            }
            if round < st.next_round {
                return Err(Error::FailedPrecondition(format!(
                    "consumer {consumer} requested round {round}, but round {} has already started; \
                     was the consumer restarted with the same job name?",
                    st.next_round
                )));
            }
            // A failed pipeline (or its end: an error for coordinated reads)
            // fails every consumer's next round alike.
            producer.check()?;
            let asked = {
                let asked = st.waiting.entry(round).or_default();
                asked.insert(consumer);
                asked.len()
            };
            if round == st.next_round && asked == self.num_consumers {
                // Everyone is here: run the round.
                let wait = allow_skip.then_some(ROUND_WAIT);
                let deadline = tokio::time::Instant::now() + ROUND_WAIT;
                while st.buffer.len() < self.num_consumers {
                    let left = wait
                        .map(|_| deadline.saturating_duration_since(tokio::time::Instant::now()));
                    if left.is_some_and(|l| l.is_zero()) {
                        break;
                    }
                    match self.pull(&mut st, producer, left).await {
                        Ok(Some(item)) => st.buffer.push_back(item),
                        Ok(None) => break,
                        Err(e) => {
                            // The consumers waiting for this round learn
                            // the failure too (the producer keeps it), not
                            // only the one that ran the round.
                            drop(st);
                            self.round_done.notify_waiters();
                            return Err(e);
                        }
                    }
                }
                let result = if st.buffer.len() >= self.num_consumers {
                    RoundResult::Elements(st.buffer.drain(..self.num_consumers).collect())
                } else {
                    RoundResult::Skipped
                };
                st.waiting.remove(&round);
                st.done.insert(
                    round,
                    Round {
                        result,
                        delivered: HashSet::new(),
                    },
                );
                st.next_round = round + 1;
                drop(st);
                self.round_done.notify_waiters();
                continue;
            }
            // Wait for the round to run; register before unlocking so the
            // wake-up cannot be missed.
            let notified = self.round_done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            drop(st);
            notified.await;
        }
    }
}
