//! The queue between a stream writer's two threads: elements on their way
//! from the pipeline to the chunk writer, bounded in bytes, carrying the
//! input's end (or its error) after its elements.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

use tfdata_core::{Element, Error, Result};
use tfdata_dataset::ElementIterator;

/// Elements on their way from the pipeline to the chunk writer, at most
/// `budget` bytes of them (and always room for one).
pub(super) struct WriteAhead {
    budget: u64,
    state: Mutex<QueueState>,
    changed: Condvar,
}

#[derive(Default)]
struct QueueState {
    elements: VecDeque<Element>,
    bytes: u64,
    /// The input ended (with this error, if any).
    ended: Option<Option<Error>>,
    /// The writer is gone: pushes are refused.
    closed: bool,
}

impl WriteAhead {
    pub(super) fn new(budget: u64) -> Self {
        WriteAhead {
            budget,
            state: Mutex::new(QueueState::default()),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `element` once there is room; false if the writer is gone.
    pub(super) fn push(&self, element: Element) -> bool {
        let size = element.byte_size() as u64;
        let mut state = self.lock();
        while !state.closed
            && !state.elements.is_empty()
            && state.bytes.saturating_add(size) > self.budget
        {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        if state.closed {
            return false;
        }
        state.bytes += size;
        state.elements.push_back(element);
        self.changed.notify_all();
        true
    }

    /// No more elements: the input ended, or failed with `error`.
    pub(super) fn end(&self, error: Option<Error>) {
        self.lock().ended = Some(error);
        self.changed.notify_all();
    }

    /// The writer is done (finished or failed): wakes and refuses pushes,
    /// drops what is queued.
    pub(super) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.elements.clear();
        state.bytes = 0;
        self.changed.notify_all();
    }

    fn pop(&self) -> Result<Option<Element>> {
        let mut state = self.lock();
        loop {
            if let Some(element) = state.elements.pop_front() {
                state.bytes -= element.byte_size() as u64;
                self.changed.notify_all();
                return Ok(Some(element));
            }
            if let Some(ended) = state.ended.as_mut() {
                return match ended.take() {
                    Some(e) => Err(e),
                    None => Ok(None),
                };
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The writer's end of a [`WriteAhead`], as an iterator.
pub(super) struct QueueReader<'a>(pub(super) &'a WriteAhead);

impl ElementIterator for QueueReader<'_> {
    fn next_element(&mut self) -> Result<Option<Element>> {
        self.0.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use tfdata_core::Tensor;

    #[test]
    fn the_write_ahead_queue_is_bounded_and_ends_as_its_input() {
        let e = |v: i64| Element::new(vec![Tensor::scalar(v)]);
        let queue = Arc::new(WriteAhead::new(16));
        assert!(queue.push(e(0)) && queue.push(e(1)));
        // Full (two 8-byte elements): the third waits for a pop.
        let pushed = Arc::new(AtomicUsize::new(0));
        let producer = {
            let (queue, pushed) = (Arc::clone(&queue), Arc::clone(&pushed));
            std::thread::spawn(move || {
                assert!(queue.push(e(2)));
                pushed.store(1, Ordering::SeqCst);
                queue.end(Some(Error::InvalidArgument("boom".into())));
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(pushed.load(Ordering::SeqCst), 0);
        let mut reader = QueueReader(&queue);
        for v in 0..3 {
            assert_eq!(reader.next_element().unwrap(), Some(e(v)));
        }
        producer.join().unwrap();
        // The input's error comes after its elements, once.
        let err = reader.next_element().unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
        assert_eq!(reader.next_element().unwrap(), None);
        // One element larger than the budget still passes, alone.
        let queue = WriteAhead::new(4);
        assert!(queue.push(e(7)));
        // A closed queue (the writer is gone) refuses pushes at once.
        queue.close();
        assert!(!queue.push(e(8)));
    }
}
