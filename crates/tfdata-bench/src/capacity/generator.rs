//! The load generator: simulated workers, readers and `GetSplit` callers,
//! speaking the dispatcher protocol over a few shared HTTP/2 connections.
//!
//! Each simulated worker registers with its first `WorkerHeartbeat`, then
//! beats every worker interval with the tasks it holds (it adds the
//! `new_tasks` of each answer and drops its `tasks_to_delete`, as a worker
//! does) and, from its distributed_epoch task, asks for a split every split
//! interval. Each simulated reader gets an iteration client id with
//! `GetOrCreateIteration` and beats every client interval; its answer lists
//! the iteration's tasks, one per worker, which is checked. Periodic calls
//! are spread over their interval (golden-ratio phases) rather than sent in
//! bursts. Every simulated client is one tokio task on one runtime; they
//! share [`CHANNELS`] connections (HTTP/2 multiplexes them), as many
//! clients behind a few proxies would. The calls are sequential per client,
//! as TensorFlow's heartbeat threads are: a slow answer delays the next
//! beat, which shows as a rate below the offered one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use tfdata_proto::data::{
    self as wire, ClientHeartbeatRequest, DataServiceMetadata, DatasetDef,
    GetOrCreateIterationRequest, GetOrCreateJobRequest, GetOrRegisterDatasetRequest,
    GetSplitRequest, ProcessingModeDef, WorkerHeartbeatRequest,
    dispatcher_service_client::DispatcherServiceClient, processing_mode_def::ShardingPolicy,
};
use tfdata_rpc::security::RpcChannel;
use tonic::codegen::http::uri::PathAndQuery;

use super::heartbeat_codec::HeartbeatCodec;

/// HTTP/2 connections the simulated clients share.
pub const CHANNELS: usize = 8;

/// Registrations in flight at once while the load grows.
const REGISTRATIONS_IN_FLIGHT: usize = 64;

/// A call that takes longer than this is an error (the dispatcher is far
/// past any useful load).
const CALL_DEADLINE: Duration = Duration::from_secs(30);

const CLIENT_HEARTBEAT_PATH: &str = "/tensorflow.data.DispatcherService/ClientHeartbeat";

/// How often each simulated client calls.
#[derive(Debug, Clone, Copy)]
pub struct Intervals {
    pub worker_heartbeat: Duration,
    pub client_heartbeat: Duration,
    /// Per worker; `None`: no `GetSplit` callers.
    pub split: Option<Duration>,
}

/// The RPCs the steady load is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rpc {
    WorkerHeartbeat = 0,
    ClientHeartbeat = 1,
    GetSplit = 2,
}

impl Rpc {
    pub const ALL: [Rpc; 3] = [Rpc::WorkerHeartbeat, Rpc::ClientHeartbeat, Rpc::GetSplit];

    pub fn name(self) -> &'static str {
        match self {
            Rpc::WorkerHeartbeat => "WorkerHeartbeat",
            Rpc::ClientHeartbeat => "ClientHeartbeat",
            Rpc::GetSplit => "GetSplit",
        }
    }
}

/// The dataset the load registers: a graph as TensorFlow's client
/// registers it (both dispatchers serve it), or a tfdata pipeline (ours only,
/// and no TensorFlow needed to make it).
#[derive(Debug, Clone)]
pub struct RegisteredDataset {
    pub definition: DatasetDef,
    pub element_spec: Option<bytes::Bytes>,
}

impl RegisteredDataset {
    pub fn tensorflow_graph(graph: bytes::Bytes, element_spec: bytes::Bytes) -> Self {
        RegisteredDataset {
            definition: DatasetDef {
                graph,
                ..Default::default()
            },
            element_spec: Some(element_spec),
        }
    }

    /// `range(2**62)` as tfdata's client registers it.
    pub fn tfdata_range() -> Result<Self> {
        let dataset = tfdata_dataset::Dataset::range(1 << 62);
        let pipeline = tfdata_dataset::pipeline::to_pipeline_def(&dataset, false)?;
        let element_spec = dataset.element_spec()?.map(|s| {
            prost::Message::encode_to_vec(&tfdata_dataset::spec_coder::to_structured_value(&s))
                .into()
        });
        Ok(RegisteredDataset {
            definition: DatasetDef {
                tfdata_pipeline: Some(pipeline),
                ..Default::default()
            },
            element_spec,
        })
    }
}

#[derive(Default)]
struct Series {
    latencies_us: Vec<u32>,
    errors: u64,
    first_error: Option<String>,
}

/// Latencies and errors of the calls made while a window is open.
#[derive(Default)]
pub struct Stats {
    recording: AtomicBool,
    series: [Mutex<Series>; 3],
    /// How late periodic calls were sent against their schedule (the
    /// generator's own delay).
    lag_us: Mutex<Vec<u32>>,
    /// Bytes of the readers' `ClientHeartbeat` answers.
    answer_bytes: AtomicU64,
}

/// One RPC type's figures over a window.
#[derive(Debug, Clone, Default)]
pub struct RpcFigures {
    pub calls: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Everything measured in a window.
#[derive(Debug, Clone)]
pub struct Window {
    pub rpcs: [RpcFigures; 3],
    pub lag_p99_ms: f64,
    /// Bytes of all `ClientHeartbeat` answers received in the window.
    pub client_answer_bytes: u64,
}

fn quantile_ms(sorted: &[u32], q: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * q).round() as usize)
        .map_or(0.0, |&us| f64::from(us) / 1e3)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Stats {
    fn record_answer_bytes(&self, bytes: u64) {
        if self.recording.load(Ordering::Relaxed) {
            self.answer_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    fn record(&self, rpc: Rpc, sent: Instant, scheduled: Instant, result: Result<(), String>) {
        if !self.recording.load(Ordering::Relaxed) {
            return;
        }
        let latency = sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
        let lag = sent.saturating_duration_since(scheduled).as_micros();
        lock(&self.lag_us).push(lag.min(u128::from(u32::MAX)) as u32);
        let mut series = lock(&self.series[rpc as usize]);
        match result {
            Ok(()) => series.latencies_us.push(latency),
            Err(e) => {
                series.errors += 1;
                series.first_error.get_or_insert(e);
            }
        }
    }

    pub fn start_window(&self) {
        for s in &self.series {
            *lock(s) = Series::default();
        }
        lock(&self.lag_us).clear();
        self.answer_bytes.store(0, Ordering::SeqCst);
        self.recording.store(true, Ordering::SeqCst);
    }

    pub fn end_window(&self) -> Window {
        self.recording.store(false, Ordering::SeqCst);
        let rpcs = std::array::from_fn(|i| {
            let mut s = std::mem::take(&mut *lock(&self.series[i]));
            s.latencies_us.sort_unstable();
            RpcFigures {
                calls: s.latencies_us.len() as u64 + s.errors,
                errors: s.errors,
                first_error: s.first_error,
                p50_ms: quantile_ms(&s.latencies_us, 0.5),
                p99_ms: quantile_ms(&s.latencies_us, 0.99),
                max_ms: quantile_ms(&s.latencies_us, 1.0),
            }
        });
        let mut lag = std::mem::take(&mut *lock(&self.lag_us));
        lag.sort_unstable();
        Window {
            rpcs,
            lag_p99_ms: quantile_ms(&lag, 0.99),
            client_answer_bytes: self.answer_bytes.load(Ordering::SeqCst),
        }
    }
}

/// The `k`-th client's first periodic call: spread over one interval.
fn phase(k: usize, interval: Duration) -> Instant {
    let fraction = (k as f64 * 0.618_033_988_749_895).fract();
    Instant::now() + interval.mul_f64(fraction)
}

/// The address of simulated worker `i`: a distinct loopback address, port 1.
/// Nothing listens there, so a dispatcher's `ProcessTask` push is refused
/// at once (both dispatchers then leave the task to the heartbeat).
pub fn worker_address(i: usize) -> String {
    format!(
        "127.{}.{}.{}:1",
        i / 62_500 % 250,
        i / 250 % 250,
        i % 250 + 1
    )
}

/// The simulated cluster against one dispatcher.
pub struct Load {
    clients: Vec<DispatcherServiceClient<RpcChannel>>,
    raw: Vec<tonic::client::Grpc<RpcChannel>>,
    pub stats: Arc<Stats>,
    intervals: Intervals,
    reader_job: i64,
    workers: usize,
    readers: usize,
    /// Tasks a reader's answer must list: one per registered worker.
    expected_tasks: Arc<AtomicU64>,
    /// The simulated workers say they run tfdata pipelines (as ours do):
    /// only then are they given a tfdata pipeline's tasks.
    tfdata_workers: bool,
}

fn call<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(CALL_DEADLINE);
    request
}

impl Load {
    /// Connects, registers `dataset` and creates the two jobs: the readers'
    /// (parallel_epochs) and the split callers' (distributed_epoch, whose
    /// iteration is created here by a client that then heartbeats).
    pub async fn connect(
        address: &str,
        intervals: Intervals,
        dataset: &RegisteredDataset,
    ) -> Result<Self> {
        let channels: Vec<RpcChannel> = (0..CHANNELS)
            .map(|_| tfdata_rpc::channel::channel(address, &Default::default()))
            .collect::<tfdata_core::Result<_>>()?;
        let clients: Vec<_> = channels
            .iter()
            .cloned()
            .map(tfdata_rpc::channel::dispatcher_client)
            .collect();
        let raw = channels.into_iter().map(tonic::client::Grpc::new).collect();
        let mut client = clients[0].clone();
        let dataset_id = client
            .get_or_register_dataset(call(GetOrRegisterDatasetRequest {
                dataset: Some(dataset.definition.clone()),
                metadata: Some(DataServiceMetadata {
                    element_spec: dataset.element_spec.clone(),
                    compression: wire::data_service_metadata::Compression::Off as i32,
                    cardinality: -1,
                }),
                dataset_id: None,
            }))
            .await
            .context("GetOrRegisterDataset")?
            .into_inner()
            .dataset_id;
        let job = |name: &str, policy: ShardingPolicy| {
            let mut client = client.clone();
            let request = GetOrCreateJobRequest {
                dataset_id: dataset_id.clone(),
                processing_mode_def: Some(ProcessingModeDef {
                    sharding_policy: policy as i32,
                    ..Default::default()
                }),
                job_name: Some(name.to_string()),
                ..Default::default()
            };
            async move {
                anyhow::Ok(
                    client
                        .get_or_create_job(call(request))
                        .await?
                        .into_inner()
                        .job_id,
                )
            }
        };
        let reader_job = job("capacity-readers", ShardingPolicy::Off).await?;
        let split_job = job("capacity-splits", ShardingPolicy::Dynamic).await?;
        let split_client = client
            .get_or_create_iteration(call(GetOrCreateIterationRequest {
                job_id: split_job,
                repetition: 0,
                tfdata_reports_receipts: false,
                tfdata_consumed: Vec::new(),
                tfdata_restore: None,
                tfdata_consumed_elements: Vec::new(),
                tfdata_consumed_pieces: Vec::new(),
            }))
            .await
            .context("GetOrCreateIteration of the split job")?
            .into_inner()
            .iteration_client_id;
        let load = Load {
            clients,
            raw,
            stats: Arc::new(Stats::default()),
            intervals,
            reader_job,
            workers: 0,
            readers: 0,
            expected_tasks: Arc::new(AtomicU64::new(0)),
            tfdata_workers: dataset.definition.tfdata_pipeline.is_some(),
        };
        // The split job's client beats like any reader (not measured), so
        // its iteration is never released for silence.
        tokio::spawn(reader_loop(
            load.raw[0].clone(),
            split_client,
            intervals.client_heartbeat,
            phase(0, intervals.client_heartbeat),
            Arc::new(Stats::default()),
            None,
        ));
        Ok(load)
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    pub fn readers(&self) -> usize {
        self.readers
    }

    /// Adds readers up to `readers`, then workers up to `workers`, each
    /// registered before its periodic calls start.
    pub async fn grow(&mut self, workers: usize, readers: usize) -> Result<()> {
        let new_readers: Vec<i64> = futures::stream::iter(self.readers..readers)
            .map(|k| {
                let mut client = self.clients[k % CHANNELS].clone();
                let job_id = self.reader_job;
                async move {
                    let response = client
                        .get_or_create_iteration(call(GetOrCreateIterationRequest {
                            job_id,
                            repetition: 0,
                            tfdata_reports_receipts: false,
                            tfdata_consumed: Vec::new(),
                            tfdata_restore: None,
                            tfdata_consumed_elements: Vec::new(),
                            tfdata_consumed_pieces: Vec::new(),
                        }))
                        .await
                        .with_context(|| format!("reader {k}: GetOrCreateIteration"))?;
                    anyhow::Ok(response.into_inner().iteration_client_id)
                }
            })
            .buffer_unordered(REGISTRATIONS_IN_FLIGHT)
            .try_collect()
            .await?;
        for (i, client_id) in new_readers.into_iter().enumerate() {
            let k = self.readers + i;
            tokio::spawn(reader_loop(
                self.raw[k % CHANNELS].clone(),
                client_id,
                self.intervals.client_heartbeat,
                phase(k, self.intervals.client_heartbeat),
                Arc::clone(&self.stats),
                Some(Arc::clone(&self.expected_tasks)),
            ));
        }
        self.readers = self.readers.max(readers);

        let new_workers: Vec<(usize, Vec<i64>, Option<i64>)> =
            futures::stream::iter(self.workers..workers)
                .map(|k| {
                    let mut client = self.clients[k % CHANNELS].clone();
                    let tfdata = self.tfdata_workers;
                    async move {
                        let mut tasks = Vec::new();
                        let response = client
                            .worker_heartbeat(call(heartbeat_request(k, &tasks, tfdata)))
                            .await
                            .with_context(|| format!("worker {k}: registration"))?
                            .into_inner();
                        let split_iteration = apply_answer(&mut tasks, &response);
                        anyhow::Ok((k, tasks, split_iteration))
                    }
                })
                .buffer_unordered(REGISTRATIONS_IN_FLIGHT)
                .try_collect()
                .await?;
        // One task per iteration: the split job's and, once a reader made it, the readers'.
        let iterations = if self.readers > 0 { 2 } else { 1 };
        for (k, tasks, split_iteration) in new_workers {
            if tasks.len() != iterations {
                bail!(
                    "worker {k} got {} tasks at registration, expected {iterations} (one per iteration)",
                    tasks.len()
                );
            }
            let client = self.clients[k % CHANNELS].clone();
            let interval = self.intervals.worker_heartbeat;
            tokio::spawn(worker_loop(
                client.clone(),
                (k, self.tfdata_workers),
                tasks,
                interval,
                phase(k, interval),
                Arc::clone(&self.stats),
            ));
            if let Some(split) = self.intervals.split {
                let iteration_id = split_iteration
                    .with_context(|| format!("worker {k} got no distributed_epoch task"))?;
                tokio::spawn(split_loop(
                    client,
                    iteration_id,
                    split,
                    phase(k, split),
                    Arc::clone(&self.stats),
                ));
            }
        }
        self.workers = self.workers.max(workers);
        self.expected_tasks
            .store(self.workers as u64, Ordering::SeqCst);
        Ok(())
    }
}

/// A heartbeat as TensorFlow 2.21's worker sends it (with `tfdata`, as
/// ours does: it adds that it runs tfdata pipelines).
fn heartbeat_request(k: usize, tasks: &[i64], tfdata: bool) -> WorkerHeartbeatRequest {
    let address = worker_address(k);
    WorkerHeartbeatRequest {
        transfer_servers: vec![wire::DataTransferServerInfo {
            protocol: "grpc".into(),
            address: address.clone(),
            ..Default::default()
        }],
        worker_address: address,
        worker_uid: -1,
        current_tasks: tasks.to_vec(),
        active_tasks: tasks
            .iter()
            .map(|&task_id| wire::ActiveTask {
                task_id,
                processing_time_nsec: 0.0,
            })
            .collect(),
        tfdata_runs_pipelines: tfdata,
        ..Default::default()
    }
}

/// Updates the worker's tasks from an answer; returns the iteration of a
/// new distributed_epoch task, if any.
fn apply_answer(tasks: &mut Vec<i64>, response: &wire::WorkerHeartbeatResponse) -> Option<i64> {
    tasks.retain(|t| !response.tasks_to_delete.contains(t));
    let mut split_iteration = None;
    for task in &response.new_tasks {
        if !tasks.contains(&task.task_id) {
            tasks.push(task.task_id);
        }
        let dynamic = task
            .processing_mode_def
            .is_some_and(|m| m.sharding_policy == ShardingPolicy::Dynamic as i32);
        if dynamic {
            split_iteration = Some(task.iteration_id);
        }
    }
    split_iteration
}

async fn worker_loop(
    mut client: DispatcherServiceClient<RpcChannel>,
    (k, tfdata): (usize, bool),
    mut tasks: Vec<i64>,
    interval: Duration,
    first: Instant,
    stats: Arc<Stats>,
) {
    let mut next = first;
    loop {
        tokio::time::sleep_until(next.into()).await;
        let sent = Instant::now();
        let result = client
            .worker_heartbeat(call(heartbeat_request(k, &tasks, tfdata)))
            .await
            .map(|r| {
                apply_answer(&mut tasks, r.get_ref());
            })
            .map_err(|s| format!("{:?}: {}", s.code(), s.message()));
        stats.record(Rpc::WorkerHeartbeat, sent, next, result);
        next = (next + interval).max(Instant::now());
    }
}

async fn split_loop(
    mut client: DispatcherServiceClient<RpcChannel>,
    iteration_id: i64,
    interval: Duration,
    first: Instant,
    stats: Arc<Stats>,
) {
    let mut next = first;
    loop {
        tokio::time::sleep_until(next.into()).await;
        let sent = Instant::now();
        let result = match client
            .get_split(call(GetSplitRequest {
                iteration_id,
                repetition: 0,
                split_provider_index: 0,
                ..Default::default()
            }))
            .await
        {
            Ok(r) if r.get_ref().split.is_some() => Ok(()),
            Ok(_) => Err("no split (range(2**62) cannot have ended)".to_string()),
            Err(s) => Err(format!("{:?}: {}", s.code(), s.message())),
        };
        stats.record(Rpc::GetSplit, sent, next, result);
        next = (next + interval).max(Instant::now());
    }
}

/// A reader's heartbeats; with `expected_tasks`, the answer's task list is
/// checked (a wrong one is an error).
async fn reader_loop(
    mut grpc: tonic::client::Grpc<RpcChannel>,
    client_id: i64,
    interval: Duration,
    first: Instant,
    stats: Arc<Stats>,
    expected_tasks: Option<Arc<AtomicU64>>,
) {
    let mut next = first;
    loop {
        tokio::time::sleep_until(next.into()).await;
        let sent = Instant::now();
        let result = client_heartbeat(&mut grpc, client_id).await.and_then(|s| {
            stats.record_answer_bytes(s.bytes);
            let expected = expected_tasks.as_ref().map(|e| e.load(Ordering::Relaxed));
            match expected {
                Some(expected) if s.tasks != expected => Err(format!(
                    "the answer lists {} tasks, expected {expected}",
                    s.tasks
                )),
                _ => Ok(()),
            }
        });
        stats.record(Rpc::ClientHeartbeat, sent, next, result);
        next = (next + interval).max(Instant::now());
    }
}

async fn client_heartbeat(
    grpc: &mut tonic::client::Grpc<RpcChannel>,
    client_id: i64,
) -> std::result::Result<super::heartbeat_codec::HeartbeatSummary, String> {
    grpc.ready().await.map_err(|e| format!("not ready: {e}"))?;
    let request = call(ClientHeartbeatRequest {
        iteration_client_id: client_id,
        ..Default::default()
    });
    grpc.unary(
        request,
        PathAndQuery::from_static(CLIENT_HEARTBEAT_PATH),
        HeartbeatCodec,
    )
    .await
    .map(tonic::Response::into_inner)
    .map_err(|s| format!("{:?}: {}", s.code(), s.message()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_workers_have_distinct_loopback_addresses() {
        let addresses: std::collections::HashSet<String> =
            (0..100_000).map(worker_address).collect();
        assert_eq!(addresses.len(), 100_000);
        assert_eq!(worker_address(0), "127.0.0.1:1");
        assert_eq!(worker_address(251), "127.0.1.2:1");
    }

    #[test]
    fn phases_spread_over_the_interval() {
        let start = Instant::now();
        let interval = Duration::from_secs(10);
        let mut tenths = [0usize; 10];
        for k in 0..1000 {
            let offset = phase(k, interval).duration_since(start);
            assert!(offset <= interval + Duration::from_millis(100));
            tenths[(offset.as_secs_f64().min(9.99)) as usize] += 1;
        }
        assert!(
            tenths.iter().all(|&n| (80..=120).contains(&n)),
            "{tenths:?}"
        );
    }
}
