//! Autocache with its caches on an object store (`s3://`, a real
//! S3-compatible server: moto, see the io tests' harness): the profile's
//! scratch chunk, the cache's snapshot, its `DONE` check and the read of
//! epoch 2 all go through the io layer's object-store client. The
//! dispatcher and the workers reach the server through the process-wide
//! client ([`set_global`]), so this binary holds this one test.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod autocache_support;
mod common;

#[path = "../../tfdata-dataset/tests/io_object_store_moto/mod.rs"]
mod moto;

use moto::Moto;
use tfdata::{DispatcherConfig, ProcessingMode, distribute};
use tfdata_dataset::io::object_store::set_global;

use autocache_support::*;

#[test]
fn caches_on_s3_serve_epoch_two_without_the_source_files() {
    let Some(moto) = Moto::start() else {
        return;
    };
    moto.create_bucket("caches");
    set_global(moto.file_system());
    let source = tempfile::tempdir().unwrap();
    // Large enough images that computing an element costs well over
    // reading it back from the store (a request's latency is spread over
    // the profile's sample).
    let files = write_jpeg_records(source.path(), 4, 12, 5, (800, 600));
    let (dispatcher, _workers) = cluster_with(
        DispatcherConfig {
            autocache_dir: Some("s3://caches/auto".into()),
            ..Default::default()
        },
        2,
    );
    let pipeline = decode_resize(&files);
    let expected = local(&pipeline);
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .autocache(true)
        .apply(&pipeline)
        .unwrap();
    assert_eq!(read_epoch(&ds), expected);
    let cached = wait_until_cached(&dispatcher, ds.dataset_id());
    assert!(cached.path.starts_with("s3://caches/auto/"), "{cached:?}");
    assert!(
        tfdata_dataset::io::exists(&format!("{}/DONE", cached.path)).unwrap(),
        "{cached:?}"
    );

    let watch = OpenWatch::new(source.path());
    assert_eq!(read_epoch(&ds), expected);
    let opened = watch.opened();
    assert!(opened.is_empty(), "epoch 2 opened {opened:?}");
    let served = row(&dispatcher, ds.dataset_id()).unwrap();
    assert_eq!((served.state.as_str(), served.jobs_served), ("cached", 1));
}
