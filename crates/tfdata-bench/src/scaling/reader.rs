//! The readers of the `scaling` scenario, each a process of its own (this
//! binary's hidden `--scaling-reader SPEC`), as trainers on other hosts
//! would be: R reader threads in the bench would share one client runtime
//! and one process's allocator, and their CPU would mix with the
//! dispatcher's, which the bench process holds.
//!
//! The exchange, one JSON object a line: the reader connects to the shared
//! job (`from_dataset_id`, parallel_epochs, `job_name`) and says
//! `{"ready": true}`; on `go` from stdin it starts its iteration, reads to
//! the end and prints what it received (counts, `small`'s sum, payload
//! bytes, its CPU seconds, and a timeline of its count). The bench merges
//! the timelines into one aggregate rate ([`steady_rate`]). TensorFlow's
//! reader (`scripts/tf_scaling.py read`) follows the same exchange.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tfdata::{ProcessingMode, from_dataset_id};

use super::workload::Workload;

/// Hidden command-line flag: run one scaling reader with this JSON spec.
pub const SCALING_READER_FLAG: &str = "--scaling-reader";

/// The longest line a reader may print (its timeline holds a few thousand
/// entries); a longer one is an error, not unbounded memory.
const MAX_LINE_BYTES: u64 = 64 << 20;

/// What one reader reads.
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderSpec {
    pub target: String,
    pub dataset_id: String,
    pub job_name: String,
    pub workload: Workload,
    /// The pipeline's batch size, to check its batches.
    pub batch_size: i64,
}

impl ReaderSpec {
    pub fn to_json(&self) -> String {
        json!({
            "target": self.target,
            "dataset_id": self.dataset_id,
            "job_name": self.job_name,
            "workload": self.workload.name(),
            "batch_size": self.batch_size,
        })
        .to_string()
    }

    pub fn parse(text: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(text).context("the reader spec is not JSON")?;
        let s = |key: &str| -> Result<String> {
            Ok(v[key]
                .as_str()
                .with_context(|| format!("the reader spec has no {key}"))?
                .to_string())
        };
        let workload = s("workload")?;
        Ok(ReaderSpec {
            target: s("target")?,
            dataset_id: s("dataset_id")?,
            job_name: s("job_name")?,
            workload: Workload::parse(&workload)
                .with_context(|| format!("no workload {workload:?}"))?,
            batch_size: v["batch_size"].as_i64().context("no batch_size")?,
        })
    }
}

/// What one reader received.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReaderResult {
    pub elements: u64,
    /// Elements, or for the pipeline examples.
    pub items: u64,
    /// `small`: the sum of the values.
    pub sum: i64,
    /// Bytes of the tensors received.
    pub payload_bytes: u64,
    /// The reader's CPU time from `go` to its last element.
    pub cpu_seconds: f64,
    /// `(microseconds since the Unix epoch, items received so far)`, every
    /// [`Workload::checkpoint_every`] elements and at the last.
    pub checkpoints: Vec<(u64, u64)>,
}

impl ReaderResult {
    fn to_json(&self) -> Value {
        json!({
            "elements": self.elements,
            "items": self.items,
            "sum": self.sum,
            "payload_bytes": self.payload_bytes,
            "cpu_seconds": self.cpu_seconds,
            "checkpoints": self.checkpoints,
        })
    }

    fn parse(v: &Value) -> Result<Self> {
        let u = |key: &str| v[key].as_u64().with_context(|| format!("no {key}"));
        let checkpoints = v["checkpoints"]
            .as_array()
            .context("no checkpoints")?
            .iter()
            .map(|c| Some((c.get(0)?.as_u64()?, c.get(1)?.as_u64()?)))
            .collect::<Option<_>>()
            .context("a malformed checkpoint")?;
        Ok(ReaderResult {
            elements: u("elements")?,
            items: u("items")?,
            sum: v["sum"].as_i64().context("no sum")?,
            payload_bytes: u("payload_bytes")?,
            cpu_seconds: v["cpu_seconds"].as_f64().context("no cpu_seconds")?,
            checkpoints,
        })
    }
}

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The child side of [`SCALING_READER_FLAG`]: errors are printed as
/// `{"error": ...}` for the bench, and returned.
pub fn serve_reader(spec: &str) -> Result<()> {
    let result = ReaderSpec::parse(spec).and_then(|spec| read(&spec));
    let line = match &result {
        Ok(r) => r.to_json(),
        Err(e) => json!({ "error": format!("{e:#}") }),
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()?;
    result.map(|_| ())
}

fn read(spec: &ReaderSpec) -> Result<ReaderResult> {
    let dataset = from_dataset_id(
        ProcessingMode::ParallelEpochs,
        &spec.target,
        &spec.dataset_id,
    )
    .job_name(&spec.job_name)
    .build()?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{}", json!({"ready": true}))?;
        stdout.flush()?;
    }
    let mut go = String::new();
    std::io::stdin()
        .lock()
        .take(16)
        .read_line(&mut go)
        .context("waiting for go")?;
    if go.trim() != "go" {
        bail!("the bench went away before go");
    }
    let cpu_start = crate::measure::process_cpu_seconds();
    let every = spec.workload.checkpoint_every();
    let mut r = ReaderResult::default();
    // The iteration starts here: before `go` no worker has a task.
    for element in dataset.iter()? {
        let element = element?;
        let (items, value) = spec.workload.tally(&element, spec.batch_size)?;
        r.elements += 1;
        r.items += items;
        r.sum = r.sum.wrapping_add(value);
        r.payload_bytes += element
            .components
            .iter()
            .map(|t| t.byte_size() as u64)
            .sum::<u64>();
        if r.elements.is_multiple_of(every) {
            r.checkpoints.push((unix_micros(), r.items));
        }
    }
    if r.checkpoints
        .last()
        .is_none_or(|&(_, items)| items != r.items)
    {
        r.checkpoints.push((unix_micros(), r.items));
    }
    r.cpu_seconds = match (cpu_start, crate::measure::process_cpu_seconds()) {
        (Some(a), Some(b)) => b - a,
        _ => 0.0,
    };
    Ok(r)
}

/// A reader process: killed (if still running) and waited for on drop.
pub struct ReaderProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<std::io::Result<String>>,
}

impl ReaderProcess {
    /// Starts `command`, a reader of ours or TensorFlow's (`tf_scaling.py read`).
    pub fn start(mut command: Command) -> Result<Self> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting a reader process")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let stdin = child.stdin.take();
        let (sender, lines) = mpsc::channel();
        // Lines arrive on a thread so every wait for one has a deadline.
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout.take(MAX_LINE_BYTES));
            loop {
                let mut line = String::new();
                let read = reader.read_line(&mut line);
                let end = matches!(read, Ok(0) | Err(_));
                if sender.send(read.map(|_| line)).is_err() || end {
                    return;
                }
            }
        });
        Ok(ReaderProcess {
            child,
            stdin,
            lines,
        })
    }

    /// The reader's next JSON line, by `deadline`.
    fn line(&mut self, deadline: Instant) -> Result<Value> {
        let wait = deadline.saturating_duration_since(Instant::now());
        let line = match self.lines.recv_timeout(wait) {
            Ok(line) => line.context("reading from a reader")?,
            Err(mpsc::RecvTimeoutError::Timeout) => bail!("a reader said nothing in time"),
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("a reader's output ended"),
        };
        if line.is_empty() {
            let status = self.child.wait()?;
            bail!("a reader exited ({status}) before it answered");
        }
        let v: Value =
            serde_json::from_str(&line).with_context(|| format!("a reader said {line:?}"))?;
        if let Some(error) = v["error"].as_str() {
            bail!("a reader failed: {error}");
        }
        Ok(v)
    }

    pub fn wait_ready(&mut self, limit: Duration) -> Result<()> {
        let v = self.line(Instant::now() + limit)?;
        if v["ready"] != json!(true) {
            bail!("a reader said {v} instead of ready");
        }
        Ok(())
    }

    pub fn go(&mut self) -> Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .context("the reader's stdin is closed")?;
        stdin.write_all(b"go\n")?;
        stdin.flush()?;
        Ok(())
    }

    pub fn result(&mut self, deadline: Instant) -> Result<ReaderResult> {
        ReaderResult::parse(&self.line(deadline)?)
    }
}

impl Drop for ReaderProcess {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if let Ok(None) = self.child.try_wait() {
            // A reader that answered exits at once; one still running was
            // given up on (an error elsewhere): stop it.
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(10));
            }
            if let Ok(None) = self.child.try_wait() {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

/// The fewest checkpoints a window is measured over.
pub const MIN_WINDOW_CHECKPOINTS: usize = 8;

/// The aggregate rate of several readers' timelines, in items per second,
/// between the moments the readers together had received `from` and `to`
/// (fractions) of `total` items; and those moments' distance in seconds.
/// The ends are left out: the start holds the iteration's setup and the
/// first fill of the buffers, the end the last reader's tail. `None` when
/// the timelines are too coarse for it: fewer than [`MIN_WINDOW_CHECKPOINTS`]
/// checkpoints in the window (two readers' single checkpoints a moment
/// apart would give any rate at all).
pub fn steady_rate(
    timelines: &[&[(u64, u64)]],
    total: u64,
    from: f64,
    to: f64,
) -> Option<(f64, f64)> {
    // Each checkpoint adds what its reader received since its previous one.
    let mut increments: Vec<(u64, u64)> = timelines
        .iter()
        .flat_map(|timeline| {
            let mut previous = 0;
            timeline.iter().map(move |&(t, items)| {
                let added = items.saturating_sub(previous);
                previous = items;
                (t, added)
            })
        })
        .collect();
    increments.sort_unstable();
    let (low, high) = (from * total as f64, to * total as f64);
    let mut received = 0u64;
    let mut start = None;
    for (i, (t, added)) in increments.into_iter().enumerate() {
        received += added;
        match start {
            None if received as f64 >= low => start = Some((i, t, received)),
            Some((i0, t0, r0)) if received as f64 >= high => {
                let seconds = t.saturating_sub(t0) as f64 / 1e6;
                let enough = i - i0 >= MIN_WINDOW_CHECKPOINTS;
                return (enough && seconds > 0.0)
                    .then(|| ((received - r0) as f64 / seconds, seconds));
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_and_results_round_trip() {
        let spec = ReaderSpec {
            target: "grpc://localhost:1".into(),
            dataset_id: "7".into(),
            job_name: "j".into(),
            workload: Workload::Pipeline,
            batch_size: 64,
        };
        assert_eq!(ReaderSpec::parse(&spec.to_json()).unwrap(), spec);
        assert!(ReaderSpec::parse(r#"{"target": "x"}"#).is_err());
        assert!(ReaderSpec::parse("not json").is_err());
        let result = ReaderResult {
            elements: 3,
            items: 3,
            sum: 3,
            payload_bytes: 24,
            cpu_seconds: 0.5,
            checkpoints: vec![(10, 1), (20, 3)],
        };
        assert_eq!(ReaderResult::parse(&result.to_json()).unwrap(), result);
        assert!(ReaderResult::parse(&json!({"elements": 1})).is_err());
    }

    #[test]
    fn the_steady_rate_leaves_out_both_ends() {
        // Two readers, 10 items each, one item per second each, but the
        // first second (setup) delivers nothing and the last reader ends late.
        let a: Vec<(u64, u64)> = (1..=10).map(|i| ((i + 1) * 1_000_000, i)).collect();
        let mut b: Vec<(u64, u64)> = (1..=9).map(|i| ((i + 1) * 1_000_000, i)).collect();
        b.push((30_000_000, 10));
        let (rate, seconds) = steady_rate(&[&a, &b], 20, 0.1, 0.9).unwrap();
        // 10 % (2 items) at t = 2 s, 90 % (18 items) at t = 10 s: 16 in 8 s.
        assert_eq!(seconds, 8.0);
        assert_eq!(rate, 2.0);
        // Coarse timelines cannot give a rate: one checkpoint, or two
        // readers' few a moment apart.
        assert!(steady_rate(&[&[(5, 20)]], 20, 0.1, 0.9).is_none());
        let a = [(1_000_000, 1024), (1_000_010, 1100)];
        let b = [(1_000_005, 900)];
        assert!(steady_rate(&[&a, &b], 2000, 0.1, 0.9).is_none());
        assert!(steady_rate(&[], 20, 0.1, 0.9).is_none());
    }
}
