//! `parquet`, `hf`, `webdataset`: issue 32's sources read through the
//! service, and with `--compare-peers` by the libraries users read the same
//! files with, one after the other on the same files and cores.
//!
//! The files are written once by the real writers (`scripts/make_sources.py`:
//! pyarrow, `datasets`' `save_to_disk`, `webdataset.TarWriter`) under
//! `--data-dir` (default `target/bench-data/sources`). tfdata: our dispatcher
//! in this process, one worker in a child process (`--serve-worker`), the
//! pipeline registered here, one reader: tfdata's Python client in a process
//! of its own (`scripts/sources_reader.py`), as a PyTorch or JAX trainer
//! reads. Each peer runs in that script too, under the same Python.
//!
//! | scenario | tfdata | peers |
//! | --- | --- | --- |
//! | `parquet` | `parquet_dataset(batch_size=1024)`, read as pyarrow batches (`as_arrow_iterator`) and as numpy | `pyarrow.parquet.ParquetFile.iter_batches(1024)` in the reader's process; `ray.data.read_parquet(...).iter_batches(1024)` on 2 CPUs |
//! | `hf` | `huggingface_dataset` → `decode_jpeg_resize(224×224)` → `cast(uint8)` (fused into one kernel) → `batch(64)` | `datasets` `with_format("numpy")` through a torch DataLoader with 2 workers, resized with PIL |
//! | `webdataset` | `webdataset` → `decode_jpeg_resize(224×224)` → `cast(uint8)` (fused) → `batch(64)` | `webdataset.WebDataset(...).decode("rgb8")` through a DataLoader with 2 workers, resized with PIL |
//!
//! Reported: rows (images) per second of each, the ratios to tfdata's, the
//! readers' peak RSS and the tfdata worker's. The reader's Python should
//! hold a release build of `tfdata._native` (`maturin build --release`):
//! a debug build is flagged in the report.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use tfdata::{DispatchServer, DispatcherConfig};

use crate::child::worker_process;
use crate::data;

/// What to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Parquet,
    HuggingFace,
    WebDataset,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Parquet => "parquet",
            Kind::HuggingFace => "hf",
            Kind::WebDataset => "webdataset",
        }
    }
}

pub struct SourcesOptions {
    /// The Python with tfdata (and the peers, with `compare_peers`).
    pub python: PathBuf,
    pub dir: PathBuf,
    /// Rows of the Parquet table.
    pub rows: u64,
    /// Images of the `hf` and `webdataset` data sets.
    pub images: u64,
    pub compare_peers: bool,
    /// Runs of each engine, alternating; the median is reported.
    pub repeats: usize,
}

/// One JSON line of `scripts/sources_reader.py`.
fn reader(python: &Path, args: &[String]) -> Result<Value> {
    let line = data::run_python_script(python, "sources_reader.py", args)?;
    Ok(serde_json::from_str(&line)?)
}

/// The data set `kind`, written by `scripts/make_sources.py` when missing.
fn ensure_data(kind: Kind, options: &SourcesOptions) -> Result<Value> {
    let rows = match kind {
        Kind::Parquet => options.rows,
        _ => options.images,
    };
    let dir = options.dir.join(format!("{}-{rows}", kind.name()));
    let args = [
        kind.name().to_string(),
        "--out".into(),
        dir.to_string_lossy().into_owned(),
        "--rows".into(),
        rows.to_string(),
    ];
    let line = data::run_python_script(&options.python, "make_sources.py", &args)?;
    Ok(serde_json::from_str(&line)?)
}

/// tfdata's pipeline over the data set, as JSON, and the column that counts
/// its rows.
fn pipeline(kind: Kind, files: &Value) -> Result<(String, &'static str)> {
    let path = |key: &str| -> Result<String> {
        files[key]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("make_sources.py printed no {key}: {files}"))
    };
    // Decoded and resized to 224×224 as the peers' PIL does, to uint8 as
    // theirs (TensorFlow's bilinear resize gives float32: cast back).
    let images = |source: Value| {
        let component = if kind == Kind::HuggingFace {
            "image"
        } else {
            "jpg"
        };
        json!({
            "op": "batch", "batch_size": 64,
            "input": {
                "op": "map", "num_parallel_calls": -1,
                "function": {"function": "cast", "args": {
                    "component": component, "dtype": "uint8"}},
                "input": {
                    "op": "map", "num_parallel_calls": -1,
                    "function": {"function": "decode_jpeg_resize", "args": {
                        "component": component, "size": [224, 224], "channels": 3}},
                    "input": source,
                }
            }
        })
    };
    Ok(match kind {
        Kind::Parquet => (
            json!({"op": "parquet_dataset", "filenames": [path("path")?], "batch_size": 1024})
                .to_string(),
            "id",
        ),
        Kind::HuggingFace => (
            images(json!({"op": "huggingface_dataset", "path": path("path")?})).to_string(),
            "label",
        ),
        Kind::WebDataset => (
            images(
                json!({"op": "webdataset", "urls": [path("pattern")?], "fields": ["jpg", "cls"]}),
            )
            .to_string(),
            "cls",
        ),
    })
}

/// tfdata's read: the pipeline registered with our dispatcher, one worker
/// process, the reader script; returns its JSON and the worker's peak RSS.
fn measure_tfdata(
    options: &SourcesOptions,
    json_pipeline: &str,
    rows_key: &str,
    format: &str,
) -> Result<(Value, Option<u64>)> {
    let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
    let worker = worker_process(&dispatcher.address(), None)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while dispatcher.num_workers() < 1 {
        if Instant::now() > deadline {
            bail!("the worker process did not register");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let parsed = tfdata_dataset::json::from_json(json_pipeline)?;
    let target = dispatcher.target();
    let dataset_id =
        tfdata::register_dataset(&target, &parsed.dataset, tfdata::Compression::Auto, None)?;
    let result = reader(
        &options.python,
        &[
            "--engine".into(),
            "tfdata".into(),
            "--service".into(),
            target,
            "--dataset-id".into(),
            dataset_id,
            "--format".into(),
            format.into(),
            "--rows-key".into(),
            rows_key.into(),
        ],
    )?;
    let worker_peak = worker.status_bytes("VmHWM:");
    drop(worker);
    Ok((result, worker_peak))
}

fn rate(v: &Value) -> f64 {
    v["rows_per_second"].as_f64().unwrap_or(0.0)
}

/// One engine's runs: the median one (by rate), and every rate.
struct Runs {
    median: Value,
    rates: Vec<f64>,
    worker_peak: Option<u64>,
}

fn median(mut runs: Vec<(Value, Option<u64>)>) -> Runs {
    runs.sort_by(|a, b| rate(&a.0).total_cmp(&rate(&b.0)));
    let rates = runs.iter().map(|(v, _)| rate(v)).collect();
    let (median, worker_peak) = runs.swap_remove(runs.len() / 2);
    Runs {
        median,
        rates,
        worker_peak,
    }
}

pub fn run(
    kind: Kind,
    options: &SourcesOptions,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    let files = ensure_data(kind, options)?;
    let (json_pipeline, rows_key) = pipeline(kind, &files)?;
    let formats: &[&str] = match kind {
        Kind::Parquet => &["arrow", "numpy"],
        _ => &["numpy"],
    };
    let path = files["path"]
        .as_str()
        .or(files["pattern"].as_str())
        .context("no path")?
        .to_string();
    let engines: &[&str] = match (options.compare_peers, kind) {
        (false, _) => &[],
        (true, Kind::Parquet) => &["pyarrow", "ray"],
        (true, Kind::HuggingFace) => &["datasets"],
        (true, Kind::WebDataset) => &["webdataset"],
    };
    // Engines alternate within each repeat, so a disturbance of the
    // machine falls on all of them; the median run of each is reported.
    let mut ours: Vec<Vec<(Value, Option<u64>)>> = vec![Vec::new(); formats.len()];
    let mut theirs: Vec<Vec<(Value, Option<u64>)>> = vec![Vec::new(); engines.len()];
    for _ in 0..options.repeats.max(1) {
        for (f, format) in formats.iter().enumerate() {
            ours[f].push(measure_tfdata(options, &json_pipeline, rows_key, format)?);
        }
        for (e, engine) in engines.iter().enumerate() {
            let result = reader(
                &options.python,
                &[
                    "--engine".into(),
                    (*engine).into(),
                    "--path".into(),
                    path.clone(),
                ],
            )?;
            theirs[e].push((result, None));
        }
    }
    let ours: Vec<Runs> = ours.into_iter().map(median).collect();
    let theirs: Vec<Runs> = theirs.into_iter().map(median).collect();
    let reference = rate(&ours[0].median);
    for (format, runs) in formats.iter().zip(&ours) {
        let result = &runs.median;
        let mut report = Map::new();
        report.insert("scenario".into(), json!(kind.name()));
        report.insert("engine".into(), json!(format!("tfdata ({format})")));
        report.insert("value".into(), json!(rate(result)));
        report.insert("values".into(), json!(runs.rates));
        report.insert("unit".into(), json!("rows/s"));
        report.insert("worker_peak_rss_bytes".into(), json!(runs.worker_peak));
        report.insert("data".into(), files.clone());
        report.insert("reader".into(), result.clone());
        let summary = format!(
            "{} tfdata ({format}): {:.0} rows/s (runs {:?}), first batch after {:.2} s \
             (reader peak RSS {:.0} MB, worker {:.0} MB, native {})",
            kind.name(),
            rate(result),
            runs.rates.iter().map(|r| r.round()).collect::<Vec<_>>(),
            result["first_batch_seconds"].as_f64().unwrap_or(0.0),
            result["peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1e6,
            runs.worker_peak.unwrap_or(0) as f64 / 1e6,
            result["native_build"].as_str().unwrap_or("unknown"),
        );
        emit(report, summary)?;
    }
    for (engine, runs) in engines.iter().zip(&theirs) {
        let result = &runs.median;
        let ratio = if rate(result) > 0.0 {
            reference / rate(result)
        } else {
            0.0
        };
        let mut report = Map::new();
        report.insert("scenario".into(), json!(kind.name()));
        report.insert("engine".into(), json!(engine));
        report.insert("value".into(), json!(rate(result)));
        report.insert("values".into(), json!(runs.rates));
        report.insert("unit".into(), json!("rows/s"));
        report.insert("tfdata_ratio".into(), json!(ratio));
        report.insert("reader".into(), result.clone());
        let summary = format!(
            "{} {engine}: {:.0} rows/s (runs {:?}), first batch after {:.2} s (peak RSS {:.0} \
             MB, its workers {:.0} MB): tfdata ({}) is {ratio:.2}x",
            kind.name(),
            rate(result),
            runs.rates.iter().map(|r| r.round()).collect::<Vec<_>>(),
            result["first_batch_seconds"].as_f64().unwrap_or(0.0),
            result["peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1e6,
            result["children_peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1e6,
            formats[0],
        );
        emit(report, summary)?;
    }
    Ok(())
}
