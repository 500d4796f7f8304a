//! One snapshot stream's writer (spec §8.2): runs the snapshot's dataset
//! over the stream's splits and writes its elements to chunk files,
//! committing each by renaming it into `<base>/chunks/`.
//!
//! Position and restart: the engine has no iterator checkpoints, so a
//! stream's position is what it has committed. On (re)start the writer
//! sums the element counts in its committed chunk names (N) and takes the
//! next chunk index, deletes its uncommitted files, rebuilds the dataset
//! with split providers that replay the stream's split files first, skips
//! the first N elements and carries on. The rebuilt pipeline yields the
//! same elements in the same order when it is deterministic given its
//! splits: unseeded randomness is drawn from a seed derived from the
//! snapshot path and stream index ([`stream_seed`], see
//! `tfdata_dataset::random`), and parallel maps keep their order
//! (`IterContext::deterministic`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tfdata_core::{Element, Error, Result};
use tfdata_dataset::io::fs::FileSystem;
use tfdata_dataset::snapshot::chunk::ChunkWriter;
use tfdata_dataset::snapshot::layout::{self, SnapshotCompression};
use tfdata_dataset::{ElementIterator, IterContext};
use tfdata_rpc::CancellationToken;

use super::files;
use super::split_source::SplitSource;
use super::splits::SnapshotSplitProvider;
use super::write_ahead::{QueueReader, WriteAhead};

/// Per-record framing a chunk adds to each component's bytes (TFRecord
/// header and footer, `TensorProto` dtype and shape), in the estimate that
/// keeps chunks under the size limit.
const RECORD_OVERHEAD_BYTES: u64 = 64;
/// Elements skipped between checks of the cancellation token.
const CANCEL_CHECK_ELEMENTS: u64 = 1024;
/// Element bytes the pipeline may run ahead of the chunk writer by default
/// (at least one element, whatever its size): the pipeline and the
/// encoding, compression and file writes run on two threads.
pub const WRITE_AHEAD_BYTES: u64 = 8 << 20;

/// What a stream writer needs to know.
#[derive(Debug, Clone)]
pub struct StreamParams {
    pub base_path: String,
    pub stream_index: i64,
    pub num_sources: i64,
    pub compression: SnapshotCompression,
    pub max_chunk_bytes: u64,
    /// `None`: TensorFlow's schedule (`crate::config::commit_interval`).
    pub commit_interval: Option<Duration>,
    /// Element bytes the pipeline may run ahead of the chunk writer
    /// ([`WRITE_AHEAD_BYTES`]; 0: one element).
    pub write_ahead_bytes: u64,
}

/// How a writer ended.
#[derive(Debug)]
pub enum Outcome {
    /// `DONE` written (or found: the stream had finished before).
    Done,
    /// Stopped on request; nothing written about it.
    Cancelled,
    /// A transient failure (UNAVAILABLE, ABORTED: a dispatcher or object
    /// store hiccup) on an attempt that may be retried: nothing written;
    /// the next attempt restarts from the committed chunks.
    Transient(Error),
    /// `ERROR` written (if it could be) with this cause.
    Failed(Error),
}

/// The seed unseeded randomness in a stream's pipeline is drawn from:
/// FNV-1a of the snapshot path and the stream index, the same in every
/// process and release.
pub fn stream_seed(base_path: &str, stream_index: i64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in base_path
        .bytes()
        .chain([0])
        .chain(stream_index.to_le_bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

pub struct StreamWriter {
    pub params: StreamParams,
    pub fs: Arc<dyn FileSystem>,
    pub splits: Arc<dyn SplitSource>,
    pub cancel: CancellationToken,
    /// Where committed chunks are counted (the worker's metrics).
    pub commits: crate::metrics::SnapshotCommits,
}

impl StreamWriter {
    /// Writes the stream to its end, then its `DONE` (or `ERROR`). Blocks:
    /// run it on its own thread.
    pub fn run(&self) -> Outcome {
        self.attempt(true)
    }

    /// [`run`](Self::run), except that unless this is the `last` attempt a
    /// transient failure is [`Outcome::Transient`] rather than the stream's
    /// `ERROR`. (TensorFlow's writer stops silently on such errors and
    /// leaves its stream unfinished for good.)
    pub fn attempt(&self, last: bool) -> Outcome {
        let result = self.write_stream();
        if self.cancel.is_cancelled() {
            return Outcome::Cancelled;
        }
        let p = &self.params;
        match result {
            Ok(()) => Outcome::Done,
            Err(e) if !last && e.is_retryable() => {
                tracing::info!(snapshot = %p.base_path, stream = p.stream_index, error = %e, "snapshot stream interrupted; it will restart");
                Outcome::Transient(e)
            }
            Err(e) => {
                tracing::warn!(snapshot = %p.base_path, stream = p.stream_index, error = %e, "snapshot stream failed");
                if let Err(write) = files::write_error(&*self.fs, &p.base_path, p.stream_index, &e)
                {
                    tracing::warn!(snapshot = %p.base_path, error = %write, "cannot write the stream's ERROR file");
                }
                Outcome::Failed(e)
            }
        }
    }

    fn write_stream(&self) -> Result<()> {
        let p = &self.params;
        let (base, stream) = (p.base_path.as_str(), p.stream_index);
        if self.fs.exists(&layout::stream_done_file(base, stream))? {
            tracing::info!(snapshot = base, stream, "snapshot stream already done");
            return Ok(());
        }
        self.fs
            .create_dir_all(&layout::uncommitted_chunks_dir(base, stream))?;
        self.fs.create_dir_all(&layout::chunks_dir(base))?;
        let committed = files::committed(&*self.fs, base, stream)?;
        let discarded = files::discard_uncommitted(&*self.fs, base, stream)?;
        let dataset_def = files::read_dataset_def(&*self.fs, base)?;
        tracing::info!(
            snapshot = base,
            stream,
            committed_elements = committed.num_elements,
            next_chunk = committed.next_chunk,
            discarded,
            "writing snapshot stream"
        );
        tfdata_dataset::random::with_seed(stream_seed(base, stream), || {
            let (dataset, form) = crate::pipeline::build_dataset(&dataset_def, None, 0, 0)?;
            if !form.sparse_variants.is_empty() {
                // Snapshot chunks hold the elements' tensors; a SparseTensor
                // or RaggedTensor there would be the pipeline's string form,
                // not TensorFlow's variant.
                return Err(Error::Unimplemented(format!(
                    "snapshot {base}: the dataset's elements hold SparseTensors or RaggedTensors \
                     (components {:?}), which tfdata snapshots cannot write; densify them in the \
                     last map",
                    form.sparse_variants
                )));
            }
            let sources = dataset.sources();
            if sources.len() as i64 != p.num_sources {
                return Err(Error::FailedPrecondition(format!(
                    "snapshot {base}: the dataset has {} sources but the dispatcher has {} split \
                     providers",
                    sources.len(),
                    p.num_sources
                )));
            }
            let mut ctx = IterContext::new();
            ctx.deterministic = true;
            for (index, source) in sources.iter().enumerate() {
                let provider = SnapshotSplitProvider::open(
                    Arc::clone(&self.fs),
                    base,
                    stream,
                    index as i64,
                    Arc::clone(&self.splits),
                )?;
                ctx.split_providers
                    .insert(source.op_key(), Arc::new(provider));
            }
            let mut elements = dataset.iter_with(&ctx)?;
            self.skip(&mut *elements, committed.num_elements)?;
            self.write_chunks(&mut *elements, committed.next_chunk)
        })?;
        if self.cancel.is_cancelled() {
            return Err(Error::Cancelled("snapshot stream writer cancelled".into()));
        }
        files::write_atomically(&*self.fs, &layout::stream_done_file(base, stream), b"")?;
        tracing::info!(snapshot = base, stream, "snapshot stream done");
        Ok(())
    }

    /// Drops the `n` elements the stream has committed already.
    fn skip(&self, elements: &mut dyn ElementIterator, n: u64) -> Result<()> {
        for skipped in 0..n {
            if skipped % CANCEL_CHECK_ELEMENTS == 0 {
                self.check_cancelled()?;
            }
            if elements.next_element()?.is_none() {
                return Err(Error::DataLoss {
                    location: layout::chunks_dir(&self.params.base_path),
                    reason: format!(
                        "stream {} has committed {n} elements, but its dataset now ends after \
                         {skipped}: the pipeline is not deterministic given its splits",
                        self.params.stream_index
                    ),
                });
            }
        }
        Ok(())
    }

    fn check_cancelled(&self) -> Result<()> {
        if self.cancel.is_cancelled() {
            Err(Error::Cancelled("snapshot stream writer cancelled".into()))
        } else {
            Ok(())
        }
    }

    /// Writes and commits chunks from `first_chunk` on until the input ends.
    /// The pipeline runs on this thread (which holds the stream's seed
    /// scope); encoding, compressing and writing the chunks on a
    /// `snapshot-write` thread, fed through a [`WriteAhead`] queue of at
    /// most `write_ahead_bytes`.
    fn write_chunks(&self, elements: &mut dyn ElementIterator, first_chunk: i64) -> Result<()> {
        let queue = WriteAhead::new(self.params.write_ahead_bytes);
        std::thread::scope(|scope| {
            let writer = std::thread::Builder::new()
                .name("snapshot-write".into())
                .spawn_scoped(scope, || {
                    let mut input = QueueReader(&queue);
                    let result = self.write_chunks_from(&mut input, first_chunk);
                    queue.close();
                    result
                })
                .map_err(|e| Error::Internal(format!("cannot start a chunk writer thread: {e}")))?;
            loop {
                let next = if self.cancel.is_cancelled() {
                    Err(Error::Cancelled("snapshot stream writer cancelled".into()))
                } else {
                    elements.next_element()
                };
                match next {
                    Ok(Some(element)) => {
                        if !queue.push(element) {
                            break; // The writer stopped: its result says why.
                        }
                    }
                    Ok(None) => {
                        queue.end(None);
                        break;
                    }
                    Err(e) => {
                        queue.end(Some(e));
                        break;
                    }
                }
            }
            writer
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("the chunk writer thread panicked".into())))
        })
    }

    /// [`write_chunks`](Self::write_chunks)' writer side.
    fn write_chunks_from(
        &self,
        elements: &mut dyn ElementIterator,
        first_chunk: i64,
    ) -> Result<()> {
        let mut pending: Option<Element> = None;
        let mut chunk = first_chunk;
        loop {
            self.check_cancelled()?;
            let end = self.write_chunk(elements, chunk, &mut pending)?;
            chunk += 1;
            if end {
                return Ok(());
            }
        }
    }

    /// Fills one chunk until the input ends (true), the commit interval
    /// passes or the next element would take it past the size limit (that
    /// element is left in `pending` for the next chunk); then commits it.
    fn write_chunk(
        &self,
        elements: &mut dyn ElementIterator,
        chunk: i64,
        pending: &mut Option<Element>,
    ) -> Result<bool> {
        let p = &self.params;
        let (base, stream) = (p.base_path.as_str(), p.stream_index);
        let path = files::uncommitted_chunk_file(base, stream, chunk, &files::unique_suffix());
        let mut writer = ChunkWriter::create(&*self.fs, &path, p.compression)?;
        let deadline = Instant::now() + crate::config::commit_interval(p.commit_interval, chunk);
        let mut bytes: u64 = 0;
        let end = loop {
            if self.cancel.is_cancelled() {
                // Not committed: the restart (or the next owner) rewrites it.
                return Err(Error::Cancelled("snapshot stream writer cancelled".into()));
            }
            if writer.num_elements() > 0 && Instant::now() >= deadline {
                break false;
            }
            let element = match pending.take() {
                Some(e) => e,
                None => match elements.next_element()? {
                    Some(e) => e,
                    None => break true,
                },
            };
            let size = estimated_bytes(&element);
            if writer.num_elements() > 0 && bytes.saturating_add(size) > p.max_chunk_bytes {
                *pending = Some(element);
                break false;
            }
            writer.write(&element)?;
            bytes = bytes.saturating_add(size);
        };
        let num_elements = writer.num_elements();
        writer.finish()?;
        if num_elements == 0 {
            self.fs.delete(&path)?;
            return Ok(end);
        }
        let committed = layout::join(
            &layout::chunks_dir(base),
            &layout::chunk_name(stream, chunk, num_elements as i64),
        );
        self.fs.rename(&path, &committed)?;
        self.commits.chunks.inc();
        self.commits.elements.inc_by(num_elements);
        self.commits.bytes.inc_by(bytes);
        tracing::debug!(
            snapshot = base,
            stream,
            chunk,
            num_elements,
            "committed chunk"
        );
        Ok(end)
    }
}

/// An element's size in a chunk file before compression, a little high.
fn estimated_bytes(element: &Element) -> u64 {
    (element.byte_size() as u64)
        .saturating_add(RECORD_OVERHEAD_BYTES.saturating_mul(element.components.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::splits::tests::FakeDispatcher;
    use prost::Message;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tfdata_core::{DType, Tensor};
    use tfdata_dataset::Dataset;
    use tfdata_dataset::snapshot::chunk::ChunkReader;
    use tfdata_proto::data as wire;

    fn local_fs() -> Arc<dyn FileSystem> {
        tfdata_dataset::io::registry::file_system("/").unwrap()
    }

    /// A snapshot directory as the dispatcher makes it, for `dataset`.
    fn snapshot_dir(base: &str, dataset: &Dataset) {
        std::fs::create_dir_all(layout::chunks_dir(base)).unwrap();
        let def = wire::DatasetDef {
            graph: Default::default(),
            tfdata_pipeline: Some(
                tfdata_dataset::pipeline::to_pipeline_def(dataset, false).unwrap(),
            ),
        };
        std::fs::write(layout::dataset_def_file(base), def.encode_to_vec()).unwrap();
    }

    fn params(base: &str, compression: SnapshotCompression) -> StreamParams {
        StreamParams {
            base_path: base.to_string(),
            stream_index: 0,
            num_sources: 1,
            compression,
            // A few elements per chunk.
            max_chunk_bytes: 3 * (8 + RECORD_OVERHEAD_BYTES),
            commit_interval: Some(Duration::from_secs(3600)),
            // One element ahead: kills land where the tests expect them.
            write_ahead_bytes: 0,
        }
    }

    /// Splits through the fake dispatcher; cancels the writer after
    /// `crash_after` splits (a worker killed mid-stream).
    struct Crashing {
        inner: Arc<FakeDispatcher>,
        crash_after: usize,
        served: AtomicUsize,
        cancel: CancellationToken,
    }

    impl SplitSource for Crashing {
        fn next_split(&self, source: i64, repetition: i64) -> Result<(Option<Tensor>, i64)> {
            if self.served.fetch_add(1, Ordering::SeqCst) == self.crash_after {
                self.cancel.cancel();
                return Err(Error::Cancelled("killed".into()));
            }
            self.inner.next_split(source, repetition)
        }
    }

    fn writer(
        base: &str,
        compression: SnapshotCompression,
        fake: &Arc<FakeDispatcher>,
        crash_after: usize,
    ) -> StreamWriter {
        let cancel = CancellationToken::new();
        StreamWriter {
            params: params(base, compression),
            fs: local_fs(),
            splits: Arc::new(Crashing {
                inner: Arc::clone(fake),
                crash_after,
                served: AtomicUsize::new(0),
                cancel: cancel.clone(),
            }),
            cancel,
            commits: Default::default(),
        }
    }

    /// Every element of every committed chunk of stream 0, by chunk name.
    fn committed_elements(base: &str, compression: SnapshotCompression) -> Vec<(String, Vec<i64>)> {
        let fs = local_fs();
        let dir = layout::chunks_dir(base);
        let mut out = Vec::new();
        for name in fs.list(&dir).unwrap() {
            let chunk = layout::parse_chunk_name(&name).unwrap();
            let reader = ChunkReader::open(
                &*fs,
                &layout::join(&dir, &name),
                compression,
                vec![DType::Int64],
            )
            .unwrap();
            let values: Vec<i64> = reader
                .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
                .collect();
            assert_eq!(values.len() as i64, chunk.num_elements, "{name}");
            out.push((name, values));
        }
        out.sort_by_key(|(name, _)| layout::parse_chunk_name(name).unwrap());
        out
    }

    fn shuffled(n: i64) -> Dataset {
        Dataset::range(n).shuffle(16, None, true).prefetch(2)
    }

    #[test]
    fn writes_every_element_once_in_bounded_chunks() {
        for compression in [
            SnapshotCompression::None,
            SnapshotCompression::Snappy,
            SnapshotCompression::Gzip,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let base = dir.path().to_str().unwrap();
            snapshot_dir(base, &shuffled(50));
            let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![(0..50).collect()]]));
            let mut w = writer(base, compression, &fake, usize::MAX);
            if compression == SnapshotCompression::Snappy {
                w.params.write_ahead_bytes = WRITE_AHEAD_BYTES;
            }
            assert!(matches!(w.run(), Outcome::Done));
            assert!(std::path::Path::new(&layout::stream_done_file(base, 0)).exists());
            let chunks = committed_elements(base, compression);
            let mut all: Vec<i64> = chunks.iter().flat_map(|(_, v)| v.clone()).collect();
            assert!(chunks.iter().all(|(_, v)| v.len() <= 3), "{chunks:?}");
            assert_ne!(all, (0..50).collect::<Vec<_>>(), "shuffled");
            all.sort();
            assert_eq!(all, (0..50).collect::<Vec<_>>());
            assert!(
                local_fs()
                    .list(&layout::uncommitted_chunks_dir(base, 0))
                    .unwrap()
                    .is_empty()
            );
        }
    }

    /// Killed mid-stream (several times), with a half-written uncommitted
    /// chunk left behind and an object-store commit that copied but did not
    /// delete: the restarted writers skip what is committed, and the stream
    /// ends with every element exactly once, in the order one uninterrupted
    /// writer gives (the unseeded shuffle repeats under the stream's seed).
    #[test]
    fn restarts_resume_exactly_once() {
        let n = 60;
        // One path for both runs: the stream's seed derives from it.
        let dir = tempfile::tempdir().unwrap();
        let base_dir = dir.path().join("snapshot");
        let base = base_dir.to_str().unwrap();
        let uninterrupted = {
            snapshot_dir(base, &shuffled(n));
            let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![(0..n).collect()]]));
            assert!(matches!(
                writer(base, SnapshotCompression::None, &fake, usize::MAX).run(),
                Outcome::Done
            ));
            committed_elements(base, SnapshotCompression::None)
        };
        std::fs::remove_dir_all(base).unwrap();

        snapshot_dir(base, &shuffled(n));
        let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![(0..n).collect()]]));
        let mut kills = 0;
        for crash_after in [25, 7, 13] {
            let outcome = writer(base, SnapshotCompression::None, &fake, crash_after).run();
            assert!(matches!(outcome, Outcome::Cancelled), "{outcome:?}");
            kills += 1;
            assert!(!std::path::Path::new(&layout::stream_done_file(base, 0)).exists());
            assert!(!std::path::Path::new(&layout::stream_error_file(base, 0)).exists());
        }
        assert_eq!(kills, 3);
        // The copy of an object-store commit landed, the delete did not.
        let committed = committed_elements(base, SnapshotCompression::None);
        assert!(!committed.is_empty(), "the kills left nothing committed");
        let (last, _) = committed.last().unwrap();
        let chunk = layout::parse_chunk_name(last).unwrap().chunk;
        std::fs::copy(
            layout::join(&layout::chunks_dir(base), last),
            files::uncommitted_chunk_file(base, 0, chunk, "twin"),
        )
        .unwrap();

        let outcome = writer(base, SnapshotCompression::None, &fake, usize::MAX).run();
        assert!(matches!(outcome, Outcome::Done), "{outcome:?}");
        let values = |chunks: &[(String, Vec<i64>)]| -> Vec<i64> {
            chunks.iter().flat_map(|(_, v)| v.clone()).collect()
        };
        let resumed = committed_elements(base, SnapshotCompression::None);
        assert_eq!(values(&resumed), values(&uninterrupted));
        let mut sorted = values(&resumed);
        sorted.sort();
        assert_eq!(sorted, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn a_finished_stream_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        std::fs::create_dir_all(layout::stream_dir(base, 0)).unwrap();
        std::fs::write(layout::stream_done_file(base, 0), b"").unwrap();
        // No dataset_def.proto: it is not even read.
        let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![]]));
        assert!(matches!(
            writer(base, SnapshotCompression::None, &fake, usize::MAX).run(),
            Outcome::Done
        ));
    }

    fn error_file(base: &str) -> String {
        std::fs::read_to_string(layout::stream_error_file(base, 0)).unwrap()
    }

    #[test]
    fn bad_input_fails_the_stream_with_its_cause() {
        // A damaged dataset_def.proto.
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        std::fs::create_dir_all(layout::chunks_dir(base)).unwrap();
        std::fs::write(layout::dataset_def_file(base), b"\x0a\xff\xff\xff").unwrap();
        let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![]]));
        let outcome = writer(base, SnapshotCompression::None, &fake, usize::MAX).run();
        assert!(
            matches!(outcome, Outcome::Failed(Error::DataLoss { .. })),
            "{outcome:?}"
        );
        assert!(
            error_file(base).starts_with("DATA_LOSS: "),
            "{}",
            error_file(base)
        );
        assert!(error_file(base).contains("dataset_def.proto"));

        // More committed than the dataset has: the position is not derivable.
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        snapshot_dir(base, &Dataset::range(5));
        std::fs::write(layout::join(&layout::chunks_dir(base), "chunk_0_0_9"), b"").unwrap();
        let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![(0..5).collect()]]));
        let outcome = writer(base, SnapshotCompression::None, &fake, usize::MAX).run();
        assert!(matches!(outcome, Outcome::Failed(_)), "{outcome:?}");
        assert!(
            error_file(base).contains("committed 9 elements"),
            "{}",
            error_file(base)
        );

        // A split file that does not parse.
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        snapshot_dir(base, &Dataset::range(5));
        std::fs::create_dir_all(layout::repetition_dir(base, 0, 0, 0)).unwrap();
        std::fs::write(layout::split_file(base, 0, 0, 0, 0, 0), b"garbage!garbage!").unwrap();
        let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![]]));
        let outcome = writer(base, SnapshotCompression::None, &fake, usize::MAX).run();
        assert!(matches!(outcome, Outcome::Failed(_)), "{outcome:?}");
        assert!(
            error_file(base).contains("split_0_0"),
            "{}",
            error_file(base)
        );

        // Sources the dispatcher does not agree with.
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        snapshot_dir(
            base,
            &Dataset::zip(vec![Dataset::range(3), Dataset::range(4)]),
        );
        let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![]]));
        let outcome = writer(base, SnapshotCompression::None, &fake, usize::MAX).run();
        assert!(
            matches!(outcome, Outcome::Failed(Error::FailedPrecondition(_))),
            "{outcome:?}"
        );
    }

    /// A file system that refuses to create chunk files (a full disk, a
    /// failing object store) after `allowed` of them.
    struct FullDisk {
        inner: Arc<dyn FileSystem>,
        allowed: AtomicUsize,
        /// Fail with UNAVAILABLE (an object store's hiccup) instead.
        transient: bool,
    }

    impl FileSystem for FullDisk {
        fn open(&self, path: &str) -> Result<Box<dyn std::io::Read + Send>> {
            self.inner.open(path)
        }
        fn glob(&self, pattern: &str) -> Result<Vec<String>> {
            self.inner.glob(pattern)
        }
        fn exists(&self, path: &str) -> Result<bool> {
            self.inner.exists(path)
        }
        fn file_size(&self, path: &str) -> Result<u64> {
            self.inner.file_size(path)
        }
        fn create(&self, path: &str) -> Result<Box<dyn std::io::Write + Send>> {
            if path.contains("uncommitted_chunks")
                && self
                    .allowed
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |a| a.checked_sub(1))
                    .is_err()
            {
                if self.transient {
                    return Err(Error::Unavailable(format!(
                        "creating {path}: 503 Slow Down"
                    )));
                }
                return Err(Error::io(
                    format!("creating {path}"),
                    std::io::Error::other("No space left on device"),
                ));
            }
            self.inner.create(path)
        }
        fn list(&self, dir: &str) -> Result<Vec<String>> {
            self.inner.list(dir)
        }
        fn delete(&self, path: &str) -> Result<()> {
            self.inner.delete(path)
        }
        fn create_dir_all(&self, dir: &str) -> Result<()> {
            self.inner.create_dir_all(dir)
        }
        fn rename(&self, from: &str, to: &str) -> Result<()> {
            self.inner.rename(from, to)
        }
    }

    #[test]
    fn a_full_disk_fails_the_stream() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        snapshot_dir(base, &Dataset::range(30));
        let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![(0..30).collect()]]));
        let mut w = writer(base, SnapshotCompression::Snappy, &fake, usize::MAX);
        w.fs = Arc::new(FullDisk {
            inner: local_fs(),
            allowed: AtomicUsize::new(2),
            transient: false,
        });
        let outcome = w.run();
        assert!(
            matches!(outcome, Outcome::Failed(Error::Io { .. })),
            "{outcome:?}"
        );
        assert!(
            error_file(base).contains("No space left on device"),
            "{}",
            error_file(base)
        );
        assert_eq!(
            committed_elements(base, SnapshotCompression::Snappy).len(),
            2
        );
    }

    /// A transient failure on an attempt that may be retried writes
    /// nothing; the next attempt resumes from the committed chunks.
    #[test]
    fn a_transient_failure_is_retried_from_the_committed_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        snapshot_dir(base, &shuffled(30));
        let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![(0..30).collect()]]));
        let mut w = writer(base, SnapshotCompression::Gzip, &fake, usize::MAX);
        w.fs = Arc::new(FullDisk {
            inner: local_fs(),
            allowed: AtomicUsize::new(3),
            transient: true,
        });
        let outcome = w.attempt(false);
        assert!(
            matches!(outcome, Outcome::Transient(Error::Unavailable(_))),
            "{outcome:?}"
        );
        assert!(!std::path::Path::new(&layout::stream_error_file(base, 0)).exists());
        assert_eq!(committed_elements(base, SnapshotCompression::Gzip).len(), 3);
        // The last attempt: the same failure is the stream's error.
        let outcome = w.attempt(true);
        assert!(
            matches!(outcome, Outcome::Failed(Error::Unavailable(_))),
            "{outcome:?}"
        );
        assert!(
            error_file(base).starts_with("UNAVAILABLE: "),
            "{}",
            error_file(base)
        );
        std::fs::remove_file(layout::stream_error_file(base, 0)).unwrap();
        // The store recovers.
        w.fs = local_fs();
        assert!(matches!(w.attempt(false), Outcome::Done));
        let mut all: Vec<i64> = committed_elements(base, SnapshotCompression::Gzip)
            .into_iter()
            .flat_map(|(_, v)| v)
            .collect();
        all.sort();
        assert_eq!(all, (0..30).collect::<Vec<_>>());
    }

    #[test]
    fn stream_seeds_are_stable() {
        // Fixed forever: a worker upgraded mid-snapshot must draw the same.
        assert_eq!(stream_seed("/s", 0), stream_seed("/s", 0));
        assert_ne!(stream_seed("/s", 0), stream_seed("/s", 1));
        assert_ne!(stream_seed("/s", 0), stream_seed("/t", 0));
    }
}
