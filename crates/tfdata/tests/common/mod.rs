//! Helpers shared by the in-process cluster tests.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)] // test code

use std::time::{Duration, Instant};

use tfdata::{DispatchServer, DispatcherConfig, DistributedDataset, WorkerConfig, WorkerServer};

/// A dispatcher with `config` and `workers` workers, all registered (a worker
/// that registers after an iteration finished gets no task in it).
pub fn cluster_with(
    config: DispatcherConfig,
    workers: usize,
) -> (DispatchServer, Vec<WorkerServer>) {
    let dispatcher = DispatchServer::new(config).unwrap();
    let workers: Vec<WorkerServer> = (0..workers)
        .map(|_| WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while dispatcher.num_workers() < workers.len() {
        assert!(Instant::now() < deadline, "workers did not register");
        std::thread::sleep(Duration::from_millis(5));
    }
    (dispatcher, workers)
}

pub fn cluster(workers: usize) -> (DispatchServer, Vec<WorkerServer>) {
    cluster_with(DispatcherConfig::default(), workers)
}

/// Every element's first component as an int64 scalar.
pub fn scalars(ds: &DistributedDataset) -> Vec<i64> {
    ds.iter()
        .unwrap()
        .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
        .collect()
}

/// A fault-tolerant dispatcher configuration on `work_dir` (a path or URL).
pub fn fault_tolerant(work_dir: &str, port: u16) -> DispatcherConfig {
    DispatcherConfig {
        port,
        work_dir: Some(work_dir.to_string()),
        fault_tolerant_mode: true,
        ..Default::default()
    }
}

/// For restart tests: a worker of `dispatcher` (quick heartbeats) and a read
/// of `range(100)` that has taken its first 10 elements and is still in
/// progress (a small stream window keeps the task unfinished; the default
/// would fetch all 100 at once).
pub fn read_in_progress(
    dispatcher: &DispatchServer,
) -> (WorkerServer, tfdata::ElementIterator, Vec<i64>) {
    let mut worker_config = WorkerConfig::new(dispatcher.address());
    worker_config.heartbeat_interval = Duration::from_millis(100);
    let worker = WorkerServer::new(worker_config).unwrap();
    let ds = tfdata::distribute(tfdata::ProcessingMode::ParallelEpochs, &dispatcher.target())
        .task_refresh_interval(Duration::from_millis(50))
        .stream_window(4, 1 << 20)
        .apply(&tfdata::Dataset::range(100))
        .unwrap();
    let mut it = ds.iter().unwrap();
    let values = (&mut it)
        .take(10)
        .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
        .collect();
    (worker, it, values)
}

/// A plain HTTP/1.1 GET, as Prometheus, kubelet or a browser sends it:
/// the status, the head (lowercased) and the body.
pub fn http_get(port: u16, path: &str) -> (u16, String, String) {
    use std::io::{Read, Write};
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
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase(), body.into())
}
