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
//! New scenarios (issue 7: the service) are added to [`Scenario`] and
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
//! On a shared or busy machine, use `--repeats 3` or more: the engines
//! then run alternately and the median run of each is reported, with every
//! run's throughput in `values` / `tensorflow_values` and the best one in
//! `best` / `tensorflow_best` / `best_ratio` (the least disturbed runs).
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

mod capacity;
mod child;
mod commit;
mod data;
mod graph_pipeline;
mod kernels;
mod measure;
mod pipeline;
mod resume;
mod scaling;
mod service;
mod snapshot;
mod sources;
mod worker_loss;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use serde_json::{Map, Value};

use crate::kernels::KernelOptions;
use crate::measure::MeasureConfig;
use crate::pipeline::{PipelineOptions, Stage};

/// What to benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// TFRecord → parse → decode JPEG → resize 224×224 → normalise → batch 64, locally.
    Pipeline,
    /// `pipeline` truncated after each stage, to see where the time goes.
    PipelineStages,
    /// `pipeline` decoding an ImageNet-style random window of each image
    /// (RandomResizedCrop: area 8-100%, aspect 3/4-4/3) instead of all of it.
    PipelineCrop,
    /// The pipeline's kernels timed one at a time on one thread.
    Kernels,
    /// The pipeline written in tf.data, read by TensorFlow's client from a
    /// tfdata worker running its graph and from TensorFlow's worker.
    GraphPipeline,
    /// `range(--elements)` int64 scalars through a dispatcher and one worker: elements/s.
    Small,
    /// `--elements` batches of 1024 int64 through the service: elements/s.
    Batched,
    /// `--elements` tensors of 1 MiB random float32 through the service: MB/s.
    Large,
    /// Milliseconds from `distribute` to the first element on a warm cluster.
    FirstElement,
    /// `range(--elements)` in distributed_epoch over two workers: elements/s.
    Dynamic,
    /// `dynamic` read by two readers sharing the job: elements/s of both.
    #[value(name = "dynamic-2-readers")]
    Dynamic2Readers,
    /// A plain copy through one loopback TCP stream: MB/s, the data plane's ceiling.
    TcpLoopback,
    /// `GetSplit`/s and p99 latency of a fault-tolerant dispatcher with concurrent callers.
    DispatcherCommit,
    /// The most workers (and 10× as many readers) one dispatcher serves at
    /// TensorFlow's default intervals with p99 < 50 ms, ours and TensorFlow's.
    DispatcherCapacity,
    /// `distributed_save` by our dispatcher + worker and by TensorFlow's, then
    /// `load` by both engines: MB/s.
    Snapshot,
    /// Aggregate throughput of `small`, `large` and the image pipeline with
    /// 1, 2, 4 worker processes and 1, 2, 4 reader processes sharing a job,
    /// and a model of what 100 and 1,000 workers need.
    Scaling,
    /// A reader restored from a checkpoint at 90% of `range(--elements)`
    /// in batches of 64 (and of as many lines in 100 files, distributed_epoch):
    /// time to its first element against the epoch's.
    Resume,
    /// One of two workers SIGKILLed at half of a distributed_epoch read of
    /// `range(--elements)` (and its `batch(7)`): the time until its splits
    /// flow again, the readers' receipts report size, exactly once checked.
    WorkerLoss,
    /// A Parquet table (2 numeric, 1 string column) in batches of 1,024
    /// rows through the service, read by tfdata's Python client; with
    /// `--compare-peers`, pyarrow's `iter_batches` and Ray Data too.
    Parquet,
    /// A Hugging Face `save_to_disk` folder of JPEGs and labels, decoded
    /// and resized to 224×224; peers: `datasets` through a DataLoader.
    Hf,
    /// WebDataset shards of the same JPEGs; peers: `webdataset` through a
    /// DataLoader.
    Webdataset,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Pipeline => "pipeline",
            Scenario::PipelineStages => "pipeline-stages",
            Scenario::PipelineCrop => "pipeline-crop",
            Scenario::Kernels => "kernels",
            Scenario::GraphPipeline => "graph-pipeline",
            Scenario::Small => "small",
            Scenario::Batched => "batched",
            Scenario::Large => "large",
            Scenario::FirstElement => "first-element",
            Scenario::Dynamic => "dynamic",
            Scenario::Dynamic2Readers => "dynamic-2-readers",
            Scenario::TcpLoopback => "tcp-loopback",
            Scenario::DispatcherCommit => "dispatcher-commit",
            Scenario::DispatcherCapacity => "dispatcher-capacity",
            Scenario::Snapshot => "snapshot",
            Scenario::Scaling => "scaling",
            Scenario::Resume => "resume",
            Scenario::WorkerLoss => "worker-loss",
            Scenario::Parquet => "parquet",
            Scenario::Hf => "hf",
            Scenario::Webdataset => "webdataset",
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "tfdata-bench",
    about = "Benchmarks tfdata (and TensorFlow, with --compare-tensorflow)"
)]
struct Cli {
    /// Print one JSON object per measurement on stdout (the summary goes to stderr).
    #[arg(long)]
    json: bool,
    /// Scenarios to run, in order (comma-separated or repeated). Default:
    /// the data-plane scenarios of issue 7.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [
        Scenario::TcpLoopback, Scenario::Small, Scenario::Batched, Scenario::Large,
        Scenario::FirstElement, Scenario::Dynamic, Scenario::Dynamic2Readers,
    ])]
    scenario: Vec<Scenario>,
    /// Internal: run a worker for this dispatcher until stdin closes (the
    /// `large` scenario's worker process).
    #[arg(long = "serve-worker", hide = true)]
    serve_worker: Option<String>,
    /// Internal: the `--serve-worker` worker's heartbeat interval (ms).
    #[arg(long = "serve-worker-heartbeat-ms", hide = true)]
    serve_worker_heartbeat_ms: Option<u64>,
    /// Internal: serve our dispatcher until stdin closes (the
    /// `dispatcher-capacity` scenario's dispatcher process).
    #[arg(long = "serve-dispatcher", hide = true)]
    serve_dispatcher: bool,
    /// Internal: the `--serve-dispatcher` dispatcher's journal (fault tolerant).
    #[arg(long = "serve-dispatcher-work-dir", hide = true)]
    serve_dispatcher_work_dir: Option<PathBuf>,
    /// Internal: read a shared job as one of the `scaling` scenario's
    /// readers (a JSON spec).
    #[arg(long = "scaling-reader", hide = true)]
    scaling_reader: Option<String>,
    /// For `scaling`: worker process counts, one row of cells each.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4])]
    scaling_workers: Vec<usize>,
    /// For `scaling`: reader process counts, one cell each.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4])]
    scaling_readers: Vec<usize>,
    /// For `scaling`: the workloads, in order.
    #[arg(long, value_enum, value_delimiter = ',',
          default_values_t = [scaling::Workload::Small, scaling::Workload::Large, scaling::Workload::Pipeline])]
    scaling_workloads: Vec<scaling::Workload>,
    /// For `scaling`: `small`'s int64 scalars per cell, shared by its workers.
    #[arg(long, default_value_t = 4_000_000)]
    scaling_small_elements: u64,
    /// For `scaling`: `large`'s 1 MiB tensors per cell, shared by its workers.
    #[arg(long, default_value_t = 4096)]
    scaling_large_elements: u64,
    /// For `scaling` with `--compare-tensorflow`: TensorFlow's `small`
    /// elements per cell (it reads some 3,000 a second).
    #[arg(long, default_value_t = 20_000)]
    scaling_tensorflow_small_elements: u64,
    /// For `scaling` with `--compare-tensorflow`: TensorFlow's `large`
    /// tensors per cell.
    #[arg(long, default_value_t = 1024)]
    scaling_tensorflow_large_elements: u64,
    /// For `scaling`: the pipeline's batches (of `--batch-size`) per cell,
    /// shared by its workers.
    #[arg(long, default_value_t = 64)]
    scaling_pipeline_batches: u64,
    /// For `scaling`: simulated worker counts (10 readers each, see
    /// `--capacity-readers-per-worker`) at which our dispatcher's CPU per
    /// heartbeat is measured for the model, each for `--min-seconds` after
    /// `--capacity-warmup-seconds`; `0` skips it.
    #[arg(long, value_delimiter = ',', default_values_t = [50usize, 200])]
    scaling_dispatcher_workers: Vec<usize>,
    /// For `scaling`: the worker counts the model sizes.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1000])]
    scaling_model_workers: Vec<usize>,
    /// For `scaling`: cores each modelled worker has (its throughput is
    /// the measured CPU per item times this).
    #[arg(long, default_value_t = 1.0)]
    scaling_model_worker_cores: f64,
    /// For `scaling`: cores each modelled reader process has (the readers
    /// needed are the reader CPU the workers' output takes over this).
    #[arg(long, default_value_t = 1.0)]
    scaling_model_reader_cores: f64,
    /// Internal: read this distributed snapshot with `Dataset::load` and
    /// print what it took (the `snapshot` scenario's reader process).
    #[arg(long = "load-snapshot", hide = true)]
    load_snapshot: Option<String>,
    /// For `snapshot`: `distributed_save`'s compression.
    #[arg(long, default_value = "AUTO", value_parser = ["AUTO", "NONE", "GZIP"])]
    snapshot_compression: String,
    /// For `snapshot`: the datasets saved, in order: `map` (each element
    /// computed by the worker's map) and `repeat` (the map returns one
    /// constant: the writer alone).
    #[arg(long, value_delimiter = ',', default_values_t = ["map".to_string(), "repeat".to_string()],
          value_parser = ["map", "repeat"])]
    snapshot_dataset: Vec<String>,
    /// For `snapshot`: elements saved (float32 vectors of `--snapshot-values`).
    #[arg(long, default_value_t = 800)]
    snapshot_elements: u64,
    /// For `snapshot`: float32 values per element (65536: 256 KiB).
    #[arg(long, default_value_t = 65536)]
    snapshot_values: u64,
    /// For `snapshot`: the scratch directory for snapshots and work dirs
    /// (deleted and made again); default `target/bench-data/snapshot`.
    #[arg(long)]
    snapshot_dir: Option<PathBuf>,
    /// For `snapshot`: keep the last run's snapshots in `--snapshot-dir`.
    #[arg(long)]
    snapshot_keep: bool,
    /// For `snapshot`: both workers' heartbeat interval (ms).
    #[arg(long, default_value_t = 100)]
    snapshot_heartbeat_ms: u64,
    /// For `graph-pipeline`: the client's `compression` (`NONE` or `AUTO`).
    #[arg(long, default_value = "NONE", value_parser = ["NONE", "AUTO"])]
    graph_compression: String,
    /// For `graph-pipeline`: the pipelines, comma-separated: `image` (the
    /// `pipeline` scenario's), `text` (normalise, split, hash, pad),
    /// `recsys` (batched Example parsing, var-len ids densified), `windows`
    /// (sliding windows over a series).
    #[arg(long, value_delimiter = ',', default_value = "image")]
    graph_pipelines: Vec<String>,
    /// Also run each scenario with TensorFlow and report its result and the ratio.
    #[arg(long)]
    compare_tensorflow: bool,
    /// Examples in the data set (one epoch).
    #[arg(long, default_value_t = 2048)]
    examples: u64,
    /// Where the data set is (written there if missing); default
    /// `target/bench-data/images-<examples>`.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The Python of the TensorFlow 2.21 venv; default `~/.cache/tfdata-tf-2.21/bin/python`.
    #[arg(long)]
    python: Option<PathBuf>,
    /// Also read `small`, `batched` and `large` through tfdata's Python client
    /// (`scripts/python_client.py` under this Python, in its own process, from
    /// our dispatcher and worker as in the Rust client's run) and report its
    /// rate and the ratios to the Rust client's and TensorFlow's. Without a
    /// value: `~/.cache/tfdata-py-release/bin/python` if it exists, else
    /// `~/.cache/tfdata-py/bin/python`. Measure a release build of
    /// `tfdata._native` (`maturin build --release`): a debug build is flagged
    /// in the report. Skipped, with a note, when that Python has no tfdata.
    #[arg(long, value_name = "PYTHON", num_args = 0..=1)]
    python_client: Option<Option<PathBuf>>,
    /// Measure each pipeline for at least this long (then up to the end of an epoch).
    #[arg(long, default_value_t = 5.0)]
    min_seconds: f64,
    /// Batches taken before the clock starts.
    #[arg(long, default_value_t = 2)]
    warmup_batches: u64,
    /// Examples per batch.
    #[arg(long, default_value_t = 64)]
    batch_size: i64,
    /// Runs per engine and measurement, alternating engines; the median is
    /// reported, and every run's value in `values` / `tensorflow_values`.
    #[arg(long, default_value_t = 1)]
    repeats: usize,
    /// For `pipeline-stages`: the stages to stop after (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    stages: Vec<Stage>,
    /// For `kernels`: the images each kernel runs over.
    #[arg(long, default_value_t = 128)]
    kernel_images: usize,
    /// For `kernels`: seconds each kernel runs for.
    #[arg(long, default_value_t = 2.0)]
    kernel_seconds: f64,
    /// For `small` and `first-element`: elements read through the service
    /// (`batched` reads half as many batches of 1,024, `large` a twentieth
    /// as many 1 MiB tensors).
    #[arg(long, default_value_t = 20_000)]
    elements: u64,
    /// For `dispatcher-commit`: concurrent callers, one run per value.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 8, 64])]
    commit_callers: Vec<usize>,
    /// For `dispatcher-capacity`: the ladder of simulated workers, in order.
    #[arg(long, value_delimiter = ',', default_values_t = [10usize, 25, 50, 100, 250, 500, 1000, 2000])]
    capacity_workers: Vec<usize>,
    /// For `dispatcher-capacity`: simulated readers per simulated worker.
    #[arg(long, default_value_t = 10)]
    capacity_readers_per_worker: usize,
    /// For `dispatcher-capacity`: the workers' heartbeat interval (ms;
    /// TensorFlow's default `heartbeat_interval_ms`).
    #[arg(long, default_value_t = 30_000)]
    capacity_worker_heartbeat_ms: u64,
    /// For `dispatcher-capacity`: the readers' heartbeat interval (ms;
    /// TensorFlow's default task refresh interval).
    #[arg(long, default_value_t = 1_000)]
    capacity_client_heartbeat_ms: u64,
    /// For `dispatcher-capacity`: each worker's `GetSplit` interval (ms; 0: none).
    #[arg(long, default_value_t = 1_000)]
    capacity_split_interval_ms: u64,
    /// For `dispatcher-capacity`: seconds between growing the load and measuring it.
    #[arg(long, default_value_t = 3.0)]
    capacity_warmup_seconds: f64,
    /// For `dispatcher-capacity`: the p99 latency a sustained load stays under (ms).
    #[arg(long, default_value_t = 50.0)]
    capacity_p99_ms: f64,
    /// For `dispatcher-capacity`: `fault-tolerant`, `in-memory` or both.
    #[arg(long, value_delimiter = ',', default_values_t = ["fault-tolerant".to_string(), "in-memory".to_string()],
          value_parser = ["fault-tolerant", "in-memory"])]
    capacity_mode: Vec<String>,
    /// For `dispatcher-capacity`: where the journals go (deleted after);
    /// default `target/bench-data/capacity`.
    #[arg(long)]
    capacity_dir: Option<PathBuf>,
    /// For `parquet`, `hf`, `webdataset`: also read the files with the
    /// libraries users read them with (pyarrow and Ray Data; `datasets`;
    /// `webdataset`), in the Python of `--python-client` (default: the
    /// release venv, else `~/.cache/tfdata-py`), which needs them installed.
    #[arg(long)]
    compare_peers: bool,
    /// For `parquet`: rows of the table.
    #[arg(long, default_value_t = 16_000_000)]
    sources_rows: u64,
    /// For `hf` and `webdataset`: images in the data set; enough for about
    /// 8 s of timed reading (2,048 was one second, too short to trust).
    #[arg(long, default_value_t = 16384)]
    sources_images: u64,
    /// For `parquet`, `hf`, `webdataset`: where the files are written once;
    /// default `target/bench-data/sources`.
    #[arg(long)]
    sources_dir: Option<PathBuf>,
    /// For `tcp-loopback`: bytes copied.
    #[arg(long, default_value_t = 4 << 30)]
    tcp_bytes: u64,
}

/// Where reports go: JSON lines on stdout and a summary on stderr, or the
/// summary alone on stdout.
pub struct Output {
    json: bool,
}

impl Output {
    fn emit(&mut self, report: Map<String, Value>, summary: String) -> Result<()> {
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
                options.tensorflow_python.as_deref(),
                python_client.as_deref(),
            )?;
            emit(report, summary)
        }
        Scenario::TcpLoopback => {
            let (report, summary) = service::tcp_loopback(cli.tcp_bytes)?;
            emit(report, summary)
        }
        Scenario::Resume => resume::run(cli.elements, &mut emit),
        Scenario::WorkerLoss => worker_loss::run(cli.elements, &mut emit),
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
    if cli.batch_size <= 0 {
        bail!("--batch-size must be positive");
    }
    if cli.examples < cli.batch_size.unsigned_abs() {
        bail!("--examples must be at least --batch-size");
    }
    if !(cli.kernel_seconds.is_finite() && cli.kernel_seconds > 0.0) {
        bail!("--kernel-seconds must be a positive number");
    }
    if cli.kernel_images < cli.batch_size.unsigned_abs() as usize {
        bail!("--kernel-images must be at least --batch-size");
    }
    if cli.elements < 2 {
        bail!("--elements must be at least 2 (the first is not timed)");
    }
    if cli.tcp_bytes == 0 {
        bail!("--tcp-bytes must be positive");
    }
    if cli.repeats == 0 {
        bail!("--repeats must be at least 1");
    }
    if !(cli.min_seconds.is_finite() && cli.min_seconds >= 0.0) {
        bail!("--min-seconds must be a non-negative number");
    }
    if cli.capacity_workers.is_empty() || cli.capacity_workers.contains(&0) {
        bail!("--capacity-workers must be positive counts");
    }
    if cli.capacity_readers_per_worker == 0 {
        bail!("--capacity-readers-per-worker must be at least 1");
    }
    if cli.capacity_worker_heartbeat_ms == 0 || cli.capacity_client_heartbeat_ms == 0 {
        bail!("heartbeat intervals must be positive");
    }
    if !(cli.capacity_warmup_seconds.is_finite() && cli.capacity_warmup_seconds >= 0.0) {
        bail!("--capacity-warmup-seconds must be a non-negative number");
    }
    if cli.scaling_workers.is_empty()
        || cli.scaling_workers.contains(&0)
        || cli.scaling_readers.is_empty()
        || cli.scaling_readers.contains(&0)
    {
        bail!("--scaling-workers and --scaling-readers must be positive counts");
    }
    if let Some(&workers) = cli.scaling_workers.iter().max() {
        let least = |flag: &str, n: u64| {
            if n < workers as u64 {
                bail!("{flag} must be at least the largest --scaling-workers ({workers})");
            }
            Ok(())
        };
        least("--scaling-small-elements", cli.scaling_small_elements)?;
        least("--scaling-large-elements", cli.scaling_large_elements)?;
        least("--scaling-pipeline-batches", cli.scaling_pipeline_batches)?;
        if cli.compare_tensorflow {
            least(
                "--scaling-tensorflow-small-elements",
                cli.scaling_tensorflow_small_elements,
            )?;
            least(
                "--scaling-tensorflow-large-elements",
                cli.scaling_tensorflow_large_elements,
            )?;
        }
    }
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if cli.scaling_model_workers.contains(&0)
        || !positive(cli.scaling_model_worker_cores)
        || !positive(cli.scaling_model_reader_cores)
    {
        bail!(
            "--scaling-model-workers, --scaling-model-worker-cores and --scaling-model-reader-cores must be positive"
        );
    }
    let mut out = Output { json: cli.json };
    for &scenario in &cli.scenario {
        run_scenario(scenario, &cli, &mut out)
            .with_context(|| format!("scenario {}", scenario.name()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "tfdata-bench",
            "--json",
            "--scenario",
            "pipeline,pipeline-stages",
            "--stages",
            "decode,resize",
        ])
        .unwrap();
        assert_eq!(
            cli.scenario,
            vec![Scenario::Pipeline, Scenario::PipelineStages]
        );
        assert_eq!(cli.stages, vec![Stage::Decode, Stage::Resize]);
        assert_eq!(cli.examples, 2048);
        assert_eq!(cli.python_client, None);
        let cli = Cli::try_parse_from(["tfdata-bench", "--python-client", "--json"]).unwrap();
        assert_eq!(cli.python_client, Some(None));
        assert!(cli.json);
        let cli = Cli::try_parse_from(["tfdata-bench", "--python-client", "/x/python"]).unwrap();
        assert_eq!(cli.python_client, Some(Some(PathBuf::from("/x/python"))));
        let cli = Cli::try_parse_from(["tfdata-bench", "--json"]).unwrap();
        assert_eq!(
            cli.scenario,
            vec![
                Scenario::TcpLoopback,
                Scenario::Small,
                Scenario::Batched,
                Scenario::Large,
                Scenario::FirstElement,
                Scenario::Dynamic,
                Scenario::Dynamic2Readers
            ]
        );
    }
}
