//! A fault-tolerant dispatcher whose work_dir is an `s3://` URL, on a real
//! S3-compatible server (moto, see the io tests' harness): it journals to
//! the bucket, a worker reads the dataset from it through `TaskDef.path`,
//! and a new dispatcher on the same work_dir recovers the state while the
//! read carries on.
//!
//! The dispatcher and the worker find the server through the io layer's
//! process-wide object-store client ([`set_global`]), exactly where they
//! would find one configured from the environment in production. That is
//! process-global, so this binary holds this one test and nothing else.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

#[path = "../../tfdata-dataset/tests/io_object_store_moto/mod.rs"]
mod moto;

use moto::Moto;
use tfdata::{Dataset, DispatchServer, DispatcherConfig, ProcessingMode, distribute};
use tfdata_core::DatasetId;
use tfdata_dataset::io::object_store::set_global;

const WORK_DIR: &str = "s3://tfdata-ft/service/dispatcher";

fn fault_tolerant(port: u16) -> DispatcherConfig {
    common::fault_tolerant(WORK_DIR, port)
}

#[test]
fn a_dispatcher_on_an_s3_work_dir_recovers_and_the_read_completes() {
    let Some(moto) = Moto::start() else {
        return;
    };
    moto.create_bucket("tfdata-ft");
    set_global(moto.file_system());

    let first = DispatchServer::new(fault_tolerant(0)).unwrap();
    let port = first.port();
    let (_worker, it, mut values) = common::read_in_progress(&first);

    let before = first.state();
    let dataset_ids: Vec<DatasetId> = before.datasets().map(|d| d.id.clone()).collect();
    let job_ids: Vec<_> = before.jobs().map(|j| j.id).collect();
    assert_eq!(dataset_ids, [DatasetId("1000".into())]);
    assert_eq!(job_ids.len(), 1);
    assert_eq!(before.workers().len(), 1);
    // The dataset is an object the worker could read through TaskDef.path,
    // and the journal is a run of segment objects.
    let dataset_url = format!("{WORK_DIR}/datasets/1000");
    assert!(tfdata_dataset::io::exists(&dataset_url).unwrap());
    let journal_url = format!("{WORK_DIR}/tf_data_dispatcher_journal");
    let journal = tfdata_dataset::io::list(&journal_url).unwrap();
    assert!(
        !journal.is_empty() && journal.iter().all(|n| n.starts_with("journal_0_")),
        "{journal:?}"
    );
    drop(first);

    let second = DispatchServer::new(fault_tolerant(port)).unwrap();
    let after = second.state();
    assert_eq!(
        after, before,
        "replaying the journal rebuilds the same state"
    );
    assert_eq!(
        after.datasets().map(|d| d.id.clone()).collect::<Vec<_>>(),
        dataset_ids
    );
    assert_eq!(after.jobs().map(|j| j.id).collect::<Vec<_>>(), job_ids);

    values.extend(it.map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap()));
    assert_eq!(values, (0..100).collect::<Vec<_>>());

    // The restart compacted the journal (`snapshot_<m>`); a new registration
    // gets an id after the recovered ones (none is reused).
    let journal = tfdata_dataset::io::list(&journal_url).unwrap();
    assert!(
        journal.iter().any(|n| n.starts_with("snapshot_")),
        "{journal:?}"
    );
    let again = distribute(ProcessingMode::ParallelEpochs, &second.target())
        .apply(&Dataset::range(5))
        .unwrap();
    assert_eq!(again.iter().unwrap().count(), 5);
    let ids: Vec<DatasetId> = second.state().datasets().map(|d| d.id.clone()).collect();
    assert!(ids.contains(&DatasetId("1000".into())), "{ids:?}");
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(tfdata_dataset::io::exists(&format!("{WORK_DIR}/datasets/1001")).unwrap());
}
