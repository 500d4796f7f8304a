//! Running a function over an input iterator on several threads, with a
//! bounded number of elements in flight and, when deterministic, output in
//! input order. `map(num_parallel_calls=...)` and parallel `interleave`
//! are built on it.
//!
//! Threads take a ticket before taking an input element; the consumer
//! returns the ticket when it hands the result on. So at most `capacity`
//! elements are being computed or waiting in the reorder buffer, however
//! uneven the work is.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, Mutex};

use tfdata_core::{Element, Error, Result};

use crate::iterators::ElementIterator;

type Work = Arc<dyn Fn(Element) -> Result<Element> + Send + Sync>;

/// Threads used for `num_parallel_calls = AUTOTUNE` (−1).
pub fn autotune_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Threads one parallel stage runs at most, whatever `num_parallel_calls`
/// asks: a pipeline from the network must not be able to make a worker
/// spawn threads until the system refuses (or overflow `threads * 2`).
pub const MAX_PARALLEL_CALLS: usize = 256;

/// The number of threads for a `num_parallel_calls` value.
pub fn threads_for(num_parallel_calls: i64) -> usize {
    if num_parallel_calls < 0 {
        autotune_threads().min(MAX_PARALLEL_CALLS)
    } else {
        usize::try_from(num_parallel_calls)
            .unwrap_or(MAX_PARALLEL_CALLS)
            .clamp(1, MAX_PARALLEL_CALLS)
    }
}

struct Shared {
    input: Mutex<InputState>,
    stop: AtomicBool,
}

struct InputState {
    iter: Box<dyn ElementIterator>,
    next_seq: u64,
    done: bool,
}

enum Msg {
    Item(u64, Result<Element>),
    /// The input ended (or failed) before sequence number `seq`.
    End(u64),
}

pub struct ParallelMap {
    shared: Arc<Shared>,
    results: Receiver<Msg>,
    tickets: SyncSender<()>,
    deterministic: bool,
    reorder: BTreeMap<u64, Result<Element>>,
    next_out: u64,
    end: Option<u64>,
    finished: bool,
}

impl ParallelMap {
    pub fn new(
        input: Box<dyn ElementIterator>,
        work: Work,
        threads: usize,
        deterministic: bool,
        name: &str,
    ) -> Result<Self> {
        let threads = threads.max(1);
        let capacity = threads * 2;
        let shared = Arc::new(Shared {
            input: Mutex::new(InputState {
                iter: input,
                next_seq: 0,
                done: false,
            }),
            stop: AtomicBool::new(false),
        });
        let (ticket_tx, ticket_rx) = sync_channel::<()>(capacity);
        for _ in 0..capacity {
            ticket_tx
                .try_send(())
                .map_err(|_| Error::Internal("ticket channel full at start".into()))?;
        }
        let ticket_rx = Arc::new(Mutex::new(ticket_rx));
        let (result_tx, results) = channel();
        for i in 0..threads {
            let shared = Arc::clone(&shared);
            let tickets = Arc::clone(&ticket_rx);
            let results: Sender<Msg> = result_tx.clone();
            let work = Arc::clone(&work);
            std::thread::Builder::new()
                .name(format!("tfdata-{name}-{i}"))
                .spawn(move || worker(shared, tickets, results, work))
                .map_err(|e| Error::Internal(format!("cannot start {name} thread: {e}")))?;
        }
        Ok(ParallelMap {
            shared,
            results,
            tickets: ticket_tx,
            deterministic,
            reorder: BTreeMap::new(),
            next_out: 0,
            end: None,
            finished: false,
        })
    }
}

fn worker(
    shared: Arc<Shared>,
    tickets: Arc<Mutex<Receiver<()>>>,
    results: Sender<Msg>,
    work: Work,
) {
    loop {
        // Wait for a ticket; the consumer going away closes the channel.
        let ticket = tickets.lock().unwrap_or_else(|p| p.into_inner()).recv();
        if ticket.is_err() || shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let (seq, next) = {
            let mut input = shared.input.lock().unwrap_or_else(|p| p.into_inner());
            if input.done {
                return;
            }
            let seq = input.next_seq;
            let next = input.iter.next_element();
            match &next {
                Ok(Some(_)) => input.next_seq += 1,
                Ok(None) => input.done = true,
                Err(_) => {
                    input.done = true;
                    input.next_seq += 1;
                }
            }
            (seq, next)
        };
        let msg = match next {
            Ok(Some(element)) => Msg::Item(seq, work(element)),
            Ok(None) => Msg::End(seq),
            Err(e) => {
                let _ = results.send(Msg::Item(seq, Err(e)));
                Msg::End(seq + 1)
            }
        };
        let end = matches!(msg, Msg::End(_));
        if results.send(msg).is_err() || end {
            return;
        }
    }
}

impl ElementIterator for ParallelMap {
    fn next_element(&mut self) -> Result<Option<Element>> {
        if self.finished {
            return Ok(None);
        }
        loop {
            if self.deterministic {
                if let Some(result) = self.reorder.remove(&self.next_out) {
                    self.next_out += 1;
                    let _ = self.tickets.try_send(());
                    return self.emit(result);
                }
            } else if let Some((&seq, _)) = self.reorder.iter().next() {
                let result = self
                    .reorder
                    .remove(&seq)
                    .unwrap_or_else(|| Ok(Element::default()));
                self.next_out += 1;
                let _ = self.tickets.try_send(());
                return self.emit(result);
            }
            if self.end.is_some_and(|end| self.next_out >= end) {
                self.finished = true;
                return Ok(None);
            }
            match self.results.recv() {
                Ok(Msg::Item(seq, result)) => {
                    self.reorder.insert(seq, result);
                }
                Ok(Msg::End(seq)) => {
                    self.end = Some(self.end.map_or(seq, |e| e.min(seq)));
                }
                Err(_) => {
                    // Every thread is gone: nothing more will come.
                    self.finished = true;
                    return match self.end {
                        Some(end) if self.next_out >= end => Ok(None),
                        _ => Err(Error::Internal(
                            "parallel map threads ended unexpectedly".into(),
                        )),
                    };
                }
            }
        }
    }
}

impl ParallelMap {
    /// One element's result. A function's error is that element's, as in
    /// TensorFlow: the next call goes on with the next element (what
    /// `ignore_errors` after a parallel `map` relies on). An input's error
    /// ends the input (its `End` follows it), so the calls after it end.
    fn emit(&mut self, result: Result<Element>) -> Result<Option<Element>> {
        result.map(Some)
    }
}

impl Drop for ParallelMap {
    fn drop(&mut self) {
        // Threads see the flag (or the closed ticket channel) and exit.
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

/// Most elements a [`Prefetcher`] buffers, whatever `prefetch`'s
/// `buffer_size` asks: its channel allocates every slot up front, and a
/// pipeline from the network may ask for 2^60. The buffer is a bound in
/// TensorFlow too, so holding fewer only prefetches less far ahead.
pub const MAX_PREFETCH_ELEMENTS: usize = 1 << 14;

/// Runs an iterator ahead on its own thread, buffering up to `capacity`
/// elements (`prefetch`), at most [`MAX_PREFETCH_ELEMENTS`].
pub struct Prefetcher {
    rx: Receiver<Result<Option<Element>>>,
    stop: Arc<AtomicBool>,
    finished: bool,
}

impl Prefetcher {
    pub fn new(mut input: Box<dyn ElementIterator>, capacity: usize, name: &str) -> Result<Self> {
        let (tx, rx) = sync_channel(capacity.clamp(1, MAX_PREFETCH_ELEMENTS));
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = Arc::clone(&stop);
        // The input runs here in order, so its unseeded draws can follow
        // the creator's seed scope (see `crate::random`).
        let seed = crate::random::fork();
        std::thread::Builder::new()
            .name(format!("tfdata-{name}"))
            .spawn(move || {
                crate::random::with_seed_opt(seed, || {
                    loop {
                        if stop_flag.load(Ordering::SeqCst) {
                            return;
                        }
                        // An error goes ahead like an element, and the
                        // input goes on after it, as TensorFlow's prefetch
                        // does (`ignore_errors` downstream skips it); the
                        // channel bounds how far ahead.
                        let next = input.next_element();
                        let last = matches!(next, Ok(None));
                        if tx.send(next).is_err() || last {
                            return;
                        }
                    }
                })
            })
            .map_err(|e| Error::Internal(format!("cannot start {name} thread: {e}")))?;
        Ok(Prefetcher {
            rx,
            stop,
            finished: false,
        })
    }
}

impl ElementIterator for Prefetcher {
    fn next_element(&mut self) -> Result<Option<Element>> {
        if self.finished {
            return Ok(None);
        }
        match self.rx.recv() {
            Ok(Ok(Some(e))) => Ok(Some(e)),
            Ok(Err(e)) => Err(e),
            Ok(Ok(None)) => {
                self.finished = true;
                Ok(None)
            }
            Err(_) => {
                self.finished = true;
                Err(Error::Internal("prefetch thread ended unexpectedly".into()))
            }
        }
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn num_parallel_calls_is_bounded() {
        assert_eq!(super::threads_for(0), 1);
        assert_eq!(super::threads_for(3), 3);
        assert_eq!(super::threads_for(1 << 40), super::MAX_PARALLEL_CALLS);
        assert_eq!(super::threads_for(i64::MAX), super::MAX_PARALLEL_CALLS);
        assert!(super::threads_for(-1) <= super::MAX_PARALLEL_CALLS);
    }
}
