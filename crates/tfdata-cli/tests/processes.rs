//! The real `tfdata` binaries as separate processes: a dispatcher and
//! workers started from the command line, read by the Rust client, then
//! stopped with SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{BIN, Process};
use tfdata::{Dataset, ProcessingMode, distribute};

/// Every element's first component as an int64 scalar.
fn scalars(ds: &tfdata::DistributedDataset) -> Vec<i64> {
    ds.iter()
        .unwrap()
        .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
        .collect()
}

#[test]
fn dispatcher_and_workers_as_processes() {
    let (dispatcher, port) = Process::start(&["dispatcher", "--port", "0"]);
    let address = format!("localhost:{port}");
    let (worker_a, _) = Process::start(&[
        "worker",
        "--dispatcher-address",
        &address,
        "--heartbeat-interval-ms",
        "200",
    ]);
    let (worker_b, _) = Process::start(&["worker", "--dispatcher-address", &address]);
    common::wait_for_workers(&address, 2);

    let ds = distribute(ProcessingMode::ParallelEpochs, &format!("grpc://{address}"))
        .apply(&Dataset::range(10))
        .unwrap();
    let mut values: Vec<i64> = scalars(&ds);
    values.sort();
    let expected: Vec<i64> = (0..10).flat_map(|v| [v, v]).collect();
    assert_eq!(values, expected);

    assert!(worker_a.terminate().success());
    assert!(worker_b.terminate().success());
    assert!(dispatcher.terminate().success());
}

#[test]
fn a_worker_started_before_its_dispatcher_registers_when_it_appears() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("localhost:{port}");
    let (worker, _) = Process::start(&["worker", "--dispatcher-address", &address]);
    std::thread::sleep(Duration::from_millis(300));
    let (dispatcher, _) = Process::start(&["dispatcher", "--port", &port.to_string()]);
    let ds = distribute(ProcessingMode::ParallelEpochs, &format!("grpc://{address}"))
        .apply(&Dataset::range(4))
        .unwrap();
    let values: Vec<i64> = scalars(&ds);
    assert_eq!(values, vec![0, 1, 2, 3]);
    assert!(worker.terminate().success());
    assert!(dispatcher.terminate().success());
}

#[test]
fn bad_flags_and_a_busy_port_exit_with_an_error() {
    let (dispatcher, port) = Process::start(&["dispatcher", "--port", "0"]);
    let out = Command::new(BIN)
        .args(["dispatcher", "--port", &port.to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&port.to_string()), "{stderr}");

    let out = Command::new(BIN)
        .args(["dispatcher", "--port", "0", "--fault-tolerant-mode"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("work_dir"));
    drop(dispatcher);
}

#[test]
fn register_read_distributed_epoch_and_status_through_the_binaries() {
    let (dispatcher, port) = Process::start(&["dispatcher", "--port", "0"]);
    let address = format!("localhost:{port}");
    let (worker_a, _) = Process::start(&["worker", "--dispatcher-address", &address]);
    let (worker_b, _) = Process::start(&["worker", "--dispatcher-address", &address]);
    common::wait_for_workers(&address, 2);

    let dir = tempfile::tempdir().unwrap();
    let id = common::register(
        dir.path(),
        &format!("grpc://{address}"),
        r#"{"op": "range", "stop": 100}"#,
    );
    assert_eq!(id, "1000");

    let ds = tfdata::from_dataset_id(
        tfdata::ProcessingMode::DistributedEpoch,
        &format!("grpc://{address}"),
        &id,
    )
    .build()
    .unwrap();
    let mut values: Vec<i64> = scalars(&ds);
    values.sort();
    assert_eq!(
        values,
        (0..100).collect::<Vec<_>>(),
        "each element once across two worker processes"
    );

    let out = Command::new(BIN)
        .args(["status", "--dispatcher", &address])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Workers (2)"), "{text}");
    assert_eq!(text.matches(" alive ").count(), 2, "{text}");
    assert!(
        text.contains("Datasets (1)") && text.contains("TensorSpec(shape=(), dtype=int64)"),
        "{text}"
    );
    assert!(text.contains("DYNAMIC"), "{text}");
    assert!(text.contains("Tasks (2)"), "{text}");

    assert!(worker_a.terminate().success());
    assert!(worker_b.terminate().success());
    assert!(dispatcher.terminate().success());
}

/// Beyond TensorFlow: a worker killed with SIGKILL is declared lost after
/// worker_timeout; its task leaves the iteration and the read completes.
#[test]
fn a_killed_worker_is_declared_lost_and_the_read_completes() {
    let (dispatcher, port) = Process::start(&[
        "dispatcher",
        "--port",
        "0",
        "--worker-timeout-ms",
        "600",
        "--job-gc-check-interval-ms",
        "100",
    ]);
    let address = format!("localhost:{port}");
    let (survivor, _) = Process::start(&[
        "worker",
        "--dispatcher-address",
        &address,
        "--heartbeat-interval-ms",
        "100",
    ]);
    let (mut victim, _) = Process::start(&[
        "worker",
        "--dispatcher-address",
        &address,
        "--heartbeat-interval-ms",
        "100",
    ]);
    common::wait_for_workers(&address, 2);
    let ds = distribute(ProcessingMode::ParallelEpochs, &format!("grpc://{address}"))
        .apply(&Dataset::range(300))
        .unwrap();
    let started = Instant::now();
    let mut values = Vec::new();
    for e in ds.iter().unwrap() {
        values.push(e.unwrap().components[0].to_scalar::<i64>().unwrap());
        if values.len() == 40 {
            victim.child.kill().unwrap(); // SIGKILL: no goodbye
            victim.child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(started.elapsed() < Duration::from_secs(60));
    let distinct: std::collections::BTreeSet<i64> = values.iter().copied().collect();
    assert_eq!(distinct.len(), 300, "the survivor delivered every element");
    assert!(survivor.terminate().success());
    assert!(dispatcher.terminate().success());
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Static sharding, coordinated reads and the cross-trainer cache with the
/// dispatcher and workers as separate processes.
#[test]
fn static_coordinated_and_cached_reads_through_the_binaries() {
    let (p1, p2) = (free_port(), free_port());
    let workers_list = format!("localhost:{p1},localhost:{p2}");
    let (dispatcher, port) = Process::start(&[
        "dispatcher",
        "--port",
        "0",
        "--worker-addresses",
        &workers_list,
    ]);
    let address = format!("localhost:{port}");
    let service = format!("grpc://{address}");
    let (w1, _) = Process::start(&[
        "worker",
        "--dispatcher-address",
        &address,
        "--port",
        &p1.to_string(),
    ]);
    let (w2, _) = Process::start(&[
        "worker",
        "--dispatcher-address",
        &address,
        "--port",
        &p2.to_string(),
    ]);
    common::wait_for_workers(&address, 2);

    // DATA sharding: each listed worker produces its half.
    let ds = distribute(ProcessingMode::Data, &service)
        .apply(&Dataset::range(40))
        .unwrap();
    let mut values: Vec<i64> = scalars(&ds);
    values.sort();
    assert_eq!(values, (0..40).collect::<Vec<_>>());

    // Coordinated reads: two consumers in step.
    let readers: Vec<_> = (0..2)
        .map(|c| {
            let ds = distribute(ProcessingMode::ParallelEpochs, &service)
                .job_name("coordinated")
                .consumers(c, 2)
                .apply(&Dataset::range(1_000_000).repeat(None))
                .unwrap();
            std::thread::spawn(move || {
                ds.iter()
                    .unwrap()
                    .take(30)
                    .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut out = readers.into_iter().map(|h| h.join().unwrap());
    let (a, b) = (out.next().unwrap(), out.next().unwrap());
    assert_eq!(a.len(), 30);
    assert!(a.iter().zip(&b).all(|(x, y)| *y == x + 1), "{a:?} {b:?}");

    // Cross-trainer cache: a second trainer sees the first one's elements.
    let trainer = |id: &str| {
        distribute(ProcessingMode::ParallelEpochs, &service)
            .job_name("cached")
            .cross_trainer_cache(id)
            .target_workers(tfdata::TargetWorkers::Any)
            .apply(&Dataset::range(1_000_000).repeat(None))
            .unwrap()
    };
    let first: Vec<i64> = trainer("a")
        .iter()
        .unwrap()
        .take(10)
        .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
        .collect();
    let second: Vec<i64> = trainer("b")
        .iter()
        .unwrap()
        .take(10)
        .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
        .collect();
    // Each task keeps one window: the second trainer starts at its front
    // (a plain shared job would go on from where the first trainer stopped,
    // past everything it and its prefetching consumed).
    assert!(
        first.contains(&0) && second.contains(&0),
        "{first:?} {second:?}"
    );
    assert!(second.iter().all(|v| *v < 10), "{second:?}");

    assert!(w1.terminate().success());
    assert!(w2.terminate().success());
    assert!(dispatcher.terminate().success());
}

/// `target_workers=AUTO` skips workers tagged COLOCATED that are not in this
/// process (and then ends with its own tasks); ANY reads them too.
#[test]
fn auto_targeting_skips_remote_colocated_workers() {
    let (dispatcher, port) = Process::start(&["dispatcher", "--port", "0"]);
    let address = format!("localhost:{port}");
    let (plain, _) = Process::start(&["worker", "--dispatcher-address", &address]);
    let (colocated, _) = Process::start(&[
        "worker",
        "--dispatcher-address",
        &address,
        "--worker-tags",
        "COLOCATED",
    ]);
    common::wait_for_workers(&address, 2);
    let read = |target: tfdata::TargetWorkers| -> Vec<i64> {
        let ds = distribute(ProcessingMode::ParallelEpochs, &format!("grpc://{address}"))
            .target_workers(target)
            .apply(&Dataset::range(20))
            .unwrap();
        let mut v: Vec<i64> = scalars(&ds);
        v.sort();
        v
    };
    assert_eq!(
        read(tfdata::TargetWorkers::Auto),
        (0..20).collect::<Vec<_>>(),
        "one copy: the COLOCATED worker is skipped"
    );
    let both: Vec<i64> = (0..20).flat_map(|v| [v, v]).collect();
    assert_eq!(read(tfdata::TargetWorkers::Any), both);
    assert!(plain.terminate().success());
    assert!(colocated.terminate().success());
    assert!(dispatcher.terminate().success());
}
