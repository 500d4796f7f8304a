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
    wait_for_these_workers(&dispatcher, &workers);
    (dispatcher, workers)
}

pub fn cluster(workers: usize) -> (DispatchServer, Vec<WorkerServer>) {
    cluster_with(DispatcherConfig::default(), workers)
}

/// How long a test waits for workers to register: generous for a loaded
/// machine, where a healthy cluster registers in milliseconds.
pub const REGISTRATION_LIMIT: Duration = Duration::from_secs(20);

/// How often [`wait_for`] looks again.
const POLL: Duration = Duration::from_millis(10);

/// Polls `done` until it holds; after `limit`, panics naming `what` (what
/// the test was waiting for).
pub fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(POLL);
    }
}

/// [`wait_for`] inside a runtime: sleeps without blocking its thread.
pub async fn wait_for_async(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

fn registration(dispatcher: &DispatchServer, n: usize) -> String {
    format!(
        "{n} worker(s) to register with the dispatcher at {}",
        dispatcher.address()
    )
}

/// Waits until `dispatcher` has at least `n` registered workers (at most
/// [`REGISTRATION_LIMIT`]; then panics saying what it waited for).
pub fn wait_for_workers(dispatcher: &DispatchServer, n: usize) {
    wait_for(&registration(dispatcher, n), REGISTRATION_LIMIT, || {
        dispatcher.num_workers() >= n
    });
}

/// [`wait_for_workers`] inside a runtime.
pub async fn wait_for_workers_async(dispatcher: &DispatchServer, n: usize) {
    wait_for_async(&registration(dispatcher, n), REGISTRATION_LIMIT, || {
        dispatcher.num_workers() >= n
    })
    .await;
}

/// [`wait_for_workers`] for `workers`, all of them; one that stops before
/// they are registered fails the wait at once with its error, rather than
/// at the deadline.
pub fn wait_for_these_workers(dispatcher: &DispatchServer, workers: &[WorkerServer]) {
    wait_for(
        &registration(dispatcher, workers.len()),
        REGISTRATION_LIMIT,
        || {
            for w in workers {
                if let Some(Err(e)) = w.join_timeout(Duration::ZERO) {
                    panic!("a worker stopped before it registered: {e}");
                }
            }
            dispatcher.num_workers() >= workers.len()
        },
    );
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

/// A trainer reading `ds` on a thread of its own until [`BackgroundRead::stop`].
pub struct BackgroundRead {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl BackgroundRead {
    pub fn start(ds: DistributedDataset) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut it = ds.iter().unwrap();
                let mut read = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    it.next().unwrap().unwrap();
                    read += 1;
                }
                read
            })
        };
        BackgroundRead { stop, thread }
    }

    /// Stops the read; the elements it read.
    pub fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().unwrap()
    }
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

/// Creates a job of `dataset_id` with `mode` and its iteration through the
/// dispatcher's gRPC, and waits (20 s at most) for the iteration's first
/// task: its id and the reader's iteration client id.
pub async fn first_task(
    dispatcher: &tfdata::DispatcherClient,
    dataset_id: String,
    mode: tfdata_proto::data::ProcessingModeDef,
) -> (i64, i64) {
    use tfdata_proto::data as wire;
    let job_id = dispatcher
        .get_or_create_job(wire::GetOrCreateJobRequest {
            dataset_id,
            processing_mode_def: Some(mode),
            target_workers: wire::TargetWorkers::Any as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .job_id;
    let client_id = dispatcher
        .get_or_create_iteration(wire::GetOrCreateIterationRequest {
            job_id,
            ..Default::default()
        })
        .await
        .unwrap()
        .iteration_client_id;
    let deadline = Instant::now() + REGISTRATION_LIMIT;
    loop {
        let response = dispatcher
            .client_heartbeat(wire::ClientHeartbeatRequest {
                iteration_client_id: client_id,
                ..Default::default()
            })
            .await
            .unwrap();
        if let Some(task) = response.task_info.first() {
            return (task.task_id, client_id);
        }
        assert!(Instant::now() < deadline, "no task");
        tokio::time::sleep(POLL).await;
    }
}
