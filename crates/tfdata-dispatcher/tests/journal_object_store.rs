//! The journal and dataset store on an object-store work_dir, against a real
//! S3-compatible server (moto, started per test by the io tests' harness).
//!
//! Each test hands its [`WorkDir`] a file system built with the server's
//! endpoint and credentials, so nothing process-wide (environment or the io
//! layer's global client) is touched and the tests can share a process.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

#[path = "../../tfdata-dataset/tests/io_object_store_moto/mod.rs"]
mod moto;

use std::io::Write;
use std::sync::Arc;

use moto::Moto;
use tfdata_core::{DatasetId, Error};
use tfdata_dataset::io::FileSystem;
use tfdata_dispatcher::persistence::journal::{self, JOURNAL_DIR};
use tfdata_dispatcher::persistence::store::DatasetStore;
use tfdata_dispatcher::persistence::work_dir::WorkDir;
use tfdata_proto::data::{DatasetDef, RegisterDatasetUpdate, Update, update::UpdateType};
use tfdata_proto::tfdata::compaction::CompactedState;

fn dataset(id: &str) -> Update {
    Update {
        update_type: Some(UpdateType::RegisterDataset(RegisterDatasetUpdate {
            dataset_id: id.into(),
            ..Default::default()
        })),
    }
}

/// A server with `bucket`, the file system pointing at it, and the work_dir
/// `s3://<bucket>/dispatcher`; `None` when moto is missing (skipped).
fn setup(bucket: &str) -> Option<(Moto, Arc<dyn FileSystem>, WorkDir)> {
    let moto = Moto::start()?;
    moto.create_bucket(bucket);
    let fs: Arc<dyn FileSystem> = Arc::new(moto.file_system());
    let work_dir =
        WorkDir::object_store(&format!("s3://{bucket}/dispatcher/"), fs.clone()).unwrap();
    Some((moto, fs, work_dir))
}

fn journal_url(bucket: &str) -> String {
    format!("s3://{bucket}/dispatcher/{JOURNAL_DIR}")
}

fn put(fs: &dyn FileSystem, url: &str, data: &[u8]) {
    let mut w = fs.create(url).unwrap();
    w.write_all(data).unwrap();
    w.flush().unwrap();
}

#[test]
fn every_update_is_one_object_and_a_restart_replays_them_in_order() {
    let Some((_moto, fs, work_dir)) = setup("replay") else {
        return;
    };
    let r = journal::open(&work_dir).unwrap();
    assert!(r.updates.is_empty() && r.compaction.is_none());
    // Nothing is written until the first update.
    assert!(fs.list(&journal_url("replay")).unwrap().is_empty());
    // Enough updates that seq 10 sorts before seq 2 as text.
    let written: Vec<Update> = (0..12).map(|i| dataset(&format!("d{i}"))).collect();
    for (i, update) in written.iter().enumerate() {
        assert_eq!(r.writer.write(update).unwrap(), i as u64 + 1);
    }
    assert_eq!(
        r.writer.path(),
        format!("{}/journal_0_12", journal_url("replay"))
    );
    drop(r);
    let names = fs.list(&journal_url("replay")).unwrap();
    assert_eq!(names.len(), 12, "{names:?}");
    assert!(names.contains(&"journal_0_10".to_string()), "{names:?}");

    // A restart replays all of them and continues in run 1.
    let r = journal::open(&work_dir).unwrap();
    assert_eq!(r.updates, written);
    r.writer.write(&dataset("after")).unwrap();
    assert!(
        r.writer.path().ends_with("/journal_1_1"),
        "{}",
        r.writer.path()
    );
    drop(r);
    // A start that writes nothing leaves no trace; the next run is 2.
    let r = journal::open(&work_dir).unwrap();
    assert_eq!(r.updates.len(), 13);
    assert_eq!(r.updates.last(), Some(&dataset("after")));
    drop(r);
    let r = journal::open(&work_dir).unwrap();
    assert_eq!(r.updates.len(), 13);
    assert!(
        r.writer.path().ends_with("/journal_2_0"),
        "{}",
        r.writer.path()
    );
}

#[test]
fn compaction_replaces_the_history_and_deletes_it() {
    let Some((_moto, fs, work_dir)) = setup("compaction") else {
        return;
    };
    let r = journal::open(&work_dir).unwrap();
    for i in 0..3 {
        r.writer.write(&dataset(&format!("old{i}"))).unwrap();
    }
    let compacted = CompactedState {
        format_version: 1,
        next_dataset_id: 1234,
        ..Default::default()
    };
    r.writer.compact(&compacted).unwrap();
    assert_eq!(r.writer.records(), 0);
    r.writer.write(&dataset("new")).unwrap();
    r.writer.wait_for_cleanup();
    assert_eq!(
        fs.list(&journal_url("compaction")).unwrap(),
        ["journal_1_0", "snapshot_1"]
    );
    drop(r);

    let r = journal::open(&work_dir).unwrap();
    assert_eq!(r.compaction.unwrap().1.next_dataset_id, 1234);
    assert_eq!(r.updates, vec![dataset("new")]);
    // Leftovers of an interrupted cleanup are ignored by a start and
    // deleted by the next compaction.
    let journal = journal_url("compaction");
    put(
        fs.as_ref(),
        &format!("{journal}/journal_0_7"),
        b"stale, never read",
    );
    put(
        fs.as_ref(),
        &format!("{journal}/snapshot_0"),
        b"stale, never read",
    );
    let r = journal::open(&work_dir).unwrap();
    assert_eq!(r.updates, vec![dataset("new")]);
    r.writer.compact(&compacted).unwrap();
    r.writer.wait_for_cleanup();
    assert_eq!(fs.list(&journal).unwrap(), ["snapshot_3"]);
    let r = journal::open(&work_dir).unwrap();
    assert!(r.compaction.is_some() && r.updates.is_empty());
}

#[test]
fn damage_refuses_to_start_naming_the_object() {
    let Some((_moto, fs, work_dir)) = setup("damage") else {
        return;
    };
    let journal = journal_url("damage");
    let r = journal::open(&work_dir).unwrap();
    for i in 0..3 {
        r.writer.write(&dataset(&format!("d{i}"))).unwrap();
    }
    drop(r);
    let second = format!("{journal}/journal_0_1");
    let good = fs.read_all(&second).unwrap().to_vec();

    // A flipped bit: the CRC fails.
    let mut bad = good.clone();
    let last = bad.len() - 6;
    bad[last] ^= 0x40;
    put(fs.as_ref(), &second, &bad);
    let err = journal::open(&work_dir).err().unwrap();
    assert!(matches!(err, Error::DataLoss { .. }), "{err}");
    assert!(err.to_string().contains(&second), "{err}");

    // Truncated: no torn-tail leniency, PUTs are atomic.
    put(fs.as_ref(), &second, &good[..good.len() - 3]);
    let err = journal::open(&work_dir).err().unwrap();
    assert!(err.to_string().contains(&second), "{err}");
    assert!(err.to_string().contains("truncated"), "{err}");

    // Valid framing around something that is not an Update.
    let mut not_update = Vec::new();
    tfdata_core::tfrecord::write_record(&mut not_update, b"\xff\xff\xff").unwrap();
    put(fs.as_ref(), &second, &not_update);
    let err = journal::open(&work_dir).err().unwrap();
    assert!(err.to_string().contains(&second), "{err}");

    // A missing segment in the middle of a run is lost history.
    fs.delete(&second).unwrap();
    let err = journal::open(&work_dir).err().unwrap();
    assert!(matches!(err, Error::DataLoss { .. }), "{err}");
    assert!(err.to_string().contains(&second), "{err}");
    assert!(err.to_string().contains("journal_0_2"), "{err}");

    // Restored, it starts again; an unexpected object does not.
    put(fs.as_ref(), &second, &good);
    assert_eq!(journal::open(&work_dir).unwrap().updates.len(), 3);
    let stray = format!("{journal}/notes.txt");
    put(fs.as_ref(), &stray, b"x");
    let err = journal::open(&work_dir).err().unwrap();
    assert!(err.to_string().contains(&stray), "{err}");
    fs.delete(&stray).unwrap();
    // A local-layout file copied in is named as such.
    let local = format!("{journal}/journal_5");
    put(fs.as_ref(), &local, b"");
    let err = journal::open(&work_dir).err().unwrap();
    assert!(err.to_string().contains(&local), "{err}");
    assert!(err.to_string().contains("local-layout"), "{err}");
}

#[test]
fn datasets_are_objects_in_the_work_dir() {
    let Some((_moto, fs, work_dir)) = setup("datasets") else {
        return;
    };
    let store = DatasetStore::in_work_dir(&work_dir).unwrap();
    let def = DatasetDef {
        graph: bytes::Bytes::from_static(b"\x0a\x03abc"),
        tfdata_pipeline: None,
    };
    let id = DatasetId("1000".into());
    store.put(&id, &def).unwrap();
    assert_eq!(store.get(&id).unwrap(), def);
    let url = "s3://datasets/dispatcher/datasets/1000";
    assert_eq!(store.path(&id).as_deref(), Some(url));
    assert!(fs.exists(url).unwrap());

    let err = store.get(&DatasetId("1001".into())).unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { what: "dataset file", id } if id.ends_with("/1001")),
        "{err}"
    );
    assert!(store.put(&DatasetId("../x".into()), &def).is_err());
    put(
        fs.as_ref(),
        "s3://datasets/dispatcher/datasets/1002",
        b"garbage!garbage!",
    );
    let err = store.get(&DatasetId("1002".into())).unwrap_err();
    assert!(matches!(err, Error::DataLoss { .. }), "{err}");
    assert!(err.to_string().contains("datasets/1002"), "{err}");
}

/// A standby's read-ahead: a recovery takes what it read from it and
/// reads only the objects written since from the store, with the same
/// result; after a compaction it keeps only what the next start reads.
#[test]
fn a_recovery_reads_only_the_objects_written_since_the_read_ahead() {
    let Some((_moto, _fs, work_dir)) = setup("prefetch") else {
        return;
    };
    let r = journal::open(&work_dir).unwrap();
    let written: Vec<Update> = (0..20).map(|i| dataset(&format!("d{i}"))).collect();
    for update in &written[..17] {
        r.writer.write(update).unwrap();
    }
    let prefetched = journal::Prefetched::default();
    assert_eq!(prefetched.refresh(&work_dir).unwrap(), 17);
    assert_eq!(prefetched.refresh(&work_dir).unwrap(), 0, "nothing new");
    for update in &written[17..] {
        r.writer.write(update).unwrap();
    }
    let recovered = journal::open_prefetched(&work_dir, None, Some(&prefetched)).unwrap();
    assert_eq!(recovered.updates, written, "the same history");
    assert_eq!(prefetched.stats(), (17, 17), "17 from the read-ahead");

    // A compaction: the read-ahead drops the superseded objects and holds
    // the compaction and the segments after it.
    let compacted = CompactedState {
        format_version: 1,
        next_dataset_id: 77,
        ..Default::default()
    };
    recovered.writer.compact(&compacted).unwrap();
    recovered.writer.write(&dataset("after")).unwrap();
    recovered.writer.wait_for_cleanup();
    assert_eq!(
        prefetched.refresh(&work_dir).unwrap(),
        2,
        "compaction and one segment"
    );
    let again = journal::open_prefetched(&work_dir, None, Some(&prefetched)).unwrap();
    assert_eq!(again.compaction.unwrap().1.next_dataset_id, 77);
    assert_eq!(again.updates, vec![dataset("after")]);
    assert_eq!(prefetched.stats(), (19, 19));
}

/// A leader taking over closes the previous leader's run: it creates the
/// run's next segment name (empty, only if absent), and a fenced writer
/// creates its segments only if absent, so the previous leader's next
/// write fails instead of landing after the takeover. Later starts replay
/// the history with the marker in it.
#[test]
fn a_takeover_closes_the_previous_leaders_run() {
    let Some((moto, fs, work_dir)) = setup("takeover") else {
        return;
    };
    let url = "s3://takeover/dispatcher/leader_lease";
    let object_fs = moto.file_system();
    let (store, key) = object_fs.object_store(url).unwrap();
    let mut lease = tfdata_dispatcher::persistence::leader_lease::LeaderLease::object_store(
        store,
        key,
        url,
        "test:1",
        tfdata_dispatcher::persistence::leader_lease::LeaseConfig {
            duration: std::time::Duration::from_secs(60),
            renew_interval: std::time::Duration::from_secs(1),
            safety_margin: std::time::Duration::from_secs(1),
        },
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let fence = match rt.block_on(lease.tick()).unwrap() {
        tfdata_dispatcher::persistence::leader_lease::Role::Leader(fence) => fence,
        other => panic!("not the leader: {other:?}"),
    };
    // Both writers hold a valid fence: what stops the old one here is the
    // storage, as it must for a writer paused between its check and its
    // write.
    let old = journal::open_fenced(&work_dir, Some(fence.clone())).unwrap();
    for i in 0..3 {
        old.writer.write(&dataset(&format!("old{i}"))).unwrap();
    }
    let new = journal::open_fenced(&work_dir, Some(fence)).unwrap();
    assert_eq!(new.updates.len(), 3);
    let names = fs.list(&journal_url("takeover")).unwrap();
    assert!(names.contains(&"journal_0_3".to_string()), "{names:?}");
    let err = old.writer.write(&dataset("late")).unwrap_err();
    assert!(
        matches!(&err, Error::Unavailable(m) if m.contains("journal_0_3")),
        "{err}"
    );
    new.writer.write(&dataset("new")).unwrap();
    drop((old, new));
    let replayed = journal::open(&work_dir).unwrap().updates;
    let expected: Vec<Update> = ["old0", "old1", "old2", "new"]
        .iter()
        .map(|id| dataset(id))
        .collect();
    assert_eq!(replayed, expected);
}
