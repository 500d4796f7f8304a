//! The measurement loop shared by every scenario, and process statistics.
//!
//! `scripts/tf_pipeline.py` implements the same loop for TensorFlow; keep
//! the two in step.

use std::time::Instant;

use anyhow::{Context, Result, bail};

/// How long and how much to measure.
#[derive(Debug, Clone, Copy)]
pub struct MeasureConfig {
    /// Examples in one pass over the data set: measurement ends on a
    /// multiple of it, so every example is seen equally often.
    pub epoch_examples: u64,
    /// Measure for at least this long.
    pub min_seconds: f64,
    /// Batches taken before the clock starts (start-up, thread spawn, the
    /// first file opens and page-cache misses).
    pub warmup_batches: u64,
}

/// What one run measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Measurement {
    /// Examples taken while the clock ran.
    pub examples: u64,
    pub seconds: f64,
    pub batches: u64,
    /// From creating the iterator to the end of the warm-up batches.
    pub startup_seconds: f64,
    /// CPU time (user + system, all threads) of the process while the clock
    /// ran, if `/proc` has it.
    pub cpu_seconds: Option<f64>,
}

impl Measurement {
    pub fn examples_per_sec(&self) -> f64 {
        if self.seconds > 0.0 {
            self.examples as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// Cores kept busy on average: CPU seconds per wall second.
    pub fn cpu_utilization(&self) -> Option<f64> {
        self.cpu_seconds
            .filter(|_| self.seconds > 0.0)
            .map(|c| c / self.seconds)
    }

    /// CPU microseconds spent per example (all threads).
    pub fn cpu_us_per_example(&self) -> Option<f64> {
        self.cpu_seconds
            .filter(|_| self.examples > 0)
            .map(|c| c * 1e6 / self.examples as f64)
    }
}

/// Runs a pipeline and measures its throughput.
///
/// `start` creates the iterator (timed as start-up); `next` returns the
/// number of examples in the next batch, or `None` at the end of the data.
/// Two warm-up batches are not counted; then the clock runs until at least
/// `min_seconds` have passed and the examples taken (warm-up included)
/// reach the next multiple of `epoch_examples`. A pipeline that ends
/// earlier is measured up to its end.
pub fn measure<I>(
    config: &MeasureConfig,
    start: impl FnOnce() -> Result<I>,
    mut next: impl FnMut(&mut I) -> Result<Option<u64>>,
) -> Result<Measurement> {
    let begin = Instant::now();
    let mut iter = start()?;
    let mut taken = 0u64;
    for i in 0..config.warmup_batches {
        match next(&mut iter)? {
            Some(n) => taken += n,
            None => bail!("the pipeline ended during warm-up (after {i} batches)"),
        }
    }
    let startup_seconds = begin.elapsed().as_secs_f64();
    let cpu_start = process_cpu_seconds();
    let t0 = Instant::now();
    let mut m = Measurement {
        startup_seconds,
        ..Measurement::default()
    };
    let mut target: Option<u64> = None;
    let epoch = config.epoch_examples.max(1);
    loop {
        let Some(n) = next(&mut iter)? else {
            m.seconds = t0.elapsed().as_secs_f64();
            break;
        };
        taken += n;
        m.examples += n;
        m.batches += 1;
        let elapsed = t0.elapsed().as_secs_f64();
        if target.is_none() && elapsed >= config.min_seconds {
            target = Some(taken.div_ceil(epoch).max(1) * epoch);
        }
        if target.is_some_and(|t| taken >= t) {
            m.seconds = elapsed;
            break;
        }
    }
    m.cpu_seconds = match (cpu_start, process_cpu_seconds()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    drop(iter);
    Ok(m)
}

/// Clock ticks per second of `/proc/*/stat` times (`USER_HZ`, 100 on Linux).
pub const USER_HZ: f64 = 100.0;

/// User + system CPU time of this process (all threads), from `/proc/self/stat`.
pub fn process_cpu_seconds() -> Option<f64> {
    cpu_seconds_of("self")
}

/// User + system CPU time of process `pid` (all threads; `"self"` for this one).
pub fn cpu_seconds_of(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces: fields start after its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 (utime) and 15 (stime), counting from 1; `rest` starts at 3.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

/// CPU seconds of each thread of process `pid` alive now, by thread id,
/// from `/proc/<pid>/task/*/schedstat` (nanoseconds, where `stat` counts
/// 10 ms ticks: a dispatcher that works a few milliseconds in a run shows).
/// A thread that exits between two readings is missed by their difference.
pub fn thread_cpu_seconds(pid: &str) -> Option<std::collections::BTreeMap<u64, f64>> {
    let mut threads = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(entry) = entry else { continue };
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        // The thread may have exited since the directory was listed.
        let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        if let Some(ns) = text
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        {
            threads.insert(tid, ns / 1e9);
        }
    }
    Some(threads)
}

/// CPU seconds the threads of `after` spent since `before` (threads new
/// since `before` count from zero).
pub fn thread_cpu_delta(
    before: &std::collections::BTreeMap<u64, f64>,
    after: &std::collections::BTreeMap<u64, f64>,
) -> f64 {
    after
        .iter()
        .map(|(tid, &t)| (t - before.get(tid).copied().unwrap_or(0.0)).max(0.0))
        .sum()
}

/// The 1-minute load average (`/proc/loadavg`): how busy the machine was.
pub fn load_average_1m() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// CPU time all processes of the machine spent busy (user, nice, system,
/// interrupts; not idle or I/O wait), from `/proc/stat`: with the CPU time
/// of the processes measured, what else kept the cores busy.
pub fn machine_busy_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal ...
    let busy: f64 = [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| ticks.get(i))
        .sum();
    Some(busy / USER_HZ)
}

/// The peak resident set size of this process (`VmHWM`), in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status_kib(&status, "VmHWM:").map(|kib| kib * 1024)
}

/// Resets the peak resident set size to the current one (best effort:
/// `echo 5 > /proc/self/clear_refs`), so each measured pipeline reports
/// its own peak.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

pub fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// The number of examples in a batch: the leading dimension of its first
/// component.
pub fn batch_examples(element: &tfdata_core::Element) -> Result<u64> {
    let first = element
        .components
        .first()
        .context("a batch with no components")?;
    let n = first
        .shape()
        .first()
        .context("a batch component with no batch dimension")?;
    u64::try_from(*n).context("a negative batch dimension")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kib_from_status() {
        let status = "Name:\tx\nVmPeak:\t  1000 kB\nVmHWM:\t   2048 kB\n";
        assert_eq!(status_kib(status, "VmHWM:"), Some(2048));
        assert_eq!(status_kib(status, "VmRSS:"), None);
    }

    #[test]
    fn process_statistics_are_available_on_linux() {
        assert!(process_cpu_seconds().is_some());
        assert!(peak_rss_bytes().is_some_and(|b| b > 0));
        assert!(load_average_1m().is_some());
        let before = thread_cpu_seconds("self").unwrap();
        assert!(!before.is_empty());
        // Spin until this thread's schedstat moves (nanoseconds: soon).
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(20) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        let after = thread_cpu_seconds("self").unwrap();
        assert!(thread_cpu_delta(&before, &after) > 0.0);
    }

    #[test]
    fn measures_until_an_epoch_boundary() {
        let config = MeasureConfig {
            epoch_examples: 100,
            min_seconds: 0.0,
            warmup_batches: 2,
        };
        // Batches of 30: warm-up takes 60, then the first measured batch
        // (90 taken) sets the target to 100, reached at 120 taken.
        let m = measure(&config, || Ok(0u64), |_| Ok(Some(30))).unwrap();
        assert_eq!(m.examples, 60);
        assert_eq!(m.batches, 2);
    }

    #[test]
    fn a_short_pipeline_is_measured_to_its_end() {
        let config = MeasureConfig {
            epoch_examples: 1000,
            min_seconds: 60.0,
            warmup_batches: 1,
        };
        let m = measure(
            &config,
            || Ok(0u32),
            |i| {
                *i += 1;
                Ok((*i <= 5).then_some(10))
            },
        )
        .unwrap();
        assert_eq!(m.examples, 40);
        assert!(measure(&config, || Ok(()), |_| Ok(None)).is_err());
    }
}
