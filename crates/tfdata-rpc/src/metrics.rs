//! What every crate's `metrics` module builds on: the `prometheus-client`
//! re-export (one version for the workspace), OpenMetrics text encoding,
//! the gRPC code label, and a histogram that never takes a lock.
//!
//! There is no global registry: each server instance owns one, so two
//! servers in one process (as in tests) do not mix. The reader's metrics
//! are the one exception (`tfdata_client::metrics`): a trainer process has
//! no server to hang them on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use prometheus_client;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// The content type of [`encode`]'s output.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The exposition formats `/metrics` serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text: what Prometheus asks for, and the default.
    OpenMetrics,
    /// Prometheus text 0.0.4, for clients that ask only for `text/plain`
    /// (older tools, `promtool check metrics`): counter families are named
    /// with their `_total` there.
    PrometheusText,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics unless the
    /// client names `text/plain` and not OpenMetrics (as Prometheus's own
    /// clients negotiate).
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            Some(a) if a.contains("text/plain") => Format::PrometheusText,
            _ => Format::OpenMetrics,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
            Format::PrometheusText => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        }
    }
}

/// `registry` in the OpenMetrics text format, `# EOF` included.
pub fn encode(registry: &Registry) -> String {
    encode_as(registry, Format::OpenMetrics)
}

/// `registry` in `format`.
pub fn encode_as(registry: &Registry, format: Format) -> String {
    let mut text = String::new();
    let encoded = match format {
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut text, registry),
        Format::PrometheusText => {
            prometheus_client::encoding::prometheus_text::encode(&mut text, registry)
        }
    };
    // Writing into a String cannot fail; a metric's encoder could only fail
    // on a bug, and a scrape then shows what was encoded before it.
    if let Err(e) = encoded {
        tracing::error!(error = %e, "encoding metrics failed");
    }
    text
}

/// Latency buckets, in seconds: 100 µs to 60 s, about ×2.5 apart. One set
/// for every latency, so dashboards can compare them.
pub const LATENCY_SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
];

/// A histogram of durations whose `observe` is a few relaxed atomic adds:
/// `prometheus-client`'s own histogram takes a mutex per observation,
/// which the data plane must not. Buckets are fixed at construction; the
/// sum is kept in nanoseconds and reported in seconds. Clones share it.
#[derive(Debug, Clone)]
pub struct Histogram {
    inner: std::sync::Arc<HistogramInner>,
}

#[derive(Debug)]
struct HistogramInner {
    bounds: &'static [f64],
    /// Per bucket (not cumulative), plus the overflow bucket last.
    counts: Box<[AtomicU64]>,
    sum_nanos: AtomicU64,
}

impl Default for Histogram {
    /// A histogram over [`LATENCY_SECONDS_BUCKETS`].
    fn default() -> Self {
        Histogram::new(LATENCY_SECONDS_BUCKETS)
    }
}

impl Histogram {
    /// A histogram with upper bounds `bounds` (seconds, ascending).
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            inner: std::sync::Arc::new(HistogramInner {
                bounds,
                counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
                sum_nanos: AtomicU64::new(0),
            }),
        }
    }

    /// Records one observation of `elapsed`.
    pub fn observe(&self, elapsed: Duration) {
        self.observe_many(elapsed, 1);
    }

    /// Records `n` observations of `elapsed` each: callers that batch (a
    /// reader's buffered `next()` calls that took no time) pay once.
    pub fn observe_many(&self, elapsed: Duration, n: u64) {
        if n == 0 {
            return;
        }
        let h = &*self.inner;
        let seconds = elapsed.as_secs_f64();
        let bucket = h
            .bounds
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(h.bounds.len());
        h.counts[bucket].fetch_add(n, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        h.sum_nanos
            .fetch_add(nanos.saturating_mul(n), Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        let h = &*self.inner;
        h.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// The sum of the observations, in seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.inner.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9
    }
}

impl prometheus_client::metrics::TypedMetric for Histogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Histogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let h = &*self.inner;
        let buckets: Vec<(f64, u64)> = h
            .bounds
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(h.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        // The count is the buckets' total, so `_count` and the `+Inf`
        // bucket agree even while observations land during the scrape.
        let count = buckets.iter().map(|(_, n)| n).sum();
        encoder.encode_histogram::<NoLabelSet>(self.sum_seconds(), count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// A monotonic clock in nanoseconds since an arbitrary start, for
/// timestamps kept in atomics (an `Instant` does not fit in one).
pub fn monotonic_nanos() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::family::Family;

    #[test]
    fn histogram_text_is_cumulative_and_consistent() {
        let mut registry = Registry::default();
        let family = Family::<Vec<(&'static str, &'static str)>, Histogram>::default();
        registry.register("tfdata_test_duration_seconds", "test", family.clone());
        let h = family.get_or_create(&vec![("method", "Get")]).clone();
        h.observe(Duration::from_micros(50));
        h.observe_many(Duration::from_millis(3), 3);
        h.observe(Duration::from_secs(100));
        let text = encode(&registry);
        assert!(
            text.contains("# TYPE tfdata_test_duration_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains(r#"tfdata_test_duration_seconds_count{method="Get"} 5"#),
            "{text}"
        );
        let bucket = |le: &str, n: u64| {
            format!(r#"tfdata_test_duration_seconds_bucket{{le="{le}",method="Get"}} {n}"#)
        };
        for (le, n) in [
            ("0.0001", 1),
            ("0.0025", 1),
            ("0.005", 4),
            ("60.0", 4),
            ("+Inf", 5),
        ] {
            assert!(text.contains(&bucket(le, n)), "{le} {n}: {text}");
        }
        let sum = 0.00005 + 0.009 + 100.0;
        assert!((h.sum_seconds() - sum).abs() < 1e-9, "{}", h.sum_seconds());
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn prometheus_text_names_counters_with_total() {
        let mut registry = Registry::default();
        let counter = prometheus_client::metrics::counter::Counter::<u64>::default();
        registry.register("tfdata_test_things", "things", counter.clone());
        counter.inc();
        let text = encode_as(&registry, Format::PrometheusText);
        assert!(
            text.contains("# HELP tfdata_test_things_total things."),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "{text}");
        assert_eq!(Format::negotiate(None), Format::OpenMetrics);
        assert_eq!(
            Format::negotiate(Some(
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
            )),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some("text/plain; version=0.0.4")),
            Format::PrometheusText
        );
    }
}
