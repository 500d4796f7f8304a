//! Operating the `tfdata` binaries as real processes: JSON logs whose lines
//! carry the ids of what they are about, and a worker that drains on
//! SIGTERM (as Kubernetes stops a pod) without losing or repeating data.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tfdata::{Dataset, ProcessingMode, distribute};

const BIN: &str = env!("CARGO_BIN_EXE_tfdata");

/// A `tfdata` process whose stderr goes to a file; killed when dropped.
struct Process {
    child: Child,
    stderr: PathBuf,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// Starts `tfdata <args>` with stderr in `dir/<name>.log`; returns it and
    /// the port from its first stdout line.
    fn start(dir: &Path, name: &str, args: &[&str]) -> (Process, u16) {
        let stderr = dir.join(format!("{name}.log"));
        let mut child = Command::new(BIN)
            .args(args)
            .env("TFDATA_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start tfdata");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("tfdata printed its port");
        let port = line
            .split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        (Process { child, stderr }, port)
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args([signal, &pid]).status().unwrap();
        assert!(status.success());
    }

    /// Waits (bounded) for the process to exit.
    fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "tfdata did not exit in {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every stderr line, each parsed as JSON (a line that is not JSON fails the test).
    fn json_lines(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(&self.stderr).unwrap();
        text.lines()
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {line:?}"))
            })
            .collect()
    }
}

/// The value of `field` in the line's spans (innermost first).
fn span_field<'a>(line: &'a serde_json::Value, field: &str) -> Option<&'a serde_json::Value> {
    line.get("spans")?
        .as_array()?
        .iter()
        .rev()
        .find_map(|span| span.get(field))
}

#[test]
fn json_logs_carry_task_job_iteration_dataset_and_worker_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (mut dispatcher, port) = Process::start(
        dir.path(),
        "dispatcher",
        &["dispatcher", "--port", "0", "--log-format", "json"],
    );
    let address = format!("localhost:{port}");
    let (mut worker, _) = Process::start(
        dir.path(),
        "worker",
        &[
            "worker",
            "--dispatcher-address",
            &address,
            "--log-format",
            "json",
        ],
    );
    common::wait_for_workers(&address, 1);
    let ds = distribute(
        ProcessingMode::DistributedEpoch,
        &format!("grpc://{address}"),
    )
    .apply(&Dataset::range(20))
    .unwrap();
    assert_eq!(ds.iter().unwrap().count(), 20);
    worker.signal("-TERM");
    assert!(worker.wait(Duration::from_secs(30)).success());
    dispatcher.signal("-TERM");
    assert!(dispatcher.wait(Duration::from_secs(30)).success());

    // Every line of both processes is a JSON object with the basics.
    let worker_lines = worker.json_lines();
    let dispatcher_lines = dispatcher.json_lines();
    for line in worker_lines.iter().chain(&dispatcher_lines) {
        for key in ["timestamp", "level", "target", "message"] {
            assert!(line.get(key).is_some(), "no {key} in {line}");
        }
    }

    // From inside the task: its pipeline thread logs in the task's span.
    let inside_task = worker_lines
        .iter()
        .find(|l| l["message"] == "task pipeline finished")
        .unwrap_or_else(|| panic!("no line from the task's pipeline in {worker_lines:#?}"));
    assert_eq!(inside_task["elements"], 20, "{inside_task}");
    let task = span_field(inside_task, "task").and_then(|v| v.as_i64());
    let job = span_field(inside_task, "job").and_then(|v| v.as_i64());
    let iteration = span_field(inside_task, "iteration").and_then(|v| v.as_i64());
    let worker_id = span_field(inside_task, "worker").and_then(|v| v.as_str());
    assert!(task.is_some_and(|t| t > 0), "{inside_task}");
    assert!(job.is_some_and(|j| j > 0), "{inside_task}");
    assert!(iteration.is_some_and(|i| i > 0), "{inside_task}");
    assert!(
        worker_id.is_some_and(|w| w.starts_with("localhost:")),
        "{inside_task}"
    );
    assert!(
        span_field(inside_task, "dataset").is_some(),
        "{inside_task}"
    );

    // The dispatcher's side of the same task: its RPC spans name the method
    // and the ids the request carried, matching the worker's.
    let split_request = dispatcher_lines
        .iter()
        .find(|l| span_field(l, "method").is_some_and(|m| m == "WorkerHeartbeat"))
        .unwrap_or_else(|| panic!("no line in a WorkerHeartbeat span: {dispatcher_lines:#?}"));
    assert_eq!(
        span_field(split_request, "worker").and_then(|v| v.as_str()),
        worker_id,
        "{split_request}"
    );
    let created = dispatcher_lines
        .iter()
        .find(|l| l["message"] == "iteration created")
        .unwrap_or_else(|| panic!("no iteration created line: {dispatcher_lines:#?}"));
    assert_eq!(
        span_field(created, "job").and_then(|v| v.as_i64()),
        job,
        "{created}"
    );
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Writes `files` text files of `lines` lines each; line `j` of file `i` is
/// `i * 1000 + j`. Each file is one split in distributed_epoch.
fn text_files(dir: &Path, files: usize, lines: usize) -> Vec<String> {
    (0..files)
        .map(|i| {
            let path = dir.join(format!("part-{i:02}.txt"));
            let text: String = (0..lines).map(|j| format!("{}\n", i * 1000 + j)).collect();
            std::fs::write(&path, text).unwrap();
            path.to_str().unwrap().to_string()
        })
        .collect()
}

fn line_value(e: tfdata::Element) -> i64 {
    let bytes = &e.components[0].string_values().unwrap()[0];
    std::str::from_utf8(bytes).unwrap().parse().unwrap()
}

/// Beyond TensorFlow: a worker told to stop with SIGTERM in the middle of a
/// distributed_epoch read finishes the file (split) it is reading, hands
/// every record of it to the reader, reports it delivered and gives back
/// what it had not started; the other worker reads the rest. Every record
/// arrives exactly once. (Without the drain, the file it was reading goes
/// back to the pool whole and its first records arrive twice; TensorFlow's
/// worker simply dies, and the dispatcher keeps its task.)
#[test]
fn a_worker_drains_on_sigterm_and_every_record_arrives_exactly_once() {
    drain_mid_read(1);
}

/// The same with `repeat(2)` after the source: the drain cuts the first
/// pass short without ending that pass for the other worker, and every
/// record arrives exactly twice.
#[test]
fn a_drain_in_a_repeated_read_ends_no_pass_early() {
    drain_mid_read(2);
}

/// Two workers read `FILES` files of `LINES` lines `passes` times over in
/// distributed_epoch; one is SIGTERMed mid-file and drains.
fn drain_mid_read(passes: usize) {
    const FILES: usize = 12;
    const LINES: usize = 150;
    let dir = tempfile::tempdir().unwrap();
    let files = text_files(dir.path(), FILES, LINES);
    let (mut dispatcher, port) = Process::start(
        dir.path(),
        "dispatcher",
        &["dispatcher", "--port", "0", "--log-format", "json"],
    );
    let address = format!("localhost:{port}");
    // Small buffers, so the reader's pace holds the workers mid-file.
    let worker_args = |drain_ms: &'static str| -> Vec<String> {
        [
            "worker",
            "--dispatcher-address",
            &address,
            "--heartbeat-interval-ms",
            "100",
            "--task-buffer-elements",
            "2",
            "--task-buffer-max-elements",
            "2",
            "--drain-timeout-ms",
            drain_ms,
            "--log-format",
            "json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let args_a = worker_args("20000");
    let args_b = worker_args("20000");
    let (mut drained, _) = Process::start(dir.path(), "drained", &as_strs(&args_a));
    let (mut survivor, _) = Process::start(dir.path(), "survivor", &as_strs(&args_b));
    common::wait_for_workers(&address, 2);

    let names: Vec<&str> = files.iter().map(String::as_str).collect();
    // A reader that holds few elements ahead, so the workers stay mid-file.
    let ds = distribute(
        ProcessingMode::DistributedEpoch,
        &format!("grpc://{address}"),
    )
    .stream_window(4, 1 << 20)
    .max_outstanding_requests(2)
    .apply(&Dataset::text_lines(&names, "").repeat(Some(passes as i64)))
    .unwrap();
    let started = Instant::now();
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    let mut signalled_at = None;
    for element in ds.iter().unwrap() {
        *counts.entry(line_value(element.unwrap())).or_default() += 1;
        let read: usize = counts.values().sum();
        // Both workers are inside their first files by now.
        if read == 30 {
            drained.signal("-TERM");
            signalled_at = Some(Instant::now());
        }
        // The trainer's pace: slow enough that the files outlast the signal.
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(signalled_at.is_some(), "the read ended before the signal");
    assert!(started.elapsed() < Duration::from_secs(90));

    let status = drained.wait(Duration::from_secs(30));
    assert!(status.success(), "{status}");
    let repeated: Vec<_> = counts.iter().filter(|(_, n)| **n > passes).collect();
    assert!(repeated.is_empty(), "records read too often: {repeated:?}");
    let short: Vec<_> = counts.iter().filter(|(_, n)| **n < passes).collect();
    assert!(short.is_empty(), "records read too rarely: {short:?}");
    let expected = FILES * LINES;
    assert_eq!(
        counts.len(),
        expected,
        "records missing: {:?}",
        (0..FILES)
            .flat_map(|i| (0..LINES).map(move |j| (i * 1000 + j) as i64))
            .filter(|v| !counts.contains_key(v))
            .collect::<Vec<_>>()
    );

    // The drained worker says what it did: one distributed_epoch task
    // finished its split and handed it over, well before the timeout.
    let lines = drained.json_lines();
    let summary = lines
        .iter()
        .find(|l| l["message"] == "drained")
        .unwrap_or_else(|| panic!("no drain summary in {lines:#?}"));
    assert_eq!(summary["drained_tasks"], 1, "{lines:#?}");
    assert_eq!(summary["undrained_tasks"], 0, "{summary}");
    assert!(
        summary["elapsed_ms"].as_u64().is_some_and(|ms| ms < 20_000),
        "{summary}"
    );
    assert!(
        lines.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.contains("stopped taking splits"))
            && span_field(l, "task").is_some()),
        "the task's pipeline did not stop taking splits: {lines:#?}"
    );

    survivor.signal("-TERM");
    assert!(survivor.wait(Duration::from_secs(30)).success());
    dispatcher.signal("-TERM");
    assert!(dispatcher.wait(Duration::from_secs(30)).success());
}
