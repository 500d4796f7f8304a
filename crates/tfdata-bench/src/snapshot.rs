//! `snapshot` (issue 14 item 9): distributed snapshots, saved and loaded
//! by both implementations on the same machine in the same run.
//!
//! **Save**: `tf.data.experimental.distributed_save` of one TensorFlow
//! graph dataset (`scripts/tf_snapshot.py`'s `dataset`: `--snapshot-elements`
//! float32 vectors of `--snapshot-values` hashed values 0..255, Snappy about
//! halves it) called by the same Python client program against (a) our
//! fault-tolerant dispatcher (in this process) with our worker (a child
//! process, this binary's `--serve-worker`) translating the graph, and (b)
//! TensorFlow's fault-tolerant dispatcher and TensorFlow's worker (each in its
//! own Python process), alternately, `--repeats` times. Timed from the call
//! (the `Snapshot` RPC) to `DONE` appearing in the snapshot directory. Both
//! workers heartbeat every `--snapshot-heartbeat-ms` (the heartbeat hands
//! out the stream and reports its end, so TensorFlow's default 30 s would
//! dominate); our worker's commit interval is its default (TensorFlow's
//! schedule: chunk 0 after 5 min, i.e. one chunk, committed at end of
//! input). Reported: MB/s of chunk-file bytes and of element bytes, and each
//! worker process's peak RSS (`VmHWM`) with its RSS before the save.
//!
//! **Load**: the last run's two snapshots (the one our worker wrote and the
//! one TensorFlow's wrote) read to the end by TensorFlow's
//! `tf.data.Dataset.load(path)` (a Python process) and by our engine's
//! `Dataset::load(path, false)` (a child process: this binary's hidden
//! `--load-snapshot`), alternately, `--repeats` times each, from the page
//! cache. Reported: MB/s of element bytes, elements/s, each reader's peak
//! RSS and its RSS before reading.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use tfdata::{DispatchServer, DispatcherConfig};
use tfdata_dataset::Dataset;

use crate::child::Server;
use crate::data::{run_python_script, scripts_dir};

const SCRIPT: &str = "tf_snapshot.py";

/// What the scenario saves and how.
#[derive(Debug, Clone)]
pub struct SnapshotOptions {
    pub python: PathBuf,
    /// Where the snapshots and work dirs go (emptied first).
    pub dir: PathBuf,
    pub elements: u64,
    pub values: u64,
    /// `AUTO` (Snappy), `NONE` or `GZIP`.
    pub compression: String,
    /// `map` and/or `repeat` (`scripts/tf_snapshot.py`'s `dataset`).
    pub datasets: Vec<String>,
    pub heartbeat_ms: u64,
    pub repeats: usize,
    /// Keep the last run's snapshots (else deleted once read).
    pub keep: bool,
}

impl SnapshotOptions {
    fn element_bytes(&self) -> u64 {
        self.elements * self.values * 4
    }
}

/// One save.
#[derive(Debug, Clone)]
struct Save {
    seconds: f64,
    chunk_bytes: u64,
    chunks: usize,
    worker_peak_rss: Option<u64>,
    worker_rss_before: Option<u64>,
}

/// One load.
#[derive(Debug, Clone)]
struct Load {
    seconds: f64,
    elements: u64,
    bytes: u64,
    peak_rss: Option<u64>,
    rss_before: Option<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Ours,
    TensorFlow,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Ours => "ours",
            Side::TensorFlow => "tensorflow",
        }
    }
}

fn save_args(o: &SnapshotOptions, kind: &str, dispatcher: &str, path: &Path) -> Vec<String> {
    vec![
        "save".into(),
        "--dataset".into(),
        kind.into(),
        "--dispatcher".into(),
        dispatcher.into(),
        "--path".into(),
        path.display().to_string(),
        "--elements".into(),
        o.elements.to_string(),
        "--values".into(),
        o.values.to_string(),
        "--compression".into(),
        o.compression.clone(),
    ]
}

fn parse_seconds(line: &str) -> Result<f64> {
    let v: Value = serde_json::from_str(line).with_context(|| format!("bad result {line}"))?;
    v["seconds"]
        .as_f64()
        .with_context(|| format!("no seconds in {line}"))
}

/// Bytes and number of the files in `<path>/chunks`.
fn chunk_files(path: &Path) -> Result<(u64, usize)> {
    let mut bytes = 0;
    let mut n = 0;
    for entry in std::fs::read_dir(path.join("chunks"))? {
        let entry = entry?;
        bytes += entry.metadata()?.len();
        n += 1;
    }
    Ok((bytes, n))
}

fn save_once(o: &SnapshotOptions, kind: &str, side: Side, run: usize) -> Result<(Save, PathBuf)> {
    let base = o.dir.join(format!("{kind}-{}-{run}", side.name()));
    if base.exists() {
        std::fs::remove_dir_all(&base)?;
    }
    std::fs::create_dir_all(&base)?;
    let work_dir = base.join("work_dir").display().to_string();
    let path = base.join("snapshot");
    let script = scripts_dir().join(SCRIPT);
    let heartbeat = o.heartbeat_ms.to_string();
    let (seconds, worker) = match side {
        Side::Ours => {
            let dispatcher = DispatchServer::new(DispatcherConfig {
                work_dir: Some(work_dir),
                fault_tolerant_mode: true,
                ..DispatcherConfig::default()
            })?;
            let mut c = Command::new(std::env::current_exe()?);
            c.arg("--serve-worker")
                .arg(dispatcher.address())
                .arg("--serve-worker-heartbeat-ms")
                .arg(&heartbeat);
            let worker = Server::start_quiet(c, "our worker", || dispatcher.num_workers() >= 1)?;
            let before = worker.status_bytes("VmRSS:");
            let line = run_python_script(
                &o.python,
                SCRIPT,
                &save_args(o, kind, &dispatcher.address(), &path),
            )?;
            (parse_seconds(&line)?, (worker, before))
        }
        Side::TensorFlow => {
            let mut c = Command::new(&o.python);
            c.arg(&script)
                .arg("serve-dispatcher")
                .arg("--work-dir")
                .arg(&work_dir);
            let dispatcher = Server::start(c, "TensorFlow's dispatcher")?;
            let v: Value = serde_json::from_str(&dispatcher.first_line)
                .with_context(|| format!("dispatcher said {:?}", dispatcher.first_line))?;
            let address = v["address"]
                .as_str()
                .context("no dispatcher address")?
                .to_string();
            let mut c = Command::new(&o.python);
            c.arg(&script)
                .arg("serve-worker")
                .arg("--dispatcher")
                .arg(&address)
                .arg("--heartbeat-ms")
                .arg(&heartbeat);
            // The WorkerServer registers before its constructor returns.
            let worker = Server::start(c, "TensorFlow's worker")?;
            let before = worker.status_bytes("VmRSS:");
            let line = run_python_script(&o.python, SCRIPT, &save_args(o, kind, &address, &path))?;
            let worker = (worker, before);
            drop(dispatcher);
            (parse_seconds(&line)?, worker)
        }
    };
    let (worker, worker_rss_before) = worker;
    let worker_peak_rss = worker.status_bytes("VmHWM:");
    drop(worker);
    let (chunk_bytes, chunks) = chunk_files(&path)?;
    Ok((
        Save {
            seconds,
            chunk_bytes,
            chunks,
            worker_peak_rss,
            worker_rss_before,
        },
        path,
    ))
}

fn load_once(o: &SnapshotOptions, side: Side, path: &Path) -> Result<Load> {
    let line = match side {
        Side::Ours => {
            let output = Command::new(std::env::current_exe()?)
                .arg("--load-snapshot")
                .arg(path)
                .output()
                .context("starting our reader")?;
            if !output.status.success() {
                bail!(
                    "our reader failed ({}):\n{}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            String::from_utf8_lossy(&output.stdout).trim().to_string()
        }
        Side::TensorFlow => run_python_script(
            &o.python,
            SCRIPT,
            &["load".into(), "--path".into(), path.display().to_string()],
        )?,
    };
    let v: Value = serde_json::from_str(&line).with_context(|| format!("bad result {line}"))?;
    Ok(Load {
        seconds: v["seconds"].as_f64().context("no seconds")?,
        elements: v["elements"].as_u64().context("no elements")?,
        bytes: v["bytes"].as_u64().context("no bytes")?,
        peak_rss: v["peak_rss_bytes"].as_u64(),
        rss_before: v["rss_before_bytes"].as_u64(),
    })
}

/// `--load-snapshot PATH`: reads the snapshot with `Dataset::load(path,
/// false)` and prints `{"seconds", "elements", "bytes", "peak_rss_bytes",
/// "rss_before_bytes"}`.
pub fn serve_load(path: &str) -> Result<()> {
    let rss_before = status_self("VmRSS:");
    let start = Instant::now();
    let mut iter = Dataset::load(path, false).iter()?;
    let (mut elements, mut bytes) = (0u64, 0u64);
    loop {
        match iter.next_element() {
            Ok(Some(e)) => {
                elements += 1;
                bytes += e.byte_size() as u64;
            }
            Ok(None) => break,
            Err(e) => bail!("reading {path}: {e}"),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({
            "seconds": seconds,
            "elements": elements,
            "bytes": bytes,
            "peak_rss_bytes": crate::measure::peak_rss_bytes(),
            "rss_before_bytes": rss_before,
        })
    );
    Ok(())
}

fn status_self(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    crate::measure::status_kib(&status, key).map(|kib| kib * 1024)
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

fn mb(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / 1e6 / seconds
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("?".into(), |b| format!("{:.0} MiB", b as f64 / 1048576.0))
}

fn max_of(v: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    v.flatten().max()
}

/// Reads every file under `dir` once, so each reader starts from the page cache.
fn warm(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir.join("chunks"))? {
        std::fs::read(entry?.path())?;
    }
    Ok(())
}

/// Runs the scenario and emits two reports: `snapshot/save` and
/// `snapshot/load` (one per snapshot read).
pub fn run(
    o: &SnapshotOptions,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    if o.dir.exists() {
        std::fs::remove_dir_all(&o.dir)?;
    }
    std::fs::create_dir_all(&o.dir)?;
    for kind in &o.datasets {
        run_dataset(o, kind, emit)?;
    }
    Ok(())
}

/// Saves (both sides, `repeats` times) and loads (both readers, both
/// snapshots) dataset `kind`.
fn run_dataset(
    o: &SnapshotOptions,
    kind: &str,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut paths = (PathBuf::new(), PathBuf::new());
    for run in 1..=o.repeats {
        for side in [Side::Ours, Side::TensorFlow] {
            eprintln!(
                "tfdata-bench: snapshot: {kind}: save by {} (run {run}) ...",
                side.name()
            );
            let (save, path) = save_once(o, kind, side, run)?;
            eprintln!(
                "tfdata-bench: snapshot:   {:.2} s, {:.1} MB of chunks ({} files)",
                save.seconds,
                save.chunk_bytes as f64 / 1e6,
                save.chunks
            );
            // Keep only the last run's snapshots (disk space).
            let keep = match side {
                Side::Ours => &mut paths.0,
                Side::TensorFlow => &mut paths.1,
            };
            if run > 1 {
                std::fs::remove_dir_all(keep.parent().context("no parent")?)?;
            }
            *keep = path;
            match side {
                Side::Ours => ours.push(save),
                Side::TensorFlow => theirs.push(save),
            }
        }
    }
    emit_save(o, kind, &ours, &theirs, emit)?;

    for (writer, path) in [(Side::Ours, &paths.0), (Side::TensorFlow, &paths.1)] {
        warm(path)?;
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for run in 1..=o.repeats {
            for side in [Side::Ours, Side::TensorFlow] {
                eprintln!(
                    "tfdata-bench: snapshot: {kind}: {} reads {}'s snapshot (run {run}) ...",
                    side.name(),
                    writer.name()
                );
                let load = load_once(o, side, path)?;
                if load.elements != o.elements || load.bytes != o.element_bytes() {
                    bail!(
                        "{} read {} elements of {} bytes from {}, expected {} of {}",
                        side.name(),
                        load.elements,
                        load.bytes,
                        path.display(),
                        o.elements,
                        o.element_bytes()
                    );
                }
                match side {
                    Side::Ours => ours.push(load),
                    Side::TensorFlow => theirs.push(load),
                }
            }
        }
        emit_load(o, kind, writer, &ours, &theirs, emit)?;
    }
    for path in [&paths.0, &paths.1].into_iter().filter(|_| !o.keep) {
        std::fs::remove_dir_all(path.parent().context("no parent")?)?;
    }
    Ok(())
}

fn describe(o: &SnapshotOptions, kind: &str) -> String {
    if kind == "repeat" {
        format!(
            "range({}).map(lambda _: constant float32[{}] of hashed values 0..255)",
            o.elements, o.values
        )
    } else {
        format!(
            "range({}).map(float32[{}] of hashed values 0..255)",
            o.elements, o.values
        )
    }
}

fn emit_save(
    o: &SnapshotOptions,
    kind: &str,
    ours: &[Save],
    theirs: &[Save],
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    let element_bytes = o.element_bytes();
    let rates =
        |s: &[Save]| -> Vec<f64> { s.iter().map(|s| mb(element_bytes, s.seconds)).collect() };
    let chunk_rates =
        |s: &[Save]| -> Vec<f64> { s.iter().map(|s| mb(s.chunk_bytes, s.seconds)).collect() };
    let (a, b) = (median(&rates(ours)), median(&rates(theirs)));
    let (ca, cb) = (median(&chunk_rates(ours)), median(&chunk_rates(theirs)));
    let seconds = |s: &[Save]| -> Vec<f64> { s.iter().map(|s| s.seconds).collect() };
    let mut r = Map::new();
    let name = format!("snapshot/save-{kind}");
    r.insert("scenario".into(), json!(name));
    r.insert("value".into(), json!(a));
    r.insert("unit".into(), json!("MB/s"));
    r.insert("tensorflow".into(), json!(b));
    r.insert("ratio".into(), json!(a / b));
    r.insert("values".into(), json!(rates(ours)));
    r.insert("tensorflow_values".into(), json!(rates(theirs)));
    r.insert("chunk_mb_per_sec".into(), json!(ca));
    r.insert("tensorflow_chunk_mb_per_sec".into(), json!(cb));
    r.insert("chunk_values".into(), json!(chunk_rates(ours)));
    r.insert("tensorflow_chunk_values".into(), json!(chunk_rates(theirs)));
    r.insert("seconds".into(), json!(seconds(ours)));
    r.insert("tensorflow_seconds".into(), json!(seconds(theirs)));
    r.insert(
        "chunk_bytes".into(),
        json!(ours.iter().map(|s| s.chunk_bytes).collect::<Vec<_>>()),
    );
    r.insert(
        "tensorflow_chunk_bytes".into(),
        json!(theirs.iter().map(|s| s.chunk_bytes).collect::<Vec<_>>()),
    );
    r.insert("chunks".into(), json!(ours.last().map(|s| s.chunks)));
    r.insert(
        "tensorflow_chunks".into(),
        json!(theirs.last().map(|s| s.chunks)),
    );
    r.insert("element_bytes".into(), json!(element_bytes));
    r.insert("elements".into(), json!(o.elements));
    r.insert("compression".into(), json!(o.compression));
    r.insert("heartbeat_ms".into(), json!(o.heartbeat_ms));
    let peak = |s: &[Save]| max_of(s.iter().map(|s| s.worker_peak_rss));
    let before = |s: &[Save]| max_of(s.iter().map(|s| s.worker_rss_before));
    r.insert("worker_peak_rss_bytes".into(), json!(peak(ours)));
    r.insert(
        "tensorflow_worker_peak_rss_bytes".into(),
        json!(peak(theirs)),
    );
    r.insert("worker_rss_before_bytes".into(), json!(before(ours)));
    r.insert(
        "tensorflow_worker_rss_before_bytes".into(),
        json!(before(theirs)),
    );
    r.insert("data".into(), json!(describe(o, kind)));
    r.insert(
        "workers".into(),
        json!("our dispatcher + our worker process"),
    );
    r.insert(
        "tensorflow_workers".into(),
        json!("TensorFlow 2.21 dispatcher + worker processes"),
    );
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let text = format!(
        "{name:<20} save {} MB ({}): ours {a:.0} MB/s [{}], TensorFlow {b:.0} MB/s [{}], ratio {:.2}\n\
         {:<20} chunk bytes/s: ours {ca:.0} MB/s, TensorFlow {cb:.0} MB/s ({:.1} vs {:.1} MB of chunks)\n\
         {:<20} worker peak RSS: ours {} (before {}), TensorFlow's {} (before {})",
        element_bytes / 1_000_000,
        o.compression,
        list(&rates(ours)),
        list(&rates(theirs)),
        a / b,
        "",
        ours.last().map_or(0.0, |s| s.chunk_bytes as f64 / 1e6),
        theirs.last().map_or(0.0, |s| s.chunk_bytes as f64 / 1e6),
        "",
        mib(peak(ours)),
        mib(before(ours)),
        mib(peak(theirs)),
        mib(before(theirs)),
    );
    emit(r, text)
}

fn emit_load(
    o: &SnapshotOptions,
    kind: &str,
    writer: Side,
    ours: &[Load],
    theirs: &[Load],
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    let rates = |l: &[Load]| -> Vec<f64> { l.iter().map(|l| mb(l.bytes, l.seconds)).collect() };
    let eps =
        |l: &[Load]| -> Vec<f64> { l.iter().map(|l| l.elements as f64 / l.seconds).collect() };
    let (a, b) = (median(&rates(ours)), median(&rates(theirs)));
    let name = format!("snapshot/load-{kind}-{}", writer.name());
    let peak = |l: &[Load]| max_of(l.iter().map(|l| l.peak_rss));
    let before = |l: &[Load]| max_of(l.iter().map(|l| l.rss_before));
    let mut r = Map::new();
    r.insert("scenario".into(), json!(name));
    r.insert("value".into(), json!(a));
    r.insert("unit".into(), json!("MB/s"));
    r.insert("tensorflow".into(), json!(b));
    r.insert("ratio".into(), json!(a / b));
    r.insert("values".into(), json!(rates(ours)));
    r.insert("tensorflow_values".into(), json!(rates(theirs)));
    r.insert("elements_per_sec".into(), json!(median(&eps(ours))));
    r.insert(
        "tensorflow_elements_per_sec".into(),
        json!(median(&eps(theirs))),
    );
    r.insert("elements".into(), json!(o.elements));
    r.insert("element_bytes".into(), json!(o.element_bytes()));
    r.insert("data".into(), json!(describe(o, kind)));
    r.insert("compression".into(), json!(o.compression));
    r.insert(
        "snapshot_written_by".into(),
        json!(match writer {
            Side::Ours => "our worker",
            Side::TensorFlow => "TensorFlow's worker",
        }),
    );
    r.insert("peak_rss_bytes".into(), json!(peak(ours)));
    r.insert("tensorflow_peak_rss_bytes".into(), json!(peak(theirs)));
    r.insert("rss_before_bytes".into(), json!(before(ours)));
    r.insert("tensorflow_rss_before_bytes".into(), json!(before(theirs)));
    r.insert("reader".into(), json!("Dataset::load(path, false)"));
    r.insert(
        "tensorflow_reader".into(),
        json!("tf.data.Dataset.load(path)"),
    );
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let text = format!(
        "{name:<20} load: ours {a:.0} MB/s [{}] ({:.0} el/s), TensorFlow {b:.0} MB/s [{}] ({:.0} el/s), ratio {:.2}\n\
         {:<20} reader peak RSS: ours {} (before {}), TensorFlow's {} (before {})",
        list(&rates(ours)),
        median(&eps(ours)),
        list(&rates(theirs)),
        median(&eps(theirs)),
        a / b,
        "",
        mib(peak(ours)),
        mib(before(ours)),
        mib(peak(theirs)),
        mib(before(theirs)),
    );
    emit(r, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_rates() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0]), 1.0);
        assert_eq!(mb(2_000_000, 2.0), 1.0);
        assert_eq!(mib(Some(3 << 20)), "3 MiB");
        assert_eq!(max_of([Some(1), None, Some(3)].into_iter()), Some(3));
    }
}
