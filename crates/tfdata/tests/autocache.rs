//! Autocache in the service (issue 36; docs/operations.md, "Autocache"):
//! in-process clusters on real sockets, real JPEG files in TFRecords, the
//! dispatcher's status over real gRPC and HTTP. Each test fails without the
//! feature: a second epoch opens the source files again, a random pipeline
//! gets a cache, an old cache survives a change of its files.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tfdata::{
    Dataset, DispatchServer, DispatcherConfig, Element, FunctionRef, ProcessingMode, WorkerConfig,
    WorkerServer, distribute,
};
use tfdata_dataset::attrs::{Attr, Attrs};
use tfdata_dataset::io::{CompressionType, TfRecordWriter};
use tfdata_proto::tfdata::status::{
    AutocacheStatus, GetStatusRequest, status_service_client::StatusServiceClient,
};

mod common;
use common::{wait_for, wait_for_these_workers};

/// Writing a cache (a distributed snapshot) and profiling on a loaded
/// machine: generous, while a healthy run takes a second or two.
const CACHE_LIMIT: Duration = Duration::from_secs(120);

/// `files` TFRecord files of `per_file` JPEGs each (`width`×`height`, RGB,
/// a pattern seeded by `seed` so two writes with different seeds differ).
fn write_jpeg_records(
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

fn jpeg((width, height): (usize, usize), seed: u8, n: u8) -> Vec<u8> {
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

fn builtin(name: &str, args: &[(&str, Attr)]) -> FunctionRef {
    let args: BTreeMap<String, Attr> = args
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    FunctionRef::with_args(name, Attrs(args))
}

/// TFRecords of JPEGs → decode → resize to 16×16: deterministic, expensive
/// to compute, cheap to read back (768 floats per element).
fn decode_resize(files: &[String]) -> Dataset {
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
fn cluster(cache_dir: &Path, workers: usize) -> (DispatchServer, Vec<WorkerServer>) {
    cluster_with(
        DispatcherConfig {
            autocache_dir: Some(cache_dir.display().to_string()),
            http_port: Some(0),
            ..Default::default()
        },
        workers,
    )
}

fn cluster_with(config: DispatcherConfig, workers: usize) -> (DispatchServer, Vec<WorkerServer>) {
    let dispatcher = DispatchServer::new(config).unwrap();
    let workers = start_workers(&dispatcher, workers);
    (dispatcher, workers)
}

fn start_workers(dispatcher: &DispatchServer, n: usize) -> Vec<WorkerServer> {
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
fn key(e: &Element) -> Vec<u8> {
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
fn multiset(elements: impl IntoIterator<Item = Element>) -> BTreeMap<Vec<u8>, usize> {
    let mut m = BTreeMap::new();
    for e in elements {
        *m.entry(key(&e)).or_default() += 1;
    }
    m
}

fn read_epoch(ds: &tfdata::DistributedDataset) -> BTreeMap<Vec<u8>, usize> {
    multiset(ds.iter().unwrap().map(Result::unwrap))
}

fn local(dataset: &Dataset) -> BTreeMap<Vec<u8>, usize> {
    multiset(dataset.iter().unwrap().map(Result::unwrap))
}

/// The dispatcher's autocache rows, over its status service (real gRPC).
fn autocache_status(dispatcher: &DispatchServer) -> Vec<AutocacheStatus> {
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

fn row(dispatcher: &DispatchServer, dataset_id: &str) -> Option<AutocacheStatus> {
    autocache_status(dispatcher)
        .into_iter()
        .find(|r| r.dataset_id == dataset_id)
}

/// Waits until autocache says `dataset_id`'s cache is complete.
fn wait_until_cached(dispatcher: &DispatchServer, dataset_id: &str) -> AutocacheStatus {
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
struct OpenWatch {
    fd: std::os::fd::OwnedFd,
}

impl OpenWatch {
    fn new(dir: &Path) -> Self {
        use rustix::fs::inotify;
        let fd =
            inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).unwrap();
        inotify::add_watch(&fd, dir, inotify::WatchFlags::OPEN).unwrap();
        OpenWatch { fd }
    }

    /// The files opened since the watch began.
    fn opened(&self) -> Vec<String> {
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
fn files_under(dir: &Path) -> Vec<PathBuf> {
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

#[test]
fn epoch_two_is_read_from_the_cache_without_opening_the_source_files() {
    let source = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let files = write_jpeg_records(source.path(), 3, 8, 1, (320, 240));
    let (dispatcher, _workers) = cluster(cache.path(), 2);
    let pipeline = decode_resize(&files);
    let expected = local(&pipeline);
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .autocache(true)
        .apply(&pipeline)
        .unwrap();

    let epoch1 = read_epoch(&ds);
    assert_eq!(
        epoch1, expected,
        "epoch 1 (profiled) must read every element"
    );
    let cached = wait_until_cached(&dispatcher, ds.dataset_id());
    // decode or decode+resize (which runs fused, cheaper than decode
    // alone): whichever saves more; never the source, as cheap to read.
    assert!(
        ["1: map(decode_jpeg)", "2: map(resize)"].contains(&cached.point.as_str()),
        "{cached:?}"
    );
    assert!(
        cached.compute_seconds_per_element > cached.read_seconds_per_element,
        "{cached:?}"
    );
    assert!(Path::new(&cached.path).join("DONE").exists(), "{cached:?}");

    let watch = OpenWatch::new(source.path());
    let epoch2 = read_epoch(&ds);
    let opened = watch.opened();
    assert!(
        opened.is_empty(),
        "epoch 2 opened source files {opened:?}: it was not served from the cache"
    );
    assert_eq!(epoch2, expected, "the cache gives the same multiset");
    let served = row(&dispatcher, ds.dataset_id()).unwrap();
    assert_eq!(served.state, "cached", "{served:?}");
    assert_eq!(served.jobs_served, 1, "{served:?}");

    // Another pipeline with the same prefix and another suffix reads the
    // same cache.
    let other = pipeline.map_with(
        builtin(
            "normalize",
            &[
                ("mean", Attr::from(vec![127.5_f64, 127.5, 127.5])),
                ("std", Attr::from(vec![127.5_f64, 127.5, 127.5])),
            ],
        ),
        None,
        true,
    );
    let other_expected = local(&other);
    let other_ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .autocache(true)
        .apply(&other)
        .unwrap();
    let watch = OpenWatch::new(source.path());
    assert_eq!(read_epoch(&other_ds), other_expected);
    let opened = watch.opened();
    assert!(
        opened.is_empty(),
        "a pipeline sharing the cached prefix opened source files {opened:?}"
    );
    let other_row = row(&dispatcher, other_ds.dataset_id()).unwrap();
    assert_eq!(
        (other_row.state.as_str(), other_row.jobs_served),
        ("cached", 1),
        "{other_row:?}"
    );

    // The status page and /api/status show it.
    let port = dispatcher.http_port().unwrap();
    let (code, _, body) = common::http_get(port, "/api/status");
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let rows = v["autocache"].as_array().unwrap();
    assert!(
        rows.iter()
            .any(|r| r["state"] == "cached" && r["point"] == cached.point.as_str()),
        "{body}"
    );
    let (_, _, page) = common::http_get(port, "/");
    assert!(page.contains("Autocache"), "{page}");
    let (_, _, metrics) = common::http_get(port, "/metrics");
    assert!(
        metrics.contains("tfdata_dispatcher_autocache_jobs_served_total 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("tfdata_dispatcher_autocache_caches{state=\"cached\"} 2"),
        "{metrics}"
    );
}

#[test]
fn a_pipeline_with_an_unseeded_random_op_is_refused_and_nothing_is_written() {
    let cache = tempfile::tempdir().unwrap();
    let (dispatcher, _workers) = cluster(cache.path(), 1);
    let images: Vec<bytes::Bytes> = (0..16).map(|n| jpeg((320, 240), 3, n).into()).collect();
    let n = images.len() as i64;
    // Expensive and with a small output after the random crop: without the
    // determinism rule, that point would be the one cached.
    let pipeline =
        Dataset::from_tensor_slices(vec![tfdata::Tensor::strings(images, vec![n]).unwrap()])
            .map_with(
                builtin("decode_random_crop_jpeg", &[("channels", Attr::Int(3))]),
                None,
                true,
            )
            .map_with(
                builtin("resize", &[("size", Attr::from(vec![16_i64, 16]))]),
                None,
                true,
            );
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .autocache(true)
        .apply(&pipeline)
        .unwrap();
    assert_eq!(ds.iter().unwrap().count(), 16);
    let mut decided = None;
    wait_for("autocache's decision", CACHE_LIMIT, || {
        let now = row(&dispatcher, ds.dataset_id());
        if let Some(r) = now
            .as_ref()
            .filter(|r| r.state == "writing" || r.state == "cached")
        {
            panic!("a point after the unseeded random op is being cached: {r:?}");
        }
        decided = now.filter(|r| r.state == "not cached");
        decided.is_some()
    });
    let decided = decided.unwrap();
    assert!(
        decided
            .reason
            .contains("unseeded random op `decode_random_crop_jpeg`"),
        "{decided:?}"
    );
    // A second epoch decides nothing new, and nothing was ever written.
    assert_eq!(ds.iter().unwrap().count(), 16);
    let written = files_under(cache.path());
    assert!(written.is_empty(), "files written: {written:?}");
}

#[test]
fn a_cache_whose_files_changed_is_dropped_and_the_new_data_read() {
    let source = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let files = write_jpeg_records(source.path(), 2, 6, 1, (320, 240));
    let (dispatcher, _workers) = cluster(cache.path(), 1);
    let pipeline = decode_resize(&files);
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .autocache(true)
        .apply(&pipeline)
        .unwrap();
    read_epoch(&ds);
    let old = wait_until_cached(&dispatcher, ds.dataset_id());

    // One file gets other images (and another size and mtime).
    write_jpeg_records(source.path(), 1, 7, 9, (320, 240));
    let expected = local(&pipeline);
    let watch = OpenWatch::new(source.path());
    assert_eq!(
        read_epoch(&ds),
        expected,
        "the new data, not the old cache's"
    );
    assert!(
        !watch.opened().is_empty(),
        "the source files were not read again"
    );
    assert!(
        !Path::new(&old.path).exists(),
        "the old cache {} is still there",
        old.path
    );
    let now = row(&dispatcher, ds.dataset_id()).unwrap();
    assert_eq!(now.jobs_served, 0, "{now:?}");
    // The new files get a cache of their own, under another name.
    let new = wait_until_cached(&dispatcher, ds.dataset_id());
    assert_ne!(new.path, old.path);
    assert_eq!(read_epoch(&ds), expected);
}

#[test]
fn a_restarted_dispatcher_keeps_serving_from_the_cache() {
    let source = tempfile::tempdir().unwrap();
    let work_dir = tempfile::tempdir().unwrap();
    let files = write_jpeg_records(source.path(), 2, 6, 1, (320, 240));
    let pipeline = decode_resize(&files);
    let expected = local(&pipeline);
    // Autocache for every job, in <work_dir>/autocache.
    let config = |port| DispatcherConfig {
        autocache: true,
        ..common::fault_tolerant(&work_dir.path().display().to_string(), port)
    };
    let (first, workers) = cluster_with(config(0), 1);
    let port = first.port();
    let ds = distribute(ProcessingMode::DistributedEpoch, &first.target())
        .apply(&pipeline)
        .unwrap();
    read_epoch(&ds);
    let cached = wait_until_cached(&first, ds.dataset_id());
    assert!(
        cached
            .path
            .starts_with(&work_dir.path().join("autocache").display().to_string()),
        "{cached:?}"
    );
    drop(ds);
    drop(workers);
    drop(first);

    let second = DispatchServer::new(config(port)).unwrap();
    let _workers = start_workers(&second, 1);
    let ds = distribute(ProcessingMode::DistributedEpoch, &second.target())
        .apply(&pipeline)
        .unwrap();
    let watch = OpenWatch::new(source.path());
    assert_eq!(read_epoch(&ds), expected);
    let opened = watch.opened();
    assert!(
        opened.is_empty(),
        "after the restart the read opened source files {opened:?}"
    );
    let served = row(&second, ds.dataset_id()).unwrap();
    assert_eq!((served.state.as_str(), served.jobs_served), ("cached", 1));
}

#[test]
fn deterministic_reads_are_never_autocached_and_the_status_says_so() {
    let cache = tempfile::tempdir().unwrap();
    // Autocache for every job: a deterministic read is still left alone.
    let (dispatcher, _workers) = cluster_with(
        DispatcherConfig {
            autocache: true,
            autocache_dir: Some(cache.path().display().to_string()),
            ..Default::default()
        },
        1,
    );
    let source = tempfile::tempdir().unwrap();
    let files = write_jpeg_records(source.path(), 2, 4, 1, (64, 48));
    let pipeline = decode_resize(&files);
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .deterministic(tfdata::Deterministic::default())
        .apply(&pipeline)
        .unwrap();
    assert_eq!(read_epoch(&ds), local(&pipeline));
    let r = row(&dispatcher, ds.dataset_id()).unwrap();
    assert_eq!(r.state, "not cached", "{r:?}");
    assert!(r.reason.contains("deterministic reads"), "{r:?}");
    assert!(files_under(cache.path()).is_empty());

    // Asking for both is refused by the client, in words.
    let err = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .deterministic(tfdata::Deterministic::default())
        .autocache(true)
        .apply(&pipeline)
        .err()
        .unwrap();
    assert!(err.to_string().contains("never autocached"), "{err}");
}

#[test]
fn parallel_epochs_jobs_read_the_whole_cache_on_every_worker() {
    let source = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let files = write_jpeg_records(source.path(), 2, 5, 4, (320, 240));
    let (dispatcher, _workers) = cluster(cache.path(), 2);
    let pipeline = decode_resize(&files);
    // Every worker produces the whole dataset: each element twice.
    let twice: BTreeMap<Vec<u8>, usize> = local(&pipeline)
        .into_iter()
        .map(|(k, n)| (k, 2 * n))
        .collect();
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .autocache(true)
        .apply(&pipeline)
        .unwrap();
    assert_eq!(read_epoch(&ds), twice);
    wait_until_cached(&dispatcher, ds.dataset_id());
    let watch = OpenWatch::new(source.path());
    assert_eq!(read_epoch(&ds), twice);
    let opened = watch.opened();
    assert!(opened.is_empty(), "opened {opened:?}");
}
