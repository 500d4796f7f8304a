//! # tfdata-bench
//!
//! Benchmarks of tfdata, run as a binary (not as timed tests), some
//! against TensorFlow 2.21 on the same machine in the same run.
//!
//! ```sh
//! cargo run --release -p tfdata-bench -- --json --scenario pipeline --compare-tensorflow
//! ```
//!
//! Without `--scenario`, the data-plane scenarios run: `tcp-loopback`,
//! `small`, `batched`, `large`, `first-element`, `dynamic` (see
//! docs/performance.md).
//!
//! With `--json` every measurement is printed on stdout as one JSON object
//! per line,
//!
//! ```json
//! {"scenario": "pipeline", "value": 1234.5, "unit": "examples/s", "tensorflow": 1500.2, "ratio": 0.82, ...}
//! ```
//!
//! and a human-readable summary goes to stderr (without `--json`, the
//! summary goes to stdout). `value` is tfdata's result; with
//! `--compare-tensorflow`, `tensorflow` is TensorFlow's and `ratio` is
//! tfdata / TensorFlow (above 1: tfdata is faster). Other fields: the
//! examples and seconds measured, `startup_seconds` (iterator creation and
//! warm-up), `cpu_utilization` (CPU seconds per wall second, i.e. cores
//! kept busy), `cpu_us_per_example` (CPU time per example, all threads),
//! `peak_rss_bytes` (`VmHWM`, reset before each measured pipeline), the same
//! with a `tensorflow_` prefix, and the data set's description.
//!
//! ## Scenarios
//!
//! * `pipeline` (issue 3 item 9): an image classification input pipeline,
//!   run locally, by tfdata in this process and by TensorFlow in a
//!   subprocess (`scripts/tf_pipeline.py`), on the same cores:
//!
//!   ```text
//!   list_files(DIR/train-*.tfrecord, shuffle=False).repeat()
//!   .interleave(tfrecord_dataset, cycle_length=4, num_parallel_calls=AUTOTUNE)
//!   .map(parse_example {image: string, label: int64}, AUTOTUNE)
//!   .map(decode_jpeg(image, channels=3), AUTOTUNE)
//!   .map(resize(image, [224, 224]), AUTOTUNE)          # bilinear, float32
//!   .map(normalize(image, mean=127.5, std=127.5), AUTOTUNE)
//!   .map(select [image, label])
//!   .batch(64, drop_remainder=True).prefetch(AUTOTUNE)
//!   ```
//!
//!   tfdata builds it from its JSON text form (`docs/pipelines.md`).
//!   The data: `--examples` (2048) `tf.train.Example`s of a JPEG (quality 90)
//!   of a synthetic photo-like 500×375 image and an int64 label, in 8
//!   TFRecord shards, written by `scripts/make_images.py` with TensorFlow
//!   into `--data-dir` (default `target/bench-data/images-N`) when it is not
//!   there yet.
//! * `pipeline-stages`: the same pipeline truncated after each stage (`read`,
//!   `parse`, `decode`, `resize`, `normalize`; each followed by the batch and
//!   prefetch), reported as `pipeline/<stage>`: where the time goes, stage
//!   by stage, for both engines. `--stages` picks some.
//! * `dispatcher-commit` (issue 12): `GetSplit` RPCs per second and their
//!   p50/p99 latency against a fault-tolerant dispatcher (and an in-memory
//!   one, the ceiling) with `--commit-callers` concurrent callers; see
//!   [`commit`].
//! * `dispatcher-capacity` (issue 16): the most simulated workers (with 10
//!   readers each, `GetSplit` callers, TensorFlow's default intervals) one
//!   dispatcher serves with every RPC's p99 under 50 ms, ours and
//!   TensorFlow's (each in its own process), fault tolerant and not; see
//!   [`capacity`].
//! * `graph-pipeline` (issue 13): the same pipeline written in tf.data and
//!   read by TensorFlow's client through `distribute` from our dispatcher,
//!   served by a tfdata worker running the graph TensorFlow registered and,
//!   in the same run, by TensorFlow's worker (each in its own process); see
//!   [`graph_pipeline`]. Always runs both (it needs TensorFlow anyway).
//! * `snapshot` (issue 14 item 9): `distributed_save` of one TensorFlow
//!   graph dataset by our dispatcher and worker and by TensorFlow's, then
//!   `load` of both snapshots by TensorFlow and by our engine: MB/s, peak
//!   RSS; see [`snapshot`]. Always runs both (it needs TensorFlow).
//! * `scaling` (issue 16 item 5): aggregate throughput of `small`, `large`
//!   and the image pipeline (run by the workers) with 1, 2 and 4 worker
//!   processes (`--scaling-workers`) and 1, 2 and 4 reader processes
//!   (`--scaling-readers`) sharing one parallel_epochs job, our dispatcher
//!   in this process; `scaling/<workload>` per cell with the CPU per item
//!   of the workers, readers and dispatcher; `scaling/dispatcher`, our
//!   dispatcher's CPU under the `dispatcher-capacity` load at
//!   `--scaling-dispatcher-workers` sizes; and `scaling/model`, what 100 and
//!   1,000 workers would need (readers, network, dispatcher cores),
//!   computed from those figures. tfdata only; see [`scaling`].
//! * `dynamic-deterministic` (issue 35 item 5): a deterministic
//!   distributed_epoch read (2 workers, consumers 0 and 1 of 2) against
//!   `dynamic-2-readers` in the same run, `range(N)` and its `batch(64)`,
//!   each consumer's exact sequence checked; then both reads with one of two
//!   worker processes stopped 90 ms of every 100 ms, with the readers'
//!   reorder figures; see [`deterministic`].
//! * `kernels`: the pipeline's per-example operations (`parse_example`,
//!   `decode_jpeg`, `resize`, `normalize`, and `batch`'s copy) timed one at
//!   a time on one thread over `--kernel-images` (128) of the images, by
//!   tfdata's kernels and by TensorFlow's ops in a `tf.function` loop with
//!   one intra-op and one inter-op thread (`scripts/tf_kernels.py`); reported as
//!   `kernels/<name>` (and `kernels/total`) with `us_per_example`, plus
//!   `kernels/decode_jpeg_resize`, the fused kernel map fusion runs for
//!   decode → resize → normalise, against the sum of TensorFlow's three
//!   ops. `ratio` is again tfdata's throughput over TensorFlow's. It
//!   separates the kernels' cost from the pipeline machinery's.
//!
//! * `autoscale`, `autocache`, `autoscale-model` (issue 36): the scaling
//!   controller and `tfdata workers` against a trainer whose demand steps
//!   (real processes; see [`autoscale`]), three epochs of decode-and-resize
//!   with `cache="auto"` and without (see [`autocache`]), and the
//!   controller in simulation at 100 and 1,000 workers from the measured
//!   costs (see [`autoscale::model`]). They need the release `tfdata`
//!   binary beside this one (`cargo build --release -p tfdata-bench -p
//!   tfdata-cli`) or `--tfdata-bin`.
//!
//! With `--python-client [PYTHON]`, `small`, `batched` and `large` are also
//! read through tfdata's Python client (`scripts/python_client.py`, in its
//! own process, from our dispatcher and worker started here as for the Rust
//! client's run, the dataset registered here and read with
//! `from_dataset_id`): `python_client` is its figure (same unit as `value`),
//! `python_client_ratio` Python / Rust, `python_client_tensorflow_ratio`
//! Python / TensorFlow (with `--compare-tensorflow`), and
//! `python_client_native_build` says whether `tfdata._native` was a
//! `release` or a `debug` build (only a release build is worth measuring).
//! Without an interpreter with tfdata the column is skipped and
//! `python_client_note` says why.
//!
//! New scenarios (issue 7: the service) are added to [`Scenario`] (with the
//! rest of the command line in [`cli`]) and
//! dispatched in [`run_scenario`]; they print reports through the same
//! [`Output`].
//!
//! ## Measurement
//!
//! The same in both engines: create the iterator, take `--warmup-batches`
//! (2) batches, then start the clock and take batches until at least
//! `--min-seconds` (5) have passed and the examples taken reach a multiple
//! of the data set's size (the input repeats forever). Throughput is the
//! examples taken while the clock ran over the time it ran. The files are
//! read once before measuring, so both engines read from the page cache.
//!
//! `--repeats` (3 by default; more on a busy machine): the engines run
//! alternately and the median run of each is reported, with every run's
//! throughput in `values` / `tensorflow_values`; the pipeline scenarios
//! add the best one (`best` / `tensorflow_best` / `best_ratio`, the least
//! disturbed runs), the service scenarios (`small`, `batched`, `large`,
//! `first-element`, `dynamic*`) the minimum and maximum (`min`/`max`,
//! `tensorflow_min`/`tensorflow_max`, `python_client_min`/`_max`), ratios
//! taken from the medians.
//! `cpu_us_per_example` depends less on other load than throughput.
//!
//! ## The memory allocator
//!
//! tfdata runs with the process's allocator. With glibc's defaults, the
//! pipeline's large buffers (a 64-image float32 batch is 38.5 MB) are
//! mmapped and unmapped every time; the page faults cost CPU and serialise
//! the threads. To see the pipeline without that cost, run with
//! `GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4000000000`
//! (TensorFlow's subprocess inherits it; it makes no measurable difference
//! there).
//!
//! Both engines use every core of the machine (tfdata: `AUTOTUNE` is one
//! thread per core; TensorFlow: its own autotuning); to compare on fewer
//! cores, run the whole binary under `taskset -c 0-1`, which both inherit.
//!
//! The TensorFlow venv is `~/.cache/tfdata-tf-2.21/bin/python`
//! (`--python` to change it); it is needed for `--compare-tensorflow` and
//! to write the data.

mod autocache;
mod autoscale;
mod capacity;
mod child;
mod cli;
mod commit;
mod data;
mod deterministic;
mod graph_pipeline;
mod kernels;
mod measure;
mod pipeline;
mod procs;
mod resume;
mod scaling;
mod service;
mod snapshot;
mod sources;
mod worker_loss;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use serde_json::{Map, Value};

use crate::cli::Cli;
pub use crate::cli::Scenario;

use crate::kernels::KernelOptions;
use crate::measure::MeasureConfig;
use crate::pipeline::{PipelineOptions, Stage};

/// Where reports go: JSON lines on stdout and a summary on stderr, or the
/// summary alone on stdout.
pub struct Output {
    json: bool,
    /// Set while a scenario that decodes JPEGs runs: its reports say which
    /// decoder code ran (`tfdata_dataset::kernels::jpeg_code_path`).
    jpeg: bool,
}

impl Output {
    fn emit(&mut self, mut report: Map<String, Value>, summary: String) -> Result<()> {
        if self.jpeg {
            report.insert(
                "jpeg_code_path".into(),
                Value::from(tfdata_dataset::kernels::jpeg_code_path()),
            );
        }
        if self.json {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{}", Value::Object(report))?;
            stdout.flush()?;
            eprintln!("{summary}");
        } else {
            println!("{summary}");
        }
        Ok(())
    }
}

fn run_scenario(scenario: Scenario, cli: &Cli, out: &mut Output) -> Result<()> {
    let python = cli.python.clone().unwrap_or_else(data::default_python);
    let options = PipelineOptions {
        batch_size: cli.batch_size,
        measure: MeasureConfig {
            epoch_examples: cli.examples,
            min_seconds: cli.min_seconds,
            warmup_batches: cli.warmup_batches,
        },
        tensorflow_python: cli.compare_tensorflow.then(|| python.clone()),
        repeats: cli.repeats,
        random_crop: false,
    };
    let images = || {
        let dir = cli
            .data_dir
            .clone()
            .unwrap_or_else(|| data::default_images_dir(cli.examples));
        let images = data::ensure_images(&dir, cli.examples, &python)?;
        warm_page_cache(&images.files)?;
        anyhow::Ok(images)
    };
    out.jpeg = scenario.decodes_jpeg();
    if out.jpeg {
        eprintln!(
            "JPEG decoder: {}",
            tfdata_dataset::kernels::jpeg_code_path()
        );
    }
    let mut emit = |r, s| out.emit(r, s);
    match scenario {
        Scenario::Small
        | Scenario::Batched
        | Scenario::Large
        | Scenario::FirstElement
        | Scenario::Dynamic
        | Scenario::Dynamic2Readers => {
            let n = match (scenario, cli.elements) {
                (
                    Scenario::Small
                    | Scenario::FirstElement
                    | Scenario::Dynamic
                    | Scenario::Dynamic2Readers,
                    n,
                ) => n,
                // 1 MiB tensors: far fewer elements for a similar run time.
                // Batches of 1,024: half as many, so that tfdata's side
                // (tens of millions of scalars a second) runs long enough to
                // measure; TensorFlow's takes about 10 s.
                (Scenario::Batched, n) => (n / 2).max(2),
                (_, n) => (n / 20).max(2),
            };
            let python_client = cli
                .python_client
                .as_ref()
                .map(|p| p.clone().unwrap_or_else(data::default_python_client));
            let (report, summary) = service::run(
                scenario.name(),
                n,
                cli.repeats,
                options.tensorflow_python.as_deref(),
                python_client.as_deref(),
            )?;
            emit(report, summary)
        }
        Scenario::DynamicDeterministic => {
            let options = deterministic::Options {
                elements: cli.deterministic_elements,
                slow_elements: cli.deterministic_slow_elements,
                repeats: cli.repeats,
                tensorflow: options.tensorflow_python.clone(),
                tensorflow_elements: cli.elements,
            };
            deterministic::run(&options, &mut emit)
        }
        Scenario::TcpLoopback => {
            let (report, summary) = service::tcp_loopback(cli.tcp_bytes)?;
            emit(report, summary)
        }
        Scenario::Resume => resume::run(cli.elements, &mut emit),
        Scenario::WorkerLoss => worker_loss::run(cli.elements, &mut emit),
        Scenario::Autoscale => autoscale::run(&autoscale_options(cli), &mut emit),
        Scenario::AutoscaleModel => autoscale::model::run(&model_options(cli)?, &mut emit),
        Scenario::Autocache => autocache::run(
            &autocache::AutocacheOptions {
                tfdata_bin: cli.tfdata_bin.clone(),
                images: cli.autocache_images,
                workers: cli.autocache_workers,
                epochs: cli.autocache_epochs,
                data_dir: data::target_dir()
                    .join("bench-data")
                    .join(format!("autocache-{}", cli.autocache_images)),
            },
            &mut emit,
        ),
        Scenario::Parquet | Scenario::Hf | Scenario::Webdataset => {
            let kind = match scenario {
                Scenario::Parquet => sources::Kind::Parquet,
                Scenario::Hf => sources::Kind::HuggingFace,
                _ => sources::Kind::WebDataset,
            };
            let options = sources::SourcesOptions {
                python: cli
                    .python_client
                    .clone()
                    .flatten()
                    .unwrap_or_else(data::default_python_client),
                dir: cli
                    .sources_dir
                    .clone()
                    .unwrap_or_else(|| data::target_dir().join("bench-data").join("sources")),
                rows: cli.sources_rows,
                images: cli.sources_images,
                compare_peers: cli.compare_peers,
                repeats: cli.repeats,
            };
            sources::run(kind, &options, &mut emit)
        }
        Scenario::DispatcherCommit => {
            let dir = cli
                .data_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from("target/bench-data/commit"));
            commit::run(&cli.commit_callers, cli.min_seconds, &dir, &mut emit)
        }
        Scenario::DispatcherCapacity => {
            let ms = std::time::Duration::from_millis;
            let options = capacity::CapacityOptions {
                python,
                dir: cli
                    .capacity_dir
                    .clone()
                    .unwrap_or_else(|| data::target_dir().join("bench-data").join("capacity")),
                workers: cli.capacity_workers.clone(),
                readers_per_worker: cli.capacity_readers_per_worker,
                intervals: capacity::Intervals {
                    worker_heartbeat: ms(cli.capacity_worker_heartbeat_ms),
                    client_heartbeat: ms(cli.capacity_client_heartbeat_ms),
                    split: (cli.capacity_split_interval_ms > 0)
                        .then(|| ms(cli.capacity_split_interval_ms)),
                },
                warmup: std::time::Duration::from_secs_f64(cli.capacity_warmup_seconds),
                window: std::time::Duration::from_secs_f64(cli.min_seconds),
                p99_limit_ms: cli.capacity_p99_ms,
                tensorflow: cli.compare_tensorflow,
                fault_tolerant: cli
                    .capacity_mode
                    .iter()
                    .map(|m| m == "fault-tolerant")
                    .collect(),
            };
            capacity::run(&options, &mut emit)
        }
        Scenario::Scaling => {
            let ms = std::time::Duration::from_millis;
            let intervals = capacity::Intervals {
                worker_heartbeat: ms(cli.capacity_worker_heartbeat_ms),
                client_heartbeat: ms(cli.capacity_client_heartbeat_ms),
                // parallel_epochs: no splits.
                split: None,
            };
            let calibration =
                (!cli.scaling_dispatcher_workers.contains(&0)).then(|| capacity::CapacityOptions {
                    python: python.clone(),
                    dir: data::target_dir()
                        .join("bench-data")
                        .join("scaling-dispatcher"),
                    workers: cli.scaling_dispatcher_workers.clone(),
                    readers_per_worker: cli.capacity_readers_per_worker,
                    intervals,
                    warmup: std::time::Duration::from_secs_f64(cli.capacity_warmup_seconds),
                    window: std::time::Duration::from_secs_f64(cli.min_seconds),
                    p99_limit_ms: cli.capacity_p99_ms,
                    tensorflow: false,
                    fault_tolerant: vec![false],
                });
            let workloads = &cli.scaling_workloads;
            let options = scaling::ScalingOptions {
                workers: cli.scaling_workers.clone(),
                readers: cli.scaling_readers.clone(),
                workloads: workloads.clone(),
                sizes: scaling::Sizes {
                    small: cli.scaling_small_elements,
                    large: cli.scaling_large_elements,
                    pipeline: cli.scaling_pipeline_batches,
                },
                tensorflow: cli.compare_tensorflow.then(|| {
                    let sizes = scaling::Sizes {
                        small: cli.scaling_tensorflow_small_elements,
                        large: cli.scaling_tensorflow_large_elements,
                        pipeline: cli.scaling_pipeline_batches,
                    };
                    (python.clone(), sizes)
                }),
                images: if workloads.contains(&scaling::Workload::Pipeline) {
                    Some(images()?)
                } else {
                    None
                },
                pipeline: options,
                calibration,
                model: scaling::ModelOptions {
                    workers: cli.scaling_model_workers.clone(),
                    worker_cores: cli.scaling_model_worker_cores,
                    reader_cores: cli.scaling_model_reader_cores,
                    client_heartbeat: intervals.client_heartbeat,
                    worker_heartbeat: intervals.worker_heartbeat,
                    readers_per_worker: cli.capacity_readers_per_worker,
                },
            };
            scaling::run(&options, &mut emit)
        }
        Scenario::Snapshot => {
            let options = snapshot::SnapshotOptions {
                python,
                dir: cli
                    .snapshot_dir
                    .clone()
                    .unwrap_or_else(|| data::target_dir().join("bench-data").join("snapshot")),
                elements: cli.snapshot_elements,
                values: cli.snapshot_values,
                compression: cli.snapshot_compression.clone(),
                datasets: cli.snapshot_dataset.clone(),
                heartbeat_ms: cli.snapshot_heartbeat_ms,
                repeats: cli.repeats,
                keep: cli.snapshot_keep,
            };
            snapshot::run(&options, &mut emit)
        }
        Scenario::Kernels => {
            let options = KernelOptions {
                images: cli.kernel_images,
                seconds_per_kernel: cli.kernel_seconds,
                batch_size: usize::try_from(cli.batch_size)?,
                tensorflow_python: options.tensorflow_python,
            };
            kernels::run(&images()?, &options, &mut emit)
        }
        Scenario::GraphPipeline => graph_pipeline::run(
            &python,
            &images()?,
            &options,
            &cli.graph_compression,
            &cli.graph_pipelines,
            &mut emit,
        ),
        Scenario::PipelineCrop => pipeline::run_stages(
            &images()?,
            &[Stage::Normalize],
            &PipelineOptions {
                random_crop: true,
                ..options
            },
            |_| "pipeline-crop".to_string(),
            &mut emit,
        ),
        Scenario::Pipeline | Scenario::PipelineStages => {
            let images = images()?;
            if scenario == Scenario::Pipeline {
                pipeline::run_stages(
                    &images,
                    &[Stage::Normalize],
                    &options,
                    |_| "pipeline".to_string(),
                    &mut emit,
                )
            } else {
                let stages = if cli.stages.is_empty() {
                    Stage::ALL.to_vec()
                } else {
                    cli.stages.clone()
                };
                pipeline::run_stages(
                    &images,
                    &stages,
                    &options,
                    |stage| format!("pipeline/{stage}"),
                    &mut emit,
                )
            }
        }
    }
}

/// Reads the files once, so neither engine pays for the first read.
/// Where `autoscale` leaves its measured costs for `autoscale-model`.
fn autoscale_measured_file() -> PathBuf {
    data::target_dir()
        .join("bench-data")
        .join("autoscale-measured.json")
}

fn autoscale_options(cli: &Cli) -> autoscale::AutoscaleOptions {
    autoscale::AutoscaleOptions {
        tfdata_bin: cli.tfdata_bin.clone(),
        sleep_ms: cli.autoscale_sleep_ms,
        base_rate: cli.autoscale_base_rate,
        steps: cli.autoscale_steps.clone(),
        step_seconds: cli.autoscale_step_seconds,
        max_workers: cli.autoscale_max_workers,
        period_ms: cli.autoscale_period_ms,
        measured_file: autoscale_measured_file(),
    }
}

/// The model's options: flags first, else the last `autoscale` run's
/// measurements, else say what is missing.
fn model_options(cli: &Cli) -> Result<autoscale::model::ModelOptions> {
    let file = autoscale_measured_file();
    let measured: Option<serde_json::Value> = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let from_run = |key: &str| measured.as_ref().and_then(|m| m[key].as_f64());
    let (worker_rate, rate_source) = match (cli.model_worker_rate, from_run("worker_rate")) {
        (Some(r), _) => (r, "--model-worker-rate"),
        (None, Some(r)) => (r, "measured by autoscale"),
        (None, None) => anyhow::bail!(
            "autoscale-model needs a worker throughput: run --scenario autoscale first \
             (it writes {}) or give --model-worker-rate",
            file.display()
        ),
    };
    let (startup, startup_source) = match (cli.model_startup_seconds, from_run("startup_seconds")) {
        (Some(s), _) => (s, "--model-startup-seconds"),
        (None, Some(s)) => (s, "measured by autoscale"),
        (None, None) => anyhow::bail!(
            "autoscale-model needs a worker start-up time: run --scenario autoscale first \
                 (it writes {}) or give --model-startup-seconds",
            file.display()
        ),
    };
    Ok(autoscale::model::ModelOptions {
        sizes: cli.model_workers.clone(),
        worker_rate,
        startup_seconds: startup,
        drain_seconds: cli.model_drain_seconds,
        period: std::time::Duration::from_millis(cli.model_period_ms),
        steps: cli.autoscale_steps.clone(),
        step_periods: cli.model_step_periods,
        noise: cli.model_noise,
        source: format!("worker rate {rate_source}, start-up {startup_source}"),
    })
}

fn warm_page_cache(files: &[PathBuf]) -> Result<()> {
    for f in files {
        std::fs::read(f).with_context(|| format!("cannot read {}", f.display()))?;
    }
    Ok(())
}

/// mimalloc, not glibc's malloc: see the workspace Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<()> {
    let cli = Cli::parse();
    if let Some(dispatcher) = &cli.serve_worker {
        let heartbeat = cli
            .serve_worker_heartbeat_ms
            .map(std::time::Duration::from_millis);
        return service::serve_worker(dispatcher, heartbeat);
    }
    if cli.serve_dispatcher {
        return capacity::serve_dispatcher(cli.serve_dispatcher_work_dir.as_deref());
    }
    if let Some(path) = &cli.load_snapshot {
        return snapshot::serve_load(path);
    }
    if let Some(spec) = &cli.scaling_reader {
        return scaling::serve_reader(spec);
    }
    cli.check()?;
    let mut out = Output {
        json: cli.json,
        jpeg: false,
    };
    for &scenario in &cli.scenario {
        run_scenario(scenario, &cli, &mut out)
            .with_context(|| format!("scenario {}", scenario.name()))?;
    }
    Ok(())
}
