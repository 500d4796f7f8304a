//! One distributed snapshot being written (TensorFlow's `SnapshotManager`,
//! spec §8.1): its streams, which worker writes each, and the split
//! providers whose splits the streams share.
//!
//! Nothing here is journaled beyond the snapshot's path: like TensorFlow,
//! the dispatcher recovers a snapshot from the files under it (see
//! [`super::resume`]), so every decision a restart must see is on disk
//! before the RPC that made it is answered: a stream's `owner_worker` file
//! before its task goes out, a split's file before the split does.
//!
//! Locks: `get_split` serialises split hand-outs of this snapshot across the
//! split file's write, so indices on disk are dense and in order; `inner`
//! is held only for bookkeeping, never across I/O. [`Assignments`] is taken
//! inside `inner`, never the other way round.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use prost::Message;
use tfdata_core::{Error, Result, Tensor, tfrecord};
use tfdata_dataset::io::fs::FileSystem;
use tfdata_dataset::snapshot::{files, layout, metadata};
use tfdata_dataset::splits::SplitProvider;
use tfdata_proto::data::{
    self as wire, DistributedSnapshotMetadata, SnapshotStreamInfo, SnapshotTaskDef,
    SnapshotTaskProgress, snapshot_stream_info::State as StreamState,
};
use tfdata_proto::tensorflow::StatusProto;

use super::assignments::Assignments;

/// How far one `GetSnapshotSplit` may move a source's repetition ahead.
/// TensorFlow's workers ask for the next repetition only (the longer input
/// of a `zip`); a larger jump is a hostile request, refused rather than
/// resetting a provider that many times.
pub const MAX_REPETITION_JUMP: i64 = 16;

/// Splits counted one by one when a provider does not know its cardinality.
const MAX_COUNTED_SPLITS: u64 = 1 << 32;

#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    /// Streams are created for workers that ask.
    Active,
    /// A stream finished: the sources are out of splits, so no new streams.
    WindingDown,
    Done,
    Error(StatusProto),
}

impl Mode {
    /// A word for status displays.
    pub fn describe(&self) -> &'static str {
        match self {
            Mode::Active => "active",
            Mode::WindingDown => "winding down",
            Mode::Done => "done",
            Mode::Error(_) => "error",
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Stream {
    pub done: bool,
    /// Splits handed to this stream, per source (its next local index).
    pub assigned_per_source: Vec<i64>,
    /// Whether its writer was a tfdata worker, once known: an orphaned
    /// stream goes only to a worker of the same kind, whose writer can
    /// continue what the first one committed.
    pub owner_runs_pipelines: Option<bool>,
    /// Its directories and `owner_worker` file are written for its current
    /// writer: only then does the writer hear of it.
    pub initialized: bool,
}

pub(super) struct Source {
    pub provider: Box<dyn SplitProvider>,
    pub repetition: i64,
    pub cardinality: i64,
    /// A split taken from the provider whose file could not be written:
    /// handed out again first, so a failed write loses nothing.
    pub pending: Option<Tensor>,
}

pub(super) struct Inner {
    pub mode: Mode,
    pub metadata: DistributedSnapshotMetadata,
    pub streams: BTreeMap<i64, Stream>,
    /// Worker address → the stream it writes.
    pub assignments: HashMap<String, i64>,
    /// Streams whose worker was lost, waiting for another.
    pub orphans: BTreeSet<i64>,
    pub sources: Vec<Source>,
    pub num_assigned_splits: i64,
    pub num_total_splits: i64,
    /// The snapshot finished (`Done` or `Error`) but its `DONE` or `ERROR`
    /// file is not written yet: the heartbeat that finished it could not
    /// write it (a store outage, say). [`SnapshotManager::retry_final_file`]
    /// tries again, so the outcome reaches the files readers watch.
    pub final_file_pending: bool,
}

/// I/O a heartbeat's decision needs before it is answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Io {
    /// A stream's directories up to each source's current repetition, and
    /// its `owner_worker` file.
    InitStream {
        stream: i64,
        owner: String,
        repetitions: Vec<i64>,
    },
    WriteDone,
    WriteError(StatusProto),
}

/// What a worker's heartbeat gets from one snapshot.
#[derive(Debug, Default)]
pub struct HeartbeatOutcome {
    pub task: Option<SnapshotTaskDef>,
    pub io: Vec<Io>,
    /// The snapshot finished (done or failed) with this heartbeat.
    pub finished: bool,
    /// The worker's stream is done with this heartbeat: it may take a
    /// stream of another snapshot.
    pub stream_done: bool,
}

/// Progress figures, for status and logs.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub mode: Mode,
    pub streams: Vec<SnapshotStreamInfo>,
    pub num_assigned_splits: i64,
    pub num_total_splits: i64,
}

/// Which workers can write a snapshot's dataset: tfdata workers run tfdata
/// pipelines and the TensorFlow graphs `tfdata-graph` supports; TensorFlow
/// workers run graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runners {
    pub tfdata: bool,
    pub tensorflow: bool,
}

impl Runners {
    pub const ANY: Runners = Runners {
        tfdata: true,
        tensorflow: true,
    };

    fn admit(self, runs_pipelines: bool) -> bool {
        if runs_pipelines {
            self.tfdata
        } else {
            self.tensorflow
        }
    }
}

pub struct SnapshotManager {
    pub(super) path: String,
    runners: Runners,
    pub(super) fs: Arc<dyn FileSystem>,
    get_split: Mutex<()>,
    pub(super) inner: Mutex<Inner>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A source's splits per repetition: its cardinality, or counted.
pub(super) fn count_splits(provider: &dyn SplitProvider) -> Result<i64> {
    let known = provider.cardinality();
    if known >= 0 {
        return Ok(known);
    }
    let mut n: u64 = 0;
    while provider.get_next()?.is_some() {
        n += 1;
        if n > MAX_COUNTED_SPLITS {
            return Err(Error::InvalidArgument(format!(
                "a source of the snapshot has more than {MAX_COUNTED_SPLITS} splits"
            )));
        }
    }
    provider.reset()?;
    Ok(n as i64)
}

pub(super) fn sources_of(providers: Vec<Box<dyn SplitProvider>>) -> Result<Vec<Source>> {
    providers
        .into_iter()
        .map(|provider| {
            let cardinality = count_splits(provider.as_ref())?;
            Ok(Source {
                provider,
                repetition: 0,
                cardinality,
                pending: None,
            })
        })
        .collect()
}

impl SnapshotManager {
    /// `Snapshot`: writes the snapshot's skeleton and metadata (blocking
    /// I/O) for a dataset whose split providers the caller built.
    pub fn start(
        fs: Arc<dyn FileSystem>,
        request: &wire::SnapshotRequest,
        providers: Vec<Box<dyn SplitProvider>>,
    ) -> Result<SnapshotManager> {
        let path = request.path.clone();
        if fs.exists(&path)? {
            return Err(Error::AlreadyExists(format!(
                "tf.data snapshot at {path} already exists."
            )));
        }
        let meta = request.metadata.clone().unwrap_or_default();
        layout::SnapshotCompression::parse(&meta.compression)?;
        let sources = sources_of(providers)?;
        fs.create_dir_all(&layout::chunks_dir(&path))?;
        fs.create_dir_all(&layout::streams_dir(&path))?;
        files::write_atomically(
            fs.as_ref(),
            &layout::metadata_file(&path),
            metadata::to_text(&meta).as_bytes(),
        )?;
        files::write_atomically(
            fs.as_ref(),
            &layout::dataset_spec_file(&path),
            &meta.element_spec,
        )?;
        let def = request.dataset.clone().unwrap_or_default();
        files::write_atomically(
            fs.as_ref(),
            &layout::dataset_def_file(&path),
            &def.encode_to_vec(),
        )?;
        let num_total_splits = sources.iter().map(|s| s.cardinality).sum();
        Ok(SnapshotManager::new(
            path,
            fs,
            Inner {
                mode: Mode::Active,
                metadata: meta,
                streams: BTreeMap::new(),
                assignments: HashMap::new(),
                orphans: BTreeSet::new(),
                sources,
                num_assigned_splits: 0,
                num_total_splits,
                final_file_pending: false,
            },
        ))
    }

    pub(super) fn new(path: String, fs: Arc<dyn FileSystem>, inner: Inner) -> Self {
        SnapshotManager {
            path,
            runners: Runners::ANY,
            fs,
            get_split: Mutex::new(()),
            inner: Mutex::new(inner),
        }
    }

    /// A snapshot that could not be recovered: failed with `status`, in
    /// memory only (its files stay as they are for the next start).
    pub fn failed(path: String, status: StatusProto) -> SnapshotManager {
        SnapshotManager::new(
            path,
            // Never written through: a failed snapshot does no I/O.
            Arc::new(tfdata_dataset::io::local::LocalFileSystem),
            Inner {
                mode: Mode::Error(status),
                metadata: DistributedSnapshotMetadata::default(),
                streams: BTreeMap::new(),
                assignments: HashMap::new(),
                orphans: BTreeSet::new(),
                sources: Vec::new(),
                num_assigned_splits: 0,
                num_total_splits: 0,
                final_file_pending: false,
            },
        )
    }

    /// The workers that may write this snapshot's streams.
    pub fn with_runners(mut self, runners: Runners) -> Self {
        self.runners = runners;
        self
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn mode(&self) -> Mode {
        lock(&self.inner).mode.clone()
    }

    pub fn is_finished(&self) -> bool {
        matches!(self.mode(), Mode::Done | Mode::Error(_))
    }

    /// A worker's heartbeat, as this snapshot sees it: its progress report
    /// (if it writes a stream here) and the stream it should write.
    pub fn worker_heartbeat(
        &self,
        worker: &str,
        runs_pipelines: bool,
        progress: Option<&SnapshotTaskProgress>,
        assignments: &Mutex<Assignments>,
    ) -> Result<HeartbeatOutcome> {
        let mut inner = lock(&self.inner);
        let mut out = HeartbeatOutcome::default();
        if matches!(inner.mode, Mode::Done | Mode::Error(_)) {
            // An empty answer tells the worker to cancel its writer.
            return Ok(out);
        }
        if progress.is_some_and(|p| p.completed) && inner.mode == Mode::Active {
            inner.mode = Mode::WindingDown;
        }
        let mut assigned = inner.assignments.get(worker).copied();
        if let Some(stream) = assigned
            && let Some(s) = inner.streams.get_mut(&stream)
        {
            s.owner_runs_pipelines = Some(runs_pipelines);
        }
        if let Some(p) = progress {
            let reported = p.snapshot_task.as_ref().map_or(0, |t| t.stream_index);
            if let Some(stream) = assigned
                && stream != reported
            {
                return Err(Error::Internal(format!(
                    "tf.data snapshot worker {worker} was assigned stream {reported}, but is now \
                     assigned a different stream {stream}"
                )));
            }
            if let Some(stream) = assigned
                && p.completed
            {
                self.complete_stream(&mut inner, stream, worker, assignments, &mut out);
                return Ok(out);
            }
            if let Some(status) = &p.status
                && status.code != 0
            {
                if !matches!(inner.mode, Mode::Error(_)) {
                    tracing::error!(snapshot = %self.path, worker, code = status.code, message = %status.message, "distributed snapshot failed");
                    inner.mode = Mode::Error(status.clone());
                    inner.final_file_pending = true;
                    out.io.push(Io::WriteError(status.clone()));
                    out.finished = true;
                }
                return Ok(out);
            }
        }
        if assigned.is_none() && !self.runners.admit(runs_pipelines) {
            // Its streams go to the workers that can run its dataset.
            return Ok(out);
        }
        if assigned.is_none() {
            assigned = self.adopt_orphan(&mut inner, worker, runs_pipelines, assignments)?;
        }
        if assigned.is_none() {
            if inner.mode != Mode::Active {
                return Ok(out);
            }
            assigned = self.new_stream(&mut inner, worker, runs_pipelines, assignments)?;
        }
        let Some(stream) = assigned else {
            return Ok(out);
        };
        let Some(s) = inner.streams.get(&stream).filter(|s| !s.done) else {
            return Ok(out);
        };
        if !s.initialized {
            // Until this I/O succeeds (`run_io` then marks the stream),
            // every heartbeat asks for it again.
            out.io.push(Io::InitStream {
                stream,
                owner: worker.to_string(),
                repetitions: inner.sources.iter().map(|s| s.repetition).collect(),
            });
        }
        out.task = Some(SnapshotTaskDef {
            base_path: self.path.clone(),
            stream_index: stream,
            num_sources: inner.sources.len() as i64,
            metadata: Some(inner.metadata.clone()),
        });
        Ok(out)
    }

    fn complete_stream(
        &self,
        inner: &mut Inner,
        stream: i64,
        worker: &str,
        assignments: &Mutex<Assignments>,
        out: &mut HeartbeatOutcome,
    ) {
        if let Some(s) = inner.streams.get_mut(&stream) {
            s.done = true;
        }
        inner.assignments.remove(worker);
        lock(assignments).remove(&self.path, worker, stream);
        out.stream_done = true;
        tracing::info!(snapshot = %self.path, stream, worker, "snapshot stream done");
        if inner.orphans.is_empty() && inner.streams.values().all(|s| s.done) {
            inner.mode = Mode::Done;
            inner.final_file_pending = true;
            out.io.push(Io::WriteDone);
            out.finished = true;
            tracing::info!(snapshot = %self.path, "finished writing tf.data distributed snapshot");
        }
    }

    /// Gives `worker` a stream whose writer was lost, if one of its kind waits.
    fn adopt_orphan(
        &self,
        inner: &mut Inner,
        worker: &str,
        runs_pipelines: bool,
        assignments: &Mutex<Assignments>,
    ) -> Result<Option<i64>> {
        let Some(stream) = inner.orphans.iter().copied().find(|k| {
            inner
                .streams
                .get(k)
                .is_some_and(|s| s.owner_runs_pipelines == Some(runs_pipelines))
        }) else {
            return Ok(None);
        };
        if !lock(assignments).try_add(&self.path, worker, stream)? {
            return Ok(None);
        }
        inner.orphans.remove(&stream);
        inner.assignments.insert(worker.to_string(), stream);
        if let Some(s) = inner.streams.get_mut(&stream) {
            s.initialized = false;
        }
        tracing::info!(snapshot = %self.path, stream, worker, "orphaned snapshot stream reassigned");
        Ok(Some(stream))
    }

    fn new_stream(
        &self,
        inner: &mut Inner,
        worker: &str,
        runs_pipelines: bool,
        assignments: &Mutex<Assignments>,
    ) -> Result<Option<i64>> {
        let stream = inner.streams.keys().next_back().map_or(0, |k| k + 1);
        if !lock(assignments).try_add(&self.path, worker, stream)? {
            return Ok(None);
        }
        inner.streams.insert(
            stream,
            Stream {
                done: false,
                assigned_per_source: vec![0; inner.sources.len()],
                owner_runs_pipelines: Some(runs_pipelines),
                initialized: false,
            },
        );
        inner.assignments.insert(worker.to_string(), stream);
        tracing::info!(snapshot = %self.path, stream, worker, "snapshot stream created");
        Ok(Some(stream))
    }

    /// Does a heartbeat's I/O (blocking); the streams it initialised may be
    /// told to their writers.
    pub fn run_io(&self, io: &[Io]) -> Result<()> {
        self.write(io)?;
        let mut inner = lock(&self.inner);
        for op in io {
            match op {
                Io::InitStream { stream, .. } => {
                    if let Some(s) = inner.streams.get_mut(stream) {
                        s.initialized = true;
                    }
                }
                Io::WriteDone | Io::WriteError(_) => inner.final_file_pending = false,
            }
        }
        Ok(())
    }

    pub fn final_file_pending(&self) -> bool {
        lock(&self.inner).final_file_pending
    }

    /// Writes the `DONE` or `ERROR` file of a finished snapshot whose
    /// finishing heartbeat could not (blocking I/O): `None` when there is
    /// nothing to write, else whether it was written now.
    pub fn retry_final_file(&self) -> Option<Result<()>> {
        let io = {
            let inner = lock(&self.inner);
            if !inner.final_file_pending {
                return None;
            }
            match &inner.mode {
                Mode::Done => Io::WriteDone,
                Mode::Error(status) => Io::WriteError(status.clone()),
                Mode::Active | Mode::WindingDown => return None,
            }
        };
        Some(self.run_io(&[io]))
    }

    fn write(&self, io: &[Io]) -> Result<()> {
        let fs = self.fs.as_ref();
        for op in io {
            match op {
                Io::InitStream {
                    stream,
                    owner,
                    repetitions,
                } => {
                    for (source, &last) in repetitions.iter().enumerate() {
                        for repetition in 0..=last {
                            fs.create_dir_all(&layout::repetition_dir(
                                &self.path,
                                *stream,
                                source as i64,
                                repetition,
                            ))?;
                        }
                    }
                    files::write_atomically(
                        fs,
                        &layout::owner_worker_file(&self.path, *stream),
                        owner.as_bytes(),
                    )?;
                }
                Io::WriteDone => {
                    files::write_atomically(fs, &layout::done_file(&self.path), b"")?;
                }
                Io::WriteError(status) => {
                    files::write_atomically(
                        fs,
                        &layout::error_file(&self.path),
                        metadata::status_to_text(status).as_bytes(),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// A worker the dispatcher lost: its unfinished stream waits for another
    /// worker of the same kind (`runs_pipelines`), which continues it from
    /// what was committed.
    pub fn worker_lost(
        &self,
        worker: &str,
        runs_pipelines: bool,
        assignments: &Mutex<Assignments>,
    ) {
        let mut inner = lock(&self.inner);
        if matches!(inner.mode, Mode::Done | Mode::Error(_)) {
            return;
        }
        let Some(stream) = inner.assignments.remove(worker) else {
            return;
        };
        lock(assignments).remove(&self.path, worker, stream);
        if let Some(s) = inner.streams.get_mut(&stream)
            && !s.done
        {
            s.owner_runs_pipelines.get_or_insert(runs_pipelines);
            inner.orphans.insert(stream);
            tracing::warn!(snapshot = %self.path, stream, worker, "snapshot stream orphaned: its worker is lost");
        }
    }

    /// `GetSnapshotSplit` (blocking: the split's file is written before the
    /// split is returned, so a restarted dispatcher counts it).
    pub fn get_snapshot_split(
        &self,
        req: &wire::GetSnapshotSplitRequest,
    ) -> Result<wire::GetSnapshotSplitResponse> {
        let _serial = lock(&self.get_split);
        let (local, global, split, new_dirs) = {
            let mut inner = lock(&self.inner);
            match inner.assignments.get(&req.worker_address) {
                None => {
                    return Err(Error::Internal(format!(
                        "tf.data snapshot worker {} was assigned stream {}, but the assignment is \
                         no longer available.",
                        req.worker_address, req.stream_index
                    )));
                }
                Some(&stream) if stream != req.stream_index => {
                    return Err(Error::Internal(format!(
                        "tf.data snapshot worker {} was assigned stream {} but is now assigned a \
                         different stream {stream}",
                        req.worker_address, req.stream_index
                    )));
                }
                Some(_) => {}
            }
            let num_sources = inner.sources.len();
            let s = usize::try_from(req.source_index)
                .ok()
                .filter(|&s| s < num_sources)
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "source_index {} out of range: the snapshot at {} has {num_sources} sources",
                        req.source_index, self.path
                    ))
                })?;
            let local = inner
                .streams
                .get(&req.stream_index)
                .and_then(|st| st.assigned_per_source.get(s).copied())
                .ok_or_else(|| {
                    Error::Internal(format!(
                        "the snapshot at {} has no stream {}",
                        self.path, req.stream_index
                    ))
                })?;
            let global = inner.num_assigned_splits;
            let current = inner.sources[s].repetition;
            if req.repetition_index < current {
                return Ok(end_of_splits(local));
            }
            if req.repetition_index > current + MAX_REPETITION_JUMP {
                return Err(Error::InvalidArgument(format!(
                    "repetition_index {} is too far ahead of source {s}'s repetition {current}",
                    req.repetition_index
                )));
            }
            let mut new_dirs = Vec::new();
            while inner.sources[s].repetition < req.repetition_index {
                let source = &mut inner.sources[s];
                source.provider.reset()?;
                source.repetition += 1;
                if source.pending.take().is_some() {
                    tracing::warn!(snapshot = %self.path, source = s, "a split whose file failed to write is dropped with its repetition");
                }
                let repetition = source.repetition;
                for &stream in inner.streams.keys() {
                    new_dirs.push(layout::repetition_dir(
                        &self.path, stream, s as i64, repetition,
                    ));
                }
                tracing::info!(snapshot = %self.path, source = s, repetition, "snapshot source repeats");
            }
            let source = &mut inner.sources[s];
            let split = match source.pending.take() {
                Some(split) => Some(split),
                None => source.provider.get_next()?,
            };
            (local, global, split, new_dirs)
        };
        for dir in &new_dirs {
            self.fs.create_dir_all(dir)?;
        }
        let Some(split) = split else {
            return Ok(end_of_splits(local));
        };
        let proto = tfdata_core::element::tensor_to_proto(&split);
        let file = layout::split_file(
            &self.path,
            req.stream_index,
            req.source_index,
            req.repetition_index,
            local,
            global,
        );
        if let Err(e) = write_split_file(self.fs.as_ref(), &file, &proto) {
            lock(&self.inner).sources[req.source_index as usize].pending = Some(split);
            return Err(e);
        }
        let mut inner = lock(&self.inner);
        if let Some(st) = inner.streams.get_mut(&req.stream_index)
            && let Some(n) = st.assigned_per_source.get_mut(req.source_index as usize)
        {
            *n += 1;
        }
        inner.num_assigned_splits += 1;
        Ok(wire::GetSnapshotSplitResponse {
            response: Some(wire::get_snapshot_split_response::Response::Split(proto)),
            local_split_index: local,
        })
    }

    pub fn progress(&self) -> Progress {
        let inner = lock(&self.inner);
        let streams = inner
            .streams
            .iter()
            .map(|(&index, s)| {
                let state = if s.done {
                    StreamState::Done
                } else if inner.orphans.contains(&index) {
                    StreamState::Orphan
                } else {
                    StreamState::Assigned
                };
                SnapshotStreamInfo {
                    index,
                    state: state as i32,
                }
            })
            .collect();
        Progress {
            mode: inner.mode.clone(),
            streams,
            num_assigned_splits: inner.num_assigned_splits,
            num_total_splits: inner.num_total_splits,
        }
    }
}

fn end_of_splits(local: i64) -> wire::GetSnapshotSplitResponse {
    wire::GetSnapshotSplitResponse {
        response: Some(wire::get_snapshot_split_response::Response::EndOfSplits(
            true,
        )),
        local_split_index: local,
    }
}

/// A split file: a TFRecord file of one serialized `TensorProto`, as
/// TensorFlow writes it.
fn write_split_file(
    fs: &dyn FileSystem,
    path: &str,
    split: &tfdata_proto::tensorflow::TensorProto,
) -> Result<()> {
    let mut record = Vec::new();
    tfrecord::write_record(&mut record, &split.encode_to_vec())
        .map_err(|e| Error::Internal(format!("framing a split: {e}")))?;
    files::write_atomically(fs, path, &record)
}
