//! Autocache in the service (issue 36; docs/operations.md, "Autocache"):
//! in-process clusters on real sockets, real JPEG files in TFRecords, the
//! dispatcher's status over real gRPC and HTTP. Each test fails without the
//! feature: a second epoch opens the source files again, a random pipeline
//! gets a cache, an old cache survives a change of its files.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::Path;

use tfdata::{Dataset, DispatchServer, DispatcherConfig, ProcessingMode, distribute};
use tfdata_dataset::attrs::Attr;

mod autocache_support;
mod common;
use autocache_support::*;
use common::wait_for;

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
