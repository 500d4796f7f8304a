//! A `FIFOQueueV2` resource (the data; its ops are `kernels::readers`, its
//! handle a `Value::Queue`): tuples of tensors in arrival order, closed
//! once and then drained.
//!
//! The legacy readers take their work items (file names) from such a
//! queue, so it exists for them: a function makes a queue, enqueues names,
//! closes it and reads. TensorFlow's queue blocks a dequeue from an open,
//! empty queue (and an enqueue into a full one) until another thread acts;
//! a function call here has no other thread, so such a call would wait
//! forever: it is an error instead of a hang.

use std::collections::VecDeque;
use std::sync::Mutex;

use tfdata_core::{DType, Error, Result, Tensor};

/// Tuples one queue may hold, whatever its capacity says (bounded memory).
pub const MAX_QUEUE_ELEMENTS: usize = 1 << 20;

/// TensorFlow's out-of-range status (the code a closed, drained queue
/// answers with), carried as a status with that code.
pub fn out_of_range(message: String) -> Error {
    Error::Remote {
        code: tonic::Code::OutOfRange,
        message,
    }
}

#[derive(Debug)]
pub struct FifoQueue {
    /// What errors call it: TensorFlow's "FIFOQueue '<name>'".
    name: String,
    capacity: Option<usize>,
    /// The components' dtypes, and their shapes when the queue declares
    /// them (empty when it does not; `-1` is a dimension of any size).
    types: Vec<DType>,
    shapes: Vec<Vec<i64>>,
    state: Mutex<QueueState>,
}

#[derive(Debug, Default)]
struct QueueState {
    tuples: VecDeque<Vec<Tensor>>,
    closed: bool,
}

impl FifoQueue {
    /// A queue; `capacity` `None` is unbounded (TensorFlow's `-1`).
    pub fn new(
        name: &str,
        capacity: Option<usize>,
        types: Vec<DType>,
        shapes: Vec<Vec<i64>>,
    ) -> FifoQueue {
        FifoQueue {
            name: format!("FIFOQueue '{name}'"),
            capacity,
            types,
            shapes,
            state: Mutex::new(QueueState::default()),
        }
    }

    pub fn types(&self) -> &[DType] {
        &self.types
    }

    pub fn shapes(&self) -> &[Vec<i64>] {
        &self.shapes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        // A panic elsewhere leaves the queue's data whole: keep using it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn size(&self) -> usize {
        self.lock().tuples.len()
    }

    pub fn close(&self) {
        self.lock().closed = true;
    }

    /// Appends tuples (all or none), refusing a closed queue as TensorFlow
    /// does (`Cancelled`).
    pub fn enqueue(&self, tuples: Vec<Vec<Tensor>>) -> Result<()> {
        let mut s = self.lock();
        if s.closed {
            return Err(Error::Cancelled(format!("{} is closed.", self.name)));
        }
        let after = s.tuples.len().saturating_add(tuples.len());
        if self.capacity.is_some_and(|c| after > c) {
            return Err(Error::InvalidArgument(format!(
                "{}: enqueueing {} elements would exceed its capacity of {}, and nothing in \
                 this function call can dequeue to make room (TensorFlow would wait forever)",
                self.name,
                tuples.len(),
                self.capacity.unwrap_or_default()
            )));
        }
        if after > MAX_QUEUE_ELEMENTS {
            return Err(Error::InvalidArgument(format!(
                "{}: more than {MAX_QUEUE_ELEMENTS} elements",
                self.name
            )));
        }
        s.tuples.extend(tuples);
        Ok(())
    }

    /// The oldest tuple; a closed, empty queue is TensorFlow's out-of-range
    /// error.
    pub fn dequeue(&self) -> Result<Vec<Tensor>> {
        let mut s = self.lock();
        if let Some(t) = s.tuples.pop_front() {
            return Ok(t);
        }
        if s.closed {
            return Err(out_of_range(format!(
                "{} is closed and has insufficient elements (requested 1, current size 0)",
                self.name
            )));
        }
        Err(Error::InvalidArgument(format!(
            "{} is empty and open, and nothing in this function call can enqueue (TensorFlow \
             would wait forever)",
            self.name
        )))
    }
}
