//! Helpers of the autocache tests (`autocache.rs`, `autocache_object_store.rs`):
//! JPEG TFRecords, the decode-and-resize pipeline, reads as multisets, the
//! dispatcher's autocache rows over gRPC, and an inotify watch of the files
//! a read opens.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)] // test code

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tfdata::{
    Dataset, DispatchServer, DispatcherConfig, Element, FunctionRef, WorkerConfig, WorkerServer,
};
use tfdata_dataset::attrs::{Attr, Attrs};
use tfdata_dataset::io::{CompressionType, TfRecordWriter};
use tfdata_proto::tfdata::status::{
    AutocacheStatus, GetStatusRequest, status_service_client::StatusServiceClient,
};

use crate::common::wait_for_these_workers;

/// Writing a cache (a distributed snapshot) and profiling on a loaded
/// machine: generous, while a healthy run takes a second or two.
pub const CACHE_LIMIT: Duration = Duration::from_secs(120);

/// `files` TFRecord files of `per_file` JPEGs each (`width`×`height`, RGB,
/// a pattern seeded by `seed` so two writes with different seeds differ).
pub fn write_jpeg_records(
    dir: &Path,
    files: usize,
    per_file: usize,
    seed: u8,
    size: (usize, usize),
) -> Vec<String> {
    (0..files)
        .map(|f| {
            let path = dir.join(format!("images-{f}.tfrecord"));
            let mut w =
                TfRecordWriter::create(path.to_str().unwrap(), CompressionType::None).unwrap();
            for i in 0..per_file {
                w.write(&jpeg(size, seed, (f * per_file + i) as u8))
                    .unwrap();
            }
            w.finish().unwrap();
            path.display().to_string()
        })
        .collect()
}

pub fn jpeg((width, height): (usize, usize), seed: u8, n: u8) -> Vec<u8> {
    let mut pixels = Vec::with_capacity(width * height * 3);
    for y in 0..height {
        for x in 0..width {
            pixels.extend_from_slice(&[
                (x as u8).wrapping_add(n),
                (y as u8).wrapping_mul(3).wrapping_add(seed),
                ((x ^ y) as u8).wrapping_add(n.wrapping_mul(7)),
            ]);
        }
    }
    let mut c = mozjpeg::Compress::new(mozjpeg::ColorSpace::JCS_RGB);
    c.set_size(width, height);
    c.set_quality(90.0);
    let mut started = c.start_compress(Vec::new()).unwrap();
    started.write_scanlines(&pixels).unwrap();
    started.finish().unwrap()
}

pub fn builtin(name: &str, args: &[(&str, Attr)]) -> FunctionRef {
    let args: BTreeMap<String, Attr> = args
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    FunctionRef::with_args(name, Attrs(args))
}

/// TFRecords of JPEGs → decode → resize to 16×16: deterministic, expensive
/// to compute, cheap to read back (768 floats per element).
pub fn decode_resize(files: &[String]) -> Dataset {
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    Dataset::tfrecord(&files, "")
        .map_with(
            builtin("decode_jpeg", &[("channels", Attr::Int(3))]),
            None,
            true,
        )
        .map_with(
            builtin("resize", &[("size", Attr::from(vec![16_i64, 16]))]),
            None,
            true,
        )
}

/// A cluster of `workers` whose dispatcher keeps caches in `cache_dir`.
pub fn cluster(cache_dir: &Path, workers: usize) -> (DispatchServer, Vec<WorkerServer>) {
    cluster_with(
        DispatcherConfig {
            autocache_dir: Some(cache_dir.display().to_string()),
            http_port: Some(0),
            ..Default::default()
        },
        workers,
    )
}

pub fn cluster_with(
    config: DispatcherConfig,
    workers: usize,
) -> (DispatchServer, Vec<WorkerServer>) {
    let dispatcher = DispatchServer::new(config).unwrap();
    let workers = start_workers(&dispatcher, workers);
    (dispatcher, workers)
}

pub fn start_workers(dispatcher: &DispatchServer, n: usize) -> Vec<WorkerServer> {
    let workers: Vec<WorkerServer> = (0..n)
        .map(|_| {
            let mut config = WorkerConfig::new(dispatcher.address());
            config.heartbeat_interval = Duration::from_millis(200);
            WorkerServer::new(config).unwrap()
        })
        .collect();
    wait_for_these_workers(dispatcher, &workers);
    workers
}

/// An element as bytes: dtype, shape and data of each component, so two
/// reads compare exactly (floats by their bits).
pub fn key(e: &Element) -> Vec<u8> {
    let mut k = Vec::new();
    for t in &e.components {
        k.extend_from_slice(format!("{:?}{:?}", t.dtype(), t.shape()).as_bytes());
        match t.data() {
            tfdata_core::tensor::TensorData::Buffer(b) => k.extend_from_slice(b),
            tfdata_core::tensor::TensorData::Strings(s) => s.iter().for_each(|b| {
                k.extend_from_slice(&(b.len() as u64).to_le_bytes());
                k.extend_from_slice(b);
            }),
        }
    }
    k
}

/// The multiset of elements a read gives.
pub fn multiset(elements: impl IntoIterator<Item = Element>) -> BTreeMap<Vec<u8>, usize> {
    let mut m = BTreeMap::new();
    for e in elements {
        *m.entry(key(&e)).or_default() += 1;
    }
    m
}

pub fn read_epoch(ds: &tfdata::DistributedDataset) -> BTreeMap<Vec<u8>, usize> {
    multiset(ds.iter().unwrap().map(Result::unwrap))
}

pub fn local(dataset: &Dataset) -> BTreeMap<Vec<u8>, usize> {
    multiset(dataset.iter().unwrap().map(Result::unwrap))
}

/// The dispatcher's autocache rows, over its status service (real gRPC).
pub fn autocache_status(dispatcher: &DispatchServer) -> Vec<AutocacheStatus> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut client = StatusServiceClient::connect(format!("http://{}", dispatcher.address()))
            .await
            .unwrap();
        client
            .get_status(GetStatusRequest {})
            .await
            .unwrap()
            .into_inner()
            .autocache
    })
}

pub fn row(dispatcher: &DispatchServer, dataset_id: &str) -> Option<AutocacheStatus> {
    autocache_status(dispatcher)
        .into_iter()
        .find(|r| r.dataset_id == dataset_id)
}

/// Waits until autocache says `dataset_id`'s cache is complete.
pub fn wait_until_cached(dispatcher: &DispatchServer, dataset_id: &str) -> AutocacheStatus {
    let mut last = None;
    let waited = std::time::Instant::now();
    loop {
        let r = row(dispatcher, dataset_id);
        if let Some(r) = &r {
            assert!(
                r.state != "not cached" && r.state != "dropped",
                "autocache decided against caching: {r:?}"
            );
            if r.state == "cached" {
                return r.clone();
            }
        }
        last = r.or(last);
        assert!(
            waited.elapsed() < CACHE_LIMIT,
            "no complete cache after {CACHE_LIMIT:?}; last status {last:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Files opened in a directory while it is watched (inotify `IN_OPEN`;
/// directory events ignored).
pub struct OpenWatch {
    fd: std::os::fd::OwnedFd,
}

impl OpenWatch {
    pub fn new(dir: &Path) -> Self {
        use rustix::fs::inotify;
        let fd =
            inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).unwrap();
        inotify::add_watch(&fd, dir, inotify::WatchFlags::OPEN).unwrap();
        OpenWatch { fd }
    }

    /// The files opened since the watch began.
    pub fn opened(&self) -> Vec<String> {
        use rustix::fs::inotify;
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        let mut opened = Vec::new();
        loop {
            match reader.next() {
                Ok(event) => {
                    if event.events().contains(inotify::ReadFlags::ISDIR) {
                        continue;
                    }
                    if let Some(name) = event.file_name() {
                        opened.push(name.to_string_lossy().into_owned());
                    }
                }
                Err(rustix::io::Errno::AGAIN) => return opened,
                Err(e) => panic!("reading inotify events: {e}"),
            }
        }
    }
}

/// Every file under `dir` (recursively).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}
