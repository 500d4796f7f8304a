//! `worker-loss`: what a worker's SIGKILL costs a distributed_epoch read
//! (issue 31). A fault-tolerant dispatcher in this process (its journal in a
//! temporary directory), two worker processes (this binary's
//! `--serve-worker`), and one reader in this process reading
//! `range(--elements)` and `range(--elements).batch(7)` at full speed.
//! When half the values have arrived, one worker is SIGKILLed and not
//! replaced: the other produces what it held. Twice: with TensorFlow's
//! default timeouts (`worker_timeout` 10 minutes, heartbeats every 30 s)
//! and with short ones (2 s, 300 ms heartbeats).
//!
//! Reported, from the SIGKILL: when the dispatcher's probes declared the
//! worker lost (`tfdata_dispatcher_workers_probed_lost`), when the readers'
//! receipts let its undelivered splits go back to the pool
//! (`tfdata_dispatcher_splits_returned`), when the first of them was
//! handed to the live worker (`tfdata_dispatcher_splits_handed_out{source=
//! "returned"}`: the splits flowing again), and when the read ended; the
//! size of the reader's receipts report for the lost task
//! (`tfdata_reader_receipt_report_bytes` / `_entries`); and whether every
//! value arrived exactly once (a run that fails that is an error).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use tfdata::{Dataset, DispatchServer, DispatcherConfig, ProcessingMode, distribute};

use crate::child::worker_process;

/// The timeouts a run uses.
struct Settings {
    name: &'static str,
    /// `None`: the dispatcher's default (TensorFlow's 10 minutes).
    worker_timeout: Option<Duration>,
    /// `None`: the worker's default (TensorFlow's 30 s).
    heartbeat: Option<Duration>,
}

const SETTINGS: [Settings; 2] = [
    Settings {
        name: "default-timeouts",
        worker_timeout: None,
        heartbeat: None,
    },
    Settings {
        name: "short-timeouts",
        worker_timeout: Some(Duration::from_millis(2000)),
        heartbeat: Some(Duration::from_millis(300)),
    },
];

/// A read's moments, each measured from the SIGKILL.
#[derive(Default)]
struct Moments {
    lost: Option<Duration>,
    returned: Option<Duration>,
    flowing: Option<Duration>,
    ended: Option<Duration>,
}

/// One counter's value in OpenMetrics text (the sample whose name and
/// labels are `sample`).
fn sample(text: &str, sample: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

fn dispatcher_metrics(dispatcher: &DispatchServer) -> String {
    dispatcher
        .dispatcher()
        .metrics()
        .encode(tfdata_rpc::metrics::Format::OpenMetrics)
}

fn read_once(
    n: i64,
    pipeline: &str,
    dataset: Dataset,
    settings: &Settings,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    let journal = tempfile::tempdir()?;
    let mut config = DispatcherConfig {
        fault_tolerant_mode: true,
        work_dir: Some(journal.path().to_string_lossy().into_owned()),
        ..DispatcherConfig::default()
    };
    if let Some(t) = settings.worker_timeout {
        config.worker_timeout = t;
    }
    let dispatcher = DispatchServer::new(config)?;
    let mut workers = vec![
        worker_process(&dispatcher.address(), settings.heartbeat)?,
        worker_process(&dispatcher.address(), settings.heartbeat)?,
    ];
    let deadline = Instant::now() + Duration::from_secs(60);
    while dispatcher.num_workers() < 2 {
        if Instant::now() > deadline {
            bail!("the worker processes did not register");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let before = |name: &str| sample(&dispatcher_metrics(&dispatcher), name);
    let lost_before = before("tfdata_dispatcher_workers_probed_lost_total");
    let returned_before = before("tfdata_dispatcher_splits_returned_total");
    let flowing_name = "tfdata_dispatcher_splits_handed_out_total{source=\"returned\"}";
    let flowing_before = before(flowing_name);
    let reader_before = tfdata::reader_metrics();

    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .job_name(&format!("worker-loss-{pipeline}-{}", settings.name))
        .apply(&dataset)?;
    let (progress_tx, progress_rx) = std::sync::mpsc::channel::<()>();
    let counted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let reader = {
        let counted = std::sync::Arc::clone(&counted);
        std::thread::spawn(move || -> Result<Vec<u8>> {
            let mut seen = vec![0u8; usize::try_from(n)?];
            for e in ds.iter()? {
                let values = e?.components[0].to_vec::<i64>()?;
                for v in &values {
                    let c = seen
                        .get_mut(usize::try_from(*v)?)
                        .context("a value outside the range")?;
                    *c = c.saturating_add(1);
                }
                counted.fetch_add(values.len(), std::sync::atomic::Ordering::Relaxed);
            }
            drop(progress_tx);
            Ok(seen)
        })
    };
    let started = Instant::now();
    let timeout = Duration::from_secs(300);
    while counted.load(std::sync::atomic::Ordering::Relaxed) < (n / 2) as usize {
        if reader.is_finished() {
            bail!(
                "the read ended before half of it ({pipeline}, {})",
                settings.name
            );
        }
        if started.elapsed() > timeout {
            bail!("half of the read took over {timeout:?}");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let mut victim = workers.remove(0);
    victim.child.kill().context("SIGKILL")?;
    let killed = Instant::now();
    drop(victim);
    let mut at = Moments::default();
    // Poll the dispatcher's counters until the read ends.
    loop {
        let done = matches!(
            progress_rx.recv_timeout(Duration::from_millis(2)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
        );
        let metrics = dispatcher_metrics(&dispatcher);
        let now = killed.elapsed();
        let moved = |name: &str, before: f64| sample(&metrics, name) > before;
        if at.lost.is_none() && moved("tfdata_dispatcher_workers_probed_lost_total", lost_before) {
            at.lost = Some(now);
        }
        if at.returned.is_none()
            && moved("tfdata_dispatcher_splits_returned_total", returned_before)
        {
            at.returned = Some(now);
        }
        if at.flowing.is_none() && moved(flowing_name, flowing_before) {
            at.flowing = Some(now);
        }
        if done {
            at.ended = Some(now);
            break;
        }
        if now > timeout {
            bail!(
                "the read did not end {timeout:?} after the kill ({pipeline}, {})",
                settings.name
            );
        }
    }
    let seen = reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader panicked"))??;
    let lost = seen.iter().filter(|c| **c == 0).count();
    let twice = seen.iter().filter(|c| **c > 1).count();
    let reader_after = tfdata::reader_metrics();
    let grew = |name: &str| sample(&reader_after, name) - sample(&reader_before, name);
    let reports = grew("tfdata_reader_receipt_report_bytes_count");
    let report_bytes = grew("tfdata_reader_receipt_report_bytes_sum");
    let report_entries = grew("tfdata_reader_receipt_report_entries_sum");
    drop(workers);
    let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
    let mut report = Map::new();
    report.insert("scenario".into(), json!("worker-loss"));
    report.insert("pipeline".into(), json!(pipeline));
    report.insert("settings".into(), json!(settings.name));
    report.insert("elements".into(), json!(n));
    report.insert("declared_lost_ms".into(), json!(ms(at.lost)));
    report.insert("splits_returned_ms".into(), json!(ms(at.returned)));
    report.insert("splits_flowing_again_ms".into(), json!(ms(at.flowing)));
    report.insert("read_ended_ms".into(), json!(ms(at.ended)));
    report.insert("receipt_reports".into(), json!(reports));
    report.insert("receipt_report_bytes".into(), json!(report_bytes));
    report.insert("receipt_report_entries".into(), json!(report_entries));
    report.insert("values_lost".into(), json!(lost));
    report.insert("values_twice".into(), json!(twice));
    let show = |d: Option<Duration>| match d {
        Some(d) => format!("{:.0} ms", d.as_secs_f64() * 1e3),
        None => "never".to_string(),
    };
    let summary = format!(
        "worker-loss ({pipeline}, {}): from the SIGKILL, declared lost after {}, its splits \
         returned after {}, flowing again after {}, the read ended after {}; receipts: {reports} \
         report(s), {report_bytes} bytes, {report_entries} entries; {lost} lost, {twice} twice",
        settings.name,
        show(at.lost),
        show(at.returned),
        show(at.flowing),
        show(at.ended),
    );
    emit(report, summary)?;
    if lost > 0 || twice > 0 {
        bail!(
            "{pipeline}, {}: {lost} values lost, {twice} delivered twice",
            settings.name
        );
    }
    Ok(())
}

pub fn run(n: u64, emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>) -> Result<()> {
    let n = i64::try_from(n)?;
    for settings in &SETTINGS {
        read_once(n, "range", Dataset::range(n), settings, emit)?;
        read_once(
            n,
            "range-batch7",
            Dataset::range(n).batch(7, false),
            settings,
            emit,
        )?;
    }
    Ok(())
}
