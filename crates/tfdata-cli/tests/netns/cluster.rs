//! tfdata on the sandbox's hosts: a dispatcher, workers and readers as real
//! `tfdata` processes, each on its own host and listening there, and the
//! dispatcher's state as `tfdata status` prints it.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::delay_proxy::{DelayProxy, LineStats};
use super::network::{Host, Network};
use crate::common::process::Process;

pub const DISPATCHER_PORT: u16 = 5050;
/// Worker `i` (from 0) listens on this port plus `i`.
pub const FIRST_WORKER_PORT: u16 = 5001;
/// How often workers heartbeat and readers refresh their tasks: short, so
/// the scenarios see changes within a second.
pub const HEARTBEAT_MS: &str = "200";
/// How long a finished command (`register`, `status`) may take.
const COMMAND_LIMIT: Duration = Duration::from_secs(30);

/// How the cluster is wired.
pub struct Layout<'a> {
    pub workers: usize,
    pub dispatcher_args: &'a [&'a str],
    /// Route every connection through a delay line of this proxy.
    pub delay_proxy: Option<&'a DelayProxy>,
}

/// A dispatcher, workers and a reader host on one switch.
pub struct Cluster {
    // Field order is drop order: processes before the network.
    pub dispatcher: Process,
    pub workers: Vec<Process>,
    pub dispatcher_host: Host,
    pub worker_hosts: Vec<Host>,
    pub reader_host: Host,
    /// What each delay line carried, by the host it leads to.
    pub lines: Vec<(String, Arc<LineStats>)>,
    delayed: bool,
    pub net: Network,
}

impl Cluster {
    /// Builds the hosts, starts the dispatcher and the workers, and waits
    /// until every worker is registered.
    pub fn start(layout: Layout<'_>) -> Cluster {
        let mut net = Network::new();
        let dispatcher_host = net.add_host("dispatcher", 2);
        let worker_hosts: Vec<Host> = (0..layout.workers)
            .map(|i| net.add_host(&format!("w{}", i + 1), 11 + i as u8))
            .collect();
        let reader_host = net.add_host("reader", 100);
        let mut lines = Vec::new();
        if let Some(proxy) = layout.delay_proxy {
            let ports = std::iter::once((&dispatcher_host, DISPATCHER_PORT))
                .chain(worker_hosts.iter().zip(FIRST_WORKER_PORT..));
            for (host, port) in ports {
                let listen = SocketAddrV4::new(host.delayed, port);
                let stats = proxy.add_line(listen, SocketAddrV4::new(host.address, port));
                lines.push((host.name.clone(), stats));
            }
            for host in worker_hosts.iter().chain([&dispatcher_host, &reader_host]) {
                net.only_delayed_paths(host);
            }
        }
        let delayed = layout.delay_proxy.is_some();
        let mut args = vec!["dispatcher", "--port", "5050"];
        args.extend(layout.dispatcher_args);
        let dispatcher = Process::spawn("dispatcher", dispatcher_host.tfdata(&args));
        dispatcher.port();
        let dispatcher_address = format!("{}:{DISPATCHER_PORT}", reach(&dispatcher_host, delayed));
        let workers: Vec<Process> = worker_hosts
            .iter()
            .zip(FIRST_WORKER_PORT..)
            .map(|(host, port)| start_worker(host, reach(host, delayed), port, &dispatcher_address))
            .collect();
        let cluster = Cluster {
            dispatcher,
            workers,
            dispatcher_host,
            worker_hosts,
            reader_host,
            lines,
            delayed,
            net,
        };
        let n = layout.workers;
        cluster.wait_status(
            "every worker registered",
            Duration::from_secs(30),
            &[],
            |s| s.workers.len() == n && s.workers.iter().all(|w| !w.lost),
        );
        cluster
    }

    /// The dispatcher as readers address it.
    pub fn service(&self) -> String {
        format!(
            "grpc://{}:{DISPATCHER_PORT}",
            reach(&self.dispatcher_host, self.delayed)
        )
    }

    /// The address worker `i` advertises (as the dispatcher lists it).
    pub fn worker_address(&self, i: usize) -> String {
        let port = FIRST_WORKER_PORT + i as u16;
        format!("{}:{port}", reach(&self.worker_hosts[i], self.delayed))
    }

    /// The cluster's processes and `others`, for failure messages.
    pub fn everyone<'a>(&'a self, others: &[&'a Process]) -> Vec<&'a Process> {
        let mut all = vec![&self.dispatcher];
        all.extend(&self.workers);
        all.extend(others);
        all
    }

    /// The logs of the cluster's processes and of `others`, for failure
    /// messages.
    pub fn logs(&self, others: &[&Process]) -> String {
        let logs: Vec<String> = self.everyone(others).iter().map(|p| p.logs()).collect();
        logs.join("\n")
    }

    /// Registers the JSON pipeline `pipeline` from the reader's host and
    /// returns its dataset id.
    pub fn register(&self, pipeline: &str) -> String {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("pipeline.json");
        std::fs::write(&path, pipeline).expect("write pipeline");
        let service = self.service();
        let path = path.to_str().expect("utf-8 temp path");
        let args = ["register", "--service", &service, "--pipeline", path];
        let lines = self.finish("tfdata register", self.reader_host.tfdata(&args));
        lines
            .first()
            .cloned()
            .expect("register printed the dataset id")
    }

    /// Starts `tfdata read` of `dataset_id` on the reader's host.
    pub fn read(&self, dataset_id: &str, mode: &str) -> Process {
        let service = self.service();
        let args = [
            "read",
            "--service",
            &service,
            "--dataset-id",
            dataset_id,
            "--processing-mode",
            mode,
            "--task-refresh-interval-ms",
            HEARTBEAT_MS,
            "--stats",
        ];
        Process::spawn("reader", self.reader_host.tfdata(&args))
    }

    /// The dispatcher's state, read with `tfdata status` on the dispatcher's
    /// own host over its loopback, so no cut link is in the way.
    pub fn status(&self) -> Status {
        let address = format!("127.0.0.1:{DISPATCHER_PORT}");
        let command = self
            .dispatcher_host
            .tfdata(&["status", "--dispatcher", &address]);
        Status::parse(self.finish("tfdata status", command).join("\n"))
    }

    /// Polls the status until `condition` holds; panics after `limit` with
    /// the last status and everyone's logs.
    pub fn wait_status(
        &self,
        what: &str,
        limit: Duration,
        others: &[&Process],
        condition: impl Fn(&Status) -> bool,
    ) -> Status {
        let deadline = Instant::now() + limit;
        loop {
            let status = self.status();
            if condition(&status) {
                return status;
            }
            if Instant::now() >= deadline {
                panic!(
                    "timed out after {limit:?} waiting for {what}; the last status:\n{}\n{}",
                    status.text,
                    self.logs(others)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs `command` to its end (bounded) and returns its stdout lines;
    /// panics with its logs and the cluster's if it fails.
    fn finish(&self, what: &str, command: std::process::Command) -> Vec<String> {
        let mut process = Process::spawn(what, command);
        match process.wait_exit(COMMAND_LIMIT) {
            Some(status) if status.success() => process.stdout_lines(),
            outcome => panic!("{what} ended with {outcome:?}\n{}", self.logs(&[&process])),
        }
    }
}

/// `tfdata worker` on `host`, listening on `port` and advertising
/// `advertised:port`, registered with `dispatcher_address`; returns once it
/// listens.
pub fn start_worker(
    host: &Host,
    advertised: Ipv4Addr,
    port: u16,
    dispatcher_address: &str,
) -> Process {
    let advertised = format!("{advertised}:%port%");
    let port = port.to_string();
    let args = [
        "worker",
        "--dispatcher-address",
        dispatcher_address,
        "--port",
        &port,
        "--worker-address",
        &advertised,
        "--heartbeat-interval-ms",
        HEARTBEAT_MS,
    ];
    let worker = Process::spawn(&format!("worker {}", host.name), host.tfdata(&args));
    worker.port();
    worker
}

/// The address others use for `host`: its own, or its delay line's.
fn reach(host: &Host, delayed: bool) -> Ipv4Addr {
    if delayed { host.delayed } else { host.address }
}

/// One worker as `tfdata status` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRow {
    pub address: String,
    pub lost: bool,
    /// Seconds since its last heartbeat (none before the first).
    pub heartbeat_age: Option<f64>,
    pub tasks: usize,
}

/// One task as `tfdata status` lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TaskRow {
    pub id: i64,
    pub iteration: i64,
    pub worker: String,
    pub finished: bool,
}

/// `tfdata status`'s text and the tables the scenarios look at.
#[derive(Debug, Clone)]
pub struct Status {
    pub text: String,
    pub workers: Vec<WorkerRow>,
    pub tasks: Vec<TaskRow>,
}

impl Status {
    fn parse(text: String) -> Status {
        let rows = |title: &str| -> Vec<Vec<String>> {
            text.lines()
                .skip_while(|l| !l.starts_with(&format!("{title} (")))
                .skip(2) // the title and the header
                .take_while(|l| !l.trim().is_empty())
                .map(|l| l.split_whitespace().map(str::to_string).collect())
                .collect()
        };
        // ADDRESS STATE [TAGS] LAST HEARTBEAT TASKS; the heartbeat is
        // "1.2s ago" or "-".
        let workers = rows("Workers")
            .into_iter()
            .map(|cells| {
                let age = cells.iter().find_map(|c| c.strip_suffix('s')?.parse().ok());
                WorkerRow {
                    address: cells[0].clone(),
                    lost: cells[1] == "lost",
                    heartbeat_age: age,
                    tasks: cells[cells.len() - 1].parse().expect("task count"),
                }
            })
            .collect();
        // ID ITERATION WORKER STARTING-ROUND STATE
        let tasks = rows("Tasks")
            .into_iter()
            .map(|cells| TaskRow {
                id: cells[0].parse().expect("task id"),
                iteration: cells[1].parse().expect("iteration id"),
                worker: cells[2].clone(),
                finished: cells[4] == "finished",
            })
            .collect();
        Status {
            text,
            workers,
            tasks,
        }
    }

    pub fn worker(&self, address: &str) -> Option<&WorkerRow> {
        self.workers.iter().find(|w| w.address == address)
    }
}

/// How often each value appears among `lines`: a line is an int64 element
/// (`17`) or a tuple whose first component is one (`(17, "...")`).
pub fn counts(lines: &[String]) -> BTreeMap<i64, usize> {
    let mut counts = BTreeMap::new();
    for line in lines {
        let first = line
            .trim_start_matches('(')
            .split([',', ')'])
            .next()
            .unwrap_or_default();
        let value: i64 = first
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("not an int64 element: {line:.80}"));
        *counts.entry(value).or_insert(0) += 1;
    }
    counts
}

/// Checks that every value of `0..n` appears at least `copies` times and no
/// other value appears; returns how many appear more often (duplicates).
pub fn check_none_lost(counts: &BTreeMap<i64, usize>, n: i64, copies: usize, what: &str) -> usize {
    let missing: Vec<i64> = (0..n)
        .filter(|v| counts.get(v).copied().unwrap_or(0) < copies)
        .collect();
    assert!(
        missing.is_empty(),
        "{what}: {} of {n} elements lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    let strangers: Vec<&i64> = counts.keys().filter(|v| !(0..n).contains(*v)).collect();
    assert!(
        strangers.is_empty(),
        "{what}: elements not in the dataset: {strangers:?}"
    );
    counts.values().filter(|c| **c > copies).count()
}

/// Checks that every value of `0..n` appears exactly `copies` times.
pub fn check_exactly(counts: &BTreeMap<i64, usize>, n: i64, copies: usize, what: &str) {
    let duplicated = check_none_lost(counts, n, copies, what);
    let examples: Vec<(&i64, &usize)> = counts
        .iter()
        .filter(|(_, c)| **c > copies)
        .take(10)
        .collect();
    assert_eq!(
        duplicated, 0,
        "{what}: {duplicated} elements delivered too often, e.g. {examples:?}"
    );
}
