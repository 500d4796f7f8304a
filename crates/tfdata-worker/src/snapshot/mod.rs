//! Distributed-snapshot stream writers (`distributed_save`, spec §8.2):
//!
//! * [`SnapshotWriters`]: one writer per stream the dispatcher assigns in
//!   heartbeat responses (`snapshot_tasks`), each on its own thread;
//!   writers no longer listed are cancelled; their progress goes into
//!   heartbeats and `GetSnapshotTaskProgresses`;
//! * [`writer`]: a stream's writer: restart from its committed chunks,
//!   chunk files, commits, `DONE` / `ERROR`;
//! * `write_ahead`: the bounded queue between a writer's pipeline thread and
//!   its chunk-writing thread;
//! * [`splits`]: the stream's split providers (split files, then
//!   `GetSnapshotSplit`, a few requests in flight, answers in order);
//! * [`split_source`]: where splits come from after the files: the
//!   dispatcher's `GetSnapshotSplit`, asked now or started ahead;
//! * [`split_files`]: the split files on disk: one source's found by local
//!   index, and a file's split read;
//! * [`files`]: the stream's bookkeeping on disk.
//!
//! Module dependencies point one way: `mod → writer → {splits → {split_files,
//! split_source}, files, write_ahead}` (and `mod → split_source`).

pub mod files;
pub mod split_files;
pub mod split_source;
pub mod splits;
mod write_ahead;
pub mod writer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tfdata_client::DispatcherClient;
use tfdata_core::{Error, Result};
use tfdata_dataset::io::fs::FileSystem;
use tfdata_dataset::snapshot::layout::SnapshotCompression;
use tfdata_proto::data as wire;
use tfdata_proto::tensorflow::StatusProto;
use tfdata_rpc::CancellationToken;

use self::split_source::{DispatcherSplits, SplitSource};
use self::writer::{Outcome, StreamParams, StreamWriter};

/// A stream: (snapshot path, stream index).
pub type StreamKey = (String, i64);

/// What a writer reports (TensorFlow's `SnapshotStreamWriter::Completed`).
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    Running,
    /// `DONE` is written: reported as `completed`.
    Done,
    /// Failed: reported as `status`.
    Failed(StatusProto),
}

/// How writers reach the dispatcher and the files (tests swap both).
pub trait WriterEnv: Send + Sync {
    fn file_system(&self, base_path: &str) -> Result<Arc<dyn FileSystem>>;
    /// The dispatcher's splits for `task`; calls give up when `cancel` fires.
    fn split_source(
        &self,
        task: &wire::SnapshotTaskDef,
        cancel: &CancellationToken,
    ) -> Result<Arc<dyn SplitSource>>;
}

/// The worker's writers reach the dispatcher through its client, on the
/// worker's runtime, and files through the io registry.
pub struct DispatcherEnv {
    pub dispatcher: DispatcherClient,
    pub runtime: tokio::runtime::Handle,
    pub worker_address: String,
    pub timeout: Duration,
}

impl WriterEnv for DispatcherEnv {
    fn file_system(&self, base_path: &str) -> Result<Arc<dyn FileSystem>> {
        tfdata_dataset::io::registry::file_system(base_path)
    }

    fn split_source(
        &self,
        task: &wire::SnapshotTaskDef,
        cancel: &CancellationToken,
    ) -> Result<Arc<dyn SplitSource>> {
        Ok(Arc::new(DispatcherSplits {
            dispatcher: self.dispatcher.clone(),
            runtime: self.runtime.clone(),
            worker_address: self.worker_address.clone(),
            base_path: task.base_path.clone(),
            stream_index: task.stream_index,
            timeout: self.timeout,
            cancel: cancel.clone(),
        }))
    }
}

struct Running {
    cancel: CancellationToken,
    progress: Arc<Mutex<Progress>>,
    thread: JoinHandle<()>,
}

/// Sizes and schedule of the chunks every writer makes, and where their
/// commits are counted.
#[derive(Debug, Clone)]
pub struct ChunkPolicy {
    pub max_chunk_bytes: u64,
    pub commit_interval: Option<Duration>,
    pub commits: crate::metrics::SnapshotCommits,
}

/// The worker's stream writers.
pub struct SnapshotWriters {
    policy: ChunkPolicy,
    shutdown: CancellationToken,
    writers: Mutex<HashMap<StreamKey, Running>>,
    /// Cancelled writers still running: a writer started again for the
    /// same stream waits for its predecessor, so two never share a stream.
    stopping: Mutex<HashMap<StreamKey, JoinHandle<()>>>,
    /// Notified when a writer ends (done or failed): news the worker's
    /// next heartbeat carries at once, not at its next interval.
    ended: Arc<tokio::sync::Notify>,
}

impl SnapshotWriters {
    pub fn new(policy: ChunkPolicy, shutdown: CancellationToken) -> Self {
        SnapshotWriters {
            policy,
            shutdown,
            writers: Mutex::new(HashMap::new()),
            stopping: Mutex::new(HashMap::new()),
            ended: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// Notified (one permit kept) when a writer is done or failed.
    pub fn writer_ended(&self) -> &tokio::sync::Notify {
        &self.ended
    }

    /// Makes the running writers the `assigned` ones: starts the new, cancels
    /// those not listed (TensorFlow's `UpdateSnapshotWriters`). Cheap: the
    /// writers read their files on their own threads.
    pub fn update(&self, assigned: &[wire::SnapshotTaskDef], env: &Arc<dyn WriterEnv>) {
        let keys: Vec<StreamKey> = assigned
            .iter()
            .map(|t| (t.base_path.clone(), t.stream_index))
            .collect();
        let mut writers = lock(&self.writers);
        let gone: Vec<StreamKey> = writers
            .keys()
            .filter(|k| !keys.contains(k))
            .cloned()
            .collect();
        for key in gone {
            if let Some(w) = writers.remove(&key) {
                tracing::info!(snapshot = %key.0, stream = key.1, "snapshot stream no longer assigned; stopping its writer");
                w.cancel.cancel();
                let mut stopping = lock(&self.stopping);
                stopping.retain(|_, t| !t.is_finished());
                stopping.insert(key, w.thread);
            }
        }
        for (task, key) in assigned.iter().zip(keys) {
            if writers.contains_key(&key) {
                continue;
            }
            let predecessor = lock(&self.stopping).remove(&key);
            let running = self.start(task.clone(), predecessor, Arc::clone(env));
            writers.insert(key, running);
        }
    }

    fn start(
        &self,
        task: wire::SnapshotTaskDef,
        predecessor: Option<JoinHandle<()>>,
        env: Arc<dyn WriterEnv>,
    ) -> Running {
        let cancel = self.shutdown.child_token();
        let progress = Arc::new(Mutex::new(Progress::Running));
        let (thread_cancel, thread_progress) = (cancel.clone(), Arc::clone(&progress));
        let policy = self.policy.clone();
        let ended = Arc::clone(&self.ended);
        // The writer's logs carry the snapshot and the stream.
        let span = tracing::info_span!(
            "snapshot_stream",
            snapshot = %task.base_path,
            stream = task.stream_index
        );
        let spawned = std::thread::Builder::new()
            .name(format!("snapshot-stream-{}", task.stream_index))
            .spawn(move || {
                let _entered = span.enter();
                if let Some(p) = predecessor {
                    let _ = p.join();
                }
                let outcome = run_with_restarts(&task, policy, &*env, &thread_cancel);
                let mut progress = lock(&thread_progress);
                match outcome {
                    Outcome::Done => *progress = Progress::Done,
                    Outcome::Failed(e) | Outcome::Transient(e) => {
                        *progress = Progress::Failed(status_proto(&e))
                    }
                    Outcome::Cancelled => return,
                }
                drop(progress);
                ended.notify_one();
            });
        match spawned {
            Ok(thread) => Running {
                cancel,
                progress,
                thread,
            },
            Err(e) => {
                let e = Error::Internal(format!("cannot start a snapshot writer thread: {e}"));
                *lock(&progress) = Progress::Failed(status_proto(&e));
                self.ended.notify_one();
                Running {
                    cancel,
                    progress,
                    // A finished stand-in, so the table stays uniform.
                    thread: std::thread::spawn(|| {}),
                }
            }
        }
    }

    /// One entry per writer, as heartbeats and `GetSnapshotTaskProgresses`
    /// report them: `completed` once `DONE` is written, `status` once the
    /// writer failed.
    pub fn progress(&self) -> Vec<wire::SnapshotTaskProgress> {
        lock(&self.writers)
            .iter()
            .map(|((base_path, stream_index), w)| {
                let progress = lock(&w.progress).clone();
                wire::SnapshotTaskProgress {
                    snapshot_task: Some(wire::SnapshotTaskDef {
                        base_path: base_path.clone(),
                        stream_index: *stream_index,
                        ..Default::default()
                    }),
                    completed: progress == Progress::Done,
                    status: match progress {
                        Progress::Failed(status) => Some(status),
                        _ => None,
                    },
                }
            })
            .collect()
    }

    /// The writers' progress, by stream (tests and tools).
    pub fn states(&self) -> HashMap<StreamKey, Progress> {
        lock(&self.writers)
            .iter()
            .map(|(k, w)| (k.clone(), lock(&w.progress).clone()))
            .collect()
    }
}

/// Attempts a stream writer makes before a transient failure becomes the
/// stream's error.
pub const MAX_ATTEMPTS: u32 = 6;
/// Pause after the first transient failure; it doubles up to [`MAX_RESTART_PAUSE`].
pub const FIRST_RESTART_PAUSE: Duration = Duration::from_secs(1);
pub const MAX_RESTART_PAUSE: Duration = Duration::from_secs(30);

/// Runs a stream's writer; a transient failure restarts it (from its
/// committed chunks) after a pause, at most [`MAX_ATTEMPTS`] times in all.
fn run_with_restarts(
    task: &wire::SnapshotTaskDef,
    policy: ChunkPolicy,
    env: &dyn WriterEnv,
    cancel: &CancellationToken,
) -> Outcome {
    let mut pause = FIRST_RESTART_PAUSE;
    for attempt in 1..=MAX_ATTEMPTS {
        match run_writer(
            task,
            policy.clone(),
            env,
            cancel.clone(),
            attempt == MAX_ATTEMPTS,
        ) {
            Outcome::Transient(_) => {
                // Sleeps in steps so a cancellation is seen at once.
                let until = std::time::Instant::now() + pause;
                while std::time::Instant::now() < until {
                    if cancel.is_cancelled() {
                        return Outcome::Cancelled;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                pause = (pause * 2).min(MAX_RESTART_PAUSE);
            }
            outcome => return outcome,
        }
    }
    // Not reached: the last attempt reports a transient failure as Failed.
    Outcome::Cancelled
}

/// Checks a task at the edge, then runs its writer once.
fn run_writer(
    task: &wire::SnapshotTaskDef,
    policy: ChunkPolicy,
    env: &dyn WriterEnv,
    cancel: CancellationToken,
    last: bool,
) -> Outcome {
    let prepared = (|| {
        if task.base_path.is_empty() || task.stream_index < 0 || task.num_sources < 0 {
            return Err(Error::InvalidArgument(format!(
                "invalid snapshot task: base_path {:?}, stream {}, {} sources",
                task.base_path, task.stream_index, task.num_sources
            )));
        }
        let compression = SnapshotCompression::parse(
            task.metadata
                .as_ref()
                .map_or("", |m| m.compression.as_str()),
        )?;
        Ok(StreamWriter {
            params: StreamParams {
                base_path: task.base_path.clone(),
                stream_index: task.stream_index,
                num_sources: task.num_sources,
                compression,
                max_chunk_bytes: policy.max_chunk_bytes,
                commit_interval: policy.commit_interval,
                write_ahead_bytes: writer::WRITE_AHEAD_BYTES,
            },
            fs: env.file_system(&task.base_path)?,
            splits: env.split_source(task, &cancel)?,
            cancel,
            commits: policy.commits.clone(),
        })
    })();
    match prepared {
        Ok(writer) => writer.attempt(last),
        Err(e) => {
            tracing::warn!(snapshot = %task.base_path, stream = task.stream_index, error = %e, "cannot start snapshot stream writer");
            if !task.base_path.is_empty()
                && task.stream_index >= 0
                && let Ok(fs) = env.file_system(&task.base_path)
                && let Err(write) = files::write_error(&*fs, &task.base_path, task.stream_index, &e)
            {
                tracing::warn!(snapshot = %task.base_path, error = %write, "cannot write the stream's ERROR file");
            }
            Outcome::Failed(e)
        }
    }
}

/// `err` as the `StatusProto` TensorFlow's dispatcher reads.
pub fn status_proto(err: &Error) -> StatusProto {
    StatusProto {
        code: err.code() as i32,
        message: err.to_string(),
        payload: Default::default(),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::splits::tests::FakeDispatcher;
    use super::*;
    use prost::Message;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tfdata_core::Tensor;
    use tfdata_dataset::Dataset;
    use tfdata_dataset::snapshot::layout;

    /// Splits from a fake dispatcher; the very first request blocks until
    /// its writer is cancelled (a writer stuck waiting for the dispatcher).
    struct FakeEnv {
        fake: Arc<FakeDispatcher>,
        block_first: AtomicBool,
    }

    struct Source {
        fake: Arc<FakeDispatcher>,
        block: bool,
        cancel: CancellationToken,
    }

    impl SplitSource for Source {
        fn next_split(&self, source: i64, repetition: i64) -> Result<(Option<Tensor>, i64)> {
            if self.block {
                for _ in 0..30_000 {
                    if self.cancel.is_cancelled() {
                        return Err(Error::Cancelled("cancelled".into()));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            self.fake.next_split(source, repetition)
        }
    }

    impl WriterEnv for FakeEnv {
        fn file_system(&self, base_path: &str) -> Result<Arc<dyn FileSystem>> {
            tfdata_dataset::io::registry::file_system(base_path)
        }
        fn split_source(
            &self,
            _task: &wire::SnapshotTaskDef,
            cancel: &CancellationToken,
        ) -> Result<Arc<dyn SplitSource>> {
            Ok(Arc::new(Source {
                fake: Arc::clone(&self.fake),
                block: self.block_first.swap(false, Ordering::SeqCst),
                cancel: cancel.clone(),
            }))
        }
    }

    fn task(base: &str, compression: &str) -> wire::SnapshotTaskDef {
        wire::SnapshotTaskDef {
            base_path: base.to_string(),
            stream_index: 0,
            num_sources: 1,
            metadata: Some(wire::DistributedSnapshotMetadata {
                element_spec: Default::default(),
                compression: compression.to_string(),
            }),
        }
    }

    fn wait_for(writers: &SnapshotWriters, key: &StreamKey, want: impl Fn(&Progress) -> bool) {
        for _ in 0..30_000 {
            if writers.states().get(key).is_some_and(&want) {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("writer state is {:?}", writers.states().get(key));
    }

    fn setup(n: i64, block_first: bool) -> (tempfile::TempDir, String, Arc<dyn WriterEnv>) {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap().to_string();
        std::fs::create_dir_all(layout::chunks_dir(&base)).unwrap();
        let def = wire::DatasetDef {
            graph: Default::default(),
            tfdata_pipeline: Some(
                tfdata_dataset::pipeline::to_pipeline_def(&Dataset::range(n), false).unwrap(),
            ),
        };
        std::fs::write(layout::dataset_def_file(&base), def.encode_to_vec()).unwrap();
        let env: Arc<dyn WriterEnv> = Arc::new(FakeEnv {
            fake: Arc::new(FakeDispatcher::new(&base, 0, vec![vec![(0..n).collect()]])),
            block_first: AtomicBool::new(block_first),
        });
        (dir, base, env)
    }

    fn policy() -> ChunkPolicy {
        ChunkPolicy {
            max_chunk_bytes: 1 << 20,
            commit_interval: None,
            commits: Default::default(),
        }
    }

    #[test]
    fn assigned_streams_are_written_and_reported() {
        let (_dir, base, env) = setup(20, false);
        let writers = SnapshotWriters::new(policy(), CancellationToken::new());
        let key = (base.clone(), 0);
        writers.update(&[task(&base, "SNAPPY")], &env);
        // Listed again while running: still one writer.
        writers.update(&[task(&base, "SNAPPY")], &env);
        wait_for(&writers, &key, |p| *p == Progress::Done);
        let progress = writers.progress();
        assert_eq!(progress.len(), 1);
        assert!(progress[0].completed);
        assert_eq!(progress[0].status, None);
        let reported = progress[0].snapshot_task.as_ref().unwrap();
        assert_eq!(
            (reported.base_path.as_str(), reported.stream_index),
            (base.as_str(), 0)
        );
        assert_eq!(
            reported.num_sources, 0,
            "workers fill only the path and index"
        );
        // No longer listed: gone from the reports.
        writers.update(&[], &env);
        assert!(writers.progress().is_empty());
    }

    #[test]
    fn a_bad_task_is_reported_failed() {
        let (_dir, base, env) = setup(3, false);
        let writers = SnapshotWriters::new(policy(), CancellationToken::new());
        writers.update(&[task(&base, "LZ4")], &env);
        let key = (base.clone(), 0);
        wait_for(&writers, &key, |p| matches!(p, Progress::Failed(_)));
        let progress = writers.progress();
        assert!(!progress[0].completed);
        let status = progress[0].status.as_ref().unwrap();
        assert_eq!(status.code, tonic::Code::InvalidArgument as i32);
        assert!(status.message.contains("LZ4"), "{}", status.message);
        let error = std::fs::read_to_string(layout::stream_error_file(&base, 0)).unwrap();
        assert!(error.starts_with("INVALID_ARGUMENT: "), "{error}");
    }

    /// A writer cancelled while stuck, then assigned again: the new one
    /// waits for the old one to stop, and the stream ends exactly once.
    #[test]
    fn a_reassigned_stream_waits_for_its_cancelled_writer() {
        let (_dir, base, env) = setup(10, true);
        let writers = SnapshotWriters::new(policy(), CancellationToken::new());
        let key = (base.clone(), 0);
        writers.update(&[task(&base, "")], &env);
        writers.update(&[], &env);
        writers.update(&[task(&base, "")], &env);
        wait_for(&writers, &key, |p| *p == Progress::Done);
        let names = std::fs::read_dir(layout::chunks_dir(&base))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect::<Vec<_>>();
        assert_eq!(names, ["chunk_0_0_10"]);
    }

    /// A writer's end (done or failed) is news the worker's heartbeat
    /// carries at once; a cancelled writer's is not.
    #[test]
    fn a_writer_ending_wakes_the_heartbeat() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let ended = |writers: &SnapshotWriters, within: Duration| {
            runtime.block_on(async {
                tokio::time::timeout(within, writers.writer_ended().notified())
                    .await
                    .is_ok()
            })
        };
        let (_dir, base, env) = setup(20, false);
        let writers = SnapshotWriters::new(policy(), CancellationToken::new());
        writers.update(&[task(&base, "SNAPPY")], &env);
        assert!(ended(&writers, Duration::from_secs(60)), "done");
        assert_eq!(writers.states()[&(base.clone(), 0)], Progress::Done);

        let (_dir, base, env) = setup(3, false);
        let writers = SnapshotWriters::new(policy(), CancellationToken::new());
        writers.update(&[task(&base, "LZ4")], &env);
        assert!(ended(&writers, Duration::from_secs(60)), "failed");

        let (_dir, base, env) = setup(10, true);
        let writers = SnapshotWriters::new(policy(), CancellationToken::new());
        writers.update(&[task(&base, "")], &env);
        writers.update(&[], &env);
        let thread = lock(&writers.stopping).remove(&(base.clone(), 0)).unwrap();
        thread.join().unwrap();
        assert!(!ended(&writers, Duration::from_millis(100)), "cancelled");
    }

    #[test]
    fn shutdown_stops_writers_without_marking_streams() {
        let (_dir, base, env) = setup(10, true);
        let shutdown = CancellationToken::new();
        let writers = SnapshotWriters::new(policy(), shutdown.clone());
        writers.update(&[task(&base, "")], &env);
        shutdown.cancel();
        let thread = lock(&writers.writers)
            .remove(&(base.clone(), 0))
            .unwrap()
            .thread;
        thread.join().unwrap();
        assert!(!std::path::Path::new(&layout::stream_done_file(&base, 0)).exists());
        assert!(!std::path::Path::new(&layout::stream_error_file(&base, 0)).exists());
    }
}
