//! Failover with real processes: three `tfdata dispatcher --leader-lease-ms`
//! processes share one work_dir (a local directory, then an S3 prefix on
//! moto); three workers and two consumers reading one distributed_epoch
//! job are given all three addresses. The leader is SIGKILLed (and
//! restarted as a standby), or SIGSTOPped (and resumed once replaced),
//! three times mid-epoch. Every read finishes with every element exactly
//! once; each failover (leader gone → another dispatcher's `/readyz`
//! passes) is measured and printed. After a SIGSTOP the resumed old
//! leader must exit non-zero having written nothing: on S3 no journal
//! object of its run appears after the takeover (the takeover created the
//! run's next segment name; segments are created only if absent).
//!
//! To investigate a failure: `TFDATA_TEST_LOG_DIR=/tmp/failover-logs
//! cargo test -p tfdata-cli --test failover -- --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;
#[path = "../../tfdata-dataset/tests/io_object_store_moto/mod.rs"]
mod moto;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{BIN, Process};
use tfdata::{Dataset, ProcessingMode, distribute};
use tfdata_dataset::io::FileSystem;

/// The lease: renewed every 400 ms, a 400 ms margin. Longer than the
/// in-process tests' because two other builds may share the cores.
const LEASE_MS: u64 = 2000;

#[derive(Clone, Copy, Debug)]
enum Failure {
    Kill,
    Stop,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Dispatcher {
    process: Process,
    http_port: u16,
}

struct Group {
    work_dir: String,
    env: Vec<(String, String)>,
    ports: Vec<u16>,
    nodes: Vec<Option<Dispatcher>>,
}

impl Group {
    fn start(work_dir: String, env: Vec<(String, String)>) -> Group {
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let mut group = Group {
            work_dir,
            env,
            ports,
            nodes: Vec::new(),
        };
        group.nodes = (0..3).map(|i| Some(group.dispatcher(i))).collect();
        group
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command.args(args);
        for (k, v) in &self.env {
            command.env(k, v);
        }
        command
    }

    fn dispatcher(&self, i: usize) -> Dispatcher {
        let port = self.ports[i].to_string();
        let address = format!("127.0.0.1:{port}");
        let lease = LEASE_MS.to_string();
        let command = self.command(&[
            "dispatcher",
            "--port",
            &port,
            "--work-dir",
            &self.work_dir,
            "--fault-tolerant-mode",
            "--leader-lease-ms",
            &lease,
            "--advertised-address",
            &address,
            "--http-port",
            "0",
        ]);
        let (process, _) = Process::start_command("dispatcher", command);
        let http_port = process.port_on_line(1);
        Dispatcher { process, http_port }
    }

    fn addresses(&self) -> String {
        self.ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The index of the dispatcher whose `/readyz` passes, if one's does
    /// (`except`: one not to ask, a stopped process).
    fn leader(&self, except: Option<usize>) -> Option<usize> {
        let ready: Vec<usize> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != except)
            .filter(|(_, n)| n.as_ref().is_some_and(|n| ready(n.http_port)))
            .map(|(i, _)| i)
            .collect();
        assert!(ready.len() <= 1, "several dispatchers ready: {ready:?}");
        ready.first().copied()
    }

    fn wait_for_leader(&self, limit: Duration, except: Option<usize>) -> usize {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(i) = self.leader(except) {
                return i;
            }
            if Instant::now() > deadline {
                let logs: Vec<String> = self
                    .nodes
                    .iter()
                    .flatten()
                    .map(|n| n.process.logs())
                    .collect();
                panic!("no dispatcher became ready\n{}", logs.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Whether the dispatcher whose admin port is `http_port` is ready (leads).
fn ready(http_port: u16) -> bool {
    common::ready(std::net::SocketAddr::from(([127, 0, 0, 1], http_port)))
}

/// The journal's object names on moto (`journal_<run>_<seq>`, compactions `snapshot_<m>`).
fn journal_objects(fs: &dyn FileSystem, url: &str) -> BTreeSet<String> {
    fs.list(url)
        .unwrap_or_default()
        .into_iter()
        .map(|name| name.rsplit('/').next().unwrap_or_default().to_string())
        .collect()
}

fn run_of(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("journal_")?;
    rest.split('_').next()?.parse().ok()
}

fn newest_compaction(names: &BTreeSet<String>) -> Option<u64> {
    names
        .iter()
        .filter_map(|n| n.strip_prefix("snapshot_")?.parse().ok())
        .max()
}

/// One scenario: `failure` three times during a distributed_epoch read.
/// Returns the failover times.
fn scenario(
    label: &str,
    work_dir: String,
    env: Vec<(String, String)>,
    failure: Failure,
    journal: Option<(&dyn FileSystem, String)>,
) -> Vec<Duration> {
    let mut group = Group::start(work_dir, env);
    group.wait_for_leader(Duration::from_secs(30), None);
    let addresses = group.addresses();
    let _workers: Vec<Process> = (0..3)
        .map(|_| {
            let command = group.command(&[
                "worker",
                "--dispatcher-address",
                &addresses,
                "--heartbeat-interval-ms",
                "200",
            ]);
            Process::start_command("worker", command).0
        })
        .collect();
    common::wait_for_workers(&addresses, 3);
    let n = 3000;
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let ds = distribute(
                ProcessingMode::DistributedEpoch,
                &format!("grpc://{addresses}"),
            )
            .job_name("failover")
            .task_refresh_interval(Duration::from_millis(100))
            .stream_window(8, 1 << 20)
            .apply(&Dataset::range(n))
            .unwrap();
            std::thread::spawn(move || {
                let mut out = Vec::new();
                for e in ds.iter().unwrap() {
                    out.push(e.unwrap().components[0].to_scalar::<i64>().unwrap());
                    std::thread::sleep(Duration::from_millis(6));
                }
                out
            })
        })
        .collect();

    let started = Instant::now();
    let mut failovers = Vec::new();
    for round in 0..3 {
        std::thread::sleep(Duration::from_millis(500));
        if consumers.iter().all(|c| c.is_finished()) {
            break;
        }
        let old = group.wait_for_leader(Duration::from_secs(30), None);
        let failed_at = Instant::now();
        match failure {
            Failure::Kill => drop(group.nodes[old].take()), // SIGKILL
            Failure::Stop => group.nodes[old].as_ref().unwrap().process.signal("STOP"),
        }
        let new = group.wait_for_leader(Duration::from_secs(30), Some(old));
        let took = failed_at.elapsed();
        eprintln!(
            "{label}: {failure:?} #{round} of dispatcher {old} at {:?}: dispatcher {new} \
             serving after {took:?}",
            failed_at - started
        );
        failovers.push(took);
        assert!(
            took < Duration::from_millis(LEASE_MS) * 2 + Duration::from_secs(5),
            "{label}: takeover within 5 s of the lease's expiry, took {took:?}"
        );
        if let Failure::Stop = failure {
            let stopped = group.nodes[old].as_ref().unwrap();
            assert!(
                !ready(stopped.http_port),
                "{label}: the stopped leader answers /readyz"
            );
            let before = journal.as_ref().map(|(fs, url)| journal_objects(*fs, url));
            let mut resumed = group.nodes[old].take().unwrap();
            resumed.process.signal("CONT");
            let status = resumed
                .process
                .wait_exit(Duration::from_secs(20))
                .unwrap_or_else(|| {
                    panic!(
                        "{label}: the resumed old leader did not exit\n{}",
                        resumed.process.logs()
                    )
                });
            let logs = resumed.process.logs();
            assert!(!status.success(), "{label}: exit {status:?}\n{logs}");
            assert!(
                logs.contains("not the leader any more") || logs.contains("lost the leader lease"),
                "{label}: {logs}"
            );
            if let (Some((fs, url)), Some(before)) = (&journal, before) {
                // Objects that appeared since the takeover in runs before
                // the new leader's (the newest compaction's number on) would
                // be the old leader's: none may, not even the group write
                // it was inside of when stopped (its fence checked before
                // the PUT): the new leader created that run's next segment
                // name at takeover, and the old leader creates segments
                // only if absent.
                let after = journal_objects(*fs, url);
                let first_new_run = newest_compaction(&before).unwrap_or(0);
                let stale: Vec<&String> = after
                    .difference(&before)
                    .filter(|n| run_of(n).is_some_and(|r| r < first_new_run))
                    .collect();
                eprintln!(
                    "{label}: objects of the old leader's run written after the takeover: \
                     {stale:?} (new runs from {first_new_run})"
                );
                assert!(
                    stale.is_empty(),
                    "{label}: the resumed old leader wrote {stale:?} (new runs from {first_new_run}; \
                     before {before:?})"
                );
            }
        }
        // Back as a standby, at the same address.
        group.nodes[old] = Some(group.dispatcher(old));
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    while !consumers.iter().all(|c| c.is_finished()) {
        assert!(
            Instant::now() < deadline,
            "{label}: the read did not finish"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for consumer in consumers {
        for v in consumer.join().unwrap() {
            *counts.entry(v).or_default() += 1;
        }
    }
    let wrong: Vec<_> = counts.iter().filter(|(_, c)| **c != 1).take(20).collect();
    assert_eq!(counts.len() as i64, n, "{label}: missing elements");
    assert!(wrong.is_empty(), "{label}: duplicated {wrong:?}");
    assert_eq!(
        failovers.len(),
        3,
        "{label}: the read ended before 3 failovers"
    );
    eprintln!(
        "{label}: {n} elements exactly once across {} failovers: {failovers:?}",
        failovers.len()
    );
    failovers
}

fn local_work_dir(dir: &tempfile::TempDir, label: &str) -> String {
    match std::env::var_os(common::process::LOG_DIR_VAR) {
        Some(logs) => std::path::Path::new(&logs)
            .join(format!("{label}-work_dir"))
            .to_str()
            .unwrap()
            .to_string(),
        None => dir.path().to_str().unwrap().to_string(),
    }
}

#[test]
fn local_work_dir_leader_killed_three_times() {
    let dir = tempfile::tempdir().unwrap();
    let work_dir = local_work_dir(&dir, "local-kill");
    scenario("local, SIGKILL", work_dir, Vec::new(), Failure::Kill, None);
}

#[test]
fn local_work_dir_leader_stopped_three_times() {
    let dir = tempfile::tempdir().unwrap();
    let work_dir = local_work_dir(&dir, "local-stop");
    scenario("local, SIGSTOP", work_dir, Vec::new(), Failure::Stop, None);
}

fn moto_env(moto: &moto::Moto) -> Vec<(String, String)> {
    moto.options()
        .into_iter()
        .map(|(k, v)| (k.to_ascii_uppercase(), v))
        .collect()
}

#[test]
fn s3_work_dir_leader_killed_three_times() {
    let Some(moto) = moto::Moto::start() else {
        return;
    };
    moto.create_bucket("tfdata-ha");
    scenario(
        "s3, SIGKILL",
        "s3://tfdata-ha/dispatcher".into(),
        moto_env(&moto),
        Failure::Kill,
        None,
    );
}

#[test]
fn s3_work_dir_leader_stopped_three_times() {
    let Some(moto) = moto::Moto::start() else {
        return;
    };
    moto.create_bucket("tfdata-ha");
    let fs = moto.file_system();
    scenario(
        "s3, SIGSTOP",
        "s3://tfdata-ha/dispatcher".into(),
        moto_env(&moto),
        Failure::Stop,
        Some((
            &fs,
            "s3://tfdata-ha/dispatcher/tf_data_dispatcher_journal".into(),
        )),
    );
}

/// The high-availability flags are refused, with the reason, where they
/// cannot work.
#[test]
fn high_availability_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let work_dir = dir.path().to_str().unwrap();
    for (args, needle) in [
        (
            vec!["--work-dir", work_dir, "--leader-lease-ms", "5000"],
            "requires fault_tolerant_mode",
        ),
        (
            vec![
                "--work-dir",
                work_dir,
                "--fault-tolerant-mode",
                "--leader-lease-ms",
                "0",
            ],
            "must be positive",
        ),
        (
            vec!["--advertised-address", "a:1"],
            "only used with --leader-lease-ms",
        ),
    ] {
        let out = Command::new(BIN)
            .args(["dispatcher", "--port", "0"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
