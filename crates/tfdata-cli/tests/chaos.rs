//! Chaos: the dispatcher is killed with SIGKILL at random moments during a
//! distributed_epoch read (3 worker processes, 2 consumers sharing the job)
//! and restarted from its journal; every element must arrive exactly once.
//! Exactly-once relies on the journaled split cursor and on tfdata workers'
//! idempotent `GetSplit` (a split journaled but not delivered is delivered on
//! the retry).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use tfdata::{Dataset, ProcessingMode, distribute};

const BIN: &str = env!("CARGO_BIN_EXE_tfdata");

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(args: &[&str]) -> Process {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(Duration::from_secs(30)).expect("started");
    Process(child)
}

fn dispatcher(port: u16, work_dir: &str) -> Process {
    start(&[
        "dispatcher",
        "--port",
        &port.to_string(),
        "--work-dir",
        work_dir,
        "--fault-tolerant-mode",
    ])
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn dispatcher_killed_at_random_moments_loses_and_duplicates_nothing() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xc4a05);
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let work_dir = dir.path().to_str().unwrap().to_string();
        let port = free_port();
        let address = format!("localhost:{port}");
        let mut current = Some(dispatcher(port, &work_dir));
        let _workers: Vec<Process> = (0..3)
            .map(|_| {
                start(&[
                    "worker",
                    "--dispatcher-address",
                    &address,
                    "--heartbeat-interval-ms",
                    "200",
                ])
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let n = 3000;
        let consumers: Vec<_> = (0..2)
            .map(|c| {
                let ds = distribute(
                    ProcessingMode::DistributedEpoch,
                    &format!("grpc://{address}"),
                )
                .job_name("chaos")
                .task_refresh_interval(Duration::from_millis(100))
                .apply(&Dataset::range(n))
                .unwrap();
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    for e in ds.iter().unwrap() {
                        out.push(e.unwrap().components[0].to_scalar::<i64>().unwrap());
                        if out.len() % 50 == c {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                    out
                })
            })
            .collect();
        // Kill and restart the dispatcher at random moments while they read.
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut kills = 0;
        while !consumers.iter().all(|c| c.is_finished()) {
            assert!(
                Instant::now() < deadline,
                "round {round}: the read did not finish"
            );
            std::thread::sleep(Duration::from_millis(rng.random_range(20..250)));
            if kills < 4 && !consumers.iter().all(|c| c.is_finished()) {
                drop(current.take()); // SIGKILL
                kills += 1;
                std::thread::sleep(Duration::from_millis(rng.random_range(0..200)));
                current = Some(dispatcher(port, &work_dir));
            }
        }
        let mut counts = BTreeMap::new();
        for c in consumers {
            for v in c.join().unwrap() {
                *counts.entry(v).or_insert(0usize) += 1;
            }
        }
        let wrong: Vec<_> = counts.iter().filter(|(_, c)| **c != 1).collect();
        assert_eq!(
            counts.len() as i64,
            n,
            "round {round} after {kills} kills: missing elements"
        );
        assert!(
            wrong.is_empty(),
            "round {round} after {kills} kills: duplicated {wrong:?}"
        );
        eprintln!("round {round}: {kills} dispatcher kills, {n} elements exactly once");
    }
}
