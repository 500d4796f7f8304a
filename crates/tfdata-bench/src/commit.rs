//! `dispatcher-commit` (issue 12): how many state-changing RPCs a
//! fault-tolerant dispatcher answers per second, and their latency, with
//! many concurrent callers.
//!
//! A dispatcher in fault-tolerant mode journals under `--data-dir` (default
//! `target/bench-data/commit`, on the same disk as the build: a tmpfs would
//! make fsync free and hide what is measured). One `range` dataset is
//! registered, one distributed_epoch iteration created, and then each of
//! `--commit-callers` concurrent callers (default 1, 8 and 64, one run
//! each) sends `GetSplit` back to back for `--min-seconds`, as TensorFlow
//! workers do: every call hands out one split and journals one
//! `ProduceSplitUpdate` before it is answered. Reported per caller count:
//! RPCs/s and the p50/p99 latency, for the journaled dispatcher and, as the
//! ceiling without a journal, for one that is not fault tolerant.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};
use tfdata::{Compression, Dataset, DispatchServer, DispatcherConfig, register_dataset};
use tfdata_proto::data::{
    GetOrCreateIterationRequest, GetOrCreateJobRequest, GetSplitRequest, ProcessingModeDef,
    processing_mode_def::ShardingPolicy,
};

/// gRPC connections the callers share (HTTP/2 multiplexes the rest).
const CHANNELS: usize = 8;

/// One run's figures.
struct Run {
    rpcs: u64,
    seconds: f64,
    p50_ms: f64,
    p99_ms: f64,
}

pub fn run(
    callers: &[usize],
    seconds: f64,
    data_dir: &Path,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    for &fault_tolerant in &[true, false] {
        for &n in callers {
            let dir = data_dir.join(format!("run-{n}"));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let run = run_once(n, seconds, fault_tolerant.then_some(dir.as_path()))?;
            let _ = std::fs::remove_dir_all(&dir);
            let rate = run.rpcs as f64 / run.seconds;
            let mode = if fault_tolerant {
                "fault-tolerant"
            } else {
                "in-memory"
            };
            let mut report = Map::new();
            report.insert("scenario".into(), json!("dispatcher-commit"));
            report.insert("value".into(), json!(rate));
            report.insert("unit".into(), json!("RPCs/s"));
            report.insert("callers".into(), json!(n));
            report.insert("fault_tolerant".into(), json!(fault_tolerant));
            report.insert("rpcs".into(), json!(run.rpcs));
            report.insert("seconds".into(), json!(run.seconds));
            report.insert("p50_ms".into(), json!(run.p50_ms));
            report.insert("p99_ms".into(), json!(run.p99_ms));
            report.insert("rpc".into(), json!("GetSplit"));
            let summary = format!(
                "dispatcher-commit {mode:>14}, {n:>3} callers: {rate:>9.0} GetSplit/s, p50 {:.2} ms, p99 {:.2} ms",
                run.p50_ms, run.p99_ms
            );
            emit(report, summary)?;
        }
    }
    Ok(())
}

fn run_once(callers: usize, seconds: f64, work_dir: Option<&Path>) -> Result<Run> {
    let mut config = DispatcherConfig::default();
    if let Some(dir) = work_dir {
        config.work_dir = Some(dir.display().to_string());
        config.fault_tolerant_mode = true;
    }
    let dispatcher = DispatchServer::new(config)?;
    let address = dispatcher.address();
    let dataset_id = register_dataset(
        &dispatcher.target(),
        &Dataset::range(i64::MAX),
        Compression::Off,
        None,
    )?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = runtime.block_on(async move {
        let channels: Vec<_> = (0..CHANNELS)
            .map(|_| {
                tfdata_rpc::channel::channel(&address, &Default::default())
                    .map(tfdata_rpc::channel::dispatcher_client)
            })
            .collect::<tfdata::Result<_>>()?;
        let mut client = channels[0].clone();
        let job_id = client
            .get_or_create_job(GetOrCreateJobRequest {
                dataset_id,
                processing_mode_def: Some(ProcessingModeDef {
                    sharding_policy: ShardingPolicy::Dynamic as i32,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await?
            .into_inner()
            .job_id;
        client
            .get_or_create_iteration(GetOrCreateIterationRequest {
                job_id,
                repetition: 0,
                tfdata_reports_receipts: false,
                tfdata_consumed: Vec::new(),
                tfdata_restore: None,
                tfdata_consumed_elements: Vec::new(),
                tfdata_consumed_pieces: Vec::new(),
            })
            .await?;
        // The first iteration's id (the dispatcher's first id); asked from
        // the state instead would need the status service.
        let iteration_id = tfdata_core::IterationId::FIRST;
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        let start = Instant::now();
        let tasks: Vec<_> = (0..callers)
            .map(|i| {
                let mut client = channels[i % CHANNELS].clone();
                tokio::spawn(async move {
                    let mut latencies = Vec::new();
                    while Instant::now() < deadline {
                        let sent = Instant::now();
                        client
                            .get_split(GetSplitRequest {
                                iteration_id,
                                repetition: 0,
                                split_provider_index: 0,
                                ..Default::default()
                            })
                            .await?;
                        latencies.push(sent.elapsed());
                    }
                    anyhow::Ok(latencies)
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await??);
        }
        let elapsed = start.elapsed().as_secs_f64();
        all.sort();
        let quantile = |q: f64| {
            all.get(((all.len() as f64 - 1.0) * q).round() as usize)
                .map_or(0.0, |d| d.as_secs_f64() * 1e3)
        };
        anyhow::Ok(Run {
            rpcs: all.len() as u64,
            seconds: elapsed,
            p50_ms: quantile(0.5),
            p99_ms: quantile(0.99),
        })
    });
    dispatcher.stop();
    result
}
