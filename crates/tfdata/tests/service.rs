//! In-process clusters on 127.0.0.1 port 0, using the same library code as
//! the `tfdata` binary: real gRPC over real sockets.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tfdata::{
    Compression, Dataset, DispatchServer, DispatcherConfig, Element, Error, ProcessingMode, Tensor,
    WorkerConfig, WorkerServer, distribute, from_dataset_id, register_dataset, register_function,
};

mod common;
use common::{cluster, scalars};

fn counts(values: &[i64]) -> BTreeMap<i64, usize> {
    let mut m = BTreeMap::new();
    for v in values {
        *m.entry(*v).or_default() += 1;
    }
    m
}

#[test]
fn quickstart_reads_range_in_order() {
    let (dispatcher, _workers) = cluster(1);
    assert!(dispatcher.target().starts_with("grpc://localhost:"));
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(10))
        .unwrap();
    assert_eq!(scalars(&ds), (0..10).collect::<Vec<_>>());
}

#[test]
fn two_workers_in_parallel_epochs_yield_every_element_twice() {
    let (dispatcher, _workers) = cluster(2);
    let ds = distribute("parallel_epochs", &dispatcher.target())
        .apply(&Dataset::range(25))
        .unwrap();
    let values = scalars(&ds);
    assert_eq!(values.len(), 50);
    assert!(counts(&values).values().all(|&c| c == 2), "{values:?}");
    assert_eq!(counts(&values).len(), 25);
}

#[test]
fn each_iterator_is_a_new_complete_repetition() {
    let (dispatcher, _workers) = cluster(1);
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(5))
        .unwrap();
    assert_eq!(scalars(&ds), vec![0, 1, 2, 3, 4]);
    assert_eq!(scalars(&ds), vec![0, 1, 2, 3, 4]);
}

#[test]
fn map_batch_take_run_on_the_worker_compressed_or_not() {
    register_function("service_test_square", |e: Element| {
        let v = e.components[0].to_scalar::<i64>()?;
        Ok(Element::new(vec![
            Tensor::scalar(v * v),
            Tensor::scalar_string(format!("n{v}")),
        ]))
    });
    let (dispatcher, _workers) = cluster(1);
    for compression in [Compression::Auto, Compression::Off] {
        let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
            .compression(compression)
            .apply(
                &Dataset::range(10)
                    .map("service_test_square")
                    .batch(4, false)
                    .take(2),
            )
            .unwrap();
        let batches: Vec<Element> = ds.iter().unwrap().map(Result::unwrap).collect();
        assert_eq!(batches.len(), 2);
        assert_eq!(
            batches[1].components[0].to_vec::<i64>().unwrap(),
            vec![16, 25, 36, 49]
        );
        assert_eq!(batches[1].components[0].shape(), &[4]);
        let names: Vec<&[u8]> = batches[0].components[1]
            .string_values()
            .unwrap()
            .iter()
            .map(|b| b.as_ref())
            .collect();
        assert_eq!(names, vec![&b"n0"[..], b"n1", b"n2", b"n3"]);
    }
}

#[test]
fn a_shared_job_splits_elements_between_readers() {
    let (dispatcher, _workers) = cluster(1);
    let make = || {
        distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
            .job_name("shared")
            .apply(&Dataset::range(40))
            .unwrap()
    };
    let (a, b) = (make(), make());
    let (ia, ib) = (a.iter().unwrap(), b.iter().unwrap());
    let reader = std::thread::spawn(move || {
        ia.map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
            .collect::<Vec<_>>()
    });
    let mut values: Vec<i64> = ib
        .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
        .collect();
    values.extend(reader.join().unwrap());
    values.sort();
    assert_eq!(values, (0..40).collect::<Vec<_>>());
}

#[test]
fn register_then_read_by_id() {
    let (dispatcher, _workers) = cluster(1);
    let id = register_dataset(
        &dispatcher.target(),
        &Dataset::range(3),
        Compression::Auto,
        None,
    )
    .unwrap();
    assert_eq!(id, "1000");
    let again = register_dataset(
        &dispatcher.target(),
        &Dataset::range(3),
        Compression::Auto,
        Some("mine"),
    )
    .unwrap();
    assert_eq!(again, "mine");
    // Same id, different metadata: refused with the reason.
    let err = register_dataset(
        &dispatcher.target(),
        &Dataset::range(4),
        Compression::Auto,
        Some("mine"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("cardinality"), "{err}");
    let ds = from_dataset_id(ProcessingMode::ParallelEpochs, &dispatcher.target(), &id)
        .build()
        .unwrap();
    assert_eq!(scalars(&ds), vec![0, 1, 2]);
}

#[test]
fn unknown_dataset_id_is_a_clear_error() {
    let (dispatcher, _workers) = cluster(1);
    let err = from_dataset_id(
        ProcessingMode::ParallelEpochs,
        &dispatcher.target(),
        "no-such-id",
    )
    .build()
    .err()
    .unwrap();
    assert_eq!(err.code(), tonic::Code::NotFound, "{err}");
    assert!(err.to_string().contains("no-such-id"), "{err}");
}

#[test]
fn invalid_processing_mode_is_rejected_before_any_call() {
    let err = distribute("one_epoch", "grpc://localhost:1")
        .apply(&Dataset::range(1))
        .err()
        .unwrap();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("one_epoch"));
}

#[test]
fn an_unregistered_function_fails_the_read_naming_it() {
    let (dispatcher, _workers) = cluster(1);
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(3).map("service_test_never_registered"))
        .unwrap();
    let first = ds.iter().unwrap().next().unwrap();
    let err = first.unwrap_err().to_string();
    assert!(err.contains("service_test_never_registered"), "{err}");
}

#[test]
fn a_user_function_panic_becomes_an_error_and_the_worker_survives() {
    register_function(
        "service_test_panics",
        |_e: Element| -> tfdata::Result<Element> { panic!("deliberate") },
    );
    let (dispatcher, _workers) = cluster(1);
    let bad = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(3).map("service_test_panics"))
        .unwrap();
    let err = bad.iter().unwrap().next().unwrap().unwrap_err().to_string();
    assert!(err.contains("deliberate"), "{err}");
    let good = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(3))
        .unwrap();
    assert_eq!(scalars(&good), vec![0, 1, 2]);
}

#[test]
fn a_port_in_use_is_an_error_from_the_constructor() {
    let dispatcher = DispatchServer::new(DispatcherConfig::default()).unwrap();
    let err = DispatchServer::new(DispatcherConfig {
        port: dispatcher.port(),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(matches!(err, Error::Bind { .. }), "{err}");
    let mut config = WorkerConfig::new(dispatcher.address());
    config.port = dispatcher.port();
    assert!(matches!(WorkerServer::new(config), Err(Error::Bind { .. })));
}

#[test]
fn an_invalid_config_is_an_error_from_the_constructor() {
    let err = DispatchServer::new(DispatcherConfig {
        fault_tolerant_mode: true,
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(err.to_string().contains("work_dir"), "{err}");
    assert!(WorkerServer::new(WorkerConfig::new("")).is_err());
}

#[test]
fn an_absent_dispatcher_is_a_clear_error_within_the_timeout() {
    // A port nobody listens on: bind one, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let start = Instant::now();
    let err = distribute(
        ProcessingMode::ParallelEpochs,
        &format!("grpc://localhost:{port}"),
    )
    .dispatcher_timeout(Duration::from_secs(2))
    .apply(&Dataset::range(3))
    .err()
    .unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "took {:?}",
        start.elapsed()
    );
    assert!(matches!(err, Error::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains(&port.to_string()), "{err}");
}

#[test]
fn start_stop_join_and_drop() {
    let dispatcher = DispatchServer::new_stopped(DispatcherConfig::default()).unwrap();
    let target = dispatcher.target();
    assert!(!target.ends_with(":0"));
    dispatcher.start().unwrap();
    let worker = WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap();
    let ds = distribute(ProcessingMode::ParallelEpochs, &target)
        .apply(&Dataset::range(2))
        .unwrap();
    assert_eq!(scalars(&ds), vec![0, 1]);
    worker.stop();
    worker.join().unwrap();
    dispatcher.stop();
    dispatcher.join().unwrap();
    let port = dispatcher.port();
    drop(dispatcher);
    // The port is free again once the server is gone.
    DispatchServer::new(DispatcherConfig {
        port,
        ..Default::default()
    })
    .unwrap();
}

#[test]
fn async_stream_reads_the_same_elements() {
    use futures::StreamExt;
    let (dispatcher, _workers) = cluster(1);
    let target = dispatcher.target();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let values = rt.block_on(async move {
        let ds = distribute(ProcessingMode::ParallelEpochs, &target)
            .apply_async(&Dataset::range(6))
            .await
            .unwrap();
        // The blocking API refuses to run inside a runtime, naming the alternative.
        assert!(ds.iter().err().unwrap().to_string().contains("async"));
        let stream = ds.stream().await.unwrap();
        stream
            .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
            .collect::<Vec<_>>()
            .await
    });
    assert_eq!(values, vec![0, 1, 2, 3, 4, 5]);
}

mod version_mismatch {
    use super::*;
    use tfdata_proto::data::{
        GetVersionRequest, GetVersionResponse,
        dispatcher_service_server::{DispatcherService, DispatcherServiceServer},
    };
    use tonic::{Request, Response, Status};

    /// A dispatcher speaking protocol version 8.
    struct OldDispatcher;

    #[tonic::async_trait]
    impl DispatcherService for OldDispatcher {
        async fn get_version(
            &self,
            _r: Request<GetVersionRequest>,
        ) -> Result<Response<GetVersionResponse>, Status> {
            Ok(Response::new(GetVersionResponse { version: 8 }))
        }
    }

    fn old_dispatcher() -> (tokio::runtime::Runtime, u16) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        rt.spawn(
            tonic::transport::Server::builder()
                .add_service(DispatcherServiceServer::new(OldDispatcher))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        (rt, port)
    }

    #[test]
    fn clients_and_workers_refuse_another_protocol_version() {
        let (_rt, port) = old_dispatcher();
        let err = distribute(
            ProcessingMode::ParallelEpochs,
            &format!("grpc://localhost:{port}"),
        )
        .apply(&Dataset::range(1))
        .err()
        .unwrap();
        assert!(
            matches!(
                err,
                Error::VersionMismatch {
                    server: 8,
                    client: 9,
                    ..
                }
            ),
            "{err}"
        );

        let worker = WorkerServer::new(WorkerConfig::new(format!("localhost:{port}"))).unwrap();
        let err = worker.join().unwrap_err();
        assert!(
            matches!(err, Error::VersionMismatch { server: 8, .. }),
            "{err}"
        );
        assert!(worker.has_stopped());
    }
}

#[test]
fn dropping_an_iterator_releases_its_iteration_client() {
    let (dispatcher, _workers) = cluster(1);
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(1_000_000))
        .unwrap();
    let mut it = ds.iter().unwrap();
    assert!(it.next().unwrap().is_ok());
    assert_eq!(dispatcher.state().clients().count(), 1);
    drop(it);
    let deadline = Instant::now() + Duration::from_secs(10);
    while dispatcher.state().clients().count() != 0 {
        assert!(Instant::now() < deadline, "client was not released");
        std::thread::sleep(Duration::from_millis(10));
    }
    let state = dispatcher.state();
    let iteration = state.iterations().next().unwrap();
    assert_eq!(iteration.num_clients, 0);
    assert!(iteration.last_client_released_micros.is_some());
}

#[test]
fn the_element_spec_is_registered_in_tensorflows_encoding() {
    let (dispatcher, _workers) = cluster(1);
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(6).batch(4, true))
        .unwrap();
    let spec = ds.element_spec().unwrap().unwrap();
    assert_eq!(spec.to_string(), "TensorSpec(shape=(4,), dtype=int64)");
    assert_eq!(ds.registered_cardinality(), 1);
}
