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
