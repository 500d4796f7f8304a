//! A task runner (first come, first served): the task's pipeline runs on its
//! own thread, off the RPC threads, and pushes elements into a bounded
//! [`ElementBuffer`]; `GetElement` calls and element streams take from it in
//! arrival order. A full buffer blocks the pipeline, so memory is bounded by
//! the buffer, not by the dataset.
//!
//! Elements are buffered decoded and encoded when served: TensorFlow's wire
//! forms for `GetElement` (Snappy for compressed datasets), tfdata's batch
//! form for streams (where compression is decided per chunk). Encoding drops
//! the element and with it its lineage: in distributed_epoch that is when the
//! element's splits count as delivered (`tfdata_core::lineage`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use tfdata_core::{Element, Error, Result, element};
use tfdata_dataset::{Dataset, IterContext};
use tfdata_proto::data::{TaskDef, get_element_response::Element as Payload};

use crate::buffer::{ElementBuffer, Taken};

/// Elements at least this large are encoded for `GetElement` on a blocking
/// thread: Snappy over megabytes would stall the RPC runtime.
const ENCODE_OFF_RUNTIME_BYTES: usize = 256 << 10;

/// What `GetElement` gets from a task.
pub enum Next {
    Element {
        payload: Payload,
        index: i64,
    },
    /// No element buffered and the caller allowed skipping.
    Skip,
    /// Sticky: every later call gets it too.
    EndOfSequence {
        first: bool,
    },
}

/// What a stream batch gets from a task.
pub enum Batch {
    Elements { elements: Vec<Element>, index: i64 },
    EndOfSequence { first: bool },
}

/// The bounds of a task's buffer (see [`ElementBuffer`]).
#[derive(Debug, Clone, Copy)]
pub struct BufferLimits {
    pub elements: usize,
    pub max_elements: usize,
    pub bytes: usize,
}

impl BufferLimits {
    /// `elements`, and the worker's default bounds for the rest.
    pub fn elements(elements: usize) -> Self {
        BufferLimits {
            elements,
            max_elements: crate::config::DEFAULT_TASK_BUFFER_MAX_ELEMENTS.max(elements),
            bytes: crate::config::DEFAULT_TASK_BUFFER_BYTES as usize,
        }
    }
}

pub struct TaskRunner {
    pub def: TaskDef,
    /// Present for coordinated reads (`num_consumers` set).
    round_robin: Option<crate::round_robin::RoundRobin>,
    /// Present for cross-trainer-cache jobs.
    cache: Option<crate::cross_trainer::CrossTrainerCache>,
    buffer: Arc<ElementBuffer>,
    /// The pipeline has not been started (or failed to start) yet.
    pending: AtomicBool,
    /// Whether the dataset asks for compression (and the dispatcher did not
    /// turn it off); known once the pipeline starts.
    compress: AtomicBool,
    end_of_sequence: AtomicBool,
    /// The error the pipeline failed with, returned to every later call.
    error: Mutex<Option<(tonic::Code, String)>>,
    next_index: AtomicI64,
}

impl Drop for TaskRunner {
    fn drop(&mut self) {
        // Stops the pipeline thread if it is still producing.
        self.buffer.close();
    }
}

impl TaskRunner {
    /// A runner with an empty buffer of `capacity` elements; the pipeline
    /// starts with [`run_pipeline`](Self::run_pipeline) once the dataset is loaded.
    pub fn new(def: TaskDef, capacity: usize) -> Self {
        Self::with_cache_budget(def, capacity, 0)
    }

    /// A runner whose cross-trainer cache (if the task uses one) holds up to
    /// `cache_budget_bytes`.
    pub fn with_cache_budget(def: TaskDef, capacity: usize, cache_budget_bytes: u64) -> Self {
        Self::with_limits(def, BufferLimits::elements(capacity), cache_budget_bytes)
    }

    pub fn with_limits(def: TaskDef, limits: BufferLimits, cache_budget_bytes: u64) -> Self {
        TaskRunner {
            cache: def
                .use_cross_trainer_cache
                .then(|| crate::cross_trainer::CrossTrainerCache::new(cache_budget_bytes)),
            round_robin: def
                .num_consumers
                .map(|n| crate::round_robin::RoundRobin::new(n.max(1) as usize)),
            def,
            buffer: Arc::new(ElementBuffer::new(
                limits.elements,
                limits.max_elements,
                limits.bytes,
            )),
            pending: AtomicBool::new(true),
            compress: AtomicBool::new(false),
            end_of_sequence: AtomicBool::new(false),
            error: Mutex::new(None),
            next_index: AtomicI64::new(0),
        }
    }

    pub fn task_id(&self) -> i64 {
        self.def.task_id
    }

    /// Whether elements are to be compressed (known once the pipeline runs).
    pub fn compress(&self) -> bool {
        self.compress.load(Ordering::SeqCst)
    }

    /// Fails the task before its pipeline starts (bad definition, unloadable dataset).
    pub fn fail(&self, err: Error) {
        if self.pending.swap(false, Ordering::SeqCst) {
            self.buffer.finish(Some(err));
        }
    }

    /// The dispatcher deleted the task: readers still holding it see the
    /// end (without a completion report) and the pipeline stops.
    pub fn cancel(&self) {
        self.end_of_sequence.store(true, Ordering::SeqCst);
        self.buffer.close();
    }

    /// Runs `dataset` on a new thread; elements are compressed when served if
    /// `compress`. `ctx` carries the sources' remote split providers in
    /// distributed_epoch mode.
    pub fn run_pipeline(&self, dataset: Dataset, ctx: IterContext, compress: bool) {
        if !self.pending.swap(false, Ordering::SeqCst) {
            return;
        }
        self.compress.store(compress, Ordering::SeqCst);
        let task_id = self.def.task_id;
        let buffer = Arc::clone(&self.buffer);
        let spawned = std::thread::Builder::new()
            .name(format!("tfdata-task-{task_id}"))
            .spawn(move || produce(task_id, dataset, ctx, &buffer));
        if let Err(e) = spawned {
            tracing::error!(task = task_id, error = %e, "cannot start task thread");
            self.buffer.finish(Some(Error::Internal(format!(
                "cannot start the pipeline thread of task {task_id}: {e}"
            ))));
        }
    }

    /// Coordinated reads: consumer `consumer`'s element of round `round`.
    pub async fn next_for_round(
        &self,
        consumer: i64,
        round: i64,
        allow_skip: bool,
    ) -> Result<Next> {
        let Some(rr) = &self.round_robin else {
            return Err(Error::FailedPrecondition(format!(
                "task {} is not a coordinated-read (round-robin) task; do not send consumer_index",
                self.def.task_id
            )));
        };
        if let Some((code, message)) = lock(&self.error).clone() {
            return Err(Error::Remote { code, message });
        }
        rr.get(self, consumer, round, allow_skip).await
    }

    /// `element` in TensorFlow's wire form.
    async fn encode(&self, element: Element) -> Result<Payload> {
        let compress = self.compress();
        let large = element.byte_size() >= ENCODE_OFF_RUNTIME_BYTES;
        let encode = move || -> Result<Payload> {
            Ok(if compress {
                Payload::Compressed(element::compress(&element)?)
            } else {
                Payload::Uncompressed(element::to_uncompressed(&element))
            })
        };
        // Cheap encodings stay inline (no compression only clones `Bytes`);
        // Snappy over large elements would hold an RPC thread for milliseconds.
        if !(compress && large) {
            return encode();
        }
        tokio::task::spawn_blocking(encode)
            .await
            .map_err(|e| Error::Internal(format!("encoding an element failed: {e}")))?
    }

    /// One element from the pipeline for a round-robin round: `Ok(None)` if
    /// none arrived within `wait` (`None` waits for ever).
    pub(crate) async fn pull(&self, wait: Option<std::time::Duration>) -> Result<Option<Payload>> {
        let taken = match wait {
            Some(wait) => match tokio::time::timeout(wait, self.buffer.take(1, usize::MAX)).await {
                Ok(taken) => taken,
                Err(_) => return Ok(None),
            },
            None => self.buffer.take(1, usize::MAX).await,
        };
        match taken {
            Taken::Elements(mut elements) => match elements.pop() {
                Some(e) => self.encode(e).await.map(Some),
                None => Ok(None),
            },
            Taken::Empty => Ok(None),
            Taken::Failed(e) => {
                *lock(&self.error) = Some((e.code(), e.to_string()));
                Err(e)
            }
            Taken::End => {
                let err = Error::FailedPrecondition(
                    "Encountered end of sequence on a round-robin read or cross-trainer cache iterator. \
                     Please ensure that the dataset has infinite cardinality, e.g. by adding a \
                     .repeat() transformation at the end."
                        .into(),
                );
                *lock(&self.error) = Some((err.code(), err.to_string()));
                Err(err)
            }
        }
    }

    /// Cross-trainer cache reads: the element at `trainer_id`'s cursor.
    pub async fn next_for_trainer(&self, trainer_id: &str) -> Result<Next> {
        let Some(cache) = &self.cache else {
            return Err(Error::FailedPrecondition(format!(
                "task {} does not use a cross-trainer cache; do not send trainer_id",
                self.def.task_id
            )));
        };
        if let Some((code, message)) = lock(&self.error).clone() {
            return Err(Error::Remote { code, message });
        }
        cache.get(self, trainer_id).await
    }

    /// Whether the task is first come, first served (not a coordinated read
    /// nor a cross-trainer cache): the kind element streams serve.
    pub fn first_come_first_served(&self) -> bool {
        self.round_robin.is_none() && self.cache.is_none()
    }

    /// Lets the buffer prefetch up to `elements` for a streaming reader.
    pub fn raise_prefetch(&self, elements: usize) {
        self.buffer.raise_capacity(elements);
    }

    /// Up to `max_elements` elements (at least one), the later ones only
    /// while their bytes stay within `max_bytes`, waiting for the first;
    /// or the end. Cancel-safe.
    pub async fn next_batch(&self, max_elements: usize, max_bytes: usize) -> Result<Batch> {
        if let Some((code, message)) = lock(&self.error).clone() {
            return Err(Error::Remote { code, message });
        }
        if self.end_of_sequence.load(Ordering::SeqCst) {
            return Ok(Batch::EndOfSequence { first: false });
        }
        let taken = self.buffer.take(max_elements, max_bytes).await;
        self.batch(taken)
    }

    fn batch(&self, taken: Taken) -> Result<Batch> {
        match taken {
            Taken::Elements(elements) => {
                let index = self
                    .next_index
                    .fetch_add(elements.len() as i64, Ordering::SeqCst);
                Ok(Batch::Elements { elements, index })
            }
            // Only non-waiting takes find the buffer empty.
            Taken::Empty => Ok(Batch::Elements {
                elements: Vec::new(),
                index: self.next_index.load(Ordering::SeqCst),
            }),
            Taken::Failed(e) => {
                *lock(&self.error) = Some((e.code(), e.to_string()));
                Err(e)
            }
            Taken::End => {
                let first = !self.end_of_sequence.swap(true, Ordering::SeqCst);
                Ok(Batch::EndOfSequence { first })
            }
        }
    }

    /// The next element, first come first served. With `allow_skip`, an empty
    /// buffer answers [`Next::Skip`] at once instead of waiting.
    pub async fn next(&self, allow_skip: bool) -> Result<Next> {
        if let Some((code, message)) = lock(&self.error).clone() {
            return Err(Error::Remote { code, message });
        }
        if self.end_of_sequence.load(Ordering::SeqCst) {
            return Ok(Next::EndOfSequence { first: false });
        }
        let taken = if allow_skip {
            self.buffer.try_take(1, usize::MAX)
        } else {
            self.buffer.take(1, usize::MAX).await
        };
        if matches!(taken, Taken::Empty) {
            return Ok(Next::Skip);
        }
        match self.batch(taken)? {
            Batch::Elements {
                mut elements,
                index,
            } => match elements.pop() {
                Some(e) => Ok(Next::Element {
                    payload: self.encode(e).await?,
                    index,
                }),
                None => Ok(Next::Skip),
            },
            Batch::EndOfSequence { first } => Ok(Next::EndOfSequence { first }),
        }
    }
}

/// The pipeline thread. Ends when the dataset ends (dropping the sender is
/// the end-of-sequence signal), on an error (sent first), or when the task
/// is deleted (the receiver is gone). A panic is reported as an error rather
/// than mistaken for the end of the data.
fn produce(task_id: i64, dataset: Dataset, ctx: IterContext, buffer: &ElementBuffer) {
    let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<()> {
        let mut it = dataset.iter_with(&ctx)?;
        while let Some(e) = it.next_element()? {
            if !buffer.push(e) {
                return Ok(()); // task deleted
            }
        }
        Ok(())
    }));
    let err = match outcome {
        Ok(Ok(())) => {
            buffer.finish(None);
            return;
        }
        Ok(Err(e)) => e,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Error::Internal(format!("task {task_id} pipeline panicked: {message}"))
        }
    };
    tracing::warn!(task = task_id, error = %err, "task pipeline failed");
    buffer.finish(Some(err));
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_core::{Element, Tensor};

    async fn drain(task: &TaskRunner) -> (Vec<i64>, Option<Error>) {
        let mut out = Vec::new();
        loop {
            match task.next(false).await {
                Ok(Next::Element { payload, .. }) => {
                    let Payload::Uncompressed(u) = payload else {
                        panic!("compressed")
                    };
                    out.push(
                        element::from_uncompressed(&u).unwrap().components[0]
                            .to_scalar::<i64>()
                            .unwrap(),
                    );
                }
                Ok(Next::EndOfSequence { .. }) => return (out, None),
                Ok(Next::Skip) => unreachable!(),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    #[tokio::test]
    async fn serves_in_order_then_sticky_end() {
        let task = TaskRunner::new(TaskDef::default(), 2);
        task.run_pipeline(Dataset::range(5), IterContext::new(), false);
        let (values, err) = drain(&task).await;
        assert_eq!(values, vec![0, 1, 2, 3, 4]);
        assert!(err.is_none());
        assert!(matches!(
            task.next(true).await,
            Ok(Next::EndOfSequence { first: false })
        ));
    }

    #[tokio::test]
    async fn a_panicking_function_fails_the_task_stickily() {
        tfdata_dataset::register_function("worker_test_panic_at_3", |e: Element| {
            if e.components[0].to_scalar::<i64>()? == 3 {
                panic!("bad element");
            }
            Ok(Element::single(Tensor::scalar(
                e.components[0].to_scalar::<i64>()?,
            )))
        });
        let task = TaskRunner::new(TaskDef::default(), 1);
        task.run_pipeline(
            Dataset::range(10).map("worker_test_panic_at_3"),
            IterContext::new(),
            false,
        );
        let (values, err) = drain(&task).await;
        assert_eq!(values, vec![0, 1, 2]);
        let msg = err.unwrap().to_string();
        assert!(
            msg.contains("worker_test_panic_at_3") && msg.contains("bad element"),
            "{msg}"
        );
        assert!(task.next(false).await.is_err());
    }

    #[tokio::test]
    async fn skip_when_nothing_is_buffered() {
        let task = TaskRunner::new(TaskDef::default(), 1);
        assert!(matches!(task.next(true).await, Ok(Next::Skip)));
        task.fail(Error::FailedPrecondition("cannot load".into()));
        assert!(task.next(true).await.is_err());
    }
}
