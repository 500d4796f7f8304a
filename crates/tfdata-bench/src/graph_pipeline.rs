//! `graph-pipeline` (issue 13 item 6): the `pipeline` scenario's image
//! pipeline written in tf.data, read by TensorFlow's client through
//! `distribute` from our dispatcher, once with a tfdata worker running the
//! graph TensorFlow registered and once with TensorFlow's worker, each
//! worker in its own process on the same cores, in the same run
//! (`scripts/tf_graph_pipeline.py` is the client and TensorFlow's worker;
//! ours is this binary's `--serve-worker`). `value` is examples/s with our
//! worker, `tensorflow` with TensorFlow's; `ratio` ours / TensorFlow's.
//! Peak RSS is each worker process's (`worker_peak_rss_bytes`), the
//! client's being the same program both times.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use tfdata::{DispatchServer, DispatcherConfig};

use crate::data::{ImageData, scripts_dir};
use crate::pipeline::{self, PipelineOptions, SideResult, Stage};

/// A worker process for `dispatcher`; stopped (stdin closed, waited for) on drop.
struct WorkerProcess {
    child: Child,
}

impl WorkerProcess {
    fn start(mut command: Command, dispatcher: &DispatchServer) -> Result<Self> {
        let child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the worker process")?;
        let mut worker = WorkerProcess { child };
        // TensorFlow's worker says when it is up; drain that line.
        if let Some(stdout) = worker.child.stdout.take() {
            std::thread::spawn(move || for _ in std::io::BufReader::new(stdout).lines() {});
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while dispatcher.num_workers() < 1 {
            if Instant::now() > deadline {
                bail!("the worker process did not register within 60 s");
            }
            if let Some(status) = worker.child.try_wait()? {
                bail!("the worker process exited ({status})");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(worker)
    }

    fn peak_rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        crate::measure::status_kib(&status, "VmHWM:").map(|kib| kib * 1024)
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Which worker serves the graph.
#[derive(Clone, Copy)]
enum Workers {
    Tfdata,
    TensorFlow,
}

fn run_once(
    python: &Path,
    workers: Workers,
    data: &ImageData,
    options: &PipelineOptions,
    compression: &str,
    pipeline_name: &str,
) -> Result<(SideResult, Option<u64>)> {
    let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
    let command = match workers {
        Workers::Tfdata => {
            let mut c = Command::new(std::env::current_exe()?);
            c.arg("--serve-worker").arg(dispatcher.address());
            c
        }
        Workers::TensorFlow => {
            let mut c = Command::new(python);
            c.arg(scripts_dir().join("tf_graph_pipeline.py"))
                .arg("--serve-worker")
                .arg(dispatcher.address())
                .env("TF_CPP_MIN_LOG_LEVEL", "2");
            c
        }
    };
    let worker = WorkerProcess::start(command, &dispatcher)?;
    let args = [
        "--service".to_string(),
        dispatcher.target(),
        "--data-dir".into(),
        data.dir.display().to_string(),
        "--examples".into(),
        data.examples.to_string(),
        "--batch-size".into(),
        options.batch_size.to_string(),
        "--min-seconds".into(),
        options.measure.min_seconds.to_string(),
        "--warmup-batches".into(),
        options.measure.warmup_batches.to_string(),
        "--compression".into(),
        compression.to_string(),
        "--pipeline".into(),
        pipeline_name.to_string(),
        "--job-name".into(),
        format!("graph-pipeline-{pipeline_name}"),
    ];
    let line = crate::data::run_python_script(python, "tf_graph_pipeline.py", &args)?;
    let result = pipeline::parse_tensorflow_result(&line)?;
    let rss = worker.peak_rss_bytes();
    drop(worker);
    Ok((result, rss))
}

/// The pipelines `--graph-pipelines` names: the image pipeline, and the
/// kinds issue 33 names (`scripts/tf_graph_pipeline.py`'s `PIPELINES`).
pub const PIPELINES: &[&str] = &["image", "text", "recsys", "windows"];

/// Runs the scenario for each pipeline named.
pub fn run(
    python: &Path,
    data: &ImageData,
    options: &PipelineOptions,
    compression: &str,
    pipelines: &[String],
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    for name in pipelines {
        if !PIPELINES.contains(&name.as_str()) {
            bail!("graph-pipeline: no pipeline {name:?}; pipelines: {PIPELINES:?}");
        }
        run_pipeline(python, data, options, compression, name, emit)?;
    }
    Ok(())
}

/// Runs one pipeline (`options.repeats` times, alternating the workers)
/// and emits the median runs' report.
fn run_pipeline(
    python: &Path,
    data: &ImageData,
    options: &PipelineOptions,
    compression: &str,
    name: &str,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for run in 1..=options.repeats.max(1) {
        eprintln!("tfdata-bench: graph-pipeline {name}: tfdata worker (run {run}) ...");
        ours.push(run_once(
            python,
            Workers::Tfdata,
            data,
            options,
            compression,
            name,
        )?);
        eprintln!("tfdata-bench: graph-pipeline {name}: TensorFlow worker (run {run}) ...");
        theirs.push(run_once(
            python,
            Workers::TensorFlow,
            data,
            options,
            compression,
            name,
        )?);
    }
    let median = |mut runs: Vec<(SideResult, Option<u64>)>| {
        runs.sort_by(|a, b| {
            a.0.measurement
                .examples_per_sec()
                .total_cmp(&b.0.measurement.examples_per_sec())
        });
        let middle = (runs.len() - 1) / 2;
        runs.swap_remove(middle)
    };
    let values = |runs: &[(SideResult, Option<u64>)]| -> Vec<f64> {
        runs.iter()
            .map(|r| r.0.measurement.examples_per_sec())
            .collect()
    };
    let (ours_values, their_values) = (values(&ours), values(&theirs));
    let (ours, ours_rss) = median(ours);
    let (theirs, their_rss) = median(theirs);
    let scenario = if name == "image" {
        "graph-pipeline".to_string()
    } else {
        format!("graph-pipeline-{name}")
    };
    let mut r = pipeline::report(
        &scenario,
        Stage::Normalize,
        data,
        options,
        &ours,
        Some(&theirs),
    );
    r.insert(
        "workers".into(),
        json!("tfdata worker running TensorFlow's graph"),
    );
    r.insert("tensorflow_workers".into(), json!("TensorFlow 2.21 worker"));
    r.insert("compression".into(), json!(compression));
    r.insert("worker_peak_rss_bytes".into(), json!(ours_rss));
    r.insert("tensorflow_worker_peak_rss_bytes".into(), json!(their_rss));
    if options.repeats > 1 {
        r.insert("values".into(), json!(ours_values));
        r.insert("tensorflow_values".into(), json!(their_values));
    }
    r.insert("pipeline".into(), json!(name));
    let mut text =
        pipeline::summary(&scenario, &ours, Some(&theirs)).replace(" tfdata ", " ours   ");
    if let (Some(a), Some(b)) = (ours_rss, their_rss) {
        text.push_str(&format!(
            "\n{:<20} worker peak RSS: ours {:.0} MiB, TensorFlow's {:.0} MiB",
            "",
            a as f64 / 1048576.0,
            b as f64 / 1048576.0
        ));
    }
    emit(r, text)
}
