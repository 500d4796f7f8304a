//! The reader's metrics, declared in one place (docs/operations.md lists
//! them). Readers live in the trainer's process, which has no server of
//! ours to scrape: the registry is process-wide, and the embedding process
//! serves [`encode`]'s text itself (Python: `tfdata.reader_metrics()`).
//!
//! Each iterator also keeps its own figures ([`ReaderStats`]): the time its
//! trainer waited in `next()` against its lifetime since the first `next()`
//! (TensorFlow's `iterator_busy` / `iterator_lifetime`: the fraction of
//! time the trainer is starved) and the elements it consumed. Its
//! heartbeats carry them to the dispatcher, which shows each reader's
//! starvation and estimates demand from them.
//!
//! Cost on the element path: a `next()` served from an already received
//! batch adds one relaxed atomic increment of its iterator's own counter
//! and a local count; only a `next()` that has to wait reads the clock.
//! Process totals are summed from the iterators when scraped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram as SizeHistogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tfdata_proto::data::TfdataReaderStats;
use tfdata_rpc::metrics::{Histogram, monotonic_nanos};

/// How elements arrived: tfdata's element stream or `GetElement`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransferLabel {
    transfer: &'static str,
}

type Seconds = Counter<f64, AtomicU64>;

/// The worker serving a lane a deterministic read waited on.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabel {
    worker: String,
}

/// Elements and bytes received through one transfer.
#[derive(Debug, Clone, Default)]
pub(crate) struct Received {
    elements: Counter,
    bytes: Counter,
}

#[derive(Debug)]
struct ReaderMetrics {
    registry: Registry,
    iterators: Gauge,
    wait: Seconds,
    lifetime: Seconds,
    consumed: Counter,
    stream: Received,
    get_element: Received,
    next_duration: Histogram,
    /// distributed_epoch: one lost task's receipts as sent to the
    /// dispatcher, encoded bytes and entries (ranges, pieces, names).
    receipt_report_bytes: SizeHistogram,
    receipt_report_entries: SizeHistogram,
    /// Deterministic reads: time the ordered merge waited on a lane while
    /// other lanes held elements, by the lane's worker; and the elements
    /// in the reorder windows now.
    reorder_wait: Family<WorkerLabel, Seconds>,
    reorder_window: Gauge,
    /// Live iterators' figures, for the totals at scrape time.
    live: Mutex<Vec<Weak<ReaderStats>>>,
    /// Figures of iterators gone.
    retired: Mutex<Retired>,
}

/// What iterators that are gone add to the totals.
#[derive(Debug, Default, Clone, Copy)]
struct Retired {
    wait_nanos: u64,
    lifetime_nanos: u64,
    elements: u64,
}

static METRICS: LazyLock<ReaderMetrics> = LazyLock::new(ReaderMetrics::new);

impl ReaderMetrics {
    fn new() -> Self {
        let received_elements = Family::<TransferLabel, Counter>::default();
        let received_bytes = Family::<TransferLabel, Counter>::default();
        let received = |transfer| {
            let label = TransferLabel { transfer };
            Received {
                elements: received_elements.get_or_create(&label).clone(),
                bytes: received_bytes.get_or_create(&label).clone(),
            }
        };
        let mut m = ReaderMetrics {
            registry: Registry::default(),
            iterators: Gauge::default(),
            wait: Seconds::default(),
            lifetime: Seconds::default(),
            consumed: Counter::default(),
            stream: received("stream"),
            get_element: received("get_element"),
            next_duration: Histogram::default(),
            // 64 B to 16 MiB, and 1 to 4^10 entries.
            receipt_report_bytes: SizeHistogram::new(exponential_buckets(64.0, 4.0, 10)),
            receipt_report_entries: SizeHistogram::new(exponential_buckets(1.0, 4.0, 11)),
            reorder_wait: Family::default(),
            reorder_window: Gauge::default(),
            live: Mutex::default(),
            retired: Mutex::default(),
        };
        // prometheus-client appends `_total` to counter names itself.
        let r = &mut m.registry;
        r.register(
            "tfdata_reader_iterators",
            "Iterators over tf.data service datasets open in this process",
            m.iterators.clone(),
        );
        r.register(
            "tfdata_reader_wait_seconds",
            "Time the trainer waited in next() for an element (TensorFlow's iterator_busy), summed over iterators",
            m.wait.clone(),
        );
        r.register(
            "tfdata_reader_lifetime_seconds",
            "Iterators' time since their first next() (TensorFlow's iterator_lifetime), summed; rate(wait) / rate(lifetime) is the fraction of time the trainer is starved",
            m.lifetime.clone(),
        );
        r.register(
            "tfdata_reader_consumed_elements",
            "Elements next() returned to the trainer",
            m.consumed.clone(),
        );
        r.register(
            "tfdata_reader_received_elements",
            "Elements received from workers, by transfer (stream: tfdata's element stream; get_element: GetElement)",
            received_elements,
        );
        r.register(
            "tfdata_reader_received_bytes",
            "Bytes of element messages received from workers, by transfer",
            received_bytes,
        );
        r.register(
            "tfdata_reader_next_duration_seconds",
            "Time one next() took (a call served from an already received batch counts as 0)",
            m.next_duration.clone(),
        );
        r.register(
            "tfdata_reader_receipt_report_bytes",
            "distributed_epoch: encoded size of one lost task's receipts as a reader sent them to the dispatcher (what it received of the task's splits)",
            m.receipt_report_bytes.clone(),
        );
        r.register(
            "tfdata_reader_receipt_report_entries",
            "distributed_epoch: entries (ranges of whole splits, splits received in part) of one lost task's receipts report",
            m.receipt_report_entries.clone(),
        );
        r.register(
            "tfdata_reader_reorder_wait_seconds",
            "Deterministic reads: time the ordered merge waited for a lane's next element while other lanes held elements, by the worker serving the lane (a slow worker shows here)",
            m.reorder_wait.clone(),
        );
        r.register(
            "tfdata_reader_reorder_window_elements",
            "Deterministic reads: elements received ahead of the merge point, in this process's reorder windows",
            m.reorder_window.clone(),
        );
        m
    }
}

/// A deterministic read's merge waited `waited` on a lane of `worker`.
pub(crate) fn reorder_waited(worker: &str, waited: Duration) {
    METRICS
        .reorder_wait
        .get_or_create(&WorkerLabel {
            worker: worker.to_string(),
        })
        .inc_by(waited.as_secs_f64());
}

/// A reorder window's fill changed by `delta` elements.
pub(crate) fn reorder_window_changed(delta: i64) {
    if delta != 0 {
        METRICS.reorder_window.inc_by(delta);
    }
}

/// This process's reader metrics as OpenMetrics text. The totals over
/// iterators (wait, lifetime, consumed elements) are summed here, from each
/// iterator's own figures, so `next()` touches nothing shared.
pub fn encode() -> String {
    let m = &*METRICS;
    // One scrape at a time: the totals only ever move up.
    let mut live = lock(&m.live);
    let mut total = *lock(&m.retired);
    let mut open = 0;
    live.retain(|weak| match weak.upgrade() {
        Some(stats) => {
            let s = stats.snapshot_nanos();
            total.wait_nanos += s.wait;
            total.lifetime_nanos += s.lifetime;
            total.elements += stats.elements.load(Ordering::Relaxed);
            open += 1;
            true
        }
        None => false,
    });
    m.iterators.set(open);
    catch_up(&m.wait, total.wait_nanos as f64 / 1e9);
    catch_up(&m.lifetime, total.lifetime_nanos as f64 / 1e9);
    let behind = total.elements.saturating_sub(m.consumed.get());
    m.consumed.inc_by(behind);
    drop(live);
    tfdata_rpc::metrics::encode(&m.registry)
}

fn catch_up(counter: &Seconds, total: f64) {
    let behind = total - counter.get();
    if behind > 0.0 {
        counter.inc_by(behind);
    }
}

/// Receipts reports the dispatcher accepted, one per lost task.
pub(crate) fn receipts_reported(reports: &[tfdata_proto::data::TfdataTaskReceipts]) {
    for r in reports {
        let entries = r.ranges.len() + r.pieces.len() + r.splits.len();
        METRICS
            .receipt_report_bytes
            .observe(prost::Message::encoded_len(r) as f64);
        METRICS.receipt_report_entries.observe(entries as f64);
    }
}

/// Where fetchers count what they receive.
pub(crate) fn received(stream: bool) -> &'static Received {
    if stream {
        &METRICS.stream
    } else {
        &METRICS.get_element
    }
}

impl Received {
    pub(crate) fn add(&self, stats: &ReaderStats, elements: u64, bytes: u64) {
        self.elements.inc_by(elements);
        self.bytes.inc_by(bytes);
        stats.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// One iterator's figures, shared by the reader (which waits and consumes)
/// and its driver (which heartbeats). Times are `monotonic_nanos() + 1`,
/// 0 meaning unset.
#[derive(Debug, Default)]
pub(crate) struct ReaderStats {
    elements: AtomicU64,
    bytes: AtomicU64,
    wait_nanos: AtomicU64,
    waiting_since: AtomicU64,
    first_next: AtomicU64,
    ended: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Nanos {
    wait: u64,
    lifetime: u64,
}

impl ReaderStats {
    /// A new iterator's figures, counted in the process's metrics.
    pub(crate) fn new() -> Arc<Self> {
        let stats = Arc::new(ReaderStats::default());
        lock(&METRICS.live).push(Arc::downgrade(&stats));
        stats
    }

    fn snapshot_nanos(&self) -> Nanos {
        let now = monotonic_nanos() + 1;
        let first = self.first_next.load(Ordering::Relaxed);
        if first == 0 {
            return Nanos::default();
        }
        let end = match self.ended.load(Ordering::Relaxed) {
            0 => now,
            ended => ended,
        };
        let waiting = match self.waiting_since.load(Ordering::Relaxed) {
            0 => 0,
            since => end.saturating_sub(since),
        };
        Nanos {
            wait: self.wait_nanos.load(Ordering::Relaxed) + waiting,
            lifetime: end.saturating_sub(first),
        }
    }

    /// The cumulative figures a heartbeat carries.
    pub(crate) fn snapshot(&self) -> TfdataReaderStats {
        let n = self.snapshot_nanos();
        TfdataReaderStats {
            elements_consumed: self.elements.load(Ordering::Relaxed),
            wait_seconds: n.wait as f64 / 1e9,
            lifetime_seconds: n.lifetime as f64 / 1e9,
            bytes_received: self.bytes.load(Ordering::Relaxed),
        }
    }
}

/// Instant `next()` calls an iterator counts before it adds them to the
/// shared histogram (one atomic update per this many calls).
pub(crate) const INSTANT_CALLS_FLUSH: u64 = 64;

/// Times an iterator's `next()` calls (owned by the iterator).
#[derive(Debug)]
pub(crate) struct NextClock {
    stats: Arc<ReaderStats>,
    waiting: Option<Instant>,
    /// `next()` calls served from a received batch since the last wait,
    /// added to the histogram as zeros in one go.
    instant_calls: u64,
}

impl NextClock {
    pub(crate) fn new(stats: Arc<ReaderStats>) -> Self {
        NextClock {
            stats,
            waiting: None,
            instant_calls: 0,
        }
    }

    /// A `next()` answered at once from what was already received.
    pub(crate) fn served_at_once(&mut self) {
        self.instant_calls += 1;
        self.stats.elements.fetch_add(1, Ordering::Relaxed);
        // A reader that never waits would otherwise add nothing until it
        // waits or ends: a scrape lags at most this many calls.
        if self.instant_calls >= INSTANT_CALLS_FLUSH {
            self.flush();
        }
    }

    /// A `next()` found nothing received: the trainer waits from now (or
    /// goes on waiting, if an earlier call found nothing either).
    pub(crate) fn wait_begins(&mut self) {
        if self.waiting.is_some() {
            return;
        }
        self.waiting = Some(Instant::now());
        let now = monotonic_nanos() + 1;
        let _ =
            self.stats
                .first_next
                .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        self.stats.waiting_since.store(now, Ordering::Relaxed);
    }

    /// The wait ended with an element (`true`) or the end of the data.
    pub(crate) fn wait_ends(&mut self, element: bool) {
        let Some(since) = self.waiting.take() else {
            return;
        };
        let waited = since.elapsed();
        self.stats.waiting_since.store(0, Ordering::Relaxed);
        let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.stats.wait_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.flush();
        METRICS.next_duration.observe(waited);
        if element {
            self.stats.elements.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn flush(&mut self) {
        let calls = std::mem::take(&mut self.instant_calls);
        METRICS.next_duration.observe_many(Duration::ZERO, calls);
    }
}

impl Drop for NextClock {
    /// The iterator is gone: its figures join the process's totals.
    fn drop(&mut self) {
        self.wait_ends(false);
        self.flush();
        let end = monotonic_nanos() + 1;
        let _ = self
            .stats
            .ended
            .compare_exchange(0, end, Ordering::Relaxed, Ordering::Relaxed);
        let n = self.stats.snapshot_nanos();
        // Under the live list's lock, so a scrape sees it once: live or retired.
        let mut live = lock(&METRICS.live);
        let mut retired = lock(&METRICS.retired);
        retired.wait_nanos += n.wait;
        retired.lifetime_nanos += n.lifetime;
        retired.elements += self.stats.elements.load(Ordering::Relaxed);
        drop(retired);
        let me = Arc::as_ptr(&self.stats);
        live.retain(|w| !std::ptr::eq(w.as_ptr(), me));
    }
}

/// The reader's side of `target_processing_time_nsec`: the trainer's time
/// per element outside `next()`, over the interval since the last
/// heartbeat (at least [`MIN_WINDOW`] long).
#[derive(Debug, Default)]
pub(crate) struct TargetTime {
    last: Option<TfdataReaderStats>,
    nanos: f64,
}

const MIN_WINDOW: f64 = 0.5;

impl TargetTime {
    /// The figures for a heartbeat now: `(target_processing_time_nsec,
    /// tfdata_stats)`.
    pub(crate) fn heartbeat(&mut self, stats: &ReaderStats) -> (f64, TfdataReaderStats) {
        let now = stats.snapshot();
        match self.last {
            Some(last) if now.lifetime_seconds - last.lifetime_seconds >= MIN_WINDOW => {
                let elements = now.elements_consumed.saturating_sub(last.elements_consumed);
                if elements > 0 {
                    let outside = (now.lifetime_seconds - last.lifetime_seconds)
                        - (now.wait_seconds - last.wait_seconds);
                    self.nanos = (outside.max(0.0) * 1e9 / elements as f64).max(1.0);
                }
                self.last = Some(now);
            }
            Some(_) => {}
            None => self.last = Some(now),
        }
        (self.nanos, now)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_count_against_the_lifetime_and_reach_the_text() {
        let stats = ReaderStats::new();
        let mut clock = NextClock::new(Arc::clone(&stats));
        assert_eq!(stats.snapshot().lifetime_seconds, 0.0, "no next() yet");
        clock.wait_begins();
        std::thread::sleep(Duration::from_millis(30));
        // A wait in progress counts already.
        assert!(stats.snapshot().wait_seconds >= 0.03);
        clock.wait_ends(true);
        for _ in 0..9 {
            clock.served_at_once();
        }
        std::thread::sleep(Duration::from_millis(30));
        let s = stats.snapshot();
        assert_eq!(s.elements_consumed, 10);
        assert!(
            s.wait_seconds >= 0.03 && s.lifetime_seconds >= s.wait_seconds + 0.03,
            "{s:?}"
        );
        let text = encode();
        assert!(text.contains("tfdata_reader_wait_seconds_total"), "{text}");
        assert!(
            text.contains("tfdata_reader_next_duration_seconds_bucket"),
            "{text}"
        );
        drop(clock);
        // Its lifetime stays in the totals once it is gone.
        let lifetime = |text: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix("tfdata_reader_lifetime_seconds_total "))
                .unwrap()
                .parse()
                .unwrap()
        };
        let before = lifetime(&encode());
        assert!(before >= 0.06, "{before}");
        assert!(lifetime(&encode()) >= before);
    }
}
