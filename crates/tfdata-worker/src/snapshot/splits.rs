//! A snapshot stream's split providers, one per source (spec §8.2): each
//! first replays the split files the dispatcher already wrote for the
//! stream (`streams/stream_<k>/splits/source_<s>/repetition_<r>/split_<local>_<global>`),
//! in local-index order, then asks the dispatcher (`GetSnapshotSplit`).
//!
//! The local index counts a source's splits for the stream across
//! repetitions; the dispatcher answers each request with the index it
//! assigned. An index ahead of ours means it assigned splits we never
//! received (an answer lost to a crash or a timeout): it wrote them to files
//! before answering, so we read them from there, as TensorFlow's
//! `SnapshotSplitProvider` does. A file of a later repetition than the
//! current one ends the current repetition.
//!
//! A round trip per split would leave the pipeline waiting on the network
//! for every `range` element, so the provider keeps up to
//! [`SPLIT_PREFETCH`] requests in flight and orders their answers by the
//! local index the dispatcher gave each. Prefetching changes nothing on
//! disk: every split answered was written to its file before the answer, so
//! a split prefetched by a writer that then crashed is replayed from its
//! file by the restarted writer, like any other answer lost in flight.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use tfdata_core::{Error, Result, Tensor};
use tfdata_dataset::io::fs::FileSystem;
use tfdata_dataset::snapshot::layout;
use tfdata_dataset::splits::SplitProvider;

use super::split_files::{SplitFile, read_split_file, split_files};
use super::split_source::{PendingSplit, SplitSource};

/// `GetSnapshotSplit` requests a stream's source keeps in flight while its
/// pipeline works (splits are scalars or file names, so this holds a few
/// hundred bytes). Four round trips cover a split that takes the pipeline a
/// quarter of a round trip; the dispatcher serves them one at a time.
pub const SPLIT_PREFETCH: usize = 4;

/// Position in the source's splits.
struct Cursor {
    /// Local index of the next split to hand out.
    next: i64,
    repetition: i64,
    /// Split files from `next` on, by local index.
    files: BTreeMap<i64, SplitFile>,
    /// Requests for this repetition's splits, oldest first.
    in_flight: VecDeque<PendingSplit>,
    /// Splits answered but not handed out yet, by local index.
    answered: BTreeMap<i64, Tensor>,
    /// The lowest local index an end-of-splits answer for this repetition
    /// carried: no request is made after it.
    end: Option<i64>,
}

/// One source's splits for one snapshot stream.
pub struct SnapshotSplitProvider {
    fs: Arc<dyn FileSystem>,
    base_path: String,
    stream_index: i64,
    source_index: i64,
    source: Arc<dyn SplitSource>,
    /// Requests kept in flight ahead of the pipeline (0: one at a time,
    /// when the pipeline asks).
    prefetch: usize,
    /// Held while a split is fetched: the order of the splits is the
    /// stream's position, so two fetches of one source must not overlap.
    /// Only this source's consumers ever wait on it.
    cursor: Mutex<Cursor>,
}

impl SnapshotSplitProvider {
    /// A provider that will first replay the split files already written
    /// for this source of the stream.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        base_path: &str,
        stream_index: i64,
        source_index: i64,
        source: Arc<dyn SplitSource>,
    ) -> Result<Self> {
        let files = split_files(&*fs, base_path, stream_index, source_index, 0)?;
        Ok(SnapshotSplitProvider {
            fs,
            base_path: base_path.to_string(),
            stream_index,
            source_index,
            source,
            prefetch: SPLIT_PREFETCH,
            cursor: Mutex::new(Cursor {
                next: 0,
                repetition: 0,
                files,
                in_flight: VecDeque::new(),
                answered: BTreeMap::new(),
                end: None,
            }),
        })
    }

    /// Keeps `prefetch` requests in flight instead of [`SPLIT_PREFETCH`].
    pub fn with_prefetch(mut self, prefetch: usize) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// How many split files this provider will replay before it asks the
    /// dispatcher (for logs and tests).
    pub fn num_replayable(&self) -> usize {
        lock(&self.cursor).files.len()
    }

    fn what(&self) -> String {
        format!(
            "snapshot {} stream {} source {}",
            self.base_path, self.stream_index, self.source_index
        )
    }

    /// The split at the cursor from its file, if one is known: `Some(None)`
    /// when it belongs to a later repetition (this one has ended).
    fn replay_file(&self, cursor: &mut Cursor) -> Result<Option<Option<Tensor>>> {
        let Some(file) = cursor.files.get(&cursor.next) else {
            return Ok(None);
        };
        if file.repetition > cursor.repetition {
            return Ok(Some(None));
        }
        let split = read_split_file(&*self.fs, &file.path)?;
        cursor.files.remove(&cursor.next);
        cursor.answered.remove(&cursor.next);
        cursor.next += 1;
        Ok(Some(Some(split)))
    }

    /// Tops the requests in flight up to `prefetch`, unless the files are
    /// still being replayed or the repetition's end has been seen.
    fn prefetch(&self, cursor: &mut Cursor) {
        if !cursor.files.is_empty() || cursor.end.is_some() {
            return;
        }
        while cursor.in_flight.len() < self.prefetch {
            let pending = self
                .source
                .start_split(self.source_index, cursor.repetition);
            cursor.in_flight.push_back(pending);
        }
    }

    /// Waits for the oldest request in flight and files its answer.
    fn receive(&self, cursor: &mut Cursor) -> Result<()> {
        let Some(pending) = cursor.in_flight.pop_front() else {
            return Ok(());
        };
        match pending.wait()? {
            (_, local) if local < cursor.next => Err(Error::Internal(format!(
                "{}: expected split {} but the dispatcher gave split {local}",
                self.what(),
                cursor.next
            ))),
            (Some(split), local) => {
                cursor.answered.insert(local, split);
                Ok(())
            }
            (None, local) => {
                cursor.end = Some(cursor.end.map_or(local, |end| end.min(local)));
                Ok(())
            }
        }
    }

    /// The dispatcher assigned splits `next..=last` whose answers never
    /// arrived (lost to a crash or a timeout): it wrote them to files before
    /// answering, so they are read from there.
    fn replay_missed(&self, cursor: &mut Cursor, last: i64) -> Result<Option<Tensor>> {
        let files = split_files(
            &*self.fs,
            &self.base_path,
            self.stream_index,
            self.source_index,
            cursor.next,
        )?;
        if files.last_key_value().is_none_or(|(&l, _)| l < last) {
            return Err(Error::DataLoss {
                location: layout::source_dir(&self.base_path, self.stream_index, self.source_index),
                reason: format!(
                    "the dispatcher has assigned splits up to {last}, but not all split files \
                     from {} to {last} are there",
                    cursor.next
                ),
            });
        }
        cursor.files = files;
        match self.replay_file(cursor)? {
            Some(split) => Ok(split),
            None => Err(Error::Internal(format!(
                "{}: split file {} vanished",
                self.what(),
                cursor.next
            ))),
        }
    }
}

impl SplitProvider for SnapshotSplitProvider {
    fn get_next(&self) -> Result<Option<Tensor>> {
        let mut guard = lock(&self.cursor);
        let cursor = &mut *guard;
        if let Some(replayed) = self.replay_file(cursor)? {
            return Ok(replayed);
        }
        if cursor.in_flight.is_empty() && cursor.answered.is_empty() && cursor.end.is_none() {
            let pending = self
                .source
                .start_split(self.source_index, cursor.repetition);
            cursor.in_flight.push_back(pending);
            self.prefetch(cursor);
        }
        // Bounded by the requests in flight: none is made in this loop.
        while !cursor.answered.contains_key(&cursor.next) && !cursor.in_flight.is_empty() {
            self.receive(cursor)?;
        }
        if let Some(split) = cursor.answered.remove(&cursor.next) {
            cursor.next += 1;
            self.prefetch(cursor);
            return Ok(Some(split));
        }
        // Every request has been answered, and none with the next split.
        if let Some(end) = cursor.end
            && end <= cursor.next
        {
            if cursor.answered.is_empty() {
                if end < cursor.next {
                    return Err(Error::Internal(format!(
                        "{}: expected split {} but the dispatcher ended the splits at {end}",
                        self.what(),
                        cursor.next
                    )));
                }
                return Ok(None);
            }
            // A split was assigned after that end (one whose file failed
            // to write is handed out again): the end was not the last word.
            cursor.end = None;
        }
        let lowest = match (cursor.answered.first_key_value(), cursor.end) {
            (Some((&local, _)), Some(end)) => local.min(end),
            (Some((&local, _)), None) => local,
            (None, Some(end)) => end,
            (None, None) => {
                return Err(Error::Internal(format!(
                    "{}: no answer to a GetSnapshotSplit",
                    self.what()
                )));
            }
        };
        self.replay_missed(cursor, lowest - 1)
    }

    fn reset(&self) -> Result<()> {
        let mut guard = lock(&self.cursor);
        let cursor = &mut *guard;
        while !cursor.in_flight.is_empty() {
            self.receive(cursor)?;
        }
        if let Some((&local, _)) = cursor.answered.first_key_value() {
            // Assigned to this stream and not written: dropping it would
            // lose it from the snapshot.
            return Err(Error::FailedPrecondition(format!(
                "{}: reset before split {local} of repetition {} was read",
                self.what(),
                cursor.repetition
            )));
        }
        cursor.end = None;
        cursor.repetition += 1;
        Ok(())
    }

    fn cardinality(&self) -> i64 {
        tfdata_dataset::UNKNOWN_CARDINALITY
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::snapshot::split_files::escape_glob;
    use crate::snapshot::split_source::SplitAnswer;
    use prost::Message;
    use tfdata_core::tfrecord;

    /// The dispatcher's side of a stream, in memory: per source, the
    /// splits of each repetition; it writes each split's file before
    /// answering, as the dispatcher does, and can "lose" answers.
    pub(crate) struct FakeDispatcher {
        pub base_path: String,
        pub stream: i64,
        pub repetitions: Vec<Vec<Vec<i64>>>,
        state: Mutex<FakeState>,
    }

    #[derive(Default)]
    struct FakeState {
        /// Per source: (repetition, index within it, local index).
        cursors: Vec<(i64, usize, i64)>,
        global: i64,
        /// Answers to drop (the request is served, the caller errs).
        lose: usize,
    }

    impl FakeDispatcher {
        pub(crate) fn new(base_path: &str, stream: i64, repetitions: Vec<Vec<Vec<i64>>>) -> Self {
            let cursors = vec![(0, 0, 0); repetitions.len()];
            FakeDispatcher {
                base_path: base_path.to_string(),
                stream,
                repetitions,
                state: Mutex::new(FakeState {
                    cursors,
                    ..Default::default()
                }),
            }
        }

        pub(crate) fn lose_next_answers(&self, n: usize) {
            lock(&self.state).lose = n;
        }
    }

    pub(crate) fn write_split_file(path: &str, value: i64) {
        let proto = tfdata_core::element::tensor_to_proto(&Tensor::scalar(value));
        let mut buf = Vec::new();
        tfrecord::write_record(&mut buf, &proto.encode_to_vec()).unwrap();
        std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
        std::fs::write(path, buf).unwrap();
    }

    impl SplitSource for FakeDispatcher {
        fn next_split(&self, source: i64, repetition: i64) -> Result<(Option<Tensor>, i64)> {
            let mut st = lock(&self.state);
            let st = &mut *st;
            let s = source as usize;
            let (rep, _, local) = st.cursors[s];
            if repetition < rep {
                return Ok((None, local));
            }
            if repetition > rep {
                st.cursors[s] = (repetition, 0, local);
            }
            let (rep, index, local) = st.cursors[s];
            let splits = self.repetitions[s].get(rep as usize);
            let Some(&value) = splits.and_then(|r| r.get(index)) else {
                return Ok((None, local));
            };
            write_split_file(
                &layout::split_file(&self.base_path, self.stream, source, rep, local, st.global),
                value,
            );
            st.cursors[s] = (rep, index + 1, local + 1);
            st.global += 1;
            if st.lose > 0 {
                st.lose -= 1;
                return Err(Error::Unavailable("answer lost".into()));
            }
            Ok((Some(Tensor::scalar(value)), local))
        }
    }

    fn drain(p: &SnapshotSplitProvider) -> Vec<i64> {
        let mut out = Vec::new();
        for _ in 0..1000 {
            match p.get_next().unwrap() {
                Some(t) => out.push(t.to_scalar::<i64>().unwrap()),
                None => return out,
            }
        }
        panic!("no end of splits");
    }

    fn local_fs() -> Arc<dyn FileSystem> {
        tfdata_dataset::io::registry::file_system("/").unwrap()
    }

    #[test]
    fn fresh_stream_asks_the_dispatcher_through_repetitions() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        let fake = Arc::new(FakeDispatcher::new(
            base,
            0,
            vec![vec![vec![1, 2, 3], vec![4, 5]]],
        ));
        let p = SnapshotSplitProvider::open(local_fs(), base, 0, 0, fake.clone()).unwrap();
        assert_eq!(p.num_replayable(), 0);
        assert_eq!(drain(&p), [1, 2, 3]);
        // Asking again in the same repetition: still its end.
        assert_eq!(p.get_next().unwrap(), None);
        p.reset().unwrap();
        assert_eq!(drain(&p), [4, 5]);
        assert!(
            std::path::Path::new(&layout::split_file(base, 0, 0, 1, 4, 4)).exists(),
            "the fake wrote the files"
        );
    }

    /// After a restart the files come first, in local-index order (not
    /// name order: split_10 sorts before split_2), across repetitions; then
    /// the dispatcher continues where they end.
    #[test]
    fn restart_replays_files_in_local_order_then_asks() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        let values: Vec<i64> = (0..12).map(|i| 100 + i).collect();
        let fake = Arc::new(FakeDispatcher::new(
            base,
            3,
            vec![vec![values.clone(), vec![7, 8, 9]]],
        ));
        {
            let first = SnapshotSplitProvider::open(local_fs(), base, 3, 0, fake.clone())
                .unwrap()
                .with_prefetch(0);
            assert_eq!(drain(&first), values);
            first.reset().unwrap();
            assert_eq!(
                first
                    .get_next()
                    .unwrap()
                    .unwrap()
                    .to_scalar::<i64>()
                    .unwrap(),
                7
            );
            // The writer dies here.
        }
        let again = SnapshotSplitProvider::open(local_fs(), base, 3, 0, fake.clone()).unwrap();
        assert_eq!(again.num_replayable(), 13);
        // Repetition 0 from files, ending where repetition 1's files begin.
        assert_eq!(drain(&again), values);
        again.reset().unwrap();
        // 7 from its file, then 8 and 9 from the dispatcher.
        assert_eq!(drain(&again), [7, 8, 9]);
    }

    /// An answer lost in flight: the dispatcher assigned the split (and
    /// wrote its file) but the caller never got it. The next answer is
    /// ahead; the provider reads the missed splits from their files.
    #[test]
    fn lost_answers_are_read_from_files() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![vec![1, 2, 3, 4]]]));
        let p = SnapshotSplitProvider::open(local_fs(), base, 0, 0, fake.clone())
            .unwrap()
            .with_prefetch(0);
        assert_eq!(
            p.get_next().unwrap().unwrap().to_scalar::<i64>().unwrap(),
            1
        );
        fake.lose_next_answers(2);
        assert!(p.get_next().is_err());
        assert!(p.get_next().is_err());
        assert_eq!(drain(&p), [2, 3, 4]);
    }

    /// Prefetching keeps several requests in flight and loses one answer
    /// in the middle: the splits still come out once each, in local order,
    /// the lost one read from its file; the error surfaces once.
    #[test]
    fn prefetched_answers_lost_in_flight_are_read_from_files() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        let values: Vec<i64> = (0..20).collect();
        let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![values.clone()]]));
        let p = SnapshotSplitProvider::open(local_fs(), base, 0, 0, fake.clone()).unwrap();
        let mut out = Vec::new();
        let mut errors = 0;
        for i in 0..100 {
            if i == 3 {
                fake.lose_next_answers(1);
            }
            match p.get_next() {
                Ok(Some(t)) => out.push(t.to_scalar::<i64>().unwrap()),
                Ok(None) => break,
                Err(_) => errors += 1,
            }
        }
        assert_eq!(out, values);
        assert_eq!(errors, 1);
    }

    /// A dispatcher that serves a stream's concurrent requests in another
    /// order than they were sent: each odd request takes two splits and
    /// answers with the second; the next request gets the first.
    struct Swapping {
        inner: Arc<FakeDispatcher>,
        stash: Mutex<Option<SplitAnswer>>,
    }

    impl SplitSource for Swapping {
        fn next_split(&self, source: i64, repetition: i64) -> Result<SplitAnswer> {
            if let Some(stashed) = lock(&self.stash).take() {
                return Ok(stashed);
            }
            let first = self.inner.next_split(source, repetition)?;
            if first.0.is_none() {
                return Ok(first);
            }
            let second = self.inner.next_split(source, repetition)?;
            *lock(&self.stash) = Some(first);
            Ok(second)
        }
    }

    #[test]
    fn prefetched_answers_out_of_order_come_out_in_local_order() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        let first: Vec<i64> = (10..21).collect();
        let fake = Arc::new(FakeDispatcher::new(
            base,
            0,
            vec![vec![first.clone(), vec![1, 2, 3]]],
        ));
        let swapping = Arc::new(Swapping {
            inner: fake,
            stash: Mutex::new(None),
        });
        let p = SnapshotSplitProvider::open(local_fs(), base, 0, 0, swapping).unwrap();
        assert_eq!(drain(&p), first);
        p.reset().unwrap();
        assert_eq!(drain(&p), [1, 2, 3]);
    }

    /// A writer that dies with prefetched splits in hand: the restarted one
    /// replays every split assigned to the stream, the prefetched ones
    /// included, so none is lost from the snapshot.
    #[test]
    fn splits_prefetched_before_a_crash_are_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        let values: Vec<i64> = (0..10).collect();
        let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![values.clone()]]));
        {
            let first = SnapshotSplitProvider::open(local_fs(), base, 0, 0, fake.clone()).unwrap();
            for want in 0..3 {
                let got = first.get_next().unwrap().unwrap();
                assert_eq!(got.to_scalar::<i64>().unwrap(), want);
            }
        }
        let again = SnapshotSplitProvider::open(local_fs(), base, 0, 0, fake).unwrap();
        assert_eq!(again.num_replayable(), 3 + SPLIT_PREFETCH);
        assert_eq!(drain(&again), values);
    }

    #[test]
    fn damaged_split_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        let fake = Arc::new(FakeDispatcher::new(base, 0, vec![vec![vec![]]]));
        write_split_file(&layout::split_file(base, 0, 0, 0, 0, 0), 5);
        let garbage = layout::split_file(base, 0, 0, 0, 1, 1);
        std::fs::write(&garbage, b"not a record").unwrap();
        let p = SnapshotSplitProvider::open(local_fs(), base, 0, 0, fake.clone()).unwrap();
        assert_eq!(
            p.get_next().unwrap().unwrap().to_scalar::<i64>().unwrap(),
            5
        );
        let err = p.get_next().unwrap_err();
        assert!(matches!(err, Error::DataLoss { .. }), "{err}");
        assert!(err.to_string().contains("split_1_1"), "{err}");

        // A gap in the local indices.
        std::fs::remove_file(&garbage).unwrap();
        write_split_file(&layout::split_file(base, 0, 0, 0, 2, 2), 6);
        let err = SnapshotSplitProvider::open(local_fs(), base, 0, 0, fake.clone())
            .err()
            .unwrap();
        assert!(err.to_string().contains("not contiguous"), "{err}");

        // A name that is not a split's; temporary files are ignored.
        std::fs::remove_file(layout::split_file(base, 0, 0, 0, 2, 2)).unwrap();
        std::fs::write(
            format!("{}/split_1_1__x.tmp", layout::repetition_dir(base, 0, 0, 0)),
            b"",
        )
        .unwrap();
        SnapshotSplitProvider::open(local_fs(), base, 0, 0, fake.clone()).unwrap();
        std::fs::write(
            format!("{}/split_x", layout::repetition_dir(base, 0, 0, 0)),
            b"",
        )
        .unwrap();
        let err = SnapshotSplitProvider::open(local_fs(), base, 0, 0, fake)
            .err()
            .unwrap();
        assert!(err.to_string().contains("split_x"), "{err}");
    }

    #[test]
    fn glob_metacharacters_in_the_path_are_literal() {
        assert_eq!(escape_glob("/a[1]/b*c?\\"), "/a\\[1]/b\\*c\\?\\\\");
        let dir = tempfile::tempdir().unwrap();
        let base = format!("{}/snap[1]*", dir.path().display());
        write_split_file(&layout::split_file(&base, 0, 0, 0, 0, 0), 9);
        let fake = Arc::new(FakeDispatcher::new(&base, 0, vec![vec![vec![]]]));
        let p = SnapshotSplitProvider::open(local_fs(), &base, 0, 0, fake).unwrap();
        assert_eq!(p.num_replayable(), 1);
        assert_eq!(
            p.get_next().unwrap().unwrap().to_scalar::<i64>().unwrap(),
            9
        );
    }
}
