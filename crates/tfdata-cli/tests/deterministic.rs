//! Deterministic reads with real processes (issue 35; docs/fault-tolerance.md,
//! "Deterministic reads"): `tfdata read --deterministic --lanes K` against a
//! dispatcher with a journal and worker processes.
//!
//! - The global sequence of a pipeline is the same element for element with
//!   1, 2 and 4 workers and 1, 2 and 3 consumers.
//! - Four consumers checkpointing every N elements are SIGKILLed together at
//!   a random step; their checkpoints of the newest step all four reached
//!   (the test keeps every version of their files, as a trainer keeps a
//!   checkpoint per step) are merged with `tfdata merge-checkpoints`; a
//!   worker is SIGKILLed and another started,
//!   the dispatcher is restarted from its journal; the merged checkpoint is
//!   restored on 2 consumers, and separately on 3 (a worker SIGKILLed in the
//!   middle of that read): what was consumed up to the checkpoint and what
//!   was read after it are, in global order, one uninterrupted read.
//! - One of two workers stopped 90 ms of every 100 ms: the read completes in
//!   order, the reorder window's bound holds, and the dispatcher's status
//!   page and metrics name the slow worker.
//!
//! Consumer `c` of `n` reads global positions `c, c + n, c + 2n, ...`, so its
//! `i`-th element goes to position `c + n * i`. That holds while no lane has
//! ended before the others (an ended lane leaves its slots empty): the
//! pipelines here give every lane the same number of elements, and the
//! rebuilt sequences are checked against an uninterrupted one-consumer read
//! whose content is checked too.
//!
//! `TFDATA_TEST_LOG_DIR=/tmp/det-logs TFDATA_LOG=debug cargo test -p
//! tfdata-cli --test deterministic` keeps every process's log;
//! `TFDATA_CHAOS_SEED=<n>` replaces the fixed seed of the kills.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::process::{BIN, Process};
use rand::{Rng, SeedableRng};

/// `TFDATA_TEST_DETERMINISTIC_OFF=1`: the consumers read without
/// `--deterministic` (ordinary distributed_epoch reads sharing the job), to
/// check that the tests fail without the feature.
fn deterministic_off() -> bool {
    std::env::var_os("TFDATA_TEST_DETERMINISTIC_OFF").is_some()
}

/// Lanes of every read here: divisible by 1, 2, 3 and 4 consumers.
const LANES: usize = 12;
/// How long one read may take (debug build, 2 shared cores).
const READ_LIMIT: Duration = Duration::from_secs(60);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The tests' random kills: from `seed`, or from `$TFDATA_CHAOS_SEED`.
fn rng(seed: u64) -> rand::rngs::StdRng {
    let seed = match std::env::var("TFDATA_CHAOS_SEED") {
        Ok(s) => s.parse().expect("TFDATA_CHAOS_SEED is a number"),
        Err(_) => seed,
    };
    eprintln!("seed {seed}");
    rand::rngs::StdRng::seed_from_u64(seed)
}

/// A fault-tolerant dispatcher (journal in `work_dir`, admin HTTP on a fixed
/// port so a restart keeps it) and worker processes.
struct Cluster {
    dir: tempfile::TempDir,
    port: u16,
    http_port: u16,
    dispatcher: Option<Process>,
    /// (port, process)
    workers: Vec<(u16, Process)>,
}

impl Cluster {
    fn start(workers: usize) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let mut cluster = Cluster {
            dir,
            port: free_port(),
            http_port: free_port(),
            dispatcher: None,
            workers: Vec::new(),
        };
        cluster.start_dispatcher();
        for _ in 0..workers {
            cluster.add_worker();
        }
        cluster.wait_for_workers(workers);
        cluster
    }

    fn address(&self) -> String {
        format!("localhost:{}", self.port)
    }

    fn service(&self) -> String {
        format!("grpc://localhost:{}", self.port)
    }

    fn work_dir(&self) -> PathBuf {
        match std::env::var_os(common::process::LOG_DIR_VAR) {
            // Kept with the logs, for reading the journal after a failure.
            Some(logs) => Path::new(&logs).join(format!("work_dir-{}", self.port)),
            None => self.dir.path().join("work_dir"),
        }
    }

    fn start_dispatcher(&mut self) {
        assert!(self.dispatcher.is_none());
        let (port, http) = (self.port.to_string(), self.http_port.to_string());
        let work_dir = self.work_dir();
        let (process, _) = Process::start(&[
            "dispatcher",
            "--port",
            &port,
            "--http-port",
            &http,
            "--work-dir",
            work_dir.to_str().unwrap(),
            "--fault-tolerant-mode",
        ]);
        self.dispatcher = Some(process);
    }

    /// SIGKILL, then a new dispatcher on the same port and journal.
    fn restart_dispatcher(&mut self) {
        drop(self.dispatcher.take());
        self.start_dispatcher();
    }

    fn add_worker(&mut self) -> u16 {
        let port = free_port();
        let (process, _) = Process::start(&[
            "worker",
            "--dispatcher-address",
            &self.address(),
            "--port",
            &port.to_string(),
            "--heartbeat-interval-ms",
            "200",
        ]);
        self.workers.push((port, process));
        port
    }

    /// SIGKILLs worker `i`; returns its port.
    fn kill_worker(&mut self, i: usize) -> u16 {
        let (port, mut process) = self.workers.remove(i);
        let _ = process.child.kill();
        let _ = process.wait_exit(Duration::from_secs(10));
        port
    }

    fn wait_for_workers(&self, n: usize) {
        common::wait_for_workers(&self.address(), n);
    }

    /// Registers the JSON pipeline `text` with `tfdata register`; its id.
    fn register(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(format!("{name}.json"));
        std::fs::write(&path, text).unwrap();
        let out = Command::new(BIN)
            .args(["register", "--service", &self.service(), "--pipeline"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "register {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    fn logs(&self) -> String {
        let mut text = self
            .dispatcher
            .as_ref()
            .map(Process::logs)
            .unwrap_or_default();
        for (_, w) in &self.workers {
            text += &w.logs();
        }
        text
    }
}

/// One consumer's `tfdata read --deterministic`.
struct Consumer<'a> {
    dataset_id: &'a str,
    job_name: &'a str,
    split_shuffle_seed: Option<u64>,
    index: usize,
    count: usize,
    /// `--checkpoint-file`, `--checkpoint-every`.
    checkpoint: Option<(&'a Path, usize)>,
    /// More flags of deterministic reads.
    extra: &'a [&'a str],
}

impl Consumer<'_> {
    fn args(&self, service: &str) -> Vec<String> {
        let mut args: Vec<String> = [
            "read",
            "--service",
            service,
            "--dataset-id",
            self.dataset_id,
            "--processing-mode",
            "distributed_epoch",
            "--job-name",
            self.job_name,
            "--task-refresh-interval-ms",
            "100",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if deterministic_off() {
            // An ordinary distributed_epoch read of the shared job (`extra`
            // holds flags of deterministic reads only).
        } else {
            args.extend(
                [
                    "--deterministic",
                    "--lanes",
                    &LANES.to_string(),
                    "--consumer-index",
                    &self.index.to_string(),
                    "--num-consumers",
                    &self.count.to_string(),
                ]
                .map(String::from),
            );
            if let Some(seed) = self.split_shuffle_seed {
                args.extend(["--split-shuffle-seed".to_string(), seed.to_string()]);
            }
            args.extend(self.extra.iter().map(|s| s.to_string()));
        }
        if let Some((file, every)) = self.checkpoint {
            args.extend([
                "--checkpoint-file".to_string(),
                file.to_str().unwrap().to_string(),
                "--checkpoint-every".to_string(),
                every.to_string(),
            ]);
        }
        args
    }

    fn spawn(&self, service: &str) -> Process {
        let mut command = Command::new(BIN);
        command.args(self.args(service));
        Process::spawn(
            &format!("consumer{}of{}-{}", self.index, self.count, self.job_name),
            command,
        )
    }
}

/// Waits for every consumer to exit successfully (within [`READ_LIMIT`]);
/// their lines.
fn finish(consumers: &mut [Process], cluster: &Cluster) -> Vec<Vec<String>> {
    let deadline = Instant::now() + READ_LIMIT;
    consumers
        .iter_mut()
        .map(|c| {
            let left = deadline.saturating_duration_since(Instant::now());
            match c.wait_exit(left) {
                Some(status) if status.success() => c.stdout_lines(),
                Some(status) => panic!("{} failed ({status})\n{}", c.name, c.logs()),
                None => panic!(
                    "{} did not finish in {READ_LIMIT:?} ({} lines)\n{}\n{}",
                    c.name,
                    c.stdout_len(),
                    c.logs(),
                    cluster.logs()
                ),
            }
        })
        .collect()
}

/// The global sequence from consumer `c` of `n`'s lines: the `i`-th at
/// `first[c] + n * i`, where `first[c]` is consumer `c`'s first global
/// position (`c` for a read from the start). Every position below the
/// total must be filled exactly once.
fn interleave(consumers: &[Vec<String>], first: &[usize], start: usize) -> Vec<String> {
    let n = consumers.len();
    let total: usize = consumers.iter().map(Vec::len).sum();
    let mut global: Vec<Option<String>> = vec![None; total];
    for (c, lines) in consumers.iter().enumerate() {
        for (i, line) in lines.iter().enumerate() {
            let q = first[c] + n * i - start;
            assert!(
                q < total && global[q].is_none(),
                "consumer {c} of {n}: its element {i} lands on global position {} (of {start}..{}), \
                 outside the sequence or taken: consumers read {:?} elements",
                q + start,
                start + total,
                consumers.iter().map(Vec::len).collect::<Vec<_>>()
            );
            global[q] = Some(line.clone());
        }
    }
    global.into_iter().map(Option::unwrap).collect()
}

/// Where `sequence` first differs from `expected`, for failure messages.
fn first_difference(expected: &[String], sequence: &[String]) -> String {
    match expected.iter().zip(sequence).position(|(a, b)| a != b) {
        Some(i) => format!(
            "first difference at position {i}: expected {:?}, got {:?} (lengths {} and {})",
            expected[i],
            sequence[i],
            expected.len(),
            sequence.len()
        ),
        None => format!("lengths {} and {}", expected.len(), sequence.len()),
    }
}

/// The numbers on every line (whole ones), sorted: what a read holds as a
/// multiset.
fn numbers(lines: &[String]) -> Vec<i64> {
    let mut values: Vec<i64> = lines
        .iter()
        .flat_map(|line| {
            // `[1.0, 4.0]` (float32 batches) or `["0 1 1", ...]` (strings).
            line.split(|c: char| !c.is_ascii_digit() && c != '.' && c != '-')
                .filter(|w| !w.is_empty())
                .map(|w| {
                    let v: f64 = w.parse().unwrap_or_else(|_| panic!("{w:?} in {line:?}"));
                    v as i64
                })
                .collect::<Vec<_>>()
        })
        .collect();
    values.sort_unstable();
    values
}

/// `range(n) → map(scale: 3x + 1) → shuffle(32, seed 5) → batch(batch)`:
/// `range` gives one split per value, so each of the 12 lanes gets `n / 12`
/// values and, with `n` a multiple of `12 * batch`, as many batches as any
/// other lane. Each line is a batch of float32 values `3x + 1`.
fn range_pipeline(n: usize, batch: usize) -> String {
    assert_eq!(n % (LANES * batch), 0, "every lane gets whole batches");
    format!(
        r#"{{"op": "batch", "batch_size": {batch}, "input":
            {{"op": "shuffle", "buffer_size": 32, "seed": 5, "input":
              {{"op": "map", "function": {{"function": "scale", "args": {{"factor": 3, "offset": 1}}}},
                "input": {{"op": "range", "stop": {n}}}}}}}}}"#
    )
}

/// The values a [`range_pipeline`] of `n` holds, sorted.
fn range_values(n: usize) -> Vec<i64> {
    (0..n as i64).map(|x| 3 * x + 1).collect()
}

/// `files` text files of `lines` lines each (`<file> <line> <value>`) and the
/// pipeline `text_line_dataset(files) → shuffle(16, no seed) → batch(3)`:
/// one split per file, `files / 12` files per lane; the unseeded shuffle
/// draws its seed from the dataset, the epoch and the lane.
fn text_pipeline(dir: &Path, files: usize, lines: usize) -> String {
    assert_eq!(files % LANES, 0);
    assert_eq!((files / LANES * lines) % 3, 0);
    let mut names = Vec::new();
    for f in 0..files {
        let path = dir.join(format!("part-{f:03}.txt"));
        let text: String = (0..lines)
            .map(|l| format!("{f} {l} {}\n", f * lines + l))
            .collect();
        std::fs::write(&path, text).unwrap();
        names.push(format!("{:?}", path.to_str().unwrap()));
    }
    format!(
        r#"{{"op": "batch", "batch_size": 3, "input":
            {{"op": "shuffle", "buffer_size": 16, "input":
              {{"op": "text_line_dataset", "filenames": [{}]}}}}}}"#,
        names.join(", ")
    )
}

/// The pipelines of the global-sequence test, registered in `cluster`.
struct Pipeline {
    name: &'static str,
    dataset_id: String,
    split_shuffle_seed: Option<u64>,
}

/// Reads `p` with `n` consumers sharing job `job`; the global sequence.
fn read_global(cluster: &Cluster, p: &Pipeline, job: &str, n: usize) -> Vec<String> {
    let mut consumers: Vec<Process> = (0..n)
        .map(|c| {
            Consumer {
                dataset_id: &p.dataset_id,
                job_name: job,
                split_shuffle_seed: p.split_shuffle_seed,
                index: c,
                count: n,
                checkpoint: None,
                extra: &[],
            }
            .spawn(&cluster.service())
        })
        .collect();
    let lines = finish(&mut consumers, cluster);
    let first: Vec<usize> = (0..n).collect();
    interleave(&lines, &first, 0)
}

#[test]
fn the_global_sequence_is_the_same_for_any_number_of_workers_and_consumers() {
    let started = Instant::now();
    let mut cluster = Cluster::start(1);
    let range_n = 14_400; // 1,200 values a lane, 3,600 batches
    let (files, lines) = (24, 150); // 2 files a lane, 1,200 batches
    let range = Pipeline {
        name: "range-map-shuffle-batch",
        dataset_id: cluster.register("range", &range_pipeline(range_n, 4)),
        split_shuffle_seed: None,
    };
    let text = Pipeline {
        name: "text-files-unseeded-shuffle-batch, split shuffle seed 7",
        dataset_id: cluster.register("text", &text_pipeline(cluster.dir.path(), files, lines)),
        split_shuffle_seed: Some(7),
    };
    let pipelines = [range, text];
    // The first read of each pipeline (1 worker, 1 consumer) is the
    // reference; its content is the pipeline's, each value once.
    let mut reference: Vec<Option<Vec<String>>> = vec![None, None];
    for workers in [1, 2, 4] {
        while cluster.workers.len() < workers {
            cluster.add_worker();
        }
        cluster.wait_for_workers(workers);
        for consumers in [1, 2, 3] {
            for (p, pipeline) in pipelines.iter().enumerate() {
                let job = format!("p{p}-w{workers}-c{consumers}");
                let global = read_global(&cluster, pipeline, &job, consumers);
                eprintln!(
                    "{}: {workers} workers, {consumers} consumers: {} elements ({:?})",
                    pipeline.name,
                    global.len(),
                    started.elapsed()
                );
                match &reference[p] {
                    None => {
                        let expected: Vec<i64> = if p == 0 {
                            range_values(range_n)
                        } else {
                            (0..files)
                                .flat_map(|f| (0..lines).map(move |l| (f, l)))
                                .flat_map(|(f, l)| [f as i64, l as i64, (f * lines + l) as i64])
                                .collect::<Vec<_>>()
                        };
                        let mut expected = expected;
                        expected.sort_unstable();
                        assert!(
                            numbers(&global) == expected,
                            "{}: the read is not the pipeline's elements, each once ({} lines)",
                            pipeline.name,
                            global.len()
                        );
                        reference[p] = Some(global);
                    }
                    Some(expected) => assert!(
                        *expected == global,
                        "{}: {workers} workers and {consumers} consumers read another global \
                         sequence than 1 worker and 1 consumer: {}",
                        pipeline.name,
                        first_difference(expected, &global)
                    ),
                }
            }
        }
    }
    eprintln!(
        "9 shapes, 2 pipelines, one sequence each ({:?})",
        started.elapsed()
    );
}

/// Keeps every version of the consumers' `--checkpoint-file`s, by step, as
/// a training job keeps a checkpoint per step next to its model: the CLI
/// replaces its file at each checkpoint (atomically, by a rename), and a
/// thread reads the files every 200 µs, faster than a consumer writes
/// them. A version it misses only narrows the choice of a common step.
struct CheckpointKeeper {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<BTreeMap<usize, Vec<u8>>>>,
}

impl CheckpointKeeper {
    fn start(files: &[PathBuf]) -> CheckpointKeeper {
        let stop = Arc::new(AtomicBool::new(false));
        let files = files.to_vec();
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut kept: Vec<BTreeMap<usize, Vec<u8>>> = vec![BTreeMap::new(); files.len()];
                loop {
                    // One last pass after the stop: the files as the kill
                    // left them.
                    let last = stop.load(Ordering::Acquire);
                    for (file, kept) in files.iter().zip(&mut kept) {
                        // The file holds the run's count of printed lines
                        // (8 bytes, little-endian), then the checkpoint.
                        if let Ok(bytes) = std::fs::read(file)
                            && let Some(count) = bytes.first_chunk::<8>()
                        {
                            kept.insert(u64::from_le_bytes(*count) as usize, bytes);
                        }
                    }
                    if last {
                        return kept;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            })
        };
        CheckpointKeeper { stop, thread }
    }

    /// Every version seen of each file, by step.
    fn finish(self) -> Vec<BTreeMap<usize, Vec<u8>>> {
        self.stop.store(true, Ordering::Release);
        self.thread.join().unwrap()
    }
}

#[test]
fn a_checkpoint_of_four_consumers_restores_on_two_and_on_three_through_kills() {
    let started = Instant::now();
    let mut rng = rng(0x0035_e1a5);
    let mut cluster = Cluster::start(3);
    let n = 9_600; // 800 values a lane, 400 batches a lane, 4,800 in all
    let dataset_id = cluster.register("range", &range_pipeline(n, 2));
    let service = cluster.service();
    let read_with = |job: &str,
                     index: usize,
                     count: usize,
                     checkpoint: Option<(&Path, usize)>,
                     extra: &[&str]| {
        Consumer {
            dataset_id: &dataset_id,
            job_name: job,
            split_shuffle_seed: Some(0x5eed),
            index,
            count,
            checkpoint,
            extra,
        }
        .spawn(&service)
    };
    let read = |job: &str, index: usize, count: usize, checkpoint: Option<(&Path, usize)>| {
        read_with(job, index, count, checkpoint, &[])
    };

    // One uninterrupted read: the sequence to compare with.
    let uninterrupted = {
        let mut one = [read("uninterrupted", 0, 1, None)];
        finish(&mut one, &cluster).remove(0)
    };
    assert_eq!(
        numbers(&uninterrupted),
        range_values(n),
        "the uninterrupted read holds every value once"
    );
    eprintln!(
        "uninterrupted: {} elements ({:?})",
        uninterrupted.len(),
        started.elapsed()
    );

    // Four consumers checkpointing every 50 elements, killed together at a
    // random step (each one a few steps past their common checkpoint).
    let every = 50;
    let per_consumer = uninterrupted.len() / 4;
    let files: Vec<PathBuf> = (0..4)
        .map(|c| cluster.dir.path().join(format!("consumer{c}of4.ckpt")))
        .collect();
    let keeper = CheckpointKeeper::start(&files);
    // A small reorder window keeps the workers busy all through the read.
    let mut consumers: Vec<Process> = (0..4)
        .map(|c| {
            read_with(
                "elastic",
                c,
                4,
                Some((&files[c], every)),
                &["--reorder-window-elements", "24"],
            )
        })
        .collect();
    // SIGKILLed together once the slowest read a random number of elements
    // (a faster one may have read its whole share and ended).
    let kill_at = rng.random_range(3..per_consumer / every - 3) * every + every / 2;
    let deadline = Instant::now() + READ_LIMIT;
    while consumers.iter().map(Process::stdout_len).min().unwrap() < kill_at {
        assert!(
            Instant::now() < deadline,
            "the consumers stalled before {kill_at} elements each\n{}",
            consumers
                .iter()
                .map(Process::logs)
                .collect::<Vec<_>>()
                .join("\n")
        );
        for consumer in &mut consumers {
            if let Some(status) = consumer.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "{} failed ({status})\n{}",
                    consumer.name,
                    consumer.logs()
                );
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    for consumer in &mut consumers {
        let _ = consumer.child.kill();
        let _ = consumer.wait_exit(Duration::from_secs(10));
    }
    let kept = keeper.finish();
    let printed: Vec<usize> = consumers.iter().map(Process::stdout_len).collect();
    // The newest step every consumer checkpointed.
    let step = *kept[0]
        .keys()
        .rev()
        .find(|step| kept.iter().all(|k| k.contains_key(step)))
        .expect("the consumers checkpointed a common step");
    let seen: Vec<Vec<usize>> = kept.iter().map(|k| k.keys().copied().collect()).collect();
    eprintln!(
        "4 consumers killed after {printed:?} elements; the newest step all checkpointed: {step} \
         (steps seen: {seen:?}; {:?})",
        started.elapsed()
    );
    assert!(step > 0 && step % every == 0, "checkpoint steps {seen:?}");
    let step_files: Vec<PathBuf> = (0..4)
        .map(|c| {
            let file = cluster
                .dir
                .path()
                .join(format!("consumer{c}of4-step{step}.ckpt"));
            std::fs::write(&file, &kept[c][&step]).unwrap();
            file
        })
        .collect();
    // What the trainers consumed up to that checkpoint; what they printed
    // after it is dropped, as a trainer's steps after its model checkpoint
    // are.
    let before: Vec<Vec<String>> = consumers
        .iter()
        .map(|c| c.stdout_lines()[..step].to_vec())
        .collect();
    drop(consumers);

    let merged = cluster.dir.path().join("merged.ckpt");
    let out = Command::new(BIN)
        .arg("merge-checkpoints")
        .arg(&merged)
        .args(&step_files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "merge-checkpoints: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Between the kill and the restore: a worker SIGKILLed, another
    // started, the dispatcher SIGKILLed and restarted from its journal.
    let victim = rng.random_range(0..cluster.workers.len());
    let killed = cluster.kill_worker(victim);
    cluster.restart_dispatcher();
    let added = cluster.add_worker();
    eprintln!("worker :{killed} killed, :{added} added, dispatcher restarted");
    cluster.wait_for_workers(3);

    // A consumer's own checkpoint is refused by another consumer shape,
    // saying to merge first.
    {
        let own = cluster.dir.path().join("own.ckpt");
        std::fs::copy(&step_files[0], &own).unwrap();
        let mut wrong = [read("elastic-wrong", 0, 2, Some((&own, every)))];
        let status = wrong[0].wait_exit(READ_LIMIT).expect("the read ends");
        assert!(
            !status.success(),
            "consumer 0 of 4's checkpoint restored as 0 of 2"
        );
        let logs = wrong[0].logs();
        assert!(
            logs.contains("merge") && wrong[0].stdout_len() == 0,
            "no clear error:\n{logs}"
        );
    }

    for m in [2, 3] {
        let restore_started = Instant::now();
        let files: Vec<PathBuf> = (0..m)
            .map(|c| {
                let file = cluster.dir.path().join(format!("restored{c}of{m}.ckpt"));
                std::fs::copy(&merged, &file).unwrap();
                file
            })
            .collect();
        // On 2: the job the killed consumers read, as a restarted training
        // job names it; on 3: a job of its own.
        let job = if m == 2 { "elastic" } else { "elastic-on-3" };
        // A small reorder window: the workers stay at most 6 elements a
        // lane ahead of the consumers, so a worker killed mid-read still
        // had most of its lanes to serve.
        let mut consumers: Vec<Process> = (0..m)
            .map(|c| {
                read_with(
                    job,
                    c,
                    m,
                    Some((&files[c], every)),
                    &["--reorder-window-elements", "24"],
                )
            })
            .collect();
        if m == 3 {
            // A worker dies in the middle of this read and is not replaced:
            // its lanes move to the others, from where their readers were.
            let deadline = Instant::now() + READ_LIMIT;
            let quarter = (uninterrupted.len() - 4 * step) / 4;
            while consumers.iter().map(Process::stdout_len).sum::<usize>() < quarter {
                assert!(Instant::now() < deadline, "the restored read stalled");
                std::thread::sleep(Duration::from_millis(2));
            }
            assert!(
                consumers
                    .iter_mut()
                    .any(|c| c.child.try_wait().unwrap().is_none()),
                "the restored read ended before the worker's kill"
            );
            let victim = rng.random_range(0..cluster.workers.len());
            let killed = cluster.kill_worker(victim);
            eprintln!("worker :{killed} killed mid-read");
        }
        let after = finish(&mut consumers, &cluster);
        // The checkpoint is at global position 4 * step: consumer c of m
        // goes on from the first position at or after it that is c modulo m.
        let resumed_at = 4 * step;
        let first: Vec<usize> = (0..m)
            .map(|c| resumed_at + (c + m - resumed_at % m) % m)
            .collect();
        let mut sequence = interleave(&before, &[0, 1, 2, 3], 0);
        assert_eq!(sequence.len(), resumed_at);
        sequence.extend(interleave(&after, &first, resumed_at));
        assert!(
            sequence == uninterrupted,
            "restored on {m}: before + after is not the uninterrupted read: {}",
            first_difference(&uninterrupted, &sequence)
        );
        eprintln!(
            "restored on {m}: {} + {} elements, the uninterrupted sequence ({:?}; {:?} in all)",
            resumed_at,
            sequence.len() - resumed_at,
            restore_started.elapsed(),
            started.elapsed()
        );
    }
}

fn http_get(port: u16, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    body.to_string()
}

/// The values of metric `name` per worker address, from `/metrics` text.
fn per_worker(metrics: &str, name: &str) -> BTreeMap<String, f64> {
    metrics
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix('{')?;
            let (labels, value) = rest.split_once("} ")?;
            let worker = labels
                .split(',')
                .find_map(|l| l.strip_prefix("worker=\""))?
                .trim_end_matches('"');
            Some((worker.to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// The value for the worker listening on `port`, 0 if none.
fn of_port(values: &BTreeMap<String, f64>, port: u16) -> f64 {
    let suffix = format!(":{port}");
    values
        .iter()
        .filter(|(worker, _)| worker.ends_with(&suffix))
        .map(|(_, v)| *v)
        .sum()
}

#[test]
fn a_slow_worker_holds_up_the_read_within_its_reorder_window_and_is_named() {
    const WINDOW: usize = 24;
    let started = Instant::now();
    let cluster = Cluster::start(2);
    let n = 4_800; // 400 values a lane, 200 batches a lane
    let dataset_id = cluster.register("range", &range_pipeline(n, 2));
    // Every read here has the same window: the dispatcher's gauge is the
    // fullest window any reader reported in the last minute.
    let window = WINDOW.to_string();
    let extra = ["--reorder-window-elements", window.as_str()];
    let uninterrupted = {
        let mut one = [Consumer {
            dataset_id: &dataset_id,
            job_name: "fast",
            split_shuffle_seed: None,
            index: 0,
            count: 1,
            checkpoint: None,
            extra: &extra,
        }
        .spawn(&cluster.service())];
        finish(&mut one, &cluster).remove(0)
    };
    eprintln!("both workers running: {:?}", started.elapsed());

    // Worker 0 runs 10 ms of every 100 ms from here on.
    let (slow_port, fast_port) = (cluster.workers[0].0, cluster.workers[1].0);
    let slow_pid = cluster.workers[0].1.child.id().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let throttle = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let signal = |name: &str| {
                let _ = Command::new("kill").args([name, &slow_pid]).status();
            };
            while !stop.load(Ordering::Relaxed) {
                signal("-STOP");
                std::thread::sleep(Duration::from_millis(90));
                signal("-CONT");
                std::thread::sleep(Duration::from_millis(10));
            }
            signal("-CONT");
        })
    };
    let mut slow_read = [Consumer {
        dataset_id: &dataset_id,
        job_name: "slow",
        split_shuffle_seed: None,
        index: 0,
        count: 1,
        checkpoint: None,
        extra: &extra,
    }
    .spawn(&cluster.service())];
    // While it reads: the dispatcher's gauge of the reader's window fill,
    // as its heartbeats report it, never above the window.
    let mut fills = Vec::new();
    while slow_read[0].child.try_wait().unwrap().is_none() && started.elapsed() < READ_LIMIT * 2 {
        let metrics = http_get(cluster.http_port, "/metrics");
        fills.extend(
            per_worker(&metrics, "tfdata_dispatcher_reorder_window_elements").into_values(),
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let read = finish(&mut slow_read, &cluster).remove(0);
    stop.store(true, Ordering::Relaxed);
    throttle.join().unwrap();
    let read_time = started.elapsed();
    assert!(
        read == uninterrupted,
        "with a slow worker the sequence changed: {}",
        first_difference(&uninterrupted, &read)
    );
    let most = fills.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "slow read: {} elements; window fill sampled {} times, at most {most} of {WINDOW} \
         ({read_time:?})",
        read.len(),
        fills.len()
    );
    assert!(
        most > 0.0,
        "the reorder window never held anything: {fills:?}"
    );
    assert!(
        most <= WINDOW as f64,
        "the reorder window held {most} elements, over its bound {WINDOW}"
    );

    let metrics = http_get(cluster.http_port, "/metrics");
    let waits = per_worker(&metrics, "tfdata_dispatcher_reorder_wait_seconds_total");
    let (slow, fast) = (of_port(&waits, slow_port), of_port(&waits, fast_port));
    eprintln!("reorder waits: slow worker {slow} s, fast worker {fast} s");
    assert!(
        slow > 0.0 && slow > fast,
        "the slow worker's reorder wait ({slow} s) is not above the fast one's ({fast} s):\n{metrics}"
    );
    // The status page: the workers' table gives each worker's readers'
    // reorder wait in the last minute (flagged past 1 s a minute) and the
    // fullest window reported; `/api/status` the same figures.
    let status: serde_json::Value =
        serde_json::from_str(&http_get(cluster.http_port, "/api/status")).unwrap();
    let row = |port: u16| {
        let suffix = format!(":{port}");
        status["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["address"].as_str().unwrap().ends_with(&suffix))
            .unwrap_or_else(|| panic!("no worker :{port} in {status}"))
            .clone()
    };
    let (slow_row, fast_row) = (row(slow_port), row(fast_port));
    let wait_of = |row: &serde_json::Value| row["reorder_wait_seconds_last_minute"].as_f64();
    eprintln!(
        "status page, last minute: slow worker {:?} s, fast worker {:?} s",
        wait_of(&slow_row),
        wait_of(&fast_row)
    );
    assert!(
        wait_of(&slow_row).unwrap_or(0.0) > wait_of(&fast_row).unwrap_or(0.0),
        "the status page does not show the slow worker's reorder wait above the fast one's: \
         {slow_row} {fast_row}"
    );
    let window_seen = slow_row["reorder_window_elements"].as_u64().unwrap_or(0);
    assert!(
        window_seen <= WINDOW as u64 && slow_row["reorder_window_limit"] == WINDOW as u64,
        "the status page's reorder window: {slow_row}"
    );
    let page = http_get(cluster.http_port, "/");
    let slow_address = slow_row["address"].as_str().unwrap();
    let slow_html = page
        .split("<tr>")
        .find(|tr| tr.contains(&format!(r#"title="{slow_address}""#)))
        .unwrap_or_else(|| panic!("no row of {slow_address} on the status page:\n{page}"));
    assert!(
        slow_html.contains(r#"<span class="pill warn">"#) && slow_html.contains(" s/min"),
        "the slow worker's row does not flag its reorder wait: {slow_html}"
    );
}
