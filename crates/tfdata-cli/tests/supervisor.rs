//! `tfdata workers`, the local supervisor (issue 36), as real processes: a
//! dispatcher with its scaling controller, the supervisor and its `tfdata
//! worker` children, and `tfdata read` as the trainer. The pipeline's
//! per-element cost is latency (the `sleep` built-in), so one worker cannot
//! feed a reader however many cores the machine has, and more workers can.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{BIN, Process, wait_until};
use common::register;

/// Elements in the read: a range, one split per element in
/// distributed_epoch.
const ELEMENTS: i64 = 1_500;
/// The per-element latency: one worker makes at most 1000 / 20 = 50
/// elements a second, so the read takes 30 s on one worker and the
/// controller has time to act.
const SLEEP_MS: u32 = 20;
/// The dispatcher's scaling period: short, so a test sees several
/// decisions (the default, 5 s, suits clusters).
const SCALING_PERIOD_MS: &str = "500";

/// The pids of `parent`'s live children named `tfdata`, from /proc.
fn worker_children(parent: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces, so split after
        // its closing parenthesis.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let (state, ppid) = (fields.next(), fields.next().and_then(|p| p.parse().ok()));
        // A zombie has exited; its parent has not reaped it yet.
        if ppid == Some(parent) && state != Some("Z") && head.ends_with("(tfdata") {
            pids.push(pid);
        }
    }
    pids
}

fn supervisor(address: &str, min: &str, max: &str) -> Process {
    let mut command = Command::new(BIN);
    command.args([
        "workers",
        "--dispatcher-address",
        address,
        "--min",
        min,
        "--max",
        max,
        "--poll-interval-ms",
        "200",
        "--heartbeat-interval-ms",
        "200",
        "--drain-timeout-ms",
        "20000",
    ]);
    // The supervisor's own lines, and only warnings from its workers (they
    // inherit the filter): the decisions stay within the kept log tail.
    command.env("TFDATA_LOG", "warn,tfdata::workers=info");
    let process = Process::spawn("supervisor", command);
    process.wait_for_stdout(1, common::process::START_LIMIT);
    process
}

/// The supervisor scales up under a starved reader, back down to `--min`
/// when the reader leaves (`tfdata read` releases its reader before it
/// exits: the dispatcher keeps its default client_timeout of 5 minutes),
/// draining the surplus; the read gets
/// every element exactly once.
#[test]
fn the_supervisor_scales_up_for_a_starved_reader_and_down_when_it_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let (dispatcher, port) = Process::start(&[
        "dispatcher",
        "--port",
        "0",
        "--scaling-period-ms",
        SCALING_PERIOD_MS,
    ]);
    let address = format!("localhost:{port}");
    let service = format!("grpc://{address}");
    let dataset_id = register(
        dir.path(),
        &service,
        &format!(
            r#"{{"op": "map", "function": {{"function": "sleep", "args": {{"ms": {SLEEP_MS}}}}},
                "input": {{"op": "range", "stop": {ELEMENTS}}}}}"#
        ),
    );
    let mut sup = supervisor(&address, "1", "4");
    let pid = sup.child.id();
    common::wait_for_workers(&address, 1);
    assert_eq!(worker_children(pid).len(), 1, "{}", sup.logs());

    let mut command = Command::new(BIN);
    command.args([
        "read",
        "--service",
        &service,
        "--dataset-id",
        &dataset_id,
        "--processing-mode",
        "distributed_epoch",
        "--task-refresh-interval-ms",
        "200",
    ]);
    let mut reader = Process::spawn("reader", command);

    // Scaling up: the reader waits on one worker; the controller asks for
    // more and the supervisor starts them while the read goes on.
    let started = Instant::now();
    let mut most = 1;
    let finished = loop {
        most = most.max(worker_children(pid).len());
        if let Some(status) = reader.wait_exit(Duration::from_millis(100)) {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the read did not end\n{}\n{}",
            reader.logs(),
            sup.logs()
        );
    };
    assert!(finished.success(), "{}", reader.logs());
    let read_seconds = started.elapsed().as_secs_f64();
    assert!(
        most >= 2,
        "the supervisor never ran more than {most} worker(s) for a starved reader \
         ({read_seconds:.1} s read)\n{}\n{}",
        sup.logs(),
        dispatcher.logs()
    );
    assert!(most <= 4, "more workers than --max: {most}");

    // Every element exactly once, though workers came during the read.
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for line in reader.stdout_lines() {
        let value: i64 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("not an int64 element: {line:?}"));
        *counts.entry(value).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "elements read more than once: {twice:?}");
    let missing: Vec<i64> = (0..ELEMENTS).filter(|v| !counts.contains_key(v)).collect();
    assert!(missing.is_empty(), "elements never read: {missing:?}");

    // Scaling down: no reader, the controller goes idle at the minimum and
    // the supervisor drains the others.
    wait_until(
        "the supervisor to drain down to --min 1 worker",
        Duration::from_secs(60),
        &[&sup, &dispatcher],
        || {
            // A drained worker is gone once the supervisor reaped it (and
            // said so), not when it exits.
            let drained = sup.logs().matches("worker drained and exited").count();
            (drained == most - 1 && worker_children(pid).len() == 1).then_some(())
        },
    );
    assert!(
        sup.logs().contains("scaling to"),
        "no decision line in the supervisor's log\n{}",
        sup.logs()
    );
    eprintln!(
        "read {ELEMENTS} elements in {read_seconds:.1} s with at most {most} workers \
         (one worker alone: {:.0} s)",
        ELEMENTS as f64 * f64::from(SLEEP_MS) / 1000.0
    );

    // SIGTERM drains the last worker and the supervisor exits cleanly.
    sup.signal("TERM");
    let status = sup
        .wait_exit(Duration::from_secs(30))
        .expect("supervisor exit");
    assert!(status.success(), "{status}\n{}", sup.logs());
    assert!(worker_children(pid).is_empty());
    assert!(dispatcher.terminate().success());
}

/// A worker that dies is started again; with the dispatcher gone the
/// supervisor keeps the workers it has (a restart or a network blip must
/// not stop them) and says why; SIGTERM drains them all.
#[test]
fn the_supervisor_restarts_dead_workers_and_keeps_them_without_a_dispatcher() {
    let (dispatcher, port) = Process::start(&[
        "dispatcher",
        "--port",
        "0",
        "--scaling-period-ms",
        SCALING_PERIOD_MS,
    ]);
    let address = format!("localhost:{port}");
    let mut sup = supervisor(&address, "2", "3");
    let pid = sup.child.id();
    let first = wait_until("two workers", Duration::from_secs(30), &[&sup], || {
        let pids = worker_children(pid);
        (pids.len() == 2).then_some(pids)
    });

    // SIGKILL one: the supervisor logs its death and starts another.
    let victim = first[0];
    assert!(
        Command::new("kill")
            .args(["-KILL", &victim.to_string()])
            .status()
            .unwrap()
            .success()
    );
    wait_until(
        "a replacement worker",
        Duration::from_secs(30),
        &[&sup],
        || {
            let pids = worker_children(pid);
            (pids.len() == 2 && !pids.contains(&victim)).then_some(())
        },
    );
    assert!(sup.logs().contains("worker died"), "{}", sup.logs());

    // The dispatcher goes away: the workers stay.
    drop(dispatcher);
    wait_until(
        "the supervisor to notice the dispatcher is gone",
        Duration::from_secs(30),
        &[&sup],
        || {
            sup.logs()
                .contains("until the dispatcher answers")
                .then_some(())
        },
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(worker_children(pid).len(), 2, "{}", sup.logs());

    sup.signal("TERM");
    let status = sup
        .wait_exit(Duration::from_secs(40))
        .expect("supervisor exit");
    assert!(status.success(), "{status}\n{}", sup.logs());
    assert!(worker_children(pid).is_empty());
    assert!(sup.logs().contains("every worker exited"), "{}", sup.logs());
}

/// Scaling down in the middle of a read: the reader first takes all it
/// can (the supervisor scales up), then slows to a pace fewer workers
/// meet; the controller lowers its target and the supervisor drains
/// workers while the read goes on. Each drained worker finishes the
/// split in hand and hands the rest back: every element arrives exactly
/// once.
#[test]
fn the_supervisor_drains_workers_mid_read_without_losing_or_repeating_elements() {
    const ELEMENTS: i64 = 1_200;
    /// The slowed reader's time per element: about 66 elements a second,
    /// which two 50-a-second workers meet.
    const SLOW_READ: Duration = Duration::from_millis(15);
    let dir = tempfile::tempdir().unwrap();
    let (dispatcher, port) = Process::start(&[
        "dispatcher",
        "--port",
        "0",
        "--scaling-period-ms",
        SCALING_PERIOD_MS,
    ]);
    let address = format!("localhost:{port}");
    let service = format!("grpc://{address}");
    let dataset_id = register(
        dir.path(),
        &service,
        &format!(
            r#"{{"op": "map", "function": {{"function": "sleep", "args": {{"ms": {SLEEP_MS}}}}},
                "input": {{"op": "range", "stop": {ELEMENTS}}}}}"#
        ),
    );
    let sup = supervisor(&address, "1", "4");
    let pid = sup.child.id();
    common::wait_for_workers(&address, 1);

    // A small window: the workers produce at the reader's pace, so a
    // drained worker has splits in hand.
    let ds = tfdata::from_dataset_id(
        tfdata::ProcessingMode::DistributedEpoch,
        &service,
        &dataset_id,
    )
    .task_refresh_interval(Duration::from_millis(200))
    .stream_window(8, 1 << 20)
    .build()
    .unwrap();
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    let (mut most, mut slowed_at, mut drained_during_read) = (1, None, 0);
    let started = Instant::now();
    for (i, element) in ds.iter().unwrap().enumerate() {
        let value = element.unwrap().components[0].to_scalar::<i64>().unwrap();
        *counts.entry(value).or_default() += 1;
        if i % 20 == 0 {
            let workers = worker_children(pid).len();
            most = most.max(workers);
            if slowed_at.is_none() && workers >= 3 {
                slowed_at = Some(i);
            }
            drained_during_read = sup.logs().matches("worker drained and exited").count();
        }
        if slowed_at.is_some() {
            std::thread::sleep(SLOW_READ);
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the read did not end\n{}",
            sup.logs()
        );
    }
    drop(ds);
    let slowed_at = slowed_at.unwrap_or_else(|| {
        panic!(
            "the supervisor never ran 3 workers for a starved reader (at most {most})\n{}\n{}",
            sup.logs(),
            dispatcher.logs()
        )
    });
    assert!(
        drained_during_read >= 1,
        "no worker was drained while the slowed reader read (slowed at element {slowed_at}, \
         at most {most} workers)\n{}\n{}",
        sup.logs(),
        dispatcher.logs()
    );
    // Drained, not killed: each worker finished its drain and exited 0
    // (SIGKILL would also lose nothing, the readers' receipts see to that,
    // but the splits in hand would be produced again).
    let logs = sup.logs();
    assert_eq!(
        logs.matches("worker drained and exited (exit code 0)")
            .count(),
        logs.matches("worker drained and exited").count(),
        "{logs}"
    );
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "elements read more than once: {twice:?}");
    let missing: Vec<i64> = (0..ELEMENTS).filter(|v| !counts.contains_key(v)).collect();
    assert!(missing.is_empty(), "elements never read: {missing:?}");
    eprintln!(
        "{most} workers at most; slowed at element {slowed_at}; {drained_during_read} drained \
         during the read; {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // The reader released its iteration: back to the minimum.
    wait_until(
        "the supervisor to drain down to --min 1 worker",
        Duration::from_secs(60),
        &[&sup, &dispatcher],
        || (worker_children(pid).len() == 1).then_some(()),
    );
    let mut sup = sup;
    sup.signal("TERM");
    let status = sup
        .wait_exit(Duration::from_secs(30))
        .expect("supervisor exit");
    assert!(status.success(), "{status}\n{}", sup.logs());
    assert!(worker_children(pid).is_empty());
    assert!(dispatcher.terminate().success());
}

/// Whether process `pid` has exited (gone, or a zombie nobody reaped).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.split_whitespace().next() == Some("Z")),
    }
}

/// A supervisor killed outright (SIGKILL: it drains nothing) does not
/// leave its workers behind: each notices it was re-parented, drains and
/// stops.
#[test]
fn the_workers_of_a_killed_supervisor_stop() {
    let (dispatcher, port) = Process::start(&["dispatcher", "--port", "0"]);
    let address = format!("localhost:{port}");
    let mut sup = supervisor(&address, "2", "2");
    let pid = sup.child.id();
    let workers = wait_until("two workers", Duration::from_secs(30), &[&sup], || {
        let pids = worker_children(pid);
        (pids.len() == 2).then_some(pids)
    });
    sup.signal("KILL");
    sup.wait_exit(Duration::from_secs(10)).expect("killed");
    wait_until(
        "the orphaned workers to stop",
        Duration::from_secs(30),
        &[&sup, &dispatcher],
        || workers.iter().all(|w| exited(*w)).then_some(()),
    );
    assert!(dispatcher.terminate().success());
}
