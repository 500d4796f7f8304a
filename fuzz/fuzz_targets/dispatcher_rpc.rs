//! The dispatcher's RPCs through its public tonic adapter
//! (`DispatcherGrpc` implementing `DispatcherService`): a short sequence
//! of requests, each method picked by the input and its request decoded
//! from the input's protobuf bytes, so validation that depends on earlier
//! requests (registered datasets, jobs, iterations, workers, clients) is
//! reached. In fault-tolerant mode the run ends with a restart, which must
//! recover the state the dispatcher had.
//!
//! Kept off the network: worker addresses are mapped to `127.0.0.1` ports
//! 1-3, where nobody listens (the dispatcher pushes `ProcessTask` there),
//! and requests naming URLs or file globs are skipped. Snapshot paths are
//! mapped into one scratch directory (a `Snapshot` writes where it is told).
//! Time is paused, so
//! the dispatcher's 10 s waits (`MaybeRemoveTask`'s rendezvous, the
//! `ProcessTask` push) pass at once. A hang is libFuzzer's `-timeout`
//! (real time): a watchdog timer would fire early under paused time while
//! a call waits for the journal's writer thread.
//!
//! Input: a flags byte (bit 0: fault-tolerant mode; bit 1: a fixed
//! `worker_addresses` list; bit 2: `gc_dynamic_sharding_jobs`; bit 3: no
//! `job_gc_timeout`), then up to 16 requests, each a method byte, a byte of
//! seconds the dispatcher's clock moves first, and the request as a
//! u16-length-prefixed part.
#![no_main]

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tfdata_fuzz::Input;
use tfdata_fuzz::dispatcher::{Clock, Dispatcher, DispatcherConfig, DispatcherGrpc, same_state};
use tfdata_proto::data::{self as wire, dispatcher_service_server::DispatcherService};
use tonic::Request;

struct ManualClock(AtomicI64);

impl Clock for ManualClock {
    fn now_micros(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A worker address the dispatcher may dial: a closed loopback port.
fn worker_address(address: &mut String) {
    if let Some(&b) = address.as_bytes().first() {
        *address = format!("127.0.0.1:{}", 1 + b % 3);
    }
}

/// A snapshot path inside this process's scratch directory: at most two
/// characters of the original, so requests of one input name the same few
/// snapshots.
fn snapshot_path(path: &mut String) {
    static ROOT: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let root = ROOT.get_or_init(tfdata_fuzz::temp_dir);
    let name: String = path
        .bytes()
        .take(2)
        .map(|b| char::from(b'a' + b % 26))
        .collect();
    *path = format!("{}/s{name}", root.path().display());
}

macro_rules! call {
    ($grpc:expr, $method:ident, $request:ty, $bytes:expr) => {
        call!($grpc, $method, $request, $bytes, |_: &mut $request| {})
    };
    ($grpc:expr, $method:ident, $request:ty, $bytes:expr, $fix:expr) => {
        if let Ok(mut request) = <$request>::decode($bytes) {
            $fix(&mut request);
            let _ = $grpc.$method(Request::new(request)).await;
        }
    };
}

async fn run(grpc: &DispatcherGrpc, clock: &ManualClock, input: &mut Input<'_>) {
    for _ in 0..16 {
        if input.is_empty() {
            break;
        }
        let method = input.u8();
        let seconds = i64::from(input.u8());
        let bytes = input.part();
        clock.0.fetch_add(seconds * 1_000_000, Ordering::SeqCst);
        if !tfdata_fuzz::offline(bytes) {
            continue;
        }
        match method % 18 {
            0 => call!(
                grpc,
                worker_heartbeat,
                wire::WorkerHeartbeatRequest,
                bytes,
                |r: &mut wire::WorkerHeartbeatRequest| { worker_address(&mut r.worker_address) }
            ),
            1 => call!(
                grpc,
                worker_update,
                wire::WorkerUpdateRequest,
                bytes,
                |r: &mut wire::WorkerUpdateRequest| { worker_address(&mut r.worker_address) }
            ),
            2 => call!(grpc, get_dataset_def, wire::GetDatasetDefRequest, bytes),
            3 => call!(
                grpc,
                get_split,
                wire::GetSplitRequest,
                bytes,
                |r: &mut wire::GetSplitRequest| { worker_address(&mut r.tfdata_worker_address) }
            ),
            4 => call!(grpc, get_version, wire::GetVersionRequest, bytes),
            5 => call!(
                grpc,
                get_or_register_dataset,
                wire::GetOrRegisterDatasetRequest,
                bytes
            ),
            6 => call!(grpc, get_or_create_job, wire::GetOrCreateJobRequest, bytes),
            7 => call!(
                grpc,
                get_or_create_iteration,
                wire::GetOrCreateIterationRequest,
                bytes
            ),
            8 => call!(grpc, maybe_remove_task, wire::MaybeRemoveTaskRequest, bytes),
            9 => call!(
                grpc,
                release_iteration_client,
                wire::ReleaseIterationClientRequest,
                bytes
            ),
            10 => call!(grpc, client_heartbeat, wire::ClientHeartbeatRequest, bytes),
            11 => call!(grpc, get_workers, wire::GetWorkersRequest, bytes),
            12 => call!(
                grpc,
                get_data_service_metadata,
                wire::GetDataServiceMetadataRequest,
                bytes
            ),
            13 => call!(
                grpc,
                get_data_service_config,
                wire::GetDataServiceConfigRequest,
                bytes
            ),
            14 => call!(
                grpc,
                snapshot,
                wire::SnapshotRequest,
                bytes,
                |r: &mut wire::SnapshotRequest| { snapshot_path(&mut r.path) }
            ),
            15 => call!(
                grpc,
                get_snapshot_split,
                wire::GetSnapshotSplitRequest,
                bytes,
                |r: &mut wire::GetSnapshotSplitRequest| {
                    worker_address(&mut r.worker_address);
                    snapshot_path(&mut r.base_path);
                }
            ),
            16 => call!(
                grpc,
                get_snapshot_streams,
                wire::GetSnapshotStreamsRequest,
                bytes,
                |r: &mut wire::GetSnapshotStreamsRequest| { snapshot_path(&mut r.path) }
            ),
            _ => call!(
                grpc,
                disable_compression_at_runtime,
                wire::DisableCompressionAtRuntimeRequest,
                bytes
            ),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let flags = input.u8();
    let dir = (flags & 1 != 0).then(tfdata_fuzz::temp_dir);
    let config = DispatcherConfig {
        work_dir: dir.as_ref().map(|d| d.path().display().to_string()),
        fault_tolerant_mode: dir.is_some(),
        worker_addresses: if flags & 2 != 0 {
            vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()]
        } else {
            Vec::new()
        },
        gc_dynamic_sharding_jobs: flags & 4 != 0,
        job_gc_timeout: if flags & 8 != 0 {
            None
        } else {
            Some(Duration::from_secs(60))
        },
        ..Default::default()
    };
    let clock = Arc::new(ManualClock(AtomicI64::new(1_000_000_000)));
    let dispatcher =
        Arc::new(Dispatcher::new(config.clone(), clock.clone()).expect("a dispatcher starts"));
    let grpc = DispatcherGrpc(dispatcher.clone());
    let runtime = tfdata_fuzz::paused_runtime();
    let state = runtime.block_on(async {
        run(&grpc, &clock, &mut input).await;
        dispatcher.state_copy().await
    });
    // Tasks the calls left behind (a ProcessTask push) end with the runtime.
    drop(runtime);
    drop(grpc);
    drop(dispatcher);
    if dir.is_some() {
        let restarted = Dispatcher::new(config, clock).expect("a restart recovers the journal");
        assert!(
            same_state(&restarted.state_blocking(), &state),
            "a restart recovered another state"
        );
    }
});
