//! `resume`: what a reader restored from a checkpoint at 90% of an epoch
//! costs (issue 17), against reading the whole epoch, on an in-process
//! dispatcher and worker over loopback gRPC.
//!
//! Three pipelines. parallel_epochs: `range(n).batch(64)`, whose worker
//! seeks to the checkpoint (`range` and `batch` skip without making
//! elements), and `range(n).shuffle(1024).batch(64)`, whose worker must
//! make and drop the skipped 90% (a shuffle's order depends on every element
//! before). distributed_epoch: `text_lines(100 files).batch(64)` holding the
//! same count of lines, whose restored job never hands out the files read
//! to the end and skips the lines read of the one in progress.
//! Reported per pipeline: the epoch's read time, the restore's time to its
//! first element and to the end, and the first element's time as a share
//! of the epoch.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Map, Value, json};
use tfdata::{Dataset, DispatchServer, DispatcherConfig, WorkerConfig, WorkerServer, distribute};

/// Rows per batch in both pipelines.
const BATCH: i64 = 64;

struct Timings {
    epoch: Duration,
    first_after_restore: Duration,
    rest_after_restore: Duration,
    batches: usize,
}

fn measure(
    dispatcher: &DispatchServer,
    dataset: &Dataset,
    mode: tfdata::ProcessingMode,
) -> Result<Timings> {
    let ds = distribute(mode, &dispatcher.target()).apply(dataset)?;
    let started = Instant::now();
    let batches = ds.iter()?.try_fold(0usize, |n, e| e.map(|_| n + 1))?;
    let epoch = started.elapsed();
    // 90% read, then the checkpoint.
    let mut it = ds.iter()?;
    for e in it.by_ref().take(batches * 9 / 10) {
        e?;
    }
    let state = it.checkpoint()?;
    drop(it);
    let started = Instant::now();
    let mut restored = ds.iter()?;
    restored.restore(&state)?;
    let mut first_after_restore = None;
    for e in restored {
        e?;
        first_after_restore.get_or_insert_with(|| started.elapsed());
    }
    Ok(Timings {
        epoch,
        first_after_restore: first_after_restore.unwrap_or_default(),
        rest_after_restore: started.elapsed(),
        batches,
    })
}

pub fn run(n: u64, emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>) -> Result<()> {
    let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
    let _worker = WorkerServer::new(WorkerConfig::new(dispatcher.address()))?;
    while dispatcher.num_workers() < 1 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let n = i64::try_from(n)?;
    // The same lines in 100 files, for the distributed_epoch pipeline.
    let dir = tempfile::tempdir()?;
    let files = 100;
    let mut paths = Vec::new();
    for f in 0..files {
        let path = dir.path().join(format!("part-{f:03}.txt"));
        let mut text = String::new();
        for v in (f..n).step_by(files as usize) {
            text.push_str(&v.to_string());
            text.push('\n');
        }
        std::fs::write(&path, text)?;
        paths.push(path.to_string_lossy().into_owned());
    }
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    use tfdata::ProcessingMode::{DistributedEpoch, ParallelEpochs};
    let pipelines = [
        (
            "seek",
            Dataset::range(n).batch(BATCH, false),
            ParallelEpochs,
        ),
        (
            "make-and-drop",
            Dataset::range(n)
                .shuffle(1024, Some(1), false)
                .batch(BATCH, false),
            ParallelEpochs,
        ),
        (
            "files-distributed-epoch",
            Dataset::text_lines(&paths, "").batch(BATCH, false),
            DistributedEpoch,
        ),
    ];
    for (name, dataset, mode) in pipelines {
        let t = measure(&dispatcher, &dataset, mode)?;
        let share = t.first_after_restore.as_secs_f64() / t.epoch.as_secs_f64();
        let mut report = Map::new();
        report.insert("scenario".into(), json!("resume"));
        report.insert("pipeline".into(), json!(name));
        report.insert("elements".into(), json!(n));
        report.insert("batches".into(), json!(t.batches));
        report.insert("epoch_seconds".into(), json!(t.epoch.as_secs_f64()));
        report.insert(
            "restore_first_element_seconds".into(),
            json!(t.first_after_restore.as_secs_f64()),
        );
        report.insert(
            "restore_to_end_seconds".into(),
            json!(t.rest_after_restore.as_secs_f64()),
        );
        report.insert("first_element_share_of_epoch".into(), json!(share));
        let summary = format!(
            "resume ({name}): epoch {:.3} s; restored at 90%: first element after {:.1} ms \
             ({:.1}% of the epoch), the last 10% read in {:.3} s",
            t.epoch.as_secs_f64(),
            t.first_after_restore.as_secs_f64() * 1e3,
            share * 100.0,
            t.rest_after_restore.as_secs_f64()
        );
        emit(report, summary)?;
    }
    Ok(())
}
