//! A task runner (first come, first served): the task's pipeline runs on its
//! own thread, off the RPC threads, and pushes encoded elements into a
//! bounded buffer; `GetElement` calls pop from it in arrival order. A full
//! buffer blocks the pipeline, so memory is bounded by the buffer, not by the
//! dataset.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use tfdata_core::{Error, Lineage, Result, element};
use tfdata_dataset::{Dataset, IterContext};
use tfdata_proto::data::{TaskDef, get_element_response::Element as Payload};
use tokio::sync::mpsc;

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

/// An encoded element with the dynamic-sharding splits it was made from. The
/// lineage is dropped when the element is handed to a reader: that is when
/// its splits count as delivered (see `tfdata_core::lineage`).
type Buffered = Result<(Payload, Lineage)>;

pub struct TaskRunner {
    pub def: TaskDef,
    /// Present for coordinated reads (`num_consumers` set).
    round_robin: Option<crate::round_robin::RoundRobin>,
    /// Present for cross-trainer-cache jobs.
    cache: Option<crate::cross_trainer::CrossTrainerCache>,
    buffer: tokio::sync::Mutex<mpsc::Receiver<Buffered>>,
    producer: Mutex<Option<mpsc::Sender<Buffered>>>,
    end_of_sequence: AtomicBool,
    /// The error the pipeline failed with, returned to every later call.
    error: Mutex<Option<(tonic::Code, String)>>,
    next_index: AtomicI64,
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
        let (tx, rx) = mpsc::channel(capacity.max(1));
        TaskRunner {
            cache: def
                .use_cross_trainer_cache
                .then(|| crate::cross_trainer::CrossTrainerCache::new(cache_budget_bytes)),
            round_robin: def
                .num_consumers
                .map(|n| crate::round_robin::RoundRobin::new(n.max(1) as usize)),
            def,
            buffer: tokio::sync::Mutex::new(rx),
            producer: Mutex::new(Some(tx)),
            end_of_sequence: AtomicBool::new(false),
            error: Mutex::new(None),
            next_index: AtomicI64::new(0),
        }
    }

    pub fn task_id(&self) -> i64 {
        self.def.task_id
    }

    /// Fails the task before its pipeline starts (bad definition, unloadable dataset).
    pub fn fail(&self, err: Error) {
        if let Some(tx) = lock(&self.producer).take() {
            let _ = tx.try_send(Err(err));
        }
    }

    /// Runs `dataset` on a new thread, compressing elements if asked.
    /// `ctx` carries the sources' remote split providers in distributed_epoch mode.
    pub fn run_pipeline(&self, dataset: Dataset, ctx: IterContext, compress: bool) {
        let Some(tx) = lock(&self.producer).take() else {
            return;
        };
        let task_id = self.def.task_id;
        let spawned = std::thread::Builder::new()
            .name(format!("tfdata-task-{task_id}"))
            .spawn(move || produce(task_id, dataset, ctx, compress, tx));
        if let Err(e) = spawned {
            tracing::error!(task = task_id, error = %e, "cannot start task thread");
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

    /// One element from the pipeline for a round-robin round: `Ok(None)` if
    /// none arrived within `wait` (`None` waits for ever).
    pub(crate) async fn pull(&self, wait: Option<std::time::Duration>) -> Result<Option<Payload>> {
        let mut buffer = self.buffer.lock().await;
        let item = match wait {
            Some(wait) => match tokio::time::timeout(wait, buffer.recv()).await {
                Ok(item) => item,
                Err(_) => return Ok(None),
            },
            None => buffer.recv().await,
        };
        match item {
            Some(Ok((payload, _delivered))) => Ok(Some(payload)),
            Some(Err(e)) => {
                *lock(&self.error) = Some((e.code(), e.to_string()));
                Err(e)
            }
            None => {
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

    /// The next element, first come first served. With `allow_skip`, an empty
    /// buffer answers [`Next::Skip`] at once instead of waiting.
    pub async fn next(&self, allow_skip: bool) -> Result<Next> {
        if let Some((code, message)) = lock(&self.error).clone() {
            return Err(Error::Remote { code, message });
        }
        if self.end_of_sequence.load(Ordering::SeqCst) {
            return Ok(Next::EndOfSequence { first: false });
        }
        let mut buffer = self.buffer.lock().await;
        let item = if allow_skip {
            match buffer.try_recv() {
                Ok(item) => Some(item),
                Err(mpsc::error::TryRecvError::Empty) => return Ok(Next::Skip),
                Err(mpsc::error::TryRecvError::Disconnected) => None,
            }
        } else {
            buffer.recv().await
        };
        match item {
            Some(Ok((payload, _delivered))) => Ok(Next::Element {
                payload,
                index: self.next_index.fetch_add(1, Ordering::SeqCst),
            }),
            Some(Err(e)) => {
                *lock(&self.error) = Some((e.code(), e.to_string()));
                Err(e)
            }
            None => {
                let first = !self.end_of_sequence.swap(true, Ordering::SeqCst);
                Ok(Next::EndOfSequence { first })
            }
        }
    }
}

/// The pipeline thread. Ends when the dataset ends (dropping the sender is
/// the end-of-sequence signal), on an error (sent first), or when the task
/// is deleted (the receiver is gone). A panic is reported as an error rather
/// than mistaken for the end of the data.
fn produce(
    task_id: i64,
    dataset: Dataset,
    ctx: IterContext,
    compress: bool,
    tx: mpsc::Sender<Buffered>,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<()> {
        let mut it = dataset.iter_with(&ctx)?;
        while let Some(mut e) = it.next_element()? {
            let lineage = e.take_lineage();
            let payload = if compress {
                Payload::Compressed(element::compress(&e)?)
            } else {
                Payload::Uncompressed(element::to_uncompressed(&e))
            };
            if tx.blocking_send(Ok((payload, lineage))).is_err() {
                return Ok(()); // task deleted
            }
        }
        Ok(())
    }));
    let err = match outcome {
        Ok(Ok(())) => return,
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
    let _ = tx.blocking_send(Err(err));
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
