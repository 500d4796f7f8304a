//! A task's producer: the task's pipeline runs on its own thread, off the
//! RPC threads, and pushes decoded elements into a bounded
//! [`ElementBuffer`]. A full buffer blocks the pipeline, so memory is bounded
//! by the buffer, not by the dataset.
//!
//! The strategies (`crate::strategy`: first come first served, round robin,
//! cross-trainer cache) take elements from the producer and have it encode
//! those they serve in TensorFlow's wire form (Snappy for compressed
//! datasets), on a blocking thread when the element is large enough to stall
//! the RPC runtime. Encoding drops the element and with it its lineage: in
//! distributed_epoch that is when the element's splits count as delivered
//! (`tfdata_core::lineage`).
//!
//! A pipeline failure reaches the first take after the elements before it;
//! the producer keeps it and answers every later take with it.

pub mod buffer;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tfdata_core::{Element, Error, Result, TaskId, element};
use tfdata_dataset::{Dataset, IterContext};
use tfdata_proto::data::get_element_response::Element as Payload;

use crate::pipeline::ServedForm;

use buffer::{ElementBuffer, PipelineTimes, Taken};

/// Elements at least this large are encoded for `GetElement` on a blocking
/// thread: Snappy over megabytes would stall the RPC runtime.
const ENCODE_OFF_RUNTIME_BYTES: usize = 256 << 10;

/// Called on the pipeline thread when the pipeline ends, however it ends.
/// `true` holds a clean end back from readers: the end is not the data's (a
/// draining worker stopped taking splits), so takes wait until the task is
/// closed instead of seeing the end of sequence.
pub type EndHook = Box<dyn FnOnce() -> bool + Send>;

/// Makes a pipeline and its context, on the pipeline thread.
pub type PipelineBuild = Box<dyn FnOnce() -> Result<(Dataset, IterContext)> + Send>;

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

pub struct Producer {
    task_id: TaskId,
    buffer: Arc<ElementBuffer>,
    /// The pipeline has not been started (or failed to start) yet.
    pending: AtomicBool,
    /// How elements are served: compressed when the dataset asks for it
    /// (and the dispatcher did not turn it off), SparseTensor components as
    /// variants; known once the pipeline starts.
    form: OnceLock<ServedForm>,
    /// The error the pipeline failed with, returned to every later take.
    failure: Mutex<Option<Arc<Error>>>,
}

impl Drop for Producer {
    fn drop(&mut self) {
        // Stops the pipeline thread if it is still producing.
        self.buffer.close();
    }
}

impl Producer {
    /// A producer with an empty buffer; the pipeline starts with
    /// [`run`](Self::run) once the dataset is loaded.
    pub fn new(task_id: TaskId, limits: BufferLimits) -> Self {
        Producer {
            task_id,
            buffer: Arc::new(ElementBuffer::new(
                limits.elements,
                limits.max_elements,
                limits.bytes,
            )),
            pending: AtomicBool::new(true),
            form: OnceLock::new(),
            failure: Mutex::new(None),
        }
    }

    /// Whether elements are to be compressed (known once the pipeline runs).
    pub fn compress(&self) -> bool {
        self.form.get().is_some_and(|f| f.compress)
    }

    /// How elements are served (the default until the pipeline runs).
    pub fn form(&self) -> ServedForm {
        self.form.get().cloned().unwrap_or_default()
    }

    /// Fails the task before its pipeline starts (bad definition, unloadable dataset).
    pub fn fail(&self, err: Error) {
        if self.pending.swap(false, Ordering::SeqCst) {
            self.buffer.finish(Some(err));
        }
    }

    /// The task is gone: takes see the end and the pipeline stops.
    pub fn close(&self) {
        self.buffer.close();
    }

    /// Runs `dataset` on a new thread, in the caller's span; elements are
    /// served in `form`. `ctx` carries the sources' remote split providers
    /// in distributed_epoch mode.
    pub fn run(&self, dataset: Dataset, ctx: IterContext, form: ServedForm, on_end: EndHook) {
        self.start(Box::new(move || Ok((dataset, ctx))), None, form, on_end);
    }

    /// Builds a pipeline with `build` and runs it, both on a new thread
    /// (building may translate a graph or glob files) and both inside
    /// [`tfdata_dataset::random::with_seed`]`(seed)`: a lane of a
    /// deterministic read, whose unseeded random ops must draw the same
    /// seeds on every worker.
    pub fn run_seeded(&self, build: PipelineBuild, seed: u64, form: ServedForm) {
        self.start(build, Some(seed), form, Box::new(|| false));
    }

    fn start(&self, build: PipelineBuild, seed: Option<u64>, form: ServedForm, on_end: EndHook) {
        if !self.pending.swap(false, Ordering::SeqCst) {
            return;
        }
        let _ = self.form.set(form);
        self.buffer.start_clock();
        let task_id = self.task_id;
        let buffer = Arc::clone(&self.buffer);
        let span = tracing::Span::current();
        let spawned = std::thread::Builder::new()
            .name(format!("tfdata-task-{task_id}"))
            .spawn(move || {
                span.in_scope(|| {
                    tfdata_dataset::random::with_seed_opt(seed, || {
                        produce(task_id, build, &buffer, on_end)
                    })
                })
            });
        if let Err(e) = spawned {
            tracing::error!(task = task_id.0, error = %e, "cannot start task thread");
            self.buffer.finish(Some(Error::Internal(format!(
                "cannot start the pipeline thread of task {task_id}: {e}"
            ))));
        }
    }

    /// How the pipeline has spent its time so far.
    pub fn times(&self) -> PipelineTimes {
        self.buffer.times()
    }

    /// Elements and bytes buffered now.
    pub fn buffered(&self) -> (usize, usize) {
        self.buffer.len_and_bytes()
    }

    /// Drops the next `n` elements: those buffered now, and the rest as the
    /// pipeline skips them (see [`ElementBuffer::skip`]).
    pub fn skip(&self, n: u64) {
        self.buffer.skip(n);
    }

    /// Lets the buffer prefetch up to `elements` for a streaming reader.
    pub fn raise_capacity(&self, elements: usize) {
        self.buffer.raise_capacity(elements);
    }

    /// The error the pipeline failed with, if it did: every call after the
    /// failure gets it again.
    pub fn check(&self) -> Result<()> {
        match lock(&self.failure).as_ref() {
            Some(failure) => Err(Error::Context {
                context: None,
                source: Arc::clone(failure),
            }),
            None => Ok(()),
        }
    }

    /// Keeps `err` for every later call and returns it.
    fn record(&self, err: Error) -> Error {
        let failure = Arc::new(err);
        *lock(&self.failure) = Some(Arc::clone(&failure));
        Error::Context {
            context: None,
            source: failure,
        }
    }

    fn settle(&self, taken: Taken) -> Result<Option<Vec<Element>>> {
        match taken {
            Taken::Elements(elements) => Ok(Some(elements)),
            Taken::Empty => Ok(Some(Vec::new())),
            Taken::End => Ok(None),
            Taken::Failed(e) => Err(self.record(e)),
        }
    }

    /// Up to `max_elements` elements (at least one), the later ones only
    /// while their bytes stay within `max_bytes`, waiting for the first;
    /// `None` at the end, the pipeline's error if it failed. Cancel-safe.
    pub async fn take(
        &self,
        max_elements: usize,
        max_bytes: usize,
    ) -> Result<Option<Vec<Element>>> {
        let taken = self.buffer.take(max_elements, max_bytes).await;
        self.settle(taken)
    }

    /// Like [`take`](Self::take) without waiting: no elements if none is
    /// buffered.
    pub fn try_take(&self, max_elements: usize, max_bytes: usize) -> Result<Option<Vec<Element>>> {
        let taken = self.buffer.try_take(max_elements, max_bytes);
        self.settle(taken)
    }

    /// Whether encoding `element` is worth doing ahead of the request that
    /// will take it: Snappy over a large element of a compressed dataset.
    pub fn is_slow_to_encode(&self, element: &Element) -> bool {
        self.compress() && element.byte_size() >= ENCODE_OFF_RUNTIME_BYTES
    }

    /// `element` in TensorFlow's wire form.
    pub async fn encode(&self, element: Element) -> Result<Payload> {
        // `GetElement` readers record no split names.
        element.lineage.mark_sent();
        let form = self.form();
        let compress = form.compress;
        let large = element.byte_size() >= ENCODE_OFF_RUNTIME_BYTES;
        let encode = move || wire_payload(&element, &form);
        // Cheap encodings stay inline (no compression only clones `Bytes`);
        // Snappy over large elements would hold an RPC thread for milliseconds.
        if !(compress && large) {
            return encode();
        }
        tokio::task::spawn_blocking(encode)
            .await
            .map_err(|e| Error::Internal(format!("encoding an element failed: {e}")))?
    }

    /// One element, encoded, for the strategies that need an infinite
    /// dataset (round robin, cross-trainer cache): `Ok(None)` if none
    /// arrived within `wait` (`None` waits for ever). The end of the data is
    /// an error, kept like a failure.
    pub async fn pull(&self, wait: Option<std::time::Duration>) -> Result<Option<Payload>> {
        let taken = match wait {
            Some(wait) => match tokio::time::timeout(wait, self.take(1, usize::MAX)).await {
                Ok(taken) => taken?,
                Err(_) => return Ok(None),
            },
            None => self.take(1, usize::MAX).await?,
        };
        match taken {
            Some(mut elements) => match elements.pop() {
                Some(e) => self.encode(e).await.map(Some),
                None => Ok(None),
            },
            None => Err(self.record(Error::FailedPrecondition(
                "Encountered end of sequence on a round-robin read or cross-trainer cache iterator. \
                 Please ensure that the dataset has infinite cardinality, e.g. by adding a \
                 .repeat() transformation at the end."
                    .into(),
            ))),
        }
    }
}

/// The pipeline thread. Ends when the dataset ends (dropping the sender is
/// the end-of-sequence signal), on an error (sent first), or when the task
/// is deleted (the receiver is gone). A panic is reported as an error rather
/// than mistaken for the end of the data.
fn produce(task_id: TaskId, build: PipelineBuild, buffer: &ElementBuffer, on_end: EndHook) {
    tracing::info!("task pipeline started");
    let mut produced: u64 = 0;
    // Returning drops the iterator and the context: nothing on this thread
    // calls the split providers any more, so a drain may use them to report
    // what was delivered.
    let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<()> {
        let (dataset, ctx) = build()?;
        let mut it = dataset.iter_with(&ctx)?;
        loop {
            let skip = buffer.take_skip();
            if skip > 0 && it.skip_elements(skip)? < skip {
                return Ok(()); // skipped past the end
            }
            let Some(e) = it.next_element()? else {
                return Ok(());
            };
            if !buffer.push(e) {
                return Ok(()); // task deleted
            }
            produced += 1;
        }
    }));
    let hold = on_end();
    let err = match outcome {
        Ok(Ok(())) if hold => {
            tracing::info!(
                elements = produced,
                "task pipeline stopped taking splits (draining); its last elements wait for readers"
            );
            return;
        }
        Ok(Ok(())) => {
            tracing::info!(elements = produced, "task pipeline finished");
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
    tracing::warn!(task = task_id.0, error = %err, "task pipeline failed");
    buffer.finish(Some(err));
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `element` in TensorFlow's wire form, as `GetElement` sends it.
pub(crate) fn wire_payload(element: &Element, form: &ServedForm) -> Result<Payload> {
    Ok(match (form.compress, form.sparse_variants.is_empty()) {
        (true, true) => Payload::Compressed(element::compress(element)?),
        (true, false) => Payload::Compressed(element::compress_with_variants(
            element,
            &form.sparse_variants,
        )?),
        (false, true) => Payload::Uncompressed(element::to_uncompressed(element)),
        (false, false) => Payload::Uncompressed(element::to_uncompressed_with_variants(
            element,
            &form.sparse_variants,
        )?),
    })
}
