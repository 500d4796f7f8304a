//! The `autoscale` scenario's simulated trainer: one reader of a
//! distributed_epoch job over `range(...).map(sleep(ms))` that "computes"
//! for 1/demand s per element (a sleep: the machine's cores stay free) and
//! counts the time it waits in `next()`. Its demand is changed while it
//! runs. The client reports the waits to the dispatcher itself (the
//! readers' starvation the controller reads); the counts here are the
//! scenario's own measurement of the same thing.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use tfdata::{ProcessingMode, distribute};

/// Elements of the range: more than any run reads (at 1,000 elements/s,
/// 30 years).
const ELEMENTS: i64 = 1 << 40;

struct Shared {
    /// The demand (elements/s) as f64 bits.
    demand: AtomicU64,
    elements: AtomicU64,
    waited_ns: AtomicU64,
    stop: AtomicBool,
    error: Mutex<Option<String>>,
}

pub struct Trainer {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Trainer {
    pub fn start(service: &str, sleep_ms: f64, demand: f64) -> Result<Trainer> {
        let pipeline = tfdata_dataset::json::from_json(&format!(
            r#"{{"op": "map", "function": {{"function": "sleep", "args": {{"ms": {sleep_ms:?}}}}},
                "input": {{"op": "range", "stop": {ELEMENTS}}}}}"#
        ))?;
        let ds = distribute(ProcessingMode::DistributedEpoch, service)
            .job_name("autoscale-trainer")
            .apply(&pipeline.dataset)?;
        let shared = Arc::new(Shared {
            demand: AtomicU64::new(demand.to_bits()),
            elements: AtomicU64::new(0),
            waited_ns: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            error: Mutex::new(None),
        });
        let state = Arc::clone(&shared);
        let thread = std::thread::spawn(move || {
            let fail = |e: String| *state.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            let mut it = match ds.iter() {
                Ok(it) => it,
                Err(e) => return fail(e.to_string()),
            };
            while !state.stop.load(Ordering::Relaxed) {
                let asked = Instant::now();
                match it.next() {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return fail(e.to_string()),
                    None => return fail("the read ended".into()),
                }
                let waited = asked.elapsed();
                state
                    .waited_ns
                    .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
                state.elements.fetch_add(1, Ordering::Relaxed);
                let demand = f64::from_bits(state.demand.load(Ordering::Relaxed));
                std::thread::sleep(Duration::from_secs_f64(1.0 / demand));
            }
        });
        Ok(Trainer {
            shared,
            thread: Some(thread),
        })
    }

    pub fn set_demand(&self, demand: f64) {
        self.shared
            .demand
            .store(demand.to_bits(), Ordering::Relaxed);
    }

    /// Elements taken and seconds waited so far.
    pub fn totals(&self) -> (u64, f64) {
        (
            self.shared.elements.load(Ordering::Relaxed),
            self.shared.waited_ns.load(Ordering::Relaxed) as f64 / 1e9,
        )
    }

    pub fn failed(&self) -> Option<String> {
        self.shared
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn stop(mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Trainer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
