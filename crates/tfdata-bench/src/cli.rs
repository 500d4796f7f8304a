//! The command line: the scenarios, every flag with its default, and the
//! checks of their values made before anything runs (a bad flag is refused
//! at once, not after minutes of another scenario).

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Parser, ValueEnum};

use crate::pipeline::Stage;
use crate::scaling;

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
    /// `dynamic-2-readers` read deterministically (consumers 0 and 1 of 2)
    /// against first come first served in the same run, also with one
    /// worker process 10× slower (SIGSTOP 90 ms / SIGCONT 10 ms).
    DynamicDeterministic,
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
    /// A trainer whose demand steps (1×, 2×, 4×, 1×) against a `tfdata
    /// dispatcher` and `tfdata workers --min 1 --max N` (real processes):
    /// time to meet demand, workers against the fewest that meet it,
    /// starvation, oscillation (issue 36).
    Autoscale,
    /// Decode-and-resize read for three epochs with `cache="auto"` and
    /// without: CPU per element per epoch, elements identical (issue 36).
    Autocache,
    /// The dispatcher's scaling controller driven in simulation at 100 and
    /// 1,000 workers, from the `autoscale` run's measured costs (issue 36).
    #[value(name = "autoscale-model")]
    AutoscaleModel,
}

impl Scenario {
    /// Whether the scenario's figures depend on JPEG decoding: their
    /// reports carry `jpeg_code_path` (libjpeg-turbo built with its SIMD
    /// code or not, issue 37), since a build without `nasm` halves them.
    pub(crate) fn decodes_jpeg(self) -> bool {
        matches!(
            self,
            Scenario::Pipeline
                | Scenario::PipelineStages
                | Scenario::PipelineCrop
                | Scenario::Kernels
                | Scenario::GraphPipeline
                | Scenario::Scaling
                | Scenario::Autocache
                | Scenario::Webdataset
                | Scenario::Hf
        )
    }

    pub(crate) fn name(self) -> &'static str {
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
            Scenario::DynamicDeterministic => "dynamic-deterministic",
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
            Scenario::Autoscale => "autoscale",
            Scenario::Autocache => "autocache",
            Scenario::AutoscaleModel => "autoscale-model",
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "tfdata-bench",
    about = "Benchmarks tfdata (and TensorFlow, with --compare-tensorflow)"
)]
pub(crate) struct Cli {
    /// Print one JSON object per measurement on stdout (the summary goes to stderr).
    #[arg(long)]
    pub(crate) json: bool,
    /// Scenarios to run, in order (comma-separated or repeated). Default:
    /// the data-plane scenarios of issue 7.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [
        Scenario::TcpLoopback, Scenario::Small, Scenario::Batched, Scenario::Large,
        Scenario::FirstElement, Scenario::Dynamic, Scenario::Dynamic2Readers,
    ])]
    pub(crate) scenario: Vec<Scenario>,
    /// Internal: run a worker for this dispatcher until stdin closes (the
    /// `large` scenario's worker process).
    #[arg(long = "serve-worker", hide = true)]
    pub(crate) serve_worker: Option<String>,
    /// Internal: the `--serve-worker` worker's heartbeat interval (ms).
    #[arg(long = "serve-worker-heartbeat-ms", hide = true)]
    pub(crate) serve_worker_heartbeat_ms: Option<u64>,
    /// Internal: serve our dispatcher until stdin closes (the
    /// `dispatcher-capacity` scenario's dispatcher process).
    #[arg(long = "serve-dispatcher", hide = true)]
    pub(crate) serve_dispatcher: bool,
    /// Internal: the `--serve-dispatcher` dispatcher's journal (fault tolerant).
    #[arg(long = "serve-dispatcher-work-dir", hide = true)]
    pub(crate) serve_dispatcher_work_dir: Option<PathBuf>,
    /// Internal: read a shared job as one of the `scaling` scenario's
    /// readers (a JSON spec).
    #[arg(long = "scaling-reader", hide = true)]
    pub(crate) scaling_reader: Option<String>,
    /// For `scaling`: worker process counts, one row of cells each.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4])]
    pub(crate) scaling_workers: Vec<usize>,
    /// For `scaling`: reader process counts, one cell each.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4])]
    pub(crate) scaling_readers: Vec<usize>,
    /// For `scaling`: the workloads, in order.
    #[arg(long, value_enum, value_delimiter = ',',
          default_values_t = [scaling::Workload::Small, scaling::Workload::Large, scaling::Workload::Pipeline])]
    pub(crate) scaling_workloads: Vec<scaling::Workload>,
    /// For `scaling`: `small`'s int64 scalars per cell, shared by its workers.
    #[arg(long, default_value_t = 4_000_000)]
    pub(crate) scaling_small_elements: u64,
    /// For `scaling`: `large`'s 1 MiB tensors per cell, shared by its workers.
    #[arg(long, default_value_t = 4096)]
    pub(crate) scaling_large_elements: u64,
    /// For `scaling` with `--compare-tensorflow`: TensorFlow's `small`
    /// elements per cell (it reads some 3,000 a second).
    #[arg(long, default_value_t = 20_000)]
    pub(crate) scaling_tensorflow_small_elements: u64,
    /// For `scaling` with `--compare-tensorflow`: TensorFlow's `large`
    /// tensors per cell.
    #[arg(long, default_value_t = 1024)]
    pub(crate) scaling_tensorflow_large_elements: u64,
    /// For `scaling`: the pipeline's batches (of `--batch-size`) per cell,
    /// shared by its workers.
    #[arg(long, default_value_t = 64)]
    pub(crate) scaling_pipeline_batches: u64,
    /// For `scaling`: simulated worker counts (10 readers each, see
    /// `--capacity-readers-per-worker`) at which our dispatcher's CPU per
    /// heartbeat is measured for the model, each for `--min-seconds` after
    /// `--capacity-warmup-seconds`; `0` skips it.
    #[arg(long, value_delimiter = ',', default_values_t = [50usize, 200])]
    pub(crate) scaling_dispatcher_workers: Vec<usize>,
    /// For `scaling`: the worker counts the model sizes.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1000])]
    pub(crate) scaling_model_workers: Vec<usize>,
    /// For `scaling`: cores each modelled worker has (its throughput is
    /// the measured CPU per item times this).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) scaling_model_worker_cores: f64,
    /// For `scaling`: cores each modelled reader process has (the readers
    /// needed are the reader CPU the workers' output takes over this).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) scaling_model_reader_cores: f64,
    /// Internal: read this distributed snapshot with `Dataset::load` and
    /// print what it took (the `snapshot` scenario's reader process).
    #[arg(long = "load-snapshot", hide = true)]
    pub(crate) load_snapshot: Option<String>,
    /// For `snapshot`: `distributed_save`'s compression.
    #[arg(long, default_value = "AUTO", value_parser = ["AUTO", "NONE", "GZIP"])]
    pub(crate) snapshot_compression: String,
    /// For `snapshot`: the datasets saved, in order: `map` (each element
    /// computed by the worker's map) and `repeat` (the map returns one
    /// constant: the writer alone).
    #[arg(long, value_delimiter = ',', default_values_t = ["map".to_string(), "repeat".to_string()],
          value_parser = ["map", "repeat"])]
    pub(crate) snapshot_dataset: Vec<String>,
    /// For `snapshot`: elements saved (float32 vectors of `--snapshot-values`).
    #[arg(long, default_value_t = 800)]
    pub(crate) snapshot_elements: u64,
    /// For `snapshot`: float32 values per element (65536: 256 KiB).
    #[arg(long, default_value_t = 65536)]
    pub(crate) snapshot_values: u64,
    /// For `snapshot`: the scratch directory for snapshots and work dirs
    /// (deleted and made again); default `target/bench-data/snapshot`.
    #[arg(long)]
    pub(crate) snapshot_dir: Option<PathBuf>,
    /// For `snapshot`: keep the last run's snapshots in `--snapshot-dir`.
    #[arg(long)]
    pub(crate) snapshot_keep: bool,
    /// For `snapshot`: both workers' heartbeat interval (ms).
    #[arg(long, default_value_t = 100)]
    pub(crate) snapshot_heartbeat_ms: u64,
    /// For `graph-pipeline`: the client's `compression` (`NONE` or `AUTO`).
    #[arg(long, default_value = "NONE", value_parser = ["NONE", "AUTO"])]
    pub(crate) graph_compression: String,
    /// For `graph-pipeline`: the pipelines, comma-separated: `image` (the
    /// `pipeline` scenario's), `text` (normalise, split, hash, pad),
    /// `recsys` (batched Example parsing, var-len ids densified), `windows`
    /// (sliding windows over a series).
    #[arg(long, value_delimiter = ',', default_value = "image")]
    pub(crate) graph_pipelines: Vec<String>,
    /// Also run each scenario with TensorFlow and report its result and the ratio.
    #[arg(long)]
    pub(crate) compare_tensorflow: bool,
    /// Examples in the data set (one epoch).
    #[arg(long, default_value_t = 2048)]
    pub(crate) examples: u64,
    /// Where the data set is (written there if missing); default
    /// `target/bench-data/images-<examples>`.
    #[arg(long)]
    pub(crate) data_dir: Option<PathBuf>,
    /// The Python of the TensorFlow 2.21 venv; default `~/.cache/tfdata-tf-2.21/bin/python`.
    #[arg(long)]
    pub(crate) python: Option<PathBuf>,
    /// Also read `small`, `batched` and `large` through tfdata's Python client
    /// (`scripts/python_client.py` under this Python, in its own process, from
    /// our dispatcher and worker as in the Rust client's run) and report its
    /// rate and the ratios to the Rust client's and TensorFlow's. Without a
    /// value: `~/.cache/tfdata-py-release/bin/python` if it exists, else
    /// `~/.cache/tfdata-py/bin/python`. Measure a release build of
    /// `tfdata._native` (`maturin build --release`): a debug build is flagged
    /// in the report. Skipped, with a note, when that Python has no tfdata.
    #[arg(long, value_name = "PYTHON", num_args = 0..=1)]
    pub(crate) python_client: Option<Option<PathBuf>>,
    /// Measure each pipeline for at least this long (then up to the end of an epoch).
    #[arg(long, default_value_t = 5.0)]
    pub(crate) min_seconds: f64,
    /// Batches taken before the clock starts.
    #[arg(long, default_value_t = 2)]
    pub(crate) warmup_batches: u64,
    /// Examples per batch.
    #[arg(long, default_value_t = 64)]
    pub(crate) batch_size: i64,
    /// Runs per engine and measurement, alternating engines; the median is
    /// reported (ratios are of medians), with the minimum and maximum, and
    /// every run's value in `values` / `tensorflow_values`. Three by
    /// default: one run of a short scenario on a shared machine says little.
    #[arg(long, default_value_t = 3)]
    pub(crate) repeats: usize,
    /// For `pipeline-stages`: the stages to stop after (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(crate) stages: Vec<Stage>,
    /// For `kernels`: the images each kernel runs over.
    #[arg(long, default_value_t = 128)]
    pub(crate) kernel_images: usize,
    /// For `kernels`: seconds each kernel runs for.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) kernel_seconds: f64,
    /// For `small` and `first-element`: elements read through the service
    /// (`batched` reads half as many batches of 1,024, `large` a twentieth
    /// as many 1 MiB tensors).
    #[arg(long, default_value_t = 20_000)]
    pub(crate) elements: u64,
    /// For `dynamic-deterministic`: `range(N)`'s N for the comparison with
    /// first come first served (2 workers, 2 readers); about a second of
    /// each read on a 2-core machine. TensorFlow's figure uses `--elements`.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) deterministic_elements: u64,
    /// For `dynamic-deterministic`: `range(N)`'s N with one slow worker
    /// (about 4 s of the slowest read, 40 stop/continue cycles).
    #[arg(long, default_value_t = 200_000)]
    pub(crate) deterministic_slow_elements: u64,
    /// For `dispatcher-commit`: concurrent callers, one run per value.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 8, 64])]
    pub(crate) commit_callers: Vec<usize>,
    /// For `dispatcher-capacity`: the ladder of simulated workers, in order.
    #[arg(long, value_delimiter = ',', default_values_t = [10usize, 25, 50, 100, 250, 500, 1000, 2000])]
    pub(crate) capacity_workers: Vec<usize>,
    /// For `dispatcher-capacity`: simulated readers per simulated worker.
    #[arg(long, default_value_t = 10)]
    pub(crate) capacity_readers_per_worker: usize,
    /// For `dispatcher-capacity`: the workers' heartbeat interval (ms;
    /// TensorFlow's default `heartbeat_interval_ms`).
    #[arg(long, default_value_t = 30_000)]
    pub(crate) capacity_worker_heartbeat_ms: u64,
    /// For `dispatcher-capacity`: the readers' heartbeat interval (ms;
    /// TensorFlow's default task refresh interval).
    #[arg(long, default_value_t = 1_000)]
    pub(crate) capacity_client_heartbeat_ms: u64,
    /// For `dispatcher-capacity`: each worker's `GetSplit` interval (ms; 0: none).
    #[arg(long, default_value_t = 1_000)]
    pub(crate) capacity_split_interval_ms: u64,
    /// For `dispatcher-capacity`: seconds between growing the load and measuring it.
    #[arg(long, default_value_t = 3.0)]
    pub(crate) capacity_warmup_seconds: f64,
    /// For `dispatcher-capacity`: the p99 latency a sustained load stays under (ms).
    #[arg(long, default_value_t = 50.0)]
    pub(crate) capacity_p99_ms: f64,
    /// For `dispatcher-capacity`: `fault-tolerant`, `in-memory` or both.
    #[arg(long, value_delimiter = ',', default_values_t = ["fault-tolerant".to_string(), "in-memory".to_string()],
          value_parser = ["fault-tolerant", "in-memory"])]
    pub(crate) capacity_mode: Vec<String>,
    /// For `dispatcher-capacity`: where the journals go (deleted after);
    /// default `target/bench-data/capacity`.
    #[arg(long)]
    pub(crate) capacity_dir: Option<PathBuf>,
    /// For `parquet`, `hf`, `webdataset`: also read the files with the
    /// libraries users read them with (pyarrow and Ray Data; `datasets`;
    /// `webdataset`), in the Python of `--python-client` (default: the
    /// release venv, else `~/.cache/tfdata-py`), which needs them installed.
    #[arg(long)]
    pub(crate) compare_peers: bool,
    /// For `parquet`: rows of the table.
    #[arg(long, default_value_t = 16_000_000)]
    pub(crate) sources_rows: u64,
    /// For `hf` and `webdataset`: images in the data set; enough for about
    /// 8 s of timed reading (2,048 was one second, too short to trust).
    #[arg(long, default_value_t = 16384)]
    pub(crate) sources_images: u64,
    /// For `parquet`, `hf`, `webdataset`: where the files are written once;
    /// default `target/bench-data/sources`.
    #[arg(long)]
    pub(crate) sources_dir: Option<PathBuf>,
    /// For `tcp-loopback`: bytes copied.
    #[arg(long, default_value_t = 4 << 30)]
    pub(crate) tcp_bytes: u64,
    /// For `autoscale` and `autocache`: the `tfdata` binary; default the
    /// one beside this binary (`cargo build --release -p tfdata-cli`).
    #[arg(long)]
    pub(crate) tfdata_bin: Option<PathBuf>,
    /// For `autoscale`: each element's latency on a worker (the `sleep`
    /// built-in; no CPU), so one worker serves at most 1000/ms elements/s.
    #[arg(long, default_value_t = 20.0)]
    pub(crate) autoscale_sleep_ms: f64,
    /// For `autoscale`: the trainer's demand at 1× (elements/s).
    #[arg(long, default_value_t = 40.0)]
    pub(crate) autoscale_base_rate: f64,
    /// For `autoscale` and `autoscale-model`: the demand steps, multipliers of 1×.
    #[arg(long, value_delimiter = ',', default_values_t = [1.0, 2.0, 4.0, 1.0])]
    pub(crate) autoscale_steps: Vec<f64>,
    /// For `autoscale`: seconds each demand step lasts.
    #[arg(long, default_value_t = 30.0)]
    pub(crate) autoscale_step_seconds: f64,
    /// For `autoscale`: `tfdata workers --max`.
    #[arg(long, default_value_t = 6)]
    pub(crate) autoscale_max_workers: usize,
    /// For `autoscale`: the dispatcher's `--scaling-period-ms` (short, so a
    /// step spans many decisions; the default in production is 5 s).
    #[arg(long, default_value_t = 2000)]
    pub(crate) autoscale_period_ms: u64,
    /// For `autoscale-model`: the modelled cluster sizes.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1000])]
    pub(crate) model_workers: Vec<usize>,
    /// For `autoscale-model`: one worker's elements/s; default the last
    /// `autoscale` run's measurement (`target/bench-data/autoscale-measured.json`).
    #[arg(long)]
    pub(crate) model_worker_rate: Option<f64>,
    /// For `autoscale-model`: seconds from a raised target to a serving
    /// worker; default the last `autoscale` run's measurement.
    #[arg(long)]
    pub(crate) model_startup_seconds: Option<f64>,
    /// For `autoscale-model`: seconds a drained worker takes to leave.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) model_drain_seconds: f64,
    /// For `autoscale-model`: the controller's period (the dispatcher's
    /// default, 5 s).
    #[arg(long, default_value_t = 5000)]
    pub(crate) model_period_ms: u64,
    /// For `autoscale-model`: periods per demand step.
    #[arg(long, default_value_t = 24)]
    pub(crate) model_step_periods: u32,
    /// For `autoscale-model`: the ± fraction of per-period noise on the
    /// workers' throughput (common to all: a shared store slowing down);
    /// 0, the default, shows the controller's own dynamics.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) model_noise: f64,
    /// For `autocache`: JPEGs (800×600) in the data set.
    #[arg(long, default_value_t = 256)]
    pub(crate) autocache_images: usize,
    /// For `autocache`: worker processes.
    #[arg(long, default_value_t = 2)]
    pub(crate) autocache_workers: usize,
    /// For `autocache`: epochs (jobs) read.
    #[arg(long, default_value_t = 3)]
    pub(crate) autocache_epochs: usize,
}

impl Cli {
    /// Refuses values no scenario can run with, naming the flag.
    pub(crate) fn check(&self) -> Result<()> {
        if self.batch_size <= 0 {
            bail!("--batch-size must be positive");
        }
        if self.examples < self.batch_size.unsigned_abs() {
            bail!("--examples must be at least --batch-size");
        }
        if !(self.kernel_seconds.is_finite() && self.kernel_seconds > 0.0) {
            bail!("--kernel-seconds must be a positive number");
        }
        if self.kernel_images < self.batch_size.unsigned_abs() as usize {
            bail!("--kernel-images must be at least --batch-size");
        }
        if self.elements < 2 {
            bail!("--elements must be at least 2 (the first is not timed)");
        }
        if self.deterministic_elements < 2 || self.deterministic_slow_elements < 2 {
            bail!(
                "--deterministic-elements and --deterministic-slow-elements must be at least 2 \
                 (each reader's first element is not timed)"
            );
        }
        if self.tcp_bytes == 0 {
            bail!("--tcp-bytes must be positive");
        }
        if self.repeats == 0 {
            bail!("--repeats must be at least 1");
        }
        if !(self.min_seconds.is_finite() && self.min_seconds >= 0.0) {
            bail!("--min-seconds must be a non-negative number");
        }
        if self.capacity_workers.is_empty() || self.capacity_workers.contains(&0) {
            bail!("--capacity-workers must be positive counts");
        }
        if self.capacity_readers_per_worker == 0 {
            bail!("--capacity-readers-per-worker must be at least 1");
        }
        if self.capacity_worker_heartbeat_ms == 0 || self.capacity_client_heartbeat_ms == 0 {
            bail!("heartbeat intervals must be positive");
        }
        if !(self.capacity_warmup_seconds.is_finite() && self.capacity_warmup_seconds >= 0.0) {
            bail!("--capacity-warmup-seconds must be a non-negative number");
        }
        if self.scaling_workers.is_empty()
            || self.scaling_workers.contains(&0)
            || self.scaling_readers.is_empty()
            || self.scaling_readers.contains(&0)
        {
            bail!("--scaling-workers and --scaling-readers must be positive counts");
        }
        if let Some(&workers) = self.scaling_workers.iter().max() {
            let least = |flag: &str, n: u64| {
                if n < workers as u64 {
                    bail!("{flag} must be at least the largest --scaling-workers ({workers})");
                }
                Ok(())
            };
            least("--scaling-small-elements", self.scaling_small_elements)?;
            least("--scaling-large-elements", self.scaling_large_elements)?;
            least("--scaling-pipeline-batches", self.scaling_pipeline_batches)?;
            if self.compare_tensorflow {
                least(
                    "--scaling-tensorflow-small-elements",
                    self.scaling_tensorflow_small_elements,
                )?;
                least(
                    "--scaling-tensorflow-large-elements",
                    self.scaling_tensorflow_large_elements,
                )?;
            }
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if self.scaling_model_workers.contains(&0)
            || !positive(self.scaling_model_worker_cores)
            || !positive(self.scaling_model_reader_cores)
        {
            bail!(
                "--scaling-model-workers, --scaling-model-worker-cores and --scaling-model-reader-cores must be positive"
            );
        }
        Ok(())
    }
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
