//! Tests of transactions and group commit against a journal on an object
//! store whose `PUT`s the test can hold back or fail.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tfdata_core::{Error, IterationId, Result};
use tfdata_dataset::io::FileSystem;
use tfdata_proto::data as wire;

use super::Dispatcher;
use super::tests::{ManualClock, iteration_of_range};
use crate::config::DispatcherConfig;
use crate::persistence::journal::JOURNAL_DIR;
use crate::persistence::work_dir::WorkDir;

const URL: &str = "s3://bucket/dispatcher";

/// An in-memory object store: `PUT`s (a writer's flush) can be held at a
/// gate or made to fail, and are counted.
#[derive(Default)]
struct TestStore {
    objects: Mutex<HashMap<String, Bytes>>,
    gate_closed: Mutex<bool>,
    gate: Condvar,
    fail_puts: AtomicBool,
    journal_puts: AtomicUsize,
}

impl TestStore {
    fn close_gate(&self) {
        *self.gate_closed.lock().unwrap() = true;
    }

    fn open_gate(&self) {
        *self.gate_closed.lock().unwrap() = false;
        self.gate.notify_all();
    }

    fn put(&self, path: &str, data: Vec<u8>) -> std::io::Result<()> {
        let mut closed = self.gate_closed.lock().unwrap();
        while *closed {
            closed = self.gate.wait(closed).unwrap();
        }
        drop(closed);
        if self.fail_puts.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("injected PUT failure"));
        }
        if path.contains(&format!("{JOURNAL_DIR}/journal_")) {
            self.journal_puts.fetch_add(1, Ordering::SeqCst);
        }
        self.objects
            .lock()
            .unwrap()
            .insert(path.to_string(), data.into());
        Ok(())
    }
}

struct Upload {
    store: Arc<TestStore>,
    path: String,
    data: Vec<u8>,
}

impl Write for Upload {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.data.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.store.put(&self.path, std::mem::take(&mut self.data))
    }
}

/// The file system the dispatcher sees.
struct TestFs(Arc<TestStore>);

impl FileSystem for TestFs {
    fn open(&self, path: &str) -> Result<Box<dyn Read + Send>> {
        let data = self.read_all(path)?;
        Ok(Box::new(std::io::Cursor::new(data)))
    }
    fn read_all(&self, path: &str) -> Result<Bytes> {
        self.0
            .objects
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .ok_or_else(|| Error::not_found("file", path))
    }
    fn glob(&self, _pattern: &str) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
    fn exists(&self, path: &str) -> Result<bool> {
        Ok(self.0.objects.lock().unwrap().contains_key(path))
    }
    fn file_size(&self, path: &str) -> Result<u64> {
        Ok(self.read_all(path)?.len() as u64)
    }
    fn create(&self, path: &str) -> Result<Box<dyn Write + Send>> {
        Ok(Box::new(Upload {
            store: Arc::clone(&self.0),
            path: path.to_string(),
            data: Vec::new(),
        }))
    }
    fn list(&self, dir: &str) -> Result<Vec<String>> {
        let prefix = format!("{}/", dir.trim_end_matches('/'));
        let mut names: Vec<String> = self
            .0
            .objects
            .lock()
            .unwrap()
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .filter(|rest| !rest.contains('/'))
            .map(str::to_string)
            .collect();
        names.sort();
        Ok(names)
    }
    fn delete(&self, path: &str) -> Result<()> {
        self.0.objects.lock().unwrap().remove(path);
        Ok(())
    }
    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let mut objects = self.0.objects.lock().unwrap();
        let data = objects
            .remove(from)
            .ok_or_else(|| Error::not_found("file", from))?;
        objects.insert(to.to_string(), data);
        Ok(())
    }
}

fn dispatcher(store: &Arc<TestStore>) -> Dispatcher {
    let config = DispatcherConfig {
        work_dir: Some(URL.into()),
        fault_tolerant_mode: true,
        ..Default::default()
    };
    let fs: Arc<dyn FileSystem> = Arc::new(TestFs(Arc::clone(store)));
    let work_dir = WorkDir::object_store(URL, fs).unwrap();
    let clock = Arc::new(ManualClock(Default::default()));
    Dispatcher::with_work_dir(config, clock, Some(work_dir)).unwrap()
}

fn get_split(iteration: i64) -> wire::GetSplitRequest {
    wire::GetSplitRequest {
        iteration_id: iteration,
        repetition: 0,
        split_provider_index: 0,
        ..Default::default()
    }
}

async fn splits_applied(d: &Dispatcher, iteration: i64) -> i64 {
    d.state_copy()
        .await
        .iteration(IterationId(iteration))
        .map_or(0, |it| it.split_indices[0])
}

/// RPCs committing while the journal is busy share its next write: 32
/// concurrent `GetSplit`s take at most two `PUT`s (the one in flight and
/// one for the rest), each gets its own split, and a restart replays them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_rpcs_share_one_journal_write() {
    let store = Arc::new(TestStore::default());
    let d = Arc::new(dispatcher(&store));
    iteration_of_range(&d, 100, 1).await;
    let iteration = IterationId::FIRST;
    let puts_before = store.journal_puts.load(Ordering::SeqCst);
    store.close_gate();
    let calls: Vec<_> = (0..32)
        .map(|_| {
            let d = Arc::clone(&d);
            tokio::spawn(async move { d.get_split_wire(get_split(iteration)).await })
        })
        .collect();
    // All 32 have applied their split (in memory) while the first PUT waits.
    for _ in 0..500 {
        if splits_applied(&d, iteration).await == 32 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(splits_applied(&d, iteration).await, 32);
    // None of them was answered before its split was durable.
    assert!(calls.iter().all(|c| !c.is_finished()));
    store.open_gate();
    let mut values = Vec::new();
    for call in calls {
        let split = call.await.unwrap().unwrap().split.unwrap();
        let tensor = tfdata_core::element::tensor_from_proto(&split).unwrap();
        values.push(tensor.to_scalar::<i64>().unwrap());
    }
    values.sort();
    assert_eq!(values, (0..32).collect::<Vec<_>>());
    let puts = store.journal_puts.load(Ordering::SeqCst) - puts_before;
    assert!(
        (1..=2).contains(&puts),
        "32 commits took {puts} journal writes"
    );
    let live = d.state_copy().await;
    drop(d);
    assert_eq!(dispatcher(&store).state_copy().await, live);
}

/// After a failed journal write nothing unjournaled is handed out: the RPC
/// whose write failed errs, later changes are refused, reads that would
/// see the unwritten split err, and a restart recovers the journaled state.
#[tokio::test]
async fn a_failed_journal_write_hands_out_nothing_unjournaled() {
    let store = Arc::new(TestStore::default());
    let d = dispatcher(&store);
    let client = iteration_of_range(&d, 100, 1).await;
    let iteration = IterationId::FIRST;
    d.get_split_wire(get_split(iteration)).await.unwrap();
    let journaled = d.state_copy().await;

    store.fail_puts.store(true, Ordering::SeqCst);
    let err = d.get_split_wire(get_split(iteration)).await.unwrap_err();
    assert!(err.to_string().contains("journal write failed"), "{err}");
    store.fail_puts.store(false, Ordering::SeqCst);
    // Memory is ahead of the journal now: nothing may be answered from it.
    let err = d.get_split_wire(get_split(iteration)).await.unwrap_err();
    assert!(err.to_string().contains("journal write failed"), "{err}");
    let heartbeat = d
        .client_heartbeat(wire::ClientHeartbeatRequest {
            iteration_client_id: client,
            ..Default::default()
        })
        .await;
    assert!(heartbeat.is_err(), "{heartbeat:?}");
    assert!(d.get_workers().await.is_err());
    drop(d);
    // The restart sees exactly what was journaled, and goes on from there.
    let restarted = dispatcher(&store);
    assert_eq!(restarted.state_copy().await, journaled);
    let split = restarted
        .get_split_wire(get_split(iteration))
        .await
        .unwrap();
    let value = tfdata_core::element::tensor_from_proto(&split.split.unwrap())
        .unwrap()
        .to_scalar::<i64>()
        .unwrap();
    assert_eq!(
        value, 1,
        "the split lost with the failed write is handed out again"
    );
}

/// Heartbeats do not queue behind a split's journal write (no heartbeat
/// answer reflects a split handout), but still wait for a group that
/// changes what they answer: a reader never sees a task that is not durable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_wait_only_for_the_writes_they_answer_from() {
    let store = Arc::new(TestStore::default());
    let d = Arc::new(dispatcher(&store));
    let client = iteration_of_range(&d, 100, 1).await;
    let iteration = IterationId::FIRST;
    let heartbeat = wire::ClientHeartbeatRequest {
        iteration_client_id: client,
        ..Default::default()
    };
    store.close_gate();
    let split = {
        let d = Arc::clone(&d);
        tokio::spawn(async move { d.get_split_wire(get_split(iteration)).await })
    };
    for _ in 0..500 {
        if splits_applied(&d, iteration).await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(splits_applied(&d, iteration).await, 1);
    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        d.client_heartbeat(heartbeat.clone()),
    )
    .await
    .expect("a reader's heartbeat does not wait for the split's write")
    .unwrap();
    assert!(answer.task_info.is_empty());
    assert!(!split.is_finished(), "the split waits for its own write");

    // A worker registers: its task is in memory, not yet durable.
    let registration = {
        let d = Arc::clone(&d);
        tokio::spawn(async move {
            d.worker_heartbeat(wire::WorkerHeartbeatRequest {
                worker_address: "w:1".into(),
                tfdata_runs_pipelines: true,
                ..Default::default()
            })
            .await
        })
    };
    for _ in 0..500 {
        if d.state_copy().await.worker("w:1").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let reader = {
        let d = Arc::clone(&d);
        tokio::spawn(async move { d.client_heartbeat(heartbeat).await })
    };
    // Nothing to wait for but time: the reader must still be waiting.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !reader.is_finished() && !registration.is_finished(),
        "an answer listing the new task waits until it is durable"
    );
    store.open_gate();
    split.await.unwrap().unwrap();
    assert_eq!(registration.await.unwrap().unwrap().new_tasks.len(), 1);
    assert_eq!(reader.await.unwrap().unwrap().task_info.len(), 1);
}
