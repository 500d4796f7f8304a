//! `autocache` (issue 36 item 4): an expensive deterministic pipeline read
//! for three epochs (three jobs over one dataset) with `cache="auto"` and
//! without, each from a fresh `tfdata dispatcher` process (its work_dir a
//! temporary directory: the cache's default home) and
//! `--autocache-workers` `tfdata worker` processes.
//!
//! The pipeline: `--autocache-images` JPEGs (800×600, quality 90, a
//! synthetic photo-like pattern, written by this scenario with mozjpeg into
//! 8 TFRecord shards under `target/bench-data/autocache-N`), then
//! `tfrecord_dataset → map(decode_jpeg, 3 channels) → map(resize 224×224)
//! → map(cast uint8)`, read in distributed_epoch.
//!
//! Measured per epoch: the CPU seconds of the workers' and the
//! dispatcher's processes (`/proc/<pid>/stat`; the reader in this process
//! is not counted: it does the same work either way) per element. For the
//! autocache run, epoch 1's CPU runs until the dispatcher reports the
//! cache complete (the write runs while the epoch does, and may end after
//! it): writing the cache is epoch 1's cost. The elements of every epoch
//! are compared as multisets of content hashes, across epochs and against
//! the uncached read. The goal: epochs 2 and 3 at most 30% of epoch 1's CPU
//! per element.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use tfdata::{ProcessingMode, distribute};
use tfdata_core::tensor::TensorData;
use tfdata_proto::tfdata::status::status_service_client::StatusServiceClient;
use tfdata_proto::tfdata::status::{AutocacheStatus, GetStatusRequest};

use crate::measure::cpu_seconds_of;
use crate::procs::{self, Process};

/// The images' size: a typical photo, so decoding dominates as it does in
/// ImageNet-style input pipelines.
const IMAGE_WIDTH: usize = 800;
const IMAGE_HEIGHT: usize = 600;
const SHARDS: usize = 8;
/// How long the dispatcher gets to finish the cache after epoch 1.
const CACHE_TIMEOUT: Duration = Duration::from_secs(300);
/// The goal of issue 36: later epochs' CPU per element over epoch 1's.
const GOAL_RATIO: f64 = 0.30;

#[derive(Debug, Clone)]
pub struct AutocacheOptions {
    pub tfdata_bin: Option<PathBuf>,
    pub images: usize,
    pub workers: usize,
    pub epochs: usize,
    pub data_dir: PathBuf,
}

impl AutocacheOptions {
    pub fn check(&self) -> Result<()> {
        if self.images < SHARDS {
            bail!("--autocache-images must be at least {SHARDS} (one per shard)");
        }
        if self.workers == 0 {
            bail!("--autocache-workers must be at least 1");
        }
        if self.epochs < 2 {
            bail!("--autocache-epochs must be at least 2");
        }
        Ok(())
    }
}

/// A photo-like RGB image: smooth gradients, a few shapes and mild noise
/// (JPEG-compressed to a realistic size), different for each `index`.
fn image(index: usize) -> Vec<u8> {
    let mut pixels = Vec::with_capacity(IMAGE_WIDTH * IMAGE_HEIGHT * 3);
    let mut noise = (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let (cx, cy) = ((index * 97) % IMAGE_WIDTH, (index * 61) % IMAGE_HEIGHT);
    for y in 0..IMAGE_HEIGHT {
        for x in 0..IMAGE_WIDTH {
            noise ^= noise << 13;
            noise ^= noise >> 7;
            noise ^= noise << 17;
            let n = (noise % 24) as i32 - 12;
            let dx = x as i32 - cx as i32;
            let dy = y as i32 - cy as i32;
            let disc = if dx * dx + dy * dy < 120 * 120 { 60 } else { 0 };
            let r = (x * 255 / IMAGE_WIDTH) as i32 + disc + n;
            let g = (y * 255 / IMAGE_HEIGHT) as i32 + n;
            let b = ((x + y + index * 13) % 256) as i32 / 2 + disc / 2 + n;
            pixels.extend([r, g, b].map(|v| v.clamp(0, 255) as u8));
        }
    }
    pixels
}

fn encode_jpeg(pixels: &[u8]) -> Result<Vec<u8>> {
    // mozjpeg reports errors by unwinding.
    std::panic::catch_unwind(|| -> std::io::Result<Vec<u8>> {
        let mut c = mozjpeg::Compress::new(mozjpeg::ColorSpace::JCS_RGB);
        c.set_size(IMAGE_WIDTH, IMAGE_HEIGHT);
        c.set_quality(90.0);
        let mut started = c.start_compress(Vec::new())?;
        started.write_scanlines(pixels)?;
        started.finish()
    })
    .map_err(|_| anyhow::anyhow!("mozjpeg failed"))?
    .context("encoding a JPEG")
}

/// The shards, written when missing (a `DONE` file marks a complete set).
fn ensure_data(dir: &Path, images: usize) -> Result<Vec<String>> {
    let shards: Vec<PathBuf> = (0..SHARDS)
        .map(|i| dir.join(format!("images-{i:02}.tfrecord")))
        .collect();
    if !dir.join("DONE").exists() {
        std::fs::create_dir_all(dir)?;
        let mut files = shards
            .iter()
            .map(|p| Ok(std::io::BufWriter::new(std::fs::File::create(p)?)))
            .collect::<Result<Vec<_>>>()?;
        for i in 0..images {
            let jpeg = encode_jpeg(&image(i))?;
            tfdata_core::tfrecord::write_record(&mut files[i % SHARDS], &jpeg)?;
        }
        for mut f in files {
            f.flush()?;
        }
        std::fs::write(dir.join("DONE"), images.to_string())?;
    }
    Ok(shards
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect())
}

fn pipeline(files: &[String]) -> Result<tfdata::Dataset> {
    let text = json!({
        "op": "map",
        "function": {"function": "cast", "args": {"dtype": "uint8"}},
        "input": {
            "op": "map",
            "function": {"function": "resize", "args": {"size": [224, 224]}},
            "input": {
                "op": "map",
                "function": {"function": "decode_jpeg", "args": {"channels": 3}},
                "input": {"op": "tfrecord_dataset", "filenames": files},
            },
        },
    });
    Ok(tfdata_dataset::json::from_json(&text.to_string())?.dataset)
}

/// An element's content hash: every component's dtype, shape and bytes.
fn content_hash(element: &tfdata::Element) -> u64 {
    let mut h = DefaultHasher::new();
    for t in &element.components {
        t.dtype().name().hash(&mut h);
        t.shape().hash(&mut h);
        match t.data() {
            TensorData::Buffer(b) => b.as_ref().hash(&mut h),
            TensorData::Strings(s) => s.iter().for_each(|b| b.as_ref().hash(&mut h)),
        }
    }
    h.finish()
}

/// The service's processes and the CPU they used so far. The workers are
/// declared (so dropped, so stopped) before the dispatcher they talk to.
struct Service {
    workers: Vec<Process>,
    dispatcher: Process,
    address: String,
    _work_dir: tempfile::TempDir,
}

impl Service {
    fn start(binary: &Path, workers: usize) -> Result<Service> {
        let work_dir = tempfile::tempdir()?;
        let (dispatcher, rest) = Process::start(
            binary,
            &[
                "dispatcher".into(),
                "--port".into(),
                "0".into(),
                "--work-dir".into(),
                work_dir.path().join("work").to_string_lossy().into_owned(),
            ],
            "tfdata dispatcher listening on port",
            Some(&work_dir.path().join("dispatcher.log")),
            "the dispatcher",
        )?;
        let address = format!("localhost:{}", procs::port_of(&rest)?);
        let workers = (0..workers)
            .map(|i| {
                Process::start(
                    binary,
                    &[
                        "worker".into(),
                        "--dispatcher-address".into(),
                        address.clone(),
                        "--port".into(),
                        "0".into(),
                        "--heartbeat-interval-ms".into(),
                        "500".into(),
                    ],
                    "tfdata worker listening on port",
                    Some(&work_dir.path().join(format!("worker-{i}.log"))),
                    "a worker",
                )
                .map(|(p, _)| p)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Service {
            dispatcher,
            workers,
            address,
            _work_dir: work_dir,
        })
    }

    fn cpu_seconds(&self) -> f64 {
        std::iter::once(&self.dispatcher)
            .chain(&self.workers)
            .map(|p| cpu_seconds_of(&p.pid().to_string()).unwrap_or(0.0))
            .sum()
    }

    fn autocache_status(&self, runtime: &tokio::runtime::Runtime) -> Result<Vec<AutocacheStatus>> {
        runtime.block_on(async {
            let channel =
                tonic::transport::Channel::from_shared(format!("http://{}", self.address))?
                    .connect()
                    .await?;
            let status = StatusServiceClient::new(channel)
                .get_status(GetStatusRequest {})
                .await?
                .into_inner();
            Ok(status.autocache)
        })
    }
}

/// One epoch's figures.
#[derive(Debug)]
struct Epoch {
    elements: u64,
    cpu_seconds: f64,
    read_seconds: f64,
    /// Seconds from the read's end until the cache was complete (epoch 1
    /// of the autocache run).
    cache_wait_seconds: Option<f64>,
    hashes: Vec<u64>,
}

fn read_epochs(
    options: &AutocacheOptions,
    binary: &Path,
    dataset: &tfdata::Dataset,
    autocache: bool,
    runtime: &tokio::runtime::Runtime,
) -> Result<(Vec<Epoch>, Vec<AutocacheStatus>)> {
    let service = Service::start(binary, options.workers)?;
    let target = format!("grpc://{}", service.address);
    let mut epochs = Vec::new();
    for epoch in 0..options.epochs {
        let cpu_before = service.cpu_seconds();
        let started = Instant::now();
        let ds = distribute(ProcessingMode::DistributedEpoch, &target)
            .autocache(autocache)
            .apply(dataset)?;
        let mut hashes = Vec::new();
        for e in ds.iter()? {
            hashes.push(content_hash(&e?));
        }
        let read_seconds = started.elapsed().as_secs_f64();
        let mut cache_wait_seconds = None;
        if autocache && epoch == 0 {
            // Epoch 1 ends when the cache is complete (or was refused).
            let ended = Instant::now();
            loop {
                let status = service.autocache_status(runtime)?;
                let states: Vec<&str> = status.iter().map(|s| s.state.as_str()).collect();
                if states.contains(&"cached") || states.contains(&"not cached") {
                    break;
                }
                if ended.elapsed() > CACHE_TIMEOUT {
                    bail!("the cache was not complete {CACHE_TIMEOUT:?} after epoch 1: {status:?}");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            cache_wait_seconds = Some(ended.elapsed().as_secs_f64());
        }
        hashes.sort_unstable();
        epochs.push(Epoch {
            elements: hashes.len() as u64,
            cpu_seconds: service.cpu_seconds() - cpu_before,
            read_seconds,
            cache_wait_seconds,
            hashes,
        });
    }
    let status = service.autocache_status(runtime)?;
    Ok((epochs, status))
}

pub fn run(
    options: &AutocacheOptions,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    options.check()?;
    let binary = procs::tfdata_binary(options.tfdata_bin.as_deref())?;
    let files = ensure_data(&options.data_dir, options.images)?;
    let dataset = pipeline(&files)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (plain, _) = read_epochs(options, &binary, &dataset, false, &runtime)?;
    let (cached, status) = read_epochs(options, &binary, &dataset, true, &runtime)?;
    let reference = &plain[0].hashes;
    let mut summary = format!(
        "autocache: {} JPEGs {IMAGE_WIDTH}x{IMAGE_HEIGHT} → decode → resize 224x224 → uint8, \
         {} worker processes, distributed_epoch; CPU of workers + dispatcher per element\n  \
         run         epoch  elements  cpu ms/elem  vs epoch 1  vs uncached 1  read s  identical\n",
        options.images, options.workers
    );
    let mut goal_met = true;
    let uncached_first = plain[0].cpu_seconds / plain[0].elements.max(1) as f64;
    for (name, epochs) in [("uncached", &plain), ("cache=auto", &cached)] {
        let first = epochs[0].cpu_seconds / epochs[0].elements.max(1) as f64;
        for (i, e) in epochs.iter().enumerate() {
            let per_element = e.cpu_seconds / e.elements.max(1) as f64;
            let ratio = per_element / first;
            let identical = &e.hashes == reference;
            if name == "cache=auto" && i > 0 {
                goal_met &= ratio <= GOAL_RATIO && identical;
            }
            summary.push_str(&format!(
                "  {name:<10}  {:>5}  {:>8}  {:>11.3}  {:>9.0}%  {:>12.0}%  {:>6.1}  {identical}{}\n",
                i + 1,
                e.elements,
                per_element * 1000.0,
                ratio * 100.0,
                per_element / uncached_first * 100.0,
                e.read_seconds,
                e.cache_wait_seconds.map_or(String::new(), |w| format!(
                    " (cache complete {w:.1} s after the read)"
                )),
            ));
            let mut r = Map::new();
            r.insert("scenario".into(), json!("autocache"));
            r.insert("run".into(), json!(name));
            r.insert("epoch".into(), json!(i + 1));
            r.insert("value".into(), json!(per_element * 1000.0));
            r.insert(
                "unit".into(),
                json!("CPU ms per element (workers + dispatcher)"),
            );
            r.insert("ratio_to_epoch_1".into(), json!(ratio));
            r.insert(
                "ratio_to_uncached_epoch_1".into(),
                json!(per_element / uncached_first),
            );
            r.insert("elements".into(), json!(e.elements));
            r.insert("cpu_seconds".into(), json!(e.cpu_seconds));
            r.insert("read_seconds".into(), json!(e.read_seconds));
            r.insert("cache_wait_seconds".into(), json!(e.cache_wait_seconds));
            r.insert("identical_to_uncached_epoch_1".into(), json!(identical));
            r.insert("images".into(), json!(options.images));
            r.insert("workers".into(), json!(options.workers));
            emit(r, String::new())?;
        }
    }
    for s in &status {
        summary.push_str(&format!(
            "  dataset {}: {} at {} (compute {:.2} ms, read {:.2} ms, {:.0} bytes per element; \
             jobs served {}): {}\n",
            s.dataset_id,
            s.state,
            s.point,
            s.compute_seconds_per_element * 1000.0,
            s.read_seconds_per_element * 1000.0,
            s.bytes_per_element,
            s.jobs_served,
            s.reason
        ));
    }
    summary.push_str(&format!(
        "  goal (epochs 2+ ≤ {:.0}% of epoch 1, elements identical): {}",
        GOAL_RATIO * 100.0,
        if goal_met { "met" } else { "NOT met" }
    ));
    let mut r = Map::new();
    r.insert("scenario".into(), json!("autocache/summary"));
    r.insert("value".into(), json!(goal_met));
    r.insert("unit".into(), json!("goal met"));
    r.insert(
        "autocache".into(),
        Value::Array(
            status
                .iter()
                .map(|s| {
                    json!({"dataset_id": s.dataset_id, "state": s.state, "point": s.point,
                           "reason": s.reason, "path": s.path,
                           "compute_seconds_per_element": s.compute_seconds_per_element,
                           "read_seconds_per_element": s.read_seconds_per_element,
                           "bytes_per_element": s.bytes_per_element, "jobs_served": s.jobs_served})
                })
                .collect(),
        ),
    );
    emit(r, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_encode_and_differ() {
        let a = encode_jpeg(&image(0)).unwrap();
        let b = encode_jpeg(&image(1)).unwrap();
        assert_eq!(&a[..2], &[0xFF, 0xD8]);
        assert_ne!(a, b);
        // A photo-like size: tens of kilobytes, not a flat image's few.
        assert!(a.len() > 20_000, "{}", a.len());
    }

    #[test]
    fn the_pipeline_decodes_and_resizes_the_shards() {
        let dir = tempfile::tempdir().unwrap();
        let files = ensure_data(dir.path(), SHARDS).unwrap();
        let ds = pipeline(&files).unwrap();
        let mut hashes = Vec::new();
        for e in ds.iter().unwrap() {
            let e = e.unwrap();
            assert_eq!(e.components[0].shape(), &[224, 224, 3]);
            assert_eq!(e.components[0].dtype(), tfdata_core::DType::UInt8);
            hashes.push(content_hash(&e));
        }
        assert_eq!(hashes.len(), SHARDS);
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), SHARDS, "every image differs");
    }
}
