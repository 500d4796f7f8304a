//! Data-plane scenarios (issue 7): elements through a real dispatcher and
//! worker over loopback gRPC, and the loopback TCP ceiling to judge them by.
//!
//! One in-process worker, one client, parallel_epochs (`dynamic`: two
//! workers, distributed_epoch, `range(N)`, elements/s; `large`: the worker
//! in a child process, whose peak RSS is reported with the reader's);
//! N elements:
//! `small` `range(N)` int64 scalars (elements/s); `batched` N batches of 1024
//! int64 (elements/s); `large` N tensors of 1 MiB random float32 (MB/s);
//! `first-element` milliseconds from `distribute` to the first element on a
//! warm cluster. The first element is not part of the throughput figures.
//! TensorFlow runs the same scenarios in its own process
//! (`scripts/tf_service.py`), in the same run. With `--python-client`,
//! `small`, `batched` and `large` are read again by tfdata's Python client
//! (`scripts/python_client.py`, its own process) from a fresh cluster like
//! the Rust client's, the same dataset registered by this process.
//!
//! `tcp-loopback`: MB/s of a plain copy through one loopback TCP stream
//! (1 MiB writes, one reader thread): the physical ceiling for `large`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use tfdata::{
    Compression, Dataset, DispatchServer, DispatcherConfig, ProcessingMode, Tensor, WorkerConfig,
    WorkerServer, distribute, register_dataset,
};

use crate::data;

/// A service scenario's measured figure.
struct Measured {
    value: f64,
    unit: &'static str,
    /// `large` only: peak RSS of this process (reader and dispatcher) during
    /// the read, and of the worker's process over its life.
    client_peak_rss_bytes: Option<u64>,
    worker_peak_rss_bytes: Option<u64>,
}

/// The datasets of the scenarios; `n` is the element count of the stream.
pub(crate) fn scenario_dataset(scenario: &str, n: u64) -> Result<Dataset> {
    let n = i64::try_from(n)?;
    Ok(match scenario {
        "small" | "first-element" | "dynamic" | "dynamic-2-readers" => Dataset::range(n),
        "batched" => Dataset::range(n * BATCH).batch(BATCH, false),
        "large" => {
            // One 1 MiB tensor of random float32 (incompressible), repeated.
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            let mut values = Vec::with_capacity(LARGE_BYTES / 4);
            while values.len() < LARGE_BYTES / 4 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                values.push((state >> 40) as f32 / (1u64 << 24) as f32);
            }
            let tensor = Tensor::from_slice(&values, vec![(LARGE_BYTES / 4) as i64])?;
            Dataset::from_tensors(vec![tensor]).repeat(Some(n))
        }
        other => bail!("not a service scenario: {other}"),
    })
}

const BATCH: i64 = 1024;
const LARGE_BYTES: usize = 1 << 20;

/// Hidden command-line flag: run a worker for the dispatcher at the given
/// address until stdin closes (`large` measures the worker's memory in a
/// process of its own).
pub const SERVE_WORKER_FLAG: &str = "--serve-worker";

/// The child side of [`SERVE_WORKER_FLAG`].
pub fn serve_worker(dispatcher: &str, heartbeat: Option<std::time::Duration>) -> Result<()> {
    let mut config = WorkerConfig::new(dispatcher);
    if let Some(interval) = heartbeat {
        config.heartbeat_interval = interval;
    }
    let worker = WorkerServer::new(config)?;
    // Until the parent closes our stdin (or dies).
    let mut sink = Vec::new();
    std::io::stdin().read_to_end(&mut sink)?;
    drop(worker);
    Ok(())
}

/// A worker in a child process, stopped (stdin closed, then waited for) on drop.
struct ChildWorker {
    child: std::process::Child,
}

impl ChildWorker {
    fn start(dispatcher: &DispatchServer) -> Result<Self> {
        let child = std::process::Command::new(std::env::current_exe()?)
            .arg(SERVE_WORKER_FLAG)
            .arg(dispatcher.address())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .context("starting the worker process")?;
        let worker = ChildWorker { child };
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        while dispatcher.num_workers() < 1 {
            if Instant::now() > deadline {
                bail!("the worker process did not register");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Ok(worker)
    }

    /// The child's peak resident set size (`VmHWM`), in bytes.
    fn peak_rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        crate::measure::status_kib(&status, "VmHWM:").map(|kib| kib * 1024)
    }
}

impl Drop for ChildWorker {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Our dispatcher and the scenario's workers: one in-process worker (two for
/// `dynamic`), or for `large` one in a child process.
/// (Fields drop in order: the workers stop before the dispatcher.)
struct Cluster {
    child: Option<ChildWorker>,
    _in_process: Vec<WorkerServer>,
    dispatcher: DispatchServer,
}

impl Cluster {
    fn start(scenario: &str) -> Result<Self> {
        let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
        let mut in_process = Vec::new();
        let mut child = None;
        // Unit tests run this module inside the test binary, which cannot serve
        // as the worker process.
        if scenario == "large" && !cfg!(test) {
            child = Some(ChildWorker::start(&dispatcher)?);
        } else {
            in_process.push(WorkerServer::new(WorkerConfig::new(dispatcher.address()))?);
            if scenario.starts_with("dynamic") {
                in_process.push(WorkerServer::new(WorkerConfig::new(dispatcher.address()))?);
            }
        }
        Ok(Cluster {
            child,
            _in_process: in_process,
            dispatcher,
        })
    }
}

/// Runs `scenario` through our dispatcher and one worker (in-process, real
/// gRPC over loopback; for `large` the worker runs in a child process, and
/// both processes' peak RSS is reported).
fn measure_tfdata(scenario: &str, n: u64) -> Result<Measured> {
    let cluster = Cluster::start(scenario)?;
    let dispatcher = &cluster.dispatcher;
    let child = cluster.child.as_ref();
    let mode = if scenario.starts_with("dynamic") {
        ProcessingMode::DistributedEpoch
    } else {
        ProcessingMode::ParallelEpochs
    };
    if scenario == "dynamic-2-readers" {
        let value = read_shared(&dispatcher.target(), &scenario_dataset(scenario, n)?, n, 2)?;
        return Ok(Measured {
            value,
            unit: "elements/s",
            client_peak_rss_bytes: None,
            worker_peak_rss_bytes: None,
        });
    }
    let read = |dataset: &Dataset| -> Result<(u64, f64)> {
        let start = Instant::now();
        let distributed = distribute(mode, &dispatcher.target()).apply(dataset)?;
        let mut iter = distributed.iter()?;
        iter.next().context("the dataset is empty")??;
        let first = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let mut rest = 0u64;
        for element in iter {
            element?;
            rest += 1;
        }
        if rest + 1 != n {
            bail!("read {} elements, expected {n}", rest + 1);
        }
        Ok((
            rest,
            if scenario == "first-element" {
                first
            } else {
                start.elapsed().as_secs_f64()
            },
        ))
    };
    if scenario == "first-element" {
        // A warm cluster: the worker is registered and has run a job.
        read(&scenario_dataset("small", n)?)?;
        let (_, first) = read(&scenario_dataset("small", n)?)?;
        return Ok(Measured {
            value: first * 1e3,
            unit: "ms",
            client_peak_rss_bytes: None,
            worker_peak_rss_bytes: None,
        });
    }
    let dataset = scenario_dataset(scenario, n)?;
    crate::measure::reset_peak_rss();
    let (rest, seconds) = read(&dataset)?;
    let client_peak_rss_bytes = crate::measure::peak_rss_bytes();
    let worker_peak_rss_bytes = child.and_then(ChildWorker::peak_rss_bytes);
    let value = match scenario {
        "large" => rest as f64 * LARGE_BYTES as f64 / seconds / 1e6,
        "batched" => rest as f64 * BATCH as f64 / seconds,
        _ => rest as f64 / seconds,
    };
    Ok(Measured {
        value,
        unit: if scenario == "large" {
            "MB/s"
        } else {
            "elements/s"
        },
        client_peak_rss_bytes: child.is_some().then_some(client_peak_rss_bytes).flatten(),
        worker_peak_rss_bytes,
    })
}

/// `readers` readers sharing one distributed_epoch job over `dataset` (`n`
/// elements), each on its own thread: elements/s of all of them together,
/// from the moment every reader has its first element. Checks that the
/// readers together saw every element once.
fn read_shared(target: &str, dataset: &Dataset, n: u64, readers: usize) -> Result<f64> {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(readers + 1));
    let threads: Vec<_> = (0..readers)
        .map(|_| {
            let distributed = distribute(ProcessingMode::DistributedEpoch, target)
                .job_name("dynamic-shared")
                .apply(dataset)?;
            let barrier = std::sync::Arc::clone(&barrier);
            Ok(std::thread::spawn(move || -> Result<Vec<i64>> {
                let mut iter = distributed.iter();
                // A reader may find the epoch already gone (tiny `n`).
                let first = match &mut iter {
                    Ok(iter) => iter.next().transpose(),
                    Err(_) => Ok(None),
                };
                // Always reached: the measuring thread waits for everyone.
                barrier.wait();
                let iter = iter?;
                let mut values = Vec::new();
                if let Some(first) = first? {
                    values.push(first.components[0].to_scalar::<i64>()?);
                }
                for element in iter {
                    values.push(element?.components[0].to_scalar::<i64>()?);
                }
                Ok(values)
            }))
        })
        .collect::<Result<_>>()?;
    barrier.wait();
    let start = Instant::now();
    let mut all = Vec::new();
    for thread in threads {
        let values = thread
            .join()
            .map_err(|_| anyhow::anyhow!("a reader thread panicked"))??;
        all.extend(values);
    }
    let seconds = start.elapsed().as_secs_f64();
    all.sort_unstable();
    if all.len() as u64 != n || all.iter().zip(0..).any(|(&v, i)| v != i) {
        bail!(
            "the readers saw {} elements, not each of range({n}) once",
            all.len()
        );
    }
    Ok((n as f64 - readers as f64) / seconds)
}

/// The same scenario in TensorFlow 2.21 (`scripts/tf_service.py`).
pub(crate) fn measure_tensorflow(python: &Path, scenario: &str, n: u64) -> Result<f64> {
    let args = [
        "--scenario".to_string(),
        scenario.to_string(),
        "--elements".into(),
        n.to_string(),
    ];
    let line = data::run_python_script(python, "tf_service.py", &args)?;
    let value: Value = serde_json::from_str(&line)?;
    value["value"]
        .as_f64()
        .with_context(|| format!("no value in {line}"))
}

/// The scenarios the Python client runs.
pub const PYTHON_CLIENT_SCENARIOS: [&str; 3] = ["small", "batched", "large"];

/// What the Python client's run gave: its figures, or why it did not run.
enum PythonClientRun {
    Measured {
        value: f64,
        /// The whole JSON line of `scripts/python_client.py`.
        details: Value,
    },
    Unavailable(String),
}

/// The same scenario read by tfdata's Python client (`scripts/python_client.py`
/// under `python`, in its own process) from the same kind of cluster as the
/// Rust client's run: our dispatcher and worker in this process (for `large`
/// the worker in a child process), the same dataset registered here.
fn measure_python_client(python: &Path, scenario: &str, n: u64) -> Result<PythonClientRun> {
    if !python.exists() {
        return Ok(PythonClientRun::Unavailable(format!(
            "no Python at {}",
            python.display()
        )));
    }
    let cluster = Cluster::start(scenario)?;
    let dataset = scenario_dataset(scenario, n)?;
    let target = cluster.dispatcher.target();
    let dataset_id = register_dataset(&target, &dataset, Compression::Auto, None)?;
    let args = [
        "--scenario".to_string(),
        scenario.to_string(),
        "--elements".into(),
        n.to_string(),
        "--service".into(),
        target,
        "--dataset-id".into(),
        dataset_id,
    ];
    let line = data::run_python_script(python, "python_client.py", &args)?;
    let details: Value = serde_json::from_str(&line)?;
    if let Some(reason) = details["unavailable"].as_str() {
        return Ok(PythonClientRun::Unavailable(reason.to_string()));
    }
    let value = details["value"]
        .as_f64()
        .with_context(|| format!("no value in {line}"))?;
    Ok(PythonClientRun::Measured { value, details })
}

/// One service scenario's report: ours (the Rust client), our Python
/// client's when an interpreter is given (small, batched and large only), and
/// TensorFlow's when a Python is given. For `first-element` lower is better,
/// so the ratio is TensorFlow's time over ours (above 1 means faster, as for
/// the others).
pub fn run(
    scenario: &str,
    n: u64,
    repeats: usize,
    tensorflow: Option<&Path>,
    python_client: Option<&Path>,
) -> Result<(Map<String, Value>, String)> {
    // The engines run alternately, `repeats` times each, so that a burst
    // of load on the shared machine falls on both; medians are compared.
    let repeats = repeats.max(1);
    let (mut ours, mut tf, mut python) = (Vec::new(), Vec::new(), Vec::new());
    let mut python_unavailable = None;
    for _ in 0..repeats {
        ours.push(measure_tfdata(scenario, n)?);
        if let Some(python_path) = python_client
            && PYTHON_CLIENT_SCENARIOS.contains(&scenario)
            && python_unavailable.is_none()
        {
            match measure_python_client(python_path, scenario, n)? {
                PythonClientRun::Measured { value, details } => python.push((value, details)),
                PythonClientRun::Unavailable(reason) => python_unavailable = Some(reason),
            }
        }
        if let Some(python_path) = tensorflow {
            tf.push(measure_tensorflow(python_path, scenario, n)?);
        }
    }
    let values: Vec<f64> = ours.iter().map(|m| m.value).collect();
    let spread = Spread::of(&values);
    let unit = ours[0].unit;
    let mut report = Map::new();
    report.insert("scenario".into(), json!(scenario));
    report.insert("value".into(), json!(spread.median));
    spread.insert(&mut report, "");
    report.insert("values".into(), json!(values));
    report.insert("repeats".into(), json!(repeats));
    report.insert("unit".into(), json!(unit));
    report.insert("elements".into(), json!(n));
    let mut summary = format!("{scenario}: tfdata {} {unit}", spread.describe());
    // Memory: the largest any run reached.
    for (key, value) in [
        (
            "client_peak_rss_bytes",
            ours.iter().filter_map(|m| m.client_peak_rss_bytes).max(),
        ),
        (
            "worker_peak_rss_bytes",
            ours.iter().filter_map(|m| m.worker_peak_rss_bytes).max(),
        ),
    ] {
        if let Some(v) = value {
            report.insert(key.into(), json!(v));
            summary += &format!(
                ", {} {:.0} MB",
                key.trim_end_matches("_bytes"),
                v as f64 / 1e6
            );
        }
    }
    let mut python_value = None;
    if !python.is_empty() {
        let values: Vec<f64> = python.iter().map(|(v, _)| *v).collect();
        let python_spread = Spread::of(&values);
        let ratio = python_spread.median / spread.median;
        python_value = Some(python_spread.median);
        report.insert("python_client".into(), json!(python_spread.median));
        python_spread.insert(&mut report, "python_client_");
        report.insert("python_client_values".into(), json!(values));
        report.insert("python_client_ratio".into(), json!(ratio));
        // The details of the run nearest the median.
        let details = &python
            .iter()
            .min_by(|a, b| {
                (a.0 - python_spread.median)
                    .abs()
                    .total_cmp(&(b.0 - python_spread.median).abs())
            })
            .expect("not empty")
            .1;
        for key in [
            "elements_per_second",
            "bytes_per_second",
            "cpu_us_per_element",
            "peak_rss_bytes",
            "native_build",
            "native_module",
        ] {
            if let Some(v) = details.get(key) {
                report.insert(format!("python_client_{key}"), v.clone());
            }
        }
        summary += &format!(
            ", Python client {} {unit} ({:.0}% of Rust)",
            python_spread.describe(),
            ratio * 100.0
        );
        if details["native_build"] == "debug" {
            summary += " [DEBUG build of tfdata._native: not representative]";
        }
    }
    if let Some(reason) = python_unavailable {
        report.insert("python_client_note".into(), json!(reason));
        summary += &format!(", Python client skipped ({reason})");
    }
    if !tf.is_empty() {
        let tf_spread = Spread::of(&tf);
        let ratio = if scenario == "first-element" {
            tf_spread.median / spread.median
        } else {
            spread.median / tf_spread.median
        };
        report.insert("tensorflow".into(), json!(tf_spread.median));
        tf_spread.insert(&mut report, "tensorflow_");
        report.insert("tensorflow_values".into(), json!(tf));
        report.insert("ratio".into(), json!(ratio));
        summary += &format!(
            ", TensorFlow {} {unit}, ratio of medians {ratio:.2}",
            tf_spread.describe()
        );
        if let Some(value) = python_value {
            let ratio = value / tf_spread.median;
            report.insert("python_client_tensorflow_ratio".into(), json!(ratio));
            summary += &format!(", Python client / TensorFlow {ratio:.2}");
        }
    }
    Ok((report, summary))
}

/// Minimum, median and maximum of one engine's runs (issue 37: one run of
/// a 6-70 ms scenario says little on a shared machine).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    /// Of at least one value; the median of an even count is the mean of
    /// the middle two.
    pub fn of(values: &[f64]) -> Spread {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Spread {
            min: sorted[0],
            median,
            max: sorted[n - 1],
        }
    }

    /// `<prefix>min` and `<prefix>max` (the median is the caller's value).
    fn insert(&self, report: &mut Map<String, Value>, prefix: &str) {
        report.insert(format!("{prefix}min"), json!(self.min));
        report.insert(format!("{prefix}max"), json!(self.max));
    }

    /// `1234.5 (min 1000.0, max 1500.0)`.
    fn describe(&self) -> String {
        format!(
            "{:.1} (min {:.1}, max {:.1})",
            self.median, self.min, self.max
        )
    }
}

#[cfg(test)]
mod spread_tests {
    use super::Spread;

    #[test]
    fn spreads_take_the_middle() {
        let s = Spread::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.min, s.median, s.max), (1.0, 2.0, 3.0));
        assert_eq!(Spread::of(&[4.0, 1.0, 3.0, 2.0]).median, 2.5);
        assert_eq!(
            Spread::of(&[7.0]),
            Spread {
                min: 7.0,
                median: 7.0,
                max: 7.0
            }
        );
    }
}

/// MB/s (10^6 bytes) of `bytes` copied through one loopback TCP stream.
pub fn tcp_loopback(bytes: u64) -> Result<(Map<String, Value>, String)> {
    const CHUNK: usize = 1 << 20;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut socket, _) = listener.accept()?;
        let mut buffer = vec![0u8; CHUNK];
        let mut total = 0u64;
        loop {
            match socket.read(&mut buffer)? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    });
    let mut socket = TcpStream::connect(address)?;
    let chunk = vec![0x5au8; CHUNK];
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < bytes {
        socket.write_all(&chunk)?;
        sent += CHUNK as u64;
    }
    socket.shutdown(std::net::Shutdown::Write)?;
    let received = reader
        .join()
        .map_err(|_| anyhow::anyhow!("the reader thread panicked"))??;
    let seconds = start.elapsed().as_secs_f64();
    if received != sent {
        bail!("sent {sent} bytes, received {received}");
    }
    let mb_per_sec = received as f64 / seconds / 1e6;
    let mut report = Map::new();
    report.insert("scenario".into(), json!("tcp-loopback"));
    report.insert("value".into(), json!(mb_per_sec));
    report.insert("unit".into(), json!("MB/s"));
    report.insert("bytes".into(), json!(received));
    Ok((report, format!("tcp-loopback: {mb_per_sec:.0} MB/s")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_service_scenario_reads_every_element_through_a_real_service() {
        for scenario in [
            "small",
            "batched",
            "large",
            "first-element",
            "dynamic",
            "dynamic-2-readers",
        ] {
            let (report, _) = run(scenario, 20, 1, None, None).unwrap();
            assert!(report["value"].as_f64().unwrap() > 0.0, "{scenario}");
        }
    }

    #[test]
    fn repeated_runs_report_their_median_minimum_and_maximum() {
        let (report, summary) = run("small", 50, 3, None, None).unwrap();
        let values: Vec<f64> = report["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(values.len(), 3);
        let spread = Spread::of(&values);
        assert_eq!(report["value"].as_f64().unwrap(), spread.median);
        assert_eq!(report["min"].as_f64().unwrap(), spread.min);
        assert_eq!(report["max"].as_f64().unwrap(), spread.max);
        assert_eq!(report["repeats"], 3);
        assert!(summary.contains("(min "), "{summary}");
    }

    #[test]
    fn without_a_python_client_the_column_is_skipped_with_a_note() {
        let (report, summary) =
            run("small", 20, 1, None, Some(Path::new("/nonexistent/python"))).unwrap();
        assert!(report["value"].as_f64().unwrap() > 0.0);
        assert!(report.get("python_client").is_none());
        assert!(
            report["python_client_note"]
                .as_str()
                .unwrap()
                .contains("no Python")
        );
        assert!(summary.contains("Python client skipped"), "{summary}");
        // Scenarios the Python client does not run have no column at all.
        let (report, _) = run(
            "dynamic",
            20,
            1,
            None,
            Some(Path::new("/nonexistent/python")),
        )
        .unwrap();
        assert!(report.get("python_client_note").is_none());
    }

    /// Runs where a Python with tfdata is installed (`--python-client`'s
    /// default); elsewhere checks nothing.
    #[test]
    fn the_python_client_reads_every_element_where_tfdata_is_installed() {
        let python = crate::data::default_python_client();
        if !python.exists() {
            return;
        }
        for scenario in PYTHON_CLIENT_SCENARIOS {
            let (report, summary) = run(scenario, 20, 1, None, Some(&python)).unwrap();
            if report.contains_key("python_client_note") {
                // This Python has no tfdata: the note says so.
                assert!(summary.contains("Python client skipped"), "{summary}");
                continue;
            }
            assert!(report["python_client"].as_f64().unwrap() > 0.0, "{summary}");
            assert!(report["python_client_ratio"].as_f64().unwrap() > 0.0);
        }
    }

    #[test]
    fn tcp_loopback_copies_every_byte() {
        let (report, _) = tcp_loopback(8 << 20).unwrap();
        assert_eq!(report["bytes"], json!(8u64 << 20));
    }
}
