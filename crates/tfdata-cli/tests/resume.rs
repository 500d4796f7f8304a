//! Reader checkpoints with real processes (issue 17): a trainer (`tfdata
//! read --checkpoint-file`) is SIGKILLed at random steps, many times in one
//! epoch, and restarted from its last checkpoint; once the fault-tolerant
//! dispatcher is SIGKILLed and restarted as well, and once a worker, in the
//! middle of a run. What the trainer consumed
//! up to each checkpoint, run after run, is exactly the epoch: in
//! parallel_epochs every worker's whole sequence once, in distributed_epoch
//! every element once. The same with two trainer processes sharing one job
//! (`--job-name`), killed and restarted together, each from its own
//! checkpoint file.
//!
//! Each run's stdout is one element per line; the checkpoint file starts
//! with how many lines that run had printed when it was written, so the
//! lines after it (read but not checkpointed, as a trainer's steps after
//! its last model checkpoint) are dropped, as the trainer's work would be.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{BIN, Process};
use rand::{Rng, SeedableRng};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn dispatcher(port: u16, work_dir: &str) -> Process {
    Process::start(&[
        "dispatcher",
        "--port",
        &port.to_string(),
        "--work-dir",
        work_dir,
        "--fault-tolerant-mode",
    ])
    .0
}

/// The lines of `run` its checkpoint file covers: the count at the file's
/// start, if this run wrote the file (it differs from `before`).
fn checkpointed_lines(run: &Process, file: &std::path::Path, before: &[u8]) -> Vec<String> {
    let now = std::fs::read(file).unwrap_or_default();
    if now == before || now.len() < 8 {
        return Vec::new();
    }
    let count = u64::from_le_bytes(now[..8].try_into().unwrap()) as usize;
    let lines = run.stdout_lines();
    assert!(
        lines.len() >= count,
        "the checkpoint covers {count} lines, the run printed {}",
        lines.len()
    );
    lines[..count].to_vec()
}

#[test]
fn a_trainer_killed_at_random_steps_resumes_exactly_from_its_checkpoints() {
    // Two workers, each producing the whole dataset: every value twice.
    resume_through_kills("parallel_epochs", 2, 1, Source::Range);
}

#[test]
fn a_distributed_epoch_trainer_killed_at_random_steps_resumes_exactly() {
    // The workers share the splits: every value once.
    resume_through_kills("distributed_epoch", 1, 1, Source::Range);
}

#[test]
fn a_distributed_epoch_trainer_killed_mid_file_resumes_exactly() {
    // Splits spread over many elements: 30 files read line by line, so most
    // checkpoints fall inside files. Their positions are checkpointed and
    // skipped, not read again: every value once.
    resume_through_kills("distributed_epoch", 1, 1, Source::Files);
}

#[test]
fn two_trainers_sharing_a_distributed_epoch_job_resume_exactly() {
    // Two trainer processes share one job (job_name); each checkpoints its
    // own share and both restart from their checkpoints: every value once.
    resume_through_kills("distributed_epoch", 1, 2, Source::Range);
}

#[test]
fn two_trainers_sharing_a_parallel_epochs_job_resume_exactly() {
    // Each worker's sequence once, spread over the two trainers. No worker
    // restart: a restarted worker starts its sequence again (as in
    // TensorFlow), and a shared parallel_epochs read refuses checkpoints
    // from then on.
    resume_through_kills("parallel_epochs", 2, 2, Source::Range);
}

/// What a resume test reads: `range(n)`, or the same values as the lines of
/// 30 text files.
#[derive(Clone, Copy, PartialEq)]
enum Source {
    Range,
    Files,
}

/// `trainers` trainer processes of a `mode` read (sharing a job when more
/// than one) killed together 8 times at random steps (the dispatcher once,
/// a worker once mid-run): the lines they had checkpointed, run after run,
/// hold each value `copies` times.
fn resume_through_kills(mode: &str, copies: usize, trainers: usize, source: Source) {
    let dir = tempfile::tempdir().unwrap();
    let work_dir = dir.path().join("work_dir");
    let work_dir = work_dir.to_str().unwrap();
    let port = free_port();
    let address = format!("localhost:{port}");
    let service = format!("grpc://{address}");
    let mut current = Some(dispatcher(port, work_dir));
    let worker_ports = [free_port(), free_port()];
    let worker = |port: u16| {
        Process::start(&[
            "worker",
            "--dispatcher-address",
            &address,
            "--port",
            &port.to_string(),
            "--heartbeat-interval-ms",
            "200",
        ])
        .0
    };
    let mut workers: Vec<Process> = worker_ports.iter().map(|&p| worker(p)).collect();
    common::wait_for_workers(&address, 2);
    // The same number of elements in the epoch in both modes.
    let n: i64 = 6000 / copies as i64;
    let dataset = match source {
        Source::Range => tfdata::Dataset::range(n),
        Source::Files => {
            let files = 30;
            let paths: Vec<String> = (0..files)
                .map(|f| {
                    let path = dir.path().join(format!("part-{f:02}.txt"));
                    let text: String = (0..n)
                        .filter(|v| v % files == f)
                        .map(|v| format!("{v}\n"))
                        .collect();
                    std::fs::write(&path, text).unwrap();
                    path.to_str().unwrap().to_string()
                })
                .collect();
            let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
            tfdata::Dataset::text_lines(&paths, "").shuffle(16, Some(11), true)
        }
    };
    let dataset_id =
        tfdata::register_dataset(&service, &dataset, tfdata::Compression::Auto, None).unwrap();

    let checkpoints: Vec<std::path::PathBuf> = (0..trainers)
        .map(|i| dir.path().join(format!("reader{i}.ckpt")))
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5e5);
    let mut consumed: Vec<String> = Vec::new();
    let started = Instant::now();
    let mut kills = 0;
    let trainer = |checkpoint: &std::path::Path| {
        let mut command = Command::new(BIN);
        command.args([
            "read",
            "--service",
            &service,
            "--dataset-id",
            &dataset_id,
            "--processing-mode",
            mode,
            "--task-refresh-interval-ms",
            "100",
            "--checkpoint-file",
            checkpoint.to_str().unwrap(),
            "--checkpoint-every",
            "7",
            // Workers stay ahead of the trainer by little, so a worker
            // restarted mid-read has elements still to send.
            "--stream-window-elements",
            "16",
        ]);
        if trainers > 1 {
            command.args(["--job-name", "shared-by-trainers"]);
        }
        Process::spawn("trainer", command)
    };
    let printed = |runs: &mut [Process]| runs.iter().map(|r| r.stdout_len()).sum::<usize>();
    let all_ended = |runs: &mut [Process]| {
        runs.iter_mut()
            .all(|r| r.child.try_wait().unwrap().is_some())
    };
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "the epoch did not finish"
        );
        let before: Vec<Vec<u8>> = checkpoints
            .iter()
            .map(|c| std::fs::read(c).unwrap_or_default())
            .collect();
        let mut runs: Vec<Process> = checkpoints.iter().map(|c| trainer(c)).collect();
        if kills == 6 && !(trainers > 1 && mode == "parallel_epochs") {
            // Mid-read, a worker dies and comes back at its address: the
            // trainers read its new task on from where they were.
            while printed(&mut runs) < 20 && !all_ended(&mut runs) {
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = workers[0].child.kill();
            let _ = workers[0].wait_exit(Duration::from_secs(10));
            workers[0] = worker(worker_ports[0]);
            eprintln!("worker restarted mid-read");
            // Long enough for the readers to read the restarted worker.
            let deadline = Instant::now() + Duration::from_secs(60);
            while printed(&mut runs) < 1500 && !all_ended(&mut runs) {
                assert!(
                    Instant::now() < deadline,
                    "the trainers stalled after the worker restart\n{}\n{}\n{}",
                    runs.iter()
                        .map(Process::logs)
                        .collect::<Vec<_>>()
                        .join("\n"),
                    current.as_ref().map(Process::logs).unwrap_or_default(),
                    workers
                        .iter()
                        .map(Process::logs)
                        .collect::<Vec<_>>()
                        .join("\n")
                );
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        if kills < 8 {
            // Killed after a random number of steps (or at their end).
            let steps = rng.random_range(50..900);
            let deadline = Instant::now() + Duration::from_secs(60);
            while printed(&mut runs) < steps && !all_ended(&mut runs) {
                assert!(
                    Instant::now() < deadline,
                    "the trainers stalled\n{}",
                    runs.iter()
                        .map(Process::logs)
                        .collect::<Vec<_>>()
                        .join("\n")
                );
                std::thread::sleep(Duration::from_millis(2));
            }
            if !all_ended(&mut runs) {
                // Every trainer goes down with the job, as a synchronous
                // training job restarts all its hosts from the checkpoint.
                for run in &mut runs {
                    let _ = run.child.kill();
                    // Reaped, and its stdout read to the end.
                    let _ = run.wait_exit(Duration::from_secs(10));
                }
                kills += 1;
                eprintln!("trainers killed after {steps} steps");
                for ((run, file), before) in runs.iter().zip(&checkpoints).zip(&before) {
                    consumed.extend(checkpointed_lines(run, file, before));
                }
                if kills == 4 {
                    // The dispatcher dies too, and comes back from its journal.
                    drop(current.take());
                    current = Some(dispatcher(port, work_dir));
                    eprintln!("dispatcher restarted");
                }
                continue;
            }
        }
        for run in &mut runs {
            let status = run
                .wait_exit(Duration::from_secs(120))
                .expect("the read ends");
            assert!(status.success(), "the last run failed: {}", run.logs());
            consumed.extend(run.stdout_lines());
        }
        break;
    }
    assert!(kills >= 6, "only {kills} kills landed before the end");
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for line in &consumed {
        // A number, or a string holding one (a text file's line).
        let digits: String = line.chars().filter(char::is_ascii_digit).collect();
        *counts.entry(digits.parse().unwrap()).or_default() += 1;
    }
    let wrong: Vec<_> = (0..n)
        .filter(|v| counts.get(v) != Some(&copies))
        .map(|v| (v, counts.get(&v).copied().unwrap_or(0)))
        .take(20)
        .collect();
    assert!(
        wrong.is_empty() && counts.len() == n as usize,
        "{mode}, after {kills} kills: values not consumed exactly {copies} times: {wrong:?}"
    );
}
