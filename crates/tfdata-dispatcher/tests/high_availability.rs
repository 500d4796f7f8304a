//! Several dispatchers on one local `work_dir`, in one process, each
//! served by `tfdata_dispatcher::serving::server::serve_with_http` on its own port
//! (the real gRPC and HTTP servers): one leads, the standbys answer
//! `UNAVAILABLE` naming it and fail readiness, a successor takes over with
//! the leader's state when it stops, and a leader whose renewals are
//! blocked stops leading and writes nothing more. The failover with real
//! processes, SIGKILL and SIGSTOP is in
//! `crates/tfdata-cli/tests/failover.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use tfdata_dispatcher::DispatcherConfig;
use tfdata_dispatcher::config::HighAvailability;
use tfdata_proto::data as wire;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::security::TransportSecurity;
use tonic::Code;

/// Short leases, so that a takeover takes about a second.
const LEASE: Duration = Duration::from_millis(1000);
/// The longest any wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

struct Node {
    address: String,
    http_port: u16,
    shutdown: CancellationToken,
    served: tokio::task::JoinHandle<tfdata_core::Result<()>>,
}

async fn start(work_dir: &Path) -> Node {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    let http = tfdata_rpc::admin::bind(0).unwrap();
    let http_port = http.local_addr().unwrap().port();
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
    let served = tokio::spawn(tfdata_dispatcher::serving::server::serve_with_http(
        listener,
        Some(http),
        config,
        shutdown.clone(),
    ));
    Node {
        address,
        http_port,
        shutdown,
        served,
    }
}

fn client(
    address: &str,
) -> wire::dispatcher_service_client::DispatcherServiceClient<tfdata_rpc::security::RpcChannel> {
    let security = TransportSecurity::default().client().unwrap();
    tfdata_rpc::channel::dispatcher_client(
        tfdata_rpc::channel::channel(address, &security).unwrap(),
    )
}

/// `GetVersion` on `address`: `Ok` on the leader, the status otherwise.
async fn version(address: &str) -> Result<(), tonic::Status> {
    client(address)
        .get_version(wire::GetVersionRequest {})
        .await
        .map(|_| ())
}

/// The HTTP status of `GET path` on the admin port.
fn http_status(port: u16, path: &str) -> u16 {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
}

/// Waits until exactly one of `nodes` serves and every other one answers
/// `UNAVAILABLE` naming it; returns the leader's index.
async fn one_leader(nodes: &[&Node]) -> usize {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut leaders = Vec::new();
        let mut refusals = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            match version(&node.address).await {
                Ok(()) => leaders.push(i),
                Err(status) => {
                    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
                    refusals.push(status.message().to_string());
                }
            }
        }
        if let [leader] = leaders[..] {
            let named = format!("the leader is {}", nodes[leader].address);
            if refusals.iter().all(|m| m.contains(&named)) {
                return leader;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no single leader: serving {leaders:?}, refusals {refusals:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn register_range(address: &str, n: i64) -> String {
    let pipeline =
        tfdata_dataset::pipeline::to_pipeline_def(&tfdata_dataset::Dataset::range(n), false)
            .unwrap();
    client(address)
        .get_or_register_dataset(wire::GetOrRegisterDatasetRequest {
            dataset: Some(wire::DatasetDef {
                graph: Default::default(),
                tfdata_pipeline: Some(pipeline),
            }),
            metadata: Some(wire::DataServiceMetadata {
                compression: 1,
                cardinality: n,
                ..Default::default()
            }),
            dataset_id: None,
        })
        .await
        .unwrap()
        .into_inner()
        .dataset_id
}

async fn job(address: &str, dataset_id: &str, name: &str) -> i64 {
    client(address)
        .get_or_create_job(wire::GetOrCreateJobRequest {
            dataset_id: dataset_id.to_string(),
            processing_mode_def: Some(wire::ProcessingModeDef {
                sharding_policy: wire::processing_mode_def::ShardingPolicy::Dynamic as i32,
                ..Default::default()
            }),
            job_name: Some(name.to_string()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .job_id
}

fn journal_files(work_dir: &Path) -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> =
        std::fs::read_dir(work_dir.join("tf_data_dispatcher_journal"))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().len(),
                )
            })
            .collect();
    files.sort();
    files
}

/// Three dispatchers: one leads, the standbys refuse with its address and
/// are not ready; the leader stops, a standby takes over within the lease
/// duration plus 5 s with the same datasets and jobs (ids unchanged), and
/// then the last one does the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn standbys_refuse_naming_the_leader_and_take_over_with_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = vec![
        start(dir.path()).await,
        start(dir.path()).await,
        start(dir.path()).await,
    ];
    let mut registered: Vec<(String, i64)> = Vec::new();
    for round in 0..2 {
        let live: Vec<&Node> = nodes.iter().collect();
        let leader = one_leader(&live).await;
        for (i, node) in nodes.iter().enumerate() {
            let port = node.http_port;
            let (ready, live) = tokio::task::spawn_blocking(move || {
                (http_status(port, "/readyz"), http_status(port, "/healthz"))
            })
            .await
            .unwrap();
            assert_eq!(live, 200, "every dispatcher is alive");
            assert_eq!(ready, if i == leader { 200 } else { 503 }, "node {i}");
        }
        // The leader has everything registered under earlier leaders.
        let address = nodes[leader].address.clone();
        for (dataset, job_id) in &registered {
            let def = client(&address)
                .get_dataset_def(wire::GetDatasetDefRequest {
                    dataset_id: dataset.clone(),
                })
                .await
                .unwrap();
            assert!(def.into_inner().dataset_def.is_some());
            assert_eq!(
                job(&address, dataset, &format!("job-{dataset}")).await,
                *job_id,
                "the job keeps its id across the failover"
            );
        }
        let dataset = register_range(&address, 100 + round).await;
        let job_id = job(&address, &dataset, &format!("job-{dataset}")).await;
        registered.push((dataset, job_id));

        // The leader stops (as a dead process: it no longer renews).
        let stopped = nodes.remove(leader);
        let died = Instant::now();
        stopped.shutdown.cancel();
        stopped.served.await.unwrap().unwrap();
        let live: Vec<&Node> = nodes.iter().collect();
        let deadline = Instant::now() + PATIENCE;
        let successor = loop {
            let mut serving = None;
            for (i, node) in live.iter().enumerate() {
                if version(&node.address).await.is_ok() {
                    serving = Some(i);
                }
            }
            if let Some(i) = serving {
                break i;
            }
            assert!(Instant::now() < deadline, "nobody took over");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let failover = died.elapsed();
        println!(
            "round {round}: failover took {failover:?} (lease {LEASE:?}); new leader {}",
            live[successor].address
        );
        assert!(
            failover < LEASE * 2 + Duration::from_secs(5),
            "takeover within 5 s of the lease's expiry: {failover:?}"
        );
    }
    // The last one leads alone, with everything.
    let last = &nodes[0];
    for (dataset, job_id) in &registered {
        assert_eq!(
            job(&last.address, dataset, &format!("job-{dataset}")).await,
            *job_id
        );
    }
    last.shutdown.cancel();
}

/// A leader that cannot renew (another process holds the local lease's
/// lock file past the lease) stops leading on its own clock: its calls
/// answer `UNAVAILABLE`, readiness fails, `serve` returns an error, and
/// it writes no journal record after its fence ran out, although calls
/// keep arriving; a standby then takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_that_cannot_renew_stops_writing_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let first = start(dir.path()).await;
    assert_eq!(one_leader(&[&first]).await, 0);
    let dataset = register_range(&first.address, 10).await;
    let standby = start(dir.path()).await;
    assert_eq!(one_leader(&[&first, &standby]).await, 0);

    // Block every lease write (renewals and takeovers) for 3 leases.
    let lock = std::fs::File::create(dir.path().join("leader_lease.lock")).unwrap();
    lock.lock().unwrap();
    let blocked = Instant::now();
    let address = first.address.clone();
    let dataset_for_calls = dataset.clone();
    let callers = tokio::spawn(async move {
        // Calls that journal, all along: jobs with new names.
        let mut answers = Vec::new();
        for i in 0.. {
            if blocked.elapsed() > LEASE * 3 {
                break;
            }
            let answer = client(&address)
                .get_or_create_job(wire::GetOrCreateJobRequest {
                    dataset_id: dataset_for_calls.clone(),
                    processing_mode_def: Some(wire::ProcessingModeDef {
                        sharding_policy: wire::processing_mode_def::ShardingPolicy::Off as i32,
                        ..Default::default()
                    }),
                    job_name: Some(format!("during-{i}")),
                    ..Default::default()
                })
                .await;
            answers.push((
                blocked.elapsed(),
                answer.map(|a| a.into_inner().job_id).map_err(|s| s.code()),
            ));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        answers
    });
    // The fence runs out `duration - margin` after the last renewal was
    // sent; by one lease duration the leader must have given up.
    let outcome = tokio::time::timeout(PATIENCE, first.served).await.unwrap();
    let gave_up = blocked.elapsed();
    let err = outcome.unwrap().unwrap_err();
    assert!(err.to_string().contains("not the leader any more"), "{err}");
    // The renewal waits up to 1 s for the lock; then the fence has run out.
    assert!(gave_up < LEASE + Duration::from_secs(3), "{gave_up:?}");
    let journal_at_exit = journal_files(dir.path());
    let answers = callers.await.unwrap();
    let refused = answers.iter().filter(|(_, a)| a.is_err()).count();
    // A call in flight while the deposed leader's server shuts down sees
    // its stream reset (`CANCELLED`); it was not served either.
    assert!(
        answers
            .iter()
            .all(|(_, a)| matches!(a, Ok(_) | Err(Code::Unavailable) | Err(Code::Cancelled))),
        "{answers:?}"
    );
    assert!(refused > 0, "{answers:?}");
    // Every call after the first refusal was refused (nothing served by a
    // deposed leader), and the journal did not change since it gave up.
    let first_refusal = answers.iter().position(|(_, a)| a.is_err()).unwrap();
    assert!(answers[first_refusal..].iter().all(|(_, a)| a.is_err()));
    assert_eq!(journal_files(dir.path()), journal_at_exit);

    drop(lock);
    // The standby takes over, with every job the old leader acknowledged.
    assert_eq!(one_leader(&[&standby]).await, 0);
    for (i, (_, answer)) in answers.iter().enumerate() {
        let Ok(acknowledged_id) = answer else {
            continue;
        };
        let job_id = client(&standby.address)
            .get_or_create_job(wire::GetOrCreateJobRequest {
                dataset_id: dataset.clone(),
                processing_mode_def: Some(wire::ProcessingModeDef {
                    sharding_policy: wire::processing_mode_def::ShardingPolicy::Off as i32,
                    ..Default::default()
                }),
                job_name: Some(format!("during-{i}")),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .job_id;
        assert_eq!(
            job_id, *acknowledged_id,
            "job during-{i} survived the failover"
        );
    }
    standby.shutdown.cancel();
}

/// The in-process server is always the only dispatcher: it refuses the
/// setting rather than serve without a lease.
#[test]
fn the_in_process_server_refuses_high_availability() {
    let dir = tempfile::tempdir().unwrap();
    let config = DispatcherConfig {
        work_dir: Some(dir.path().display().to_string()),
        fault_tolerant_mode: true,
        high_availability: Some(HighAvailability::with_lease_duration(LEASE)),
        ..Default::default()
    };
    let err = tfdata_dispatcher::DispatchServer::new(config)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("high_availability"), "{err}");
}
