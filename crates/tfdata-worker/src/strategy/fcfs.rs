//! First come, first served: `GetElement` calls and element streams take
//! the producer's elements in arrival order, so readers sharing a task (job
//! sharing) each get different elements. The end of the data is sticky; the
//! first reader to see it tells the task runner, which reports the task
//! complete once no stream is still delivering it (`TaskRunner::data_ended`).
//!
//! For compressed datasets the next large element is encoded ahead, as soon
//! as a `GetElement` call is answered: TensorFlow's client keeps one request
//! in flight per task and TensorFlow's worker compresses inside its pipeline,
//! so encoding on request would make the reader wait for Snappy over every
//! batch. The element keeps its lineage (its splits are not delivered) until
//! its payload is handed out, and a stream reader arriving meanwhile gets the
//! element itself.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use tfdata_core::ranges::IndexRanges;
use tfdata_core::{Element, Error, Lineage, Result};
use tfdata_proto::data::get_element_response::Element as Payload;
use tokio::task::JoinHandle;

use super::Next;
use crate::producer::Producer;

/// What a stream batch gets from a task.
pub enum Batch {
    Elements { elements: Vec<Element>, index: i64 },
    EndOfSequence { first: bool },
}

/// An element taken from the producer and being encoded ahead.
struct Ahead {
    element: Element,
    lineage: Lineage,
    index: i64,
    encoding: JoinHandle<Result<Payload>>,
}

#[derive(Default)]
pub struct FirstComeFirstServed {
    end_of_sequence: AtomicBool,
    /// The index of the next element served.
    next_index: AtomicI64,
    /// At most one element encoded ahead (see the module docs).
    ahead: tokio::sync::Mutex<Option<Ahead>>,
    /// Held from taking elements to numbering them, so concurrent readers
    /// (job sharing) get the indices the elements have in the sequence:
    /// reader checkpoints name elements by them. Taken after `ahead`.
    numbering: tokio::sync::Mutex<()>,
    /// Indices consumed before a restore of a shared job (the task
    /// definition's `tfdata_consumed_elements`): produced, never served.
    consumed: IndexRanges,
}

impl FirstComeFirstServed {
    /// A task that never serves the elements at `consumed`.
    pub fn new(consumed: IndexRanges) -> Self {
        FirstComeFirstServed {
            consumed,
            ..Default::default()
        }
    }

    /// How many elements may be taken next without serving a consumed one
    /// (at least one), after dropping those at the next index. Call with
    /// `numbering` held.
    fn room(&self, producer: &Producer) -> usize {
        let next = self.next_index.load(Ordering::SeqCst);
        let next = match self.consumed.covering(next) {
            Some(end) => {
                producer.skip(end.saturating_sub(next) as u64);
                self.next_index.store(end, Ordering::SeqCst);
                end
            }
            None => next,
        };
        self.consumed.next_after(next).map_or(usize::MAX, |start| {
            usize::try_from(start.saturating_sub(next))
                .unwrap_or(usize::MAX)
                .max(1)
        })
    }

    /// Readers see the end from now on, without a completion report (the
    /// dispatcher deleted the task).
    pub fn end(&self) {
        self.end_of_sequence.store(true, Ordering::SeqCst);
    }

    /// Moves the task on to element `index` if it is not there yet: the
    /// elements before it are dropped unsent (a reader restored from a
    /// checkpoint, or reconnecting, already has them). Only for tasks one
    /// reader reads: with job sharing another reader may want them.
    pub async fn skip_to(&self, producer: &Producer, index: i64) {
        let mut ahead = self.ahead.lock().await;
        let _numbering = self.numbering.lock().await;
        let next = self.next_index.load(Ordering::SeqCst);
        if next >= index {
            return;
        }
        // An element encoded ahead is `next - 1`: before `index`, unwanted.
        if let Some(a) = ahead.take() {
            a.encoding.abort();
        }
        producer.skip((index - next) as u64);
        self.next_index.store(index, Ordering::SeqCst);
    }

    /// Up to `max_elements` elements (at least one), the later ones only
    /// while their bytes stay within `max_bytes`, waiting for the first;
    /// or the end. Cancel-safe.
    pub async fn next_batch(
        &self,
        producer: &Producer,
        max_elements: usize,
        max_bytes: usize,
    ) -> Result<Batch> {
        producer.check()?;
        if let Some(a) = self.ahead.lock().await.take() {
            a.encoding.abort();
            return Ok(Batch::Elements {
                elements: vec![a.element.with_lineage(a.lineage)],
                index: a.index,
            });
        }
        if self.end_of_sequence.load(Ordering::SeqCst) {
            return Ok(Batch::EndOfSequence { first: false });
        }
        let _numbering = self.numbering.lock().await;
        let room = self.room(producer);
        let taken = producer.take(max_elements.min(room), max_bytes).await?;
        Ok(self.batch(taken))
    }

    /// Takes the next element if one is buffered and slow to encode, and
    /// starts encoding it on a blocking thread.
    async fn encode_ahead(&self, producer: &Producer) {
        let mut ahead = self.ahead.lock().await;
        if ahead.is_some() || self.end_of_sequence.load(Ordering::SeqCst) {
            return;
        }
        // Only what is already buffered: a pipeline error or the end stays
        // in the producer for the next call to find.
        let _numbering = self.numbering.lock().await;
        self.room(producer);
        let Ok(Some(mut taken)) = producer.try_take(1, usize::MAX) else {
            return;
        };
        let Some(mut element) = taken.pop() else {
            return;
        };
        // Taken, it is served next whatever its size (the copy shares the
        // tensors' buffers).
        let index = self.next_index.fetch_add(1, Ordering::SeqCst);
        let lineage = element.take_lineage();
        let copy = element.clone();
        let form = producer.form();
        let encoding =
            tokio::task::spawn_blocking(move || crate::producer::wire_payload(&copy, &form));
        *ahead = Some(Ahead {
            element,
            lineage,
            index,
            encoding,
        });
    }

    /// The element encoded ahead, once its encoding is done (cancel-safe:
    /// cancelled meanwhile, it stays for the next call).
    async fn take_ahead(&self) -> Option<Result<(Payload, i64)>> {
        let mut ahead = self.ahead.lock().await;
        let a = ahead.as_mut()?;
        let done = (&mut a.encoding).await;
        let a = ahead.take()?;
        // Handed out (to a `GetElement` reader, which records no split
        // names): its splits count as delivered from here.
        a.lineage.mark_sent();
        drop(a.lineage);
        Some(match done {
            Ok(payload) => payload.map(|p| (p, a.index)),
            Err(e) => Err(Error::Internal(format!("encoding an element failed: {e}"))),
        })
    }

    fn batch(&self, taken: Option<Vec<Element>>) -> Batch {
        match taken {
            // Only non-waiting takes find no elements.
            Some(elements) => {
                let index = self
                    .next_index
                    .fetch_add(elements.len() as i64, Ordering::SeqCst);
                Batch::Elements { elements, index }
            }
            None => {
                let first = !self.end_of_sequence.swap(true, Ordering::SeqCst);
                Batch::EndOfSequence { first }
            }
        }
    }

    /// The next element. With `allow_skip`, an empty buffer answers
    /// [`Next::Skip`] at once instead of waiting.
    pub async fn next(&self, producer: &Producer, allow_skip: bool) -> Result<Next> {
        producer.check()?;
        if let Some(done) = self.take_ahead().await {
            let (payload, index) = done?;
            self.encode_ahead(producer).await;
            return Ok(Next::Element { payload, index });
        }
        if self.end_of_sequence.load(Ordering::SeqCst) {
            return Ok(Next::EndOfSequence { first: false });
        }
        let numbering = self.numbering.lock().await;
        self.room(producer);
        let taken = if allow_skip {
            producer.try_take(1, usize::MAX)?
        } else {
            producer.take(1, usize::MAX).await?
        };
        let batch = self.batch(taken);
        drop(numbering);
        match batch {
            Batch::Elements {
                mut elements,
                index,
            } => match elements.pop() {
                Some(e) => {
                    let slow = producer.is_slow_to_encode(&e);
                    let payload = producer.encode(e).await?;
                    if slow {
                        self.encode_ahead(producer).await;
                    }
                    Ok(Next::Element { payload, index })
                }
                None => Ok(Next::Skip),
            },
            Batch::EndOfSequence { first } => Ok(Next::EndOfSequence { first }),
        }
    }
}
