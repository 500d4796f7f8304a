//! Readers and workers given several dispatcher addresses follow the
//! leader of a high-availability group (three dispatchers on one local
//! `work_dir`, in this process, each on its own port): a distributed_epoch
//! read during which the leader is stopped twice finishes with every
//! element exactly once. The same with real processes, SIGKILL and SIGSTOP
//! is `crates/tfdata-cli/tests/failover.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use tfdata::{Dataset, DispatcherConfig, ProcessingMode, WorkerConfig, WorkerServer, distribute};
use tfdata_dispatcher::config::HighAvailability;
use tfdata_proto::data as wire;
use tfdata_rpc::CancellationToken;

const LEASE: Duration = Duration::from_millis(1000);

struct Node {
    address: String,
    shutdown: CancellationToken,
    served: tokio::task::JoinHandle<tfdata_core::Result<()>>,
}

fn start(rt: &tokio::runtime::Runtime, work_dir: &std::path::Path) -> Node {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    let config = DispatcherConfig {
        work_dir: Some(work_dir.display().to_string()),
        fault_tolerant_mode: true,
        high_availability: Some(HighAvailability {
            advertised_address: Some(address.clone()),
            ..HighAvailability::with_lease_duration(LEASE)
        }),
        ..Default::default()
    };
    let shutdown = CancellationToken::new();
    let _entered = rt.enter();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let served = rt.spawn(tfdata_dispatcher::serve(listener, config, shutdown.clone()));
    Node {
        address,
        shutdown,
        served,
    }
}

/// The index of the node that answers `GetVersion`, if one does.
fn leader(rt: &tokio::runtime::Runtime, nodes: &[Node]) -> Option<usize> {
    rt.block_on(async {
        for (i, node) in nodes.iter().enumerate() {
            let security = tfdata_rpc::security::TransportSecurity::default()
                .client()
                .unwrap();
            let channel = tfdata_rpc::channel::channel(&node.address, &security).unwrap();
            let mut client = tfdata_rpc::channel::dispatcher_client(channel);
            if client.get_version(wire::GetVersionRequest {}).await.is_ok() {
                return Some(i);
            }
        }
        None
    })
}

fn wait_for_leader(rt: &tokio::runtime::Runtime, nodes: &[Node]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(i) = leader(rt, nodes) {
            return i;
        }
        assert!(Instant::now() < deadline, "no dispatcher leads");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Three dispatchers; a worker and a reader given an unreachable address
/// and all three (the reader as `grpc://x,a,b,c`); the leader is stopped after a third and
/// after two thirds of the epoch. Every element arrives exactly once.
#[test]
fn readers_and_workers_with_several_addresses_follow_the_leader() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut nodes: Vec<Node> = (0..3).map(|_| start(&rt, dir.path())).collect();
    wait_for_leader(&rt, &nodes);
    // First an address nobody listens on: unreachable, like a dead
    // dispatcher, so the first calls of both must move on.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_address = dead.local_addr().unwrap().to_string();
    drop(dead);
    let addresses = std::iter::once(dead_address)
        .chain(nodes.iter().map(|n| n.address.clone()))
        .collect::<Vec<_>>()
        .join(",");

    let mut worker_config = WorkerConfig::new(addresses.clone());
    worker_config.heartbeat_interval = Duration::from_millis(100);
    let _worker = WorkerServer::new(worker_config).unwrap();
    let n = 300;
    let ds = distribute(
        ProcessingMode::DistributedEpoch,
        &format!("grpc://{addresses}"),
    )
    .task_refresh_interval(Duration::from_millis(50))
    .stream_window(4, 1 << 20)
    .apply(&Dataset::range(n))
    .unwrap();
    let mut it = ds.iter().unwrap();
    let mut values = Vec::new();
    for stop_at in [n / 3, 2 * n / 3] {
        while (values.len() as i64) < stop_at {
            let element = it.next().expect("the read ended early").unwrap();
            values.push(element.components[0].to_scalar::<i64>().unwrap());
        }
        let i = wait_for_leader(&rt, &nodes);
        let stopped = nodes.remove(i);
        let died = Instant::now();
        stopped.shutdown.cancel();
        rt.block_on(stopped.served).unwrap().unwrap();
        let successor = wait_for_leader(&rt, &nodes);
        println!(
            "failover after {} elements: {:?} to {}",
            values.len(),
            died.elapsed(),
            nodes[successor].address
        );
    }
    values.extend(it.map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap()));
    values.sort_unstable();
    assert_eq!(values, (0..n).collect::<Vec<_>>(), "every element once");
    for node in &nodes {
        node.shutdown.cancel();
    }
}
