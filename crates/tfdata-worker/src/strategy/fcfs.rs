//! First come, first served: `GetElement` calls and element streams take
//! the producer's elements in arrival order, so readers sharing a task (job
//! sharing) each get different elements. The end of the data is sticky, and
//! only the first reader to see it reports the task complete.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use tfdata_core::{Element, Result};

use super::Next;
use crate::producer::Producer;

/// What a stream batch gets from a task.
pub enum Batch {
    Elements { elements: Vec<Element>, index: i64 },
    EndOfSequence { first: bool },
}

#[derive(Default)]
pub struct FirstComeFirstServed {
    end_of_sequence: AtomicBool,
    /// The index of the next element served.
    next_index: AtomicI64,
}

impl FirstComeFirstServed {
    /// Readers see the end from now on, without a completion report (the
    /// dispatcher deleted the task).
    pub fn end(&self) {
        self.end_of_sequence.store(true, Ordering::SeqCst);
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
        if self.end_of_sequence.load(Ordering::SeqCst) {
            return Ok(Batch::EndOfSequence { first: false });
        }
        let taken = producer.take(max_elements, max_bytes).await?;
        Ok(self.batch(taken))
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
        if self.end_of_sequence.load(Ordering::SeqCst) {
            return Ok(Next::EndOfSequence { first: false });
        }
        let taken = if allow_skip {
            producer.try_take(1, usize::MAX)?
        } else {
            producer.take(1, usize::MAX).await?
        };
        match self.batch(taken) {
            Batch::Elements {
                mut elements,
                index,
            } => match elements.pop() {
                Some(e) => Ok(Next::Element {
                    payload: producer.encode(e).await?,
                    index,
                }),
                None => Ok(Next::Skip),
            },
            Batch::EndOfSequence { first } => Ok(Next::EndOfSequence { first }),
        }
    }
}
