//! The clusters the `scaling` cells run on: ours (our dispatcher in the
//! bench process, each worker this binary's `--serve-worker` in a process
//! of its own) and, with `--compare-tensorflow`, TensorFlow 2.21's (its
//! dispatcher `scripts/tf_dispatcher.py serve` and each worker
//! `scripts/tf_graph_pipeline.py --serve-worker` in processes of their
//! own). Each side registers its datasets with its own client and reads
//! with its own readers (`--scaling-reader`, `scripts/tf_scaling.py read`),
//! in the same exchange.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tfdata::{Compression, DispatchServer, DispatcherClient, DispatcherConfig, register_dataset};

use super::reader::SCALING_READER_FLAG;
use super::workload::{Share, Workload};
use crate::child::Server;
use crate::data::{ImageData, scripts_dir};
use crate::measure;
use crate::pipeline::PipelineOptions;

const SCRIPT: &str = "tf_scaling.py";

/// Whose service a cluster runs.
#[derive(Debug, Clone)]
pub enum Side {
    Ours,
    /// TensorFlow's, with this Python.
    TensorFlow(PathBuf),
}

enum Dispatcher {
    InProcess(DispatchServer),
    /// TensorFlow's, in its own process.
    Process {
        server: Server,
        address: String,
    },
}

/// A dispatcher and `workers` worker processes; the workers stop (stdin
/// closed, waited for) before the dispatcher.
pub struct Cluster {
    workers: Vec<Server>,
    dispatcher: Dispatcher,
    side: Side,
}

/// The dispatcher's CPU counter: ours shares the bench process, so its
/// threads are read (in nanoseconds); TensorFlow's is a process.
pub enum DispatcherClock {
    Threads(Option<BTreeMap<u64, f64>>),
    Process(Option<f64>),
}

impl DispatcherClock {
    pub fn seconds_since(&self, before: &DispatcherClock) -> Option<f64> {
        match (before, self) {
            (DispatcherClock::Threads(Some(a)), DispatcherClock::Threads(Some(b))) => {
                Some(measure::thread_cpu_delta(a, b))
            }
            (DispatcherClock::Process(Some(a)), DispatcherClock::Process(Some(b))) => Some(b - a),
            _ => None,
        }
    }
}

impl Cluster {
    pub fn start(side: &Side, workers: usize) -> Result<Self> {
        match side {
            Side::Ours => {
                let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
                // Declared after the dispatcher: on an error they stop first.
                let mut servers = Vec::new();
                for k in 1..=workers {
                    let mut command = Command::new(std::env::current_exe()?);
                    command
                        .arg(crate::service::SERVE_WORKER_FLAG)
                        .arg(dispatcher.address())
                        .stdout(Stdio::null());
                    servers.push(Server::start_quiet(command, "a worker process", || {
                        dispatcher.num_workers() >= k
                    })?);
                }
                Ok(Cluster {
                    workers: servers,
                    dispatcher: Dispatcher::InProcess(dispatcher),
                    side: side.clone(),
                })
            }
            Side::TensorFlow(python) => start_tensorflow(side, python, workers),
        }
    }

    pub fn target(&self) -> String {
        match &self.dispatcher {
            Dispatcher::InProcess(d) => d.target(),
            Dispatcher::Process { address, .. } => format!("grpc://{address}"),
        }
    }

    /// Registers `workload`'s dataset with this side's client: its id.
    pub fn register(
        &self,
        workload: Workload,
        share: &Share,
        images: Option<&ImageData>,
        pipeline: &PipelineOptions,
    ) -> Result<String> {
        match &self.side {
            Side::Ours => {
                let dataset = super::workload::dataset(workload, share, images, pipeline)?;
                Ok(register_dataset(
                    &self.target(),
                    &dataset,
                    Compression::Auto,
                    None,
                )?)
            }
            Side::TensorFlow(python) => {
                let data_dir = images.map_or_else(String::new, |i| i.dir.display().to_string());
                let args = [
                    "register".to_string(),
                    self.target(),
                    workload.name().into(),
                    share.elements_per_worker.to_string(),
                    pipeline.batch_size.to_string(),
                    data_dir,
                ];
                let line = crate::data::run_python_script(python, SCRIPT, &args)?;
                let v: Value = serde_json::from_str(&line)?;
                Ok(v["dataset_id"]
                    .as_str()
                    .with_context(|| format!("{SCRIPT} register said {line}"))?
                    .to_string())
            }
        }
    }

    /// The command that runs one reader with `spec` (JSON).
    pub fn reader_command(&self, spec: &str) -> Result<Command> {
        Ok(match &self.side {
            Side::Ours => {
                let mut c = Command::new(std::env::current_exe()?);
                c.arg(SCALING_READER_FLAG).arg(spec);
                c
            }
            Side::TensorFlow(python) => {
                let mut c = Command::new(python);
                c.arg(scripts_dir().join(SCRIPT))
                    .arg("read")
                    .arg(spec)
                    .env("TF_CPP_MIN_LOG_LEVEL", "2");
                c
            }
        })
    }

    pub fn worker_cpu_seconds(&self) -> Option<f64> {
        self.workers
            .iter()
            .map(|w| measure::cpu_seconds_of(&w.child.id().to_string()))
            .sum()
    }

    pub fn dispatcher_clock(&self) -> DispatcherClock {
        match &self.dispatcher {
            Dispatcher::InProcess(_) => {
                DispatcherClock::Threads(measure::thread_cpu_seconds("self"))
            }
            Dispatcher::Process { server, .. } => {
                DispatcherClock::Process(measure::cpu_seconds_of(&server.child.id().to_string()))
            }
        }
    }
}

fn start_tensorflow(side: &Side, python: &Path, workers: usize) -> Result<Cluster> {
    let mut command = Command::new(python);
    command
        .arg(scripts_dir().join("tf_dispatcher.py"))
        .arg("serve")
        .stderr(Stdio::null());
    let server = Server::start(command, "TensorFlow's dispatcher")?;
    let v: Value = serde_json::from_str(&server.first_line)
        .with_context(|| format!("TensorFlow's dispatcher said {:?}", server.first_line))?;
    let address = v["address"].as_str().context("no address")?.to_string();
    let mut cluster = Cluster {
        workers: Vec::new(),
        dispatcher: Dispatcher::Process {
            server,
            address: address.clone(),
        },
        side: side.clone(),
    };
    for _ in 0..workers {
        let mut command = Command::new(python);
        command
            .arg(scripts_dir().join("tf_graph_pipeline.py"))
            .arg("--serve-worker")
            .arg(&address)
            .env("TF_CPP_MIN_LOG_LEVEL", "2")
            .stdout(Stdio::null());
        cluster
            .workers
            .push(Server::spawn(command, "a TensorFlow worker")?);
    }
    // TensorFlow's workers take seconds to start: they import TensorFlow.
    wait_for_workers(&address, &mut cluster.workers)?;
    Ok(cluster)
}

/// Waits until TensorFlow's dispatcher lists every one of `workers`.
fn wait_for_workers(address: &str, workers: &mut [Server]) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // The channel's background task runs on this runtime.
    let _entered = runtime.enter();
    let client = DispatcherClient::new(address)?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let listed = runtime
            .block_on(client.get_workers(Default::default()))
            .map(|r| r.workers.len())
            .unwrap_or(0);
        if listed >= workers.len() {
            return Ok(());
        }
        for worker in workers.iter_mut() {
            if let Some(status) = worker.child.try_wait()? {
                bail!("a TensorFlow worker exited ({status})");
            }
        }
        if Instant::now() > deadline {
            bail!(
                "TensorFlow's dispatcher lists {listed} of {} workers after 120 s",
                workers.len()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
