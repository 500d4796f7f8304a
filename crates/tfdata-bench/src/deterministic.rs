//! `dynamic-deterministic` (issue 35 item 5): what a deterministic
//! distributed_epoch read costs against today's first-come-first-served one,
//! measured in the same run on the same cluster shape.
//!
//! * `dynamic-deterministic` (one line per pipeline: `range(N)` and
//!   `range(N).batch(64)`): two in-process workers, two readers (threads)
//!   sharing the job; deterministic readers are consumers 0 and 1 of 2 with
//!   the default lanes. The non-deterministic figure is `dynamic-2-readers`'
//!   read (same N, same shape, a fresh cluster each). `--repeats` alternates
//!   the two and reports the medians. Goal: deterministic ≥ 50% of
//!   non-deterministic.
//! * `dynamic-deterministic/slow-worker`: the same two reads of `range(N)`
//!   with the workers in child processes, one of them made 10× slower for
//!   real: a thread of this process SIGSTOPs it for 90 ms and SIGCONTs it for
//!   10 ms, over and over, during the read. Reports both rates, which worker
//!   was slow (address and pid), the stopped fraction actually achieved, and
//!   the reorder figures the reader (`tfdata::reader_metrics()`, polled
//!   during the read for the peaks) and the dispatcher (its metrics, fed by
//!   the readers' heartbeats) expose.
//!
//! Every read is checked before a number is printed: the non-deterministic
//! readers together saw each value once; each deterministic consumer saw
//! exactly its part of the global order (for `range(N)`, values c, c+2,
//! c+4, ...; for the batches, lane k's batches at global positions
//! j·K + k with k ≡ c mod 2, in that order). A wrong value fails the bench.
//!
//! TensorFlow has no deterministic distributed_epoch: `tensorflow` is null
//! with a note; with `--compare-tensorflow` its `dynamic-2-readers` figure
//! (the same shape, first come first served) is printed beside ours.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use tfdata::{
    Dataset, Deterministic, DispatchServer, DispatcherConfig, ProcessingMode, WorkerConfig,
    WorkerServer, distribute,
};

use crate::child::{Server, worker_process};

/// The cluster shape of the comparison (`dynamic-2-readers`').
const WORKERS: usize = 2;
const READERS: u32 = 2;
/// The readers of the slow-worker reads. One reader merges lanes served by
/// both workers (lane k is placed on task k % 2), so its merge waits on the
/// slow one; with two, consumer c's lanes (k ≡ c mod 2) go to task c when
/// both tasks are listed as it places them, so one consumer reads mostly the
/// slow worker and the read ends when that consumer does.
const SLOW_READERS: [u32; 2] = [1, 2];
/// `range(N).batch(64)`'s batch size.
const BATCH: i64 = 64;
/// The goal: deterministic elements/s over non-deterministic.
const GOAL_RATIO: f64 = 0.5;
/// The slow worker's cycle: stopped this long, then running this long.
const STOPPED: Duration = Duration::from_millis(90);
const RUNNING: Duration = Duration::from_millis(10);
/// How often the reader's reorder figures are sampled during a slow read.
const METRICS_POLL: Duration = Duration::from_millis(50);

const TENSORFLOW_NOTE: &str = "TensorFlow 2.21 has no deterministic distributed_epoch \
(its order depends on which worker is faster); tensorflow_dynamic_2_readers is its \
first-come-first-served read of the same shape";

/// What the scenario runs with.
pub struct Options {
    /// `range(N)`'s N for the same-shape comparison.
    pub elements: u64,
    /// `range(N)`'s N with one slow worker.
    pub slow_elements: u64,
    /// Alternating runs of each read; medians reported.
    pub repeats: usize,
    /// TensorFlow's Python, for its `dynamic-2-readers` figure.
    pub tensorflow: Option<PathBuf>,
    /// TensorFlow's element count (it reads a few thousand a second).
    pub tensorflow_elements: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pipeline {
    Range,
    RangeBatch,
}

impl Pipeline {
    fn name(self) -> &'static str {
        match self {
            Pipeline::Range => "range",
            Pipeline::RangeBatch => "range-batch64",
        }
    }

    fn dataset(self, n: u64) -> Result<Dataset> {
        let range = Dataset::range(i64::try_from(n)?);
        Ok(match self {
            Pipeline::Range => range,
            Pipeline::RangeBatch => range.batch(BATCH, false),
        })
    }
}

/// What one reader received: every value in order, and how many values
/// each element held.
#[derive(Default, Debug, PartialEq, Eq)]
struct Received {
    values: Vec<i64>,
    lengths: Vec<u32>,
}

impl Received {
    fn push(&mut self, values: &[i64]) -> Result<()> {
        self.values.extend_from_slice(values);
        self.lengths.push(u32::try_from(values.len())?);
        Ok(())
    }
}

/// The elements consumer `consumer` of `consumers` must read, in order, from
/// a deterministic read of `pipeline` over `range(n)` with `lanes` lanes:
/// lane k holds the splits (here: values) k, k+K, ...; its element j sits at
/// global position j·K + k; the consumer reads its lanes' elements (k ≡ c
/// mod n) ordered by global position. Written from the design, not from the
/// client's code, so that it checks the client.
fn expected(
    pipeline: Pipeline,
    n: u64,
    lanes: u32,
    consumer: u32,
    consumers: u32,
) -> Result<Received> {
    if lanes == 0 || consumers == 0 || !lanes.is_multiple_of(consumers) || consumer >= consumers {
        bail!("{consumers} consumers do not divide {lanes} lanes (consumer {consumer})");
    }
    let n = i64::try_from(n)?;
    let lanes = i64::from(lanes);
    let mut out = Received::default();
    match pipeline {
        // Element j of lane k is the value j·K + k, at global position j·K + k.
        Pipeline::Range => {
            for v in (i64::from(consumer)..n).step_by(consumers as usize) {
                out.push(&[v])?;
            }
        }
        Pipeline::RangeBatch => {
            let mut positioned: Vec<(i64, Vec<i64>)> = Vec::new();
            for k in (i64::from(consumer)..lanes).step_by(consumers as usize) {
                let lane: Vec<i64> = (k..n).step_by(lanes as usize).collect();
                for (j, batch) in lane.chunks(BATCH as usize).enumerate() {
                    positioned.push((i64::try_from(j)? * lanes + k, batch.to_vec()));
                }
            }
            positioned.sort_unstable_by_key(|(q, _)| *q);
            for (_, batch) in positioned {
                out.push(&batch)?;
            }
        }
    }
    Ok(out)
}

/// Fails unless `got` is `want`, naming the first difference.
fn check_consumer(consumer: u32, got: &Received, want: &Received) -> Result<()> {
    if got == want {
        return Ok(());
    }
    let element = got
        .lengths
        .iter()
        .zip(&want.lengths)
        .position(|(a, b)| a != b);
    let value = got
        .values
        .iter()
        .zip(&want.values)
        .position(|(a, b)| a != b);
    bail!(
        "deterministic consumer {consumer} read {} elements ({} values), expected {} ({}); \
         first element of a different size: {element:?}, first different value at {value:?}: \
         got {:?}, expected {:?}",
        got.lengths.len(),
        got.values.len(),
        want.lengths.len(),
        want.values.len(),
        value.and_then(|i| got.values.get(i)),
        value.and_then(|i| want.values.get(i)),
    )
}

/// Fails unless the readers together saw each value of `range(n)` once.
fn check_union(n: u64, readers: &[Received]) -> Result<()> {
    let mut seen = vec![0u8; usize::try_from(n)?];
    for r in readers {
        for &v in &r.values {
            let count = usize::try_from(v)
                .ok()
                .and_then(|i| seen.get_mut(i))
                .with_context(|| format!("value {v} is not in range({n})"))?;
            *count = count.saturating_add(1);
        }
    }
    let missing = seen.iter().filter(|c| **c == 0).count();
    let twice = seen.iter().filter(|c| **c > 1).count();
    if missing > 0 || twice > 0 {
        bail!("the readers missed {missing} values of range({n}) and saw {twice} more than once");
    }
    Ok(())
}

/// One timed read by `readers` readers sharing a job: elements/s of all of
/// them together, from the moment each has its first element, and what
/// each received.
struct Read {
    elements_per_second: f64,
    readers: Vec<Received>,
    /// The reader's reorder samples: counters' growth during the read,
    /// other samples' peak.
    reorder: Map<String, Value>,
}

fn read(
    target: &str,
    dataset: &Dataset,
    job: &str,
    deterministic: bool,
    readers: u32,
    watch_reorder: bool,
) -> Result<Read> {
    let barrier = Arc::new(std::sync::Barrier::new(readers as usize + 1));
    let threads: Vec<_> = (0..readers)
        .map(|consumer| {
            let mut builder = distribute(ProcessingMode::DistributedEpoch, target).job_name(job);
            if deterministic {
                builder = builder.deterministic(Deterministic {
                    consumer_index: consumer,
                    num_consumers: readers,
                    ..Deterministic::default()
                });
            }
            let distributed = builder.apply(dataset)?;
            let barrier = Arc::clone(&barrier);
            Ok(std::thread::spawn(
                move || -> Result<(Received, Instant, Instant)> {
                    let mut iter = distributed.iter();
                    // A reader may find the epoch already gone (tiny `n`).
                    let first = match &mut iter {
                        Ok(iter) => iter.next().transpose(),
                        Err(_) => Ok(None),
                    };
                    // Always reached: the measuring thread waits for everyone.
                    barrier.wait();
                    let started = Instant::now();
                    let iter = iter?;
                    let mut received = Received::default();
                    if let Some(first) = first? {
                        received.push(&first.components[0].to_vec::<i64>()?)?;
                    }
                    for element in iter {
                        received.push(&element?.components[0].to_vec::<i64>()?)?;
                    }
                    Ok((received, started, Instant::now()))
                },
            ))
        })
        .collect::<Result<_>>()?;
    barrier.wait();
    let before = reorder_samples(&tfdata::reader_metrics());
    let mut peaks = Samples::new();
    // Sample the reader's reorder figures while the readers run: a window's
    // fill is gone by the end of the read. (Each reader notes its own end,
    // so the polling does not stretch the timed interval.)
    while watch_reorder && !threads.iter().all(|t| t.is_finished()) {
        for (name, value) in reorder_samples(&tfdata::reader_metrics()) {
            let peak = peaks.entry(name).or_insert(value);
            *peak = peak.max(value);
        }
        std::thread::sleep(METRICS_POLL);
    }
    // Timed from the first reader's release from the barrier to the last
    // reader's end, both taken by the readers: a tiny read can end before
    // this thread would have looked at the clock.
    let mut received = Vec::new();
    let mut span: Option<(Instant, Instant)> = None;
    for thread in threads {
        let (reader, started, ended) = thread
            .join()
            .map_err(|_| anyhow::anyhow!("a reader thread panicked"))??;
        received.push(reader);
        span = Some(span.map_or((started, ended), |(s, e)| (s.min(started), e.max(ended))));
    }
    let (start, end) = span.context("no readers")?;
    let seconds = (end - start).as_secs_f64().max(1e-9);
    let after = reorder_samples(&tfdata::reader_metrics());
    let timed: usize = received.iter().map(|r| r.lengths.len()).sum();
    let timed = timed.saturating_sub(readers as usize);
    Ok(Read {
        elements_per_second: timed as f64 / seconds,
        readers: received,
        reorder: growth_and_peaks(&before, &after, &peaks),
    })
}

/// Metric samples by name (with labels).
type Samples = std::collections::BTreeMap<String, f64>;

/// The samples of OpenMetrics `text` whose name mentions reordering,
/// whatever the client calls them (histogram buckets left out).
fn reorder_samples(text: &str) -> Samples {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            let metric = name.split('{').next()?;
            (metric.contains("reorder") && !metric.ends_with("_bucket"))
                .then(|| Some((name.to_string(), value.parse().ok()?)))?
        })
        .collect()
}

/// Counters (`_total`, `_sum`, `_count`): what they grew by during the read,
/// those that grew; the others (gauges, such as a window's fill): their peak.
fn growth_and_peaks(before: &Samples, after: &Samples, peaks: &Samples) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, value) in after {
        let metric = name.split('{').next().unwrap_or(name);
        if metric.ends_with("_created") {
            continue;
        }
        let counter = ["_total", "_sum", "_count"]
            .iter()
            .any(|s| metric.ends_with(s));
        let figure = if counter {
            let growth = value - before.get(name).copied().unwrap_or(0.0);
            // Earlier reads' workers (gone) and workers never waited on.
            if growth == 0.0 {
                continue;
            }
            growth
        } else {
            peaks.get(name).copied().unwrap_or(*value).max(*value)
        };
        let key = if counter {
            format!("{name} (growth)")
        } else {
            format!("{name} (peak)")
        };
        out.insert(key, json!(figure));
    }
    out
}

/// Checks a read: each deterministic consumer's exact sequence, or the
/// non-deterministic readers' union.
fn check(pipeline: Pipeline, n: u64, deterministic: bool, read: &Read) -> Result<()> {
    let lanes = Deterministic::default().lanes;
    if deterministic {
        let consumers = u32::try_from(read.readers.len())?;
        for (consumer, got) in (0..consumers).zip(&read.readers) {
            let want = expected(pipeline, n, lanes, consumer, consumers)?;
            check_consumer(consumer, got, &want)
                .with_context(|| format!("{} (deterministic)", pipeline.name()))?;
        }
        Ok(())
    } else {
        check_union(n, &read.readers).with_context(|| format!("{} (first come)", pipeline.name()))
    }
}

/// Our dispatcher and two in-process workers; fields drop in order.
struct InProcess {
    _workers: Vec<WorkerServer>,
    dispatcher: DispatchServer,
}

impl InProcess {
    fn start() -> Result<Self> {
        let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
        let workers = (0..WORKERS)
            .map(|_| Ok(WorkerServer::new(WorkerConfig::new(dispatcher.address()))?))
            .collect::<Result<_>>()?;
        Ok(InProcess {
            _workers: workers,
            dispatcher,
        })
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn mode_name(deterministic: bool) -> &'static str {
    if deterministic {
        "deterministic"
    } else {
        "first-come"
    }
}

/// The same-shape comparison of one pipeline.
fn compare(
    pipeline: Pipeline,
    options: &Options,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    let n = options.elements;
    let dataset = pipeline.dataset(n)?;
    let mut rates = [Vec::new(), Vec::new()];
    for run in 0..options.repeats {
        // Alternate which goes first, so neither always has the warmer machine.
        let order = if run % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for deterministic in order {
            let cluster = InProcess::start()?;
            let job = format!("{}-{}-{run}", pipeline.name(), mode_name(deterministic));
            let read = read(
                &cluster.dispatcher.target(),
                &dataset,
                &job,
                deterministic,
                READERS,
                false,
            )?;
            check(pipeline, n, deterministic, &read)?;
            rates[usize::from(deterministic)].push(read.elements_per_second);
        }
    }
    let [first_come, deterministic] = rates;
    let (value, baseline) = (median(&deterministic), median(&first_come));
    let ratio = value / baseline;
    let unit = match pipeline {
        Pipeline::Range => "elements/s",
        Pipeline::RangeBatch => "batches/s",
    };
    let mut report = Map::new();
    report.insert("scenario".into(), json!("dynamic-deterministic"));
    report.insert("pipeline".into(), json!(pipeline.name()));
    report.insert("value".into(), json!(value));
    report.insert("unit".into(), json!(unit));
    report.insert("elements".into(), json!(n));
    report.insert("workers".into(), json!(WORKERS));
    report.insert("readers".into(), json!(READERS));
    report.insert("lanes".into(), json!(Deterministic::default().lanes));
    report.insert("non_deterministic".into(), json!(baseline));
    report.insert(
        "non_deterministic_scenario".into(),
        json!("dynamic-2-readers"),
    );
    report.insert("ratio_to_non_deterministic".into(), json!(ratio));
    report.insert("goal_ratio".into(), json!(GOAL_RATIO));
    report.insert("goal_met".into(), json!(ratio >= GOAL_RATIO));
    report.insert("values".into(), json!(deterministic));
    report.insert("non_deterministic_values".into(), json!(first_come));
    report.insert(
        "checked".into(),
        json!("each consumer's exact sequence; the first-come readers' union"),
    );
    report.insert("tensorflow".into(), Value::Null);
    report.insert("tensorflow_note".into(), json!(TENSORFLOW_NOTE));
    let mut summary = format!(
        "dynamic-deterministic ({}, range({n}), {WORKERS} workers, {READERS} readers): \
         deterministic {value:.0} {unit}, first come {baseline:.0}, ratio {ratio:.2} (goal ≥ {GOAL_RATIO})",
        pipeline.name()
    );
    if let (Some(python), Pipeline::Range) = (&options.tensorflow, pipeline) {
        let tf = crate::service::measure_tensorflow(
            python,
            "dynamic-2-readers",
            options.tensorflow_elements,
        )?;
        report.insert("tensorflow_dynamic_2_readers".into(), json!(tf));
        report.insert(
            "tensorflow_elements".into(),
            json!(options.tensorflow_elements),
        );
        report.insert(
            "non_deterministic_tensorflow_ratio".into(),
            json!(baseline / tf),
        );
        report.insert("deterministic_tensorflow_ratio".into(), json!(value / tf));
        summary += &format!(
            "; TensorFlow dynamic-2-readers {tf:.0} elements/s (range({})), deterministic / TensorFlow {:.1}",
            options.tensorflow_elements,
            value / tf
        );
    } else {
        summary += "; TensorFlow: no deterministic read";
    }
    emit(report, summary)
}

/// Stops and continues a process over and over until dropped; measures the
/// fraction of the time it was stopped.
struct Slowdown {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<Duration>>>,
    started: Instant,
}

fn signal(pid: u32, signal: &str) -> Result<()> {
    // `kill(1)`: the workspace forbids unsafe code, so no libc::kill.
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .context("running kill")?;
    if !status.success() {
        bail!("kill -{signal} {pid} failed ({status})");
    }
    Ok(())
}

impl Slowdown {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || -> Result<Duration> {
            let mut stopped = Duration::ZERO;
            while !flag.load(Ordering::Relaxed) {
                let at = Instant::now();
                signal(pid, "STOP")?;
                std::thread::sleep(STOPPED);
                // Continue whatever happens, or the worker stays stopped.
                let resumed = signal(pid, "CONT");
                stopped += at.elapsed();
                resumed?;
                std::thread::sleep(RUNNING);
            }
            Ok(stopped)
        });
        Slowdown {
            stop,
            thread: Some(thread),
            started: Instant::now(),
        }
    }

    /// Ends the slowdown (the process left running): the fraction of the
    /// time it was stopped.
    fn finish(mut self) -> Result<f64> {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().context("finished twice")?;
        let stopped = thread
            .join()
            .map_err(|_| anyhow::anyhow!("the slowdown thread panicked"))??;
        Ok(stopped.as_secs_f64() / self.started.elapsed().as_secs_f64())
    }
}

impl Drop for Slowdown {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Our dispatcher and two worker processes, the first of which is the slow
/// one; fields drop in order.
struct Processes {
    slow: Server,
    _fast: Server,
    slow_address: String,
    dispatcher: DispatchServer,
}

impl Processes {
    fn start() -> Result<Self> {
        let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
        let wait_for = |count: usize| -> Result<()> {
            let deadline = Instant::now() + Duration::from_secs(60);
            while dispatcher.num_workers() < count {
                if Instant::now() > deadline {
                    bail!("the worker processes did not register");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(())
        };
        // One at a time, to know the slow one's address.
        let slow = worker_process(&dispatcher.address(), None)?;
        wait_for(1)?;
        let slow_address = dispatcher
            .state()
            .workers()
            .first()
            .context("no worker")?
            .address
            .as_str()
            .to_string();
        let fast = worker_process(&dispatcher.address(), None)?;
        wait_for(2)?;
        Ok(Processes {
            slow,
            _fast: fast,
            slow_address,
            dispatcher,
        })
    }
}

/// Both reads of `range(N)` by `readers` readers with one worker 10× slower.
fn slow_worker(
    options: &Options,
    readers: u32,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    let n = options.slow_elements;
    let pipeline = Pipeline::Range;
    let dataset = pipeline.dataset(n)?;
    let mut report = Map::new();
    report.insert(
        "scenario".into(),
        json!("dynamic-deterministic/slow-worker"),
    );
    report.insert("pipeline".into(), json!(pipeline.name()));
    report.insert("unit".into(), json!("elements/s"));
    report.insert("elements".into(), json!(n));
    report.insert("workers".into(), json!(WORKERS));
    report.insert("readers".into(), json!(readers));
    report.insert("lanes".into(), json!(Deterministic::default().lanes));
    let mut summary = format!(
        "dynamic-deterministic/slow-worker (range({n}), {readers} reader(s), one of {WORKERS} \
         worker processes stopped {} ms of every {} ms):",
        STOPPED.as_millis(),
        (STOPPED + RUNNING).as_millis()
    );
    for deterministic in [false, true] {
        let cluster = Processes::start()?;
        let slowdown = Slowdown::start(cluster.slow.child.id());
        let job = format!("slow-{readers}-{}", mode_name(deterministic));
        let result = read(
            &cluster.dispatcher.target(),
            &dataset,
            &job,
            deterministic,
            readers,
            true,
        );
        let stopped_fraction = slowdown.finish()?;
        let read = result?;
        check(pipeline, n, deterministic, &read)?;
        let key = if deterministic {
            "value"
        } else {
            "non_deterministic"
        };
        report.insert(key.into(), json!(read.elements_per_second));
        let prefix = if deterministic {
            ""
        } else {
            "non_deterministic_"
        };
        report.insert(
            format!("{prefix}slow_worker"),
            json!({
                "address": cluster.slow_address,
                "pid": cluster.slow.child.id(),
                "stopped_ms": STOPPED.as_millis(),
                "running_ms": RUNNING.as_millis(),
                "stopped_fraction": stopped_fraction,
            }),
        );
        if deterministic {
            report.insert("reader_reorder".into(), Value::Object(read.reorder));
            let dispatcher_metrics = cluster
                .dispatcher
                .dispatcher()
                .metrics()
                .encode(tfdata_rpc::metrics::Format::OpenMetrics);
            let blamed = reorder_samples(&dispatcher_metrics);
            report.insert(
                "dispatcher_reorder".into(),
                Value::Object(blamed.into_iter().map(|(k, v)| (k, json!(v))).collect()),
            );
        }
        summary += &format!(
            " {} {:.0} elements/s (slow worker {} stopped {:.0}% of the time);",
            mode_name(deterministic),
            read.elements_per_second,
            cluster.slow_address,
            stopped_fraction * 100.0
        );
    }
    let ratio = report["value"].as_f64().unwrap_or(0.0)
        / report["non_deterministic"].as_f64().unwrap_or(f64::NAN);
    report.insert("ratio_to_non_deterministic".into(), json!(ratio));
    report.insert("tensorflow".into(), Value::Null);
    report.insert("tensorflow_note".into(), json!(TENSORFLOW_NOTE));
    summary += &format!(" ratio {ratio:.2}");
    emit(report, summary)
}

pub fn run(
    options: &Options,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    if options.repeats == 0 {
        bail!("at least one run of each read");
    }
    for pipeline in [Pipeline::Range, Pipeline::RangeBatch] {
        compare(pipeline, options, emit)?;
    }
    for readers in SLOW_READERS {
        slow_worker(options, readers, emit)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(r: &Received) -> &[i64] {
        &r.values
    }

    #[test]
    fn each_consumer_expects_its_positions_of_the_global_order() {
        let zero = expected(Pipeline::Range, 10, 24, 0, 2).unwrap();
        let one = expected(Pipeline::Range, 10, 24, 1, 2).unwrap();
        assert_eq!(values(&zero), [0, 2, 4, 6, 8]);
        assert_eq!(values(&one), [1, 3, 5, 7, 9]);
        assert_eq!(zero.lengths, [1; 5]);

        // range(4000).batch(64) with 24 lanes: lane k holds k, k+24, ... (167
        // or 166 values: batches of 64, 64, 39 or 38), batch j at position
        // 24j + k.
        let n = 4000;
        let zero = expected(Pipeline::RangeBatch, n, 24, 0, 2).unwrap();
        let one = expected(Pipeline::RangeBatch, n, 24, 1, 2).unwrap();
        assert_eq!(zero.lengths.len(), 12 * 3);
        assert_eq!(&zero.values[..3], [0, 24, 48]);
        // Consumer 0's second element is lane 2's first batch (position 2),
        // its 13th lane 0's second batch (position 24).
        let start = |r: &Received, element: usize| {
            r.lengths[..element]
                .iter()
                .map(|l| *l as usize)
                .sum::<usize>()
        };
        assert_eq!(zero.values[start(&zero, 1)], 2);
        assert_eq!(zero.values[start(&zero, 12)], 64 * 24);
        assert_eq!(one.values[start(&one, 0)], 1);
        // Together they hold each value once.
        check_union(n, &[zero, one]).unwrap();
        // Consumers must divide the lanes.
        assert!(expected(Pipeline::Range, 10, 24, 0, 5).is_err());
        assert!(expected(Pipeline::Range, 10, 24, 2, 2).is_err());
    }

    #[test]
    fn a_wrong_value_fails_the_checks() {
        let want = expected(Pipeline::RangeBatch, 4000, 24, 1, 2).unwrap();
        let mut got = expected(Pipeline::RangeBatch, 4000, 24, 1, 2).unwrap();
        check_consumer(1, &got, &want).unwrap();
        // Two values swapped: same union, wrong order.
        got.values.swap(3, 70);
        let error = check_consumer(1, &got, &want).unwrap_err().to_string();
        assert!(
            error.contains("first different value at Some(3)"),
            "{error}"
        );
        // The same values in other batches.
        let mut got = expected(Pipeline::RangeBatch, 4000, 24, 1, 2).unwrap();
        got.lengths[0] -= 1;
        got.lengths[1] += 1;
        assert!(check_consumer(1, &got, &want).is_err());
        // One element missing.
        let mut got = expected(Pipeline::Range, 100, 24, 0, 2).unwrap();
        got.values.pop();
        got.lengths.pop();
        let want = expected(Pipeline::Range, 100, 24, 0, 2).unwrap();
        assert!(check_consumer(0, &got, &want).is_err());

        let mut readers = [0, 1].map(|c| expected(Pipeline::Range, 100, 24, c, 2).unwrap());
        check_union(100, &readers).unwrap();
        readers[1].values[0] = 0;
        let error = check_union(100, &readers).unwrap_err().to_string();
        assert!(error.contains("missed 1 values"), "{error}");
        assert!(check_union(100, &[Received::default()]).is_err());
    }

    #[test]
    fn reorder_samples_are_found_whatever_their_names() {
        let text = "# TYPE tfdata_reader_reorder_wait_seconds counter\n\
                    tfdata_reader_reorder_wait_seconds_total{worker=\"a:1\"} 1.5\n\
                    tfdata_reader_reorder_wait_seconds_total{worker=\"gone:2\"} 3\n\
                    tfdata_reader_reorder_window_elements 12\n\
                    tfdata_reader_reorder_wait_seconds_created 17\n\
                    tfdata_reader_elements_total 99\n";
        let after = reorder_samples(text);
        assert_eq!(after.len(), 4);
        let mut before = Samples::new();
        before.insert(
            "tfdata_reader_reorder_wait_seconds_total{worker=\"a:1\"}".into(),
            0.5,
        );
        // An earlier read's worker: no growth, left out.
        before.insert(
            "tfdata_reader_reorder_wait_seconds_total{worker=\"gone:2\"}".into(),
            3.0,
        );
        let mut peaks = Samples::new();
        peaks.insert("tfdata_reader_reorder_window_elements".into(), 40.0);
        let figures = growth_and_peaks(&before, &after, &peaks);
        assert_eq!(
            figures["tfdata_reader_reorder_wait_seconds_total{worker=\"a:1\"} (growth)"],
            json!(1.0)
        );
        assert_eq!(
            figures["tfdata_reader_reorder_window_elements (peak)"],
            json!(40.0)
        );
        assert_eq!(figures.len(), 2);
    }

    /// The scenario's same-shape comparison, tiny, through a real service:
    /// both reads checked element by element (a reader that ignored
    /// `deterministic` would fail the exact-sequence check), and the
    /// report's shape.
    #[test]
    fn the_comparison_runs_tiny_and_reports_both_reads() {
        let options = Options {
            elements: 3000,
            slow_elements: 3000,
            repeats: 2,
            tensorflow: None,
            tensorflow_elements: 20,
        };
        let mut reports = Vec::new();
        for pipeline in [Pipeline::Range, Pipeline::RangeBatch] {
            compare(pipeline, &options, &mut |report, summary| {
                reports.push((report, summary));
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(reports.len(), 2);
        for ((report, summary), pipeline) in reports.iter().zip(["range", "range-batch64"]) {
            assert_eq!(report["scenario"], "dynamic-deterministic");
            assert_eq!(report["pipeline"], pipeline);
            assert_eq!(report["elements"], 3000);
            assert_eq!(report["workers"], 2);
            assert_eq!(report["readers"], 2);
            assert_eq!(report["lanes"], Deterministic::default().lanes);
            assert!(report["value"].as_f64().unwrap() > 0.0, "{summary}");
            assert!(report["non_deterministic"].as_f64().unwrap() > 0.0);
            let ratio = report["ratio_to_non_deterministic"].as_f64().unwrap();
            assert!(
                (ratio
                    - report["value"].as_f64().unwrap()
                        / report["non_deterministic"].as_f64().unwrap())
                .abs()
                    < 1e-9
            );
            assert_eq!(report["goal_met"], ratio >= GOAL_RATIO);
            assert_eq!(report["values"].as_array().unwrap().len(), 2);
            assert_eq!(
                report["non_deterministic_values"].as_array().unwrap().len(),
                2
            );
            assert_eq!(report["tensorflow"], Value::Null);
            assert!(
                report["tensorflow_note"]
                    .as_str()
                    .unwrap()
                    .contains("no deterministic")
            );
        }
        assert_eq!(reports[0].0["unit"], "elements/s");
        assert_eq!(reports[1].0["unit"], "batches/s");
    }
}
