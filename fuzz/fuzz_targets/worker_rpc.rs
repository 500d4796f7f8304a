//! The worker's RPCs in-process, through its public adapters: `WorkerGrpc`
//! (`WorkerService`: `ProcessTask`, `GetElement`, `GetWorkerTasks`,
//! `GetSnapshotTaskProgresses`) and `ElementStreamServer` (the element
//! stream, a gRPC body of fuzz-chosen frames). No dispatcher runs: the
//! worker's dispatcher is a closed loopback port, so the worker never
//! registers, `GetElement` and the stream stop at "not registered" after
//! their request is decoded and checked, and a task's pipeline is decoded,
//! sharded and validated (`load_pipeline`) but never started (its
//! compression check asks the absent dispatcher). Time is paused, so the
//! worker's retries against the absent dispatcher cost nothing.
//!
//! A `ProcessTask` whose task names a dataset file gets a file in a
//! temporary directory holding the request's second part (the worker reads
//! it as `<work_dir>/datasets/<id>`: one TFRecord holding a `DatasetDef`);
//! requests naming URLs or file globs are skipped.
//!
//! Input: up to 8 requests, each a method byte and u16-length-prefixed
//! parts (`ProcessTask`: the request, then the dataset file;
//! `StreamElements`: a frame length byte, then the body).
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tfdata_fuzz::{Frames, Input};
use tfdata_proto::data::{self as wire, task_def, worker_service_server::WorkerService};
use tfdata_rpc::CancellationToken;
use tfdata_worker::WorkerConfig;
use tfdata_worker::grpc::WorkerGrpc;
use tfdata_worker::worker::Worker;
use tfdata_worker::stream::ElementStreamServer;
use tonic::Request;
use tonic::codegen::{Service, http};

const ADDRESS: &str = "127.0.0.1:4";
const HANG: Duration = Duration::from_secs(120);

async fn bounded<F: std::future::Future>(what: &str, call: F) -> F::Output {
    match tokio::time::timeout(HANG, call).await {
        Ok(out) => out,
        Err(_) => panic!("{what} did not finish in 120 s"),
    }
}

async fn stream(worker: &std::sync::Arc<Worker>, input: &mut Input<'_>) {
    let frame_len = usize::from(input.u8()) + 1;
    let path = if input.u8() & 1 == 0 {
        tfdata_rpc::channel::STREAM_ELEMENTS_PATH
    } else {
        "/tfdata.stream.ElementStream/Other"
    };
    let body = input.part();
    let request = http::Request::builder()
        .method(http::Method::POST)
        .uri(path)
        .body(tonic::body::Body::new(Frames::new(body, frame_len, None)))
        .expect("a request");
    let mut server = ElementStreamServer(worker.clone());
    let Ok(response) = bounded("StreamElements", server.call(request)).await;
    let mut body = response.into_body();
    // The response: at most a few batches before the stream ends.
    for _ in 0..16 {
        let frame = std::future::poll_fn(|cx| {
            http_body::Body::poll_frame(std::pin::Pin::new(&mut body), cx)
        });
        match bounded("the element stream's response", frame).await {
            Some(Ok(_)) => {}
            Some(Err(_)) | None => break,
        }
    }
}

async fn run(grpc: &WorkerGrpc, dir: &tempfile::TempDir, input: &mut Input<'_>) {
    for i in 0..8 {
        if input.is_empty() {
            break;
        }
        match input.u8() % 5 {
            0 => {
                let bytes = input.part();
                let file = input.part();
                if !tfdata_fuzz::offline(bytes) {
                    continue;
                }
                let Ok(mut request) = wire::ProcessTaskRequest::decode(bytes) else {
                    continue;
                };
                if let Some(task) = &mut request.task {
                    if !task.worker_address.is_empty() {
                        task.worker_address = ADDRESS.into();
                    }
                    if let Some(task_def::Dataset::Path(path)) = &mut task.dataset {
                        let name = dir.path().join(format!("dataset_{i}"));
                        std::fs::write(&name, file).expect("a dataset file");
                        *path = name.display().to_string();
                    }
                }
                let _ = bounded("ProcessTask", grpc.process_task(Request::new(request))).await;
            }
            1 => {
                if let Ok(r) = wire::GetElementRequest::decode(input.part()) {
                    let _ = bounded("GetElement", grpc.get_element(Request::new(r))).await;
                }
            }
            2 => {
                if let Ok(r) = wire::GetWorkerTasksRequest::decode(input.part()) {
                    let _ = bounded("GetWorkerTasks", grpc.get_worker_tasks(Request::new(r))).await;
                }
            }
            3 => {
                if let Ok(r) = wire::GetSnapshotTaskProgressesRequest::decode(input.part()) {
                    let call = grpc.get_snapshot_task_progresses(Request::new(r));
                    let _ = bounded("GetSnapshotTaskProgresses", call).await;
                }
            }
            _ => stream(&grpc.0, input).await,
        }
        // Let the tasks a ProcessTask spawned run (and give up on the
        // absent dispatcher) before the next request.
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let dir = tfdata_fuzz::temp_dir();
    let runtime = tfdata_fuzz::paused_runtime();
    let shutdown = CancellationToken::new();
    runtime.block_on(async {
        let config = WorkerConfig {
            worker_address: ADDRESS.into(),
            dispatcher_timeout: Duration::from_secs(1),
            ..WorkerConfig::new("127.0.0.1:1")
        };
        let (worker, _completions) =
            Worker::new(config, ADDRESS.into(), shutdown.clone()).expect("a worker");
        let grpc = WorkerGrpc(worker);
        run(&grpc, &dir, &mut input).await;
        shutdown.cancel();
    });
});
