//! A task's element buffer: the pipeline thread pushes decoded elements, RPC
//! handlers take them (one for `GetElement`, many for a stream batch, in one
//! lock). Bounded in elements and in payload bytes: a full buffer blocks the
//! pipeline thread, so a task's memory is its buffer, not its dataset.
//!
//! The element bound starts at the worker's `task_buffer_elements` and grows
//! (up to `task_buffer_max_elements`) to what a streaming reader asks for, so
//! prefetch follows demand; the byte bound (`task_buffer_bytes`) never moves.
//! One element is always admitted into an empty buffer, whatever its size.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tfdata_core::{Element, Error};
use tokio::sync::Notify;

/// What a take found.
pub enum Taken {
    /// At least one element, in order.
    Elements(Vec<Element>),
    /// Nothing buffered (only from non-waiting takes).
    Empty,
    /// The pipeline ended after every element taken so far.
    End,
    /// The pipeline failed after every element taken so far. Delivered once;
    /// later takes see `End`.
    Failed(Error),
}

struct State {
    queue: VecDeque<(Element, usize)>,
    bytes: usize,
    capacity: usize,
    ended: bool,
    error: Option<Error>,
    /// No consumer will take again (the task is gone): the producer stops.
    closed: bool,
    producer_waiting: bool,
    /// Elements the pipeline is to skip before it pushes again (a reader
    /// restored from a checkpoint starts the task further on): the
    /// pipeline thread takes the count and skips them in its iterator.
    skip_pending: u64,
    /// The pipeline's clock (see [`PipelineTimes`]): kept here because the
    /// push path holds this lock anyway; read only when a full buffer
    /// blocks the pipeline, never per element otherwise.
    produced: u64,
    started: Option<Instant>,
    stopped: Option<Instant>,
    full: Duration,
    full_since: Option<Instant>,
}

/// How a task's pipeline has spent its time since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PipelineTimes {
    /// Elements pushed into the buffer.
    pub produced: u64,
    /// Producing: the pipeline's running time less `full`.
    pub busy: Duration,
    /// Blocked on a full buffer (readers slower than the pipeline).
    pub full: Duration,
}

pub struct ElementBuffer {
    state: Mutex<State>,
    /// Set while `State::skip_pending` may be non-zero: the pipeline thread
    /// looks here per element instead of taking the lock.
    skip_asked: AtomicBool,
    readable: Notify,
    writable: Condvar,
    max_capacity: usize,
    max_bytes: usize,
}

impl ElementBuffer {
    pub fn new(capacity: usize, max_capacity: usize, max_bytes: usize) -> Self {
        let capacity = capacity.max(1);
        ElementBuffer {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                bytes: 0,
                capacity,
                ended: false,
                error: None,
                closed: false,
                producer_waiting: false,
                skip_pending: 0,
                produced: 0,
                started: None,
                stopped: None,
                full: Duration::ZERO,
                full_since: None,
            }),
            skip_asked: AtomicBool::new(false),
            readable: Notify::new(),
            writable: Condvar::new(),
            max_capacity: max_capacity.max(capacity),
            max_bytes: max_bytes.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Producer (blocking): appends `element`, waiting for room. `false` once
    /// the buffer is closed: the producer should stop.
    pub fn push(&self, element: Element) -> bool {
        let size = element.byte_size();
        let mut st = self.lock();
        loop {
            if st.closed {
                end_full_wait(&mut st);
                return false;
            }
            let full = st.queue.len() >= st.capacity
                || (!st.queue.is_empty() && st.bytes + size > self.max_bytes);
            if !full {
                break;
            }
            if st.full_since.is_none() {
                st.full_since = Some(Instant::now());
            }
            st.producer_waiting = true;
            st = self.writable.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        end_full_wait(&mut st);
        st.producer_waiting = false;
        if st.skip_pending > 0 {
            // Made before the skip was asked for: it is one of those skipped.
            st.skip_pending -= 1;
            return true;
        }
        st.produced += 1;
        let was_empty = st.queue.is_empty();
        st.queue.push_back((element, size));
        st.bytes += size;
        drop(st);
        // Consumers only wait on an empty buffer.
        if was_empty {
            self.readable.notify_waiters();
        }
        true
    }

    /// Consumers: the next `n` elements are not wanted. Those buffered are
    /// dropped; the rest are left to the pipeline thread
    /// ([`take_skip`](Self::take_skip)), which skips them without sending
    /// them anywhere (sources seek).
    pub fn skip(&self, n: u64) {
        let mut st = self.lock();
        let buffered = st.queue.len().min(usize::try_from(n).unwrap_or(usize::MAX));
        let dropped: usize = st.queue.drain(..buffered).map(|(_, size)| size).sum();
        st.bytes -= dropped;
        st.skip_pending = st.skip_pending.saturating_add(n - buffered as u64);
        self.skip_asked.store(true, Ordering::Release);
        let wake = st.producer_waiting;
        drop(st);
        if wake {
            self.writable.notify_one();
        }
    }

    /// Producer: the elements to skip before the next push (now 0). A
    /// skip asked for while the next element is being made is still
    /// honoured: `push` drops it.
    pub fn take_skip(&self) -> u64 {
        if !self.skip_asked.load(Ordering::Acquire) {
            return 0;
        }
        let mut st = self.lock();
        self.skip_asked.store(false, Ordering::Release);
        std::mem::take(&mut st.skip_pending)
    }

    /// The pipeline starts now (its busy time counts from here).
    pub fn start_clock(&self) {
        let mut st = self.lock();
        st.started.get_or_insert_with(Instant::now);
    }

    /// How the pipeline has spent its time so far.
    pub fn times(&self) -> PipelineTimes {
        let st = self.lock();
        let now = Instant::now();
        let full = st.full + st.full_since.map_or(Duration::ZERO, |s| now - s);
        let end = st.stopped.unwrap_or(now);
        let running = st
            .started
            .map_or(Duration::ZERO, |s| end.saturating_duration_since(s));
        PipelineTimes {
            produced: st.produced,
            busy: running.saturating_sub(full),
            full,
        }
    }

    /// Producer: no more elements; `error` (if any) follows those buffered.
    pub fn finish(&self, error: Option<Error>) {
        let mut st = self.lock();
        if st.stopped.is_none() {
            st.stopped = Some(Instant::now());
        }
        if !st.ended {
            st.ended = true;
            st.error = error;
        }
        drop(st);
        self.readable.notify_waiters();
    }

    /// The task is gone: consumers see the end, the producer stops.
    pub fn close(&self) {
        let mut st = self.lock();
        if st.stopped.is_none() {
            st.stopped = Some(Instant::now());
        }
        st.closed = true;
        st.ended = true;
        st.queue.clear();
        st.bytes = 0;
        drop(st);
        self.writable.notify_all();
        self.readable.notify_waiters();
    }

    /// Lets the buffer hold up to `elements` (clamped to the maximum), so a
    /// reader asking for large batches finds them ready.
    pub fn raise_capacity(&self, elements: usize) {
        let mut st = self.lock();
        let wanted = elements.min(self.max_capacity);
        if wanted > st.capacity {
            st.capacity = wanted;
            let wake = st.producer_waiting;
            drop(st);
            if wake {
                self.writable.notify_one();
            }
        }
    }

    /// Takes up to `max_elements` (at least one if any is buffered) and,
    /// after the first, only while their bytes stay within `max_bytes`.
    /// Never waits.
    pub fn try_take(&self, max_elements: usize, max_bytes: usize) -> Taken {
        let mut st = self.lock();
        if st.queue.is_empty() {
            if !st.ended {
                return Taken::Empty;
            }
            return match st.error.take() {
                Some(e) => Taken::Failed(e),
                None => Taken::End,
            };
        }
        let mut out = Vec::with_capacity(st.queue.len().min(max_elements.max(1)));
        let mut bytes = 0usize;
        while let Some((_, size)) = st.queue.front() {
            if !out.is_empty() && (out.len() >= max_elements || bytes + size > max_bytes) {
                break;
            }
            let Some((e, size)) = st.queue.pop_front() else {
                break;
            };
            bytes += size;
            out.push(e);
        }
        st.bytes -= bytes;
        // Wake the pipeline once the buffer is half drained, not for every
        // element: fewer thread switches, same bound.
        let wake = st.producer_waiting
            && (st.queue.is_empty()
                || (st.queue.len() <= st.capacity / 2 && st.bytes <= self.max_bytes / 2));
        drop(st);
        if wake {
            self.writable.notify_one();
        }
        Taken::Elements(out)
    }

    /// Like [`try_take`](Self::try_take), waiting while the buffer is empty
    /// and the pipeline runs. Cancel-safe: nothing is taken until it returns.
    pub async fn take(&self, max_elements: usize, max_bytes: usize) -> Taken {
        loop {
            let notified = self.readable.notified();
            tokio::pin!(notified);
            // Registered before looking, so a push in between is not missed.
            notified.as_mut().enable();
            match self.try_take(max_elements, max_bytes) {
                Taken::Empty => notified.await,
                taken => return taken,
            }
        }
    }

    /// Elements and bytes buffered now.
    pub fn len_and_bytes(&self) -> (usize, usize) {
        let st = self.lock();
        (st.queue.len(), st.bytes)
    }
}

/// Ends a blocked push's wait, adding it to the full time.
fn end_full_wait(st: &mut State) {
    if let Some(since) = st.full_since.take() {
        st.full += since.elapsed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tfdata_core::Tensor;

    fn element(bytes: usize) -> Element {
        Element::single(Tensor::from_slice(&vec![0u8; bytes], vec![bytes as i64]).unwrap())
    }

    fn scalar(v: i64) -> Element {
        Element::single(Tensor::scalar(v))
    }

    fn values(taken: Taken) -> Vec<i64> {
        match taken {
            Taken::Elements(v) => v
                .iter()
                .map(|e| e.components[0].to_scalar::<i64>().unwrap())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A skip drops what is buffered first; the pipeline thread is handed
    /// the rest, and an element it pushes meanwhile is dropped as one of
    /// them.
    #[test]
    fn skips_drop_buffered_elements_then_hand_the_rest_to_the_pipeline() {
        let buffer = ElementBuffer::new(8, 8, usize::MAX);
        for v in 0..5 {
            assert!(buffer.push(scalar(v)));
        }
        assert_eq!(buffer.take_skip(), 0);
        buffer.skip(3);
        assert_eq!(buffer.take_skip(), 0);
        assert_eq!(values(buffer.try_take(10, usize::MAX)), vec![3, 4]);
        buffer.skip(4);
        // Made before the pipeline looked: dropped as the first skipped.
        assert!(buffer.push(scalar(5)));
        assert_eq!(buffer.take_skip(), 3);
        assert_eq!(buffer.take_skip(), 0);
        assert!(buffer.push(scalar(9)));
        assert_eq!(values(buffer.try_take(10, usize::MAX)), vec![9]);
        assert_eq!(buffer.len_and_bytes(), (0, 0));
    }

    #[tokio::test]
    async fn bounded_in_elements_and_bytes() {
        let buffer = Arc::new(ElementBuffer::new(4, 4, 2500));
        let producer = {
            let buffer = Arc::clone(&buffer);
            std::thread::spawn(move || {
                for _ in 0..10 {
                    assert!(buffer.push(element(1000)));
                }
                buffer.finish(None);
            })
        };
        let mut got = 0;
        loop {
            match buffer.take(100, usize::MAX).await {
                Taken::Elements(v) => {
                    // Two fit in 2500 bytes; a third would not.
                    assert!(v.len() <= 2, "{}", v.len());
                    got += v.len();
                }
                Taken::End => break,
                Taken::Empty | Taken::Failed(_) => unreachable!(),
            }
            let (_, bytes) = buffer.len_and_bytes();
            assert!(bytes <= 2500);
        }
        assert_eq!(got, 10);
        producer.join().unwrap();
    }

    #[tokio::test]
    async fn an_oversized_element_still_passes_and_errors_follow_elements() {
        let buffer = ElementBuffer::new(1, 1, 10);
        assert!(buffer.push(element(100)));
        buffer.finish(Some(Error::Internal("boom".into())));
        assert!(matches!(buffer.try_take(1, 1), Taken::Elements(v) if v.len() == 1));
        assert!(matches!(buffer.try_take(1, 1), Taken::Failed(_)));
        assert!(matches!(buffer.try_take(1, 1), Taken::End));
    }

    #[test]
    fn closing_stops_the_producer() {
        let buffer = Arc::new(ElementBuffer::new(1, 1, 1 << 20));
        assert!(buffer.push(element(1)));
        let producer = {
            let buffer = Arc::clone(&buffer);
            std::thread::spawn(move || buffer.push(element(1)))
        };
        buffer.close();
        assert!(!producer.join().unwrap());
        assert!(matches!(buffer.try_take(1, 1), Taken::End));
    }

    #[test]
    fn capacity_grows_to_demand_within_the_maximum() {
        let buffer = ElementBuffer::new(2, 5, 1 << 20);
        buffer.raise_capacity(100);
        for _ in 0..5 {
            assert!(buffer.push(element(1)));
        }
        assert_eq!(buffer.len_and_bytes().0, 5);
        assert!(matches!(buffer.try_take(3, usize::MAX), Taken::Elements(v) if v.len() == 3));
    }

    #[test]
    fn a_blocked_pipeline_counts_full_time_not_busy_time() {
        let buffer = Arc::new(ElementBuffer::new(1, 1, 1 << 20));
        buffer.start_clock();
        assert!(buffer.push(element(1)));
        let producer = {
            let buffer = Arc::clone(&buffer);
            std::thread::spawn(move || buffer.push(element(1)))
        };
        // The second push blocks until a take makes room.
        while buffer.times().full.is_zero() {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(50));
        assert!(matches!(buffer.try_take(1, usize::MAX), Taken::Elements(_)));
        assert!(producer.join().unwrap());
        buffer.finish(None);
        let t = buffer.times();
        assert_eq!(t.produced, 2);
        assert!(t.full >= Duration::from_millis(50), "{t:?}");
        // The clock stopped with the pipeline.
        assert_eq!(buffer.times(), t);
    }
}
