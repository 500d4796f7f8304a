//! A task runner: the task's [`Producer`] (its pipeline on a thread of its
//! own, feeding a bounded buffer) and the strategies that serve it. Every
//! task serves first come, first served; a coordinated-read task
//! (`num_consumers` set) also serves rounds, a cross-trainer-cache task its
//! trainers' window.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tfdata_core::{Error, Result, TaskId};
use tfdata_dataset::{Dataset, IterContext};
use tfdata_proto::data::TaskDef;

use crate::lane_task::LaneTask;
use crate::producer::buffer::PipelineTimes;
use crate::producer::{BufferLimits, Producer};
use crate::splits::SplitLedger;
use crate::strategy::Next;
use crate::strategy::cross_trainer::CrossTrainerCache;
use crate::strategy::fcfs::{Batch, FirstComeFirstServed};
use crate::strategy::round_robin::RoundRobin;

pub struct TaskRunner {
    pub def: TaskDef,
    producer: Producer,
    first_come_first_served: FirstComeFirstServed,
    /// Present for coordinated reads (`num_consumers` set).
    round_robin: Option<RoundRobin>,
    /// Present for cross-trainer-cache jobs.
    cache: Option<CrossTrainerCache>,
    /// Its leased splits, for a drain (distributed_epoch).
    pub ledger: Arc<SplitLedger>,
    /// The task's log span (task, iteration, job, dataset and worker ids).
    pub span: tracing::Span,
    completion: Completion,
    /// Present for a deterministic read's task: it runs no pipeline of its
    /// own; each lane stream runs one (`crate::lane_task`).
    lanes: Option<LaneTask>,
}

/// When a task is complete, which the worker then reports (the dispatcher
/// stops holding its splits): its data has ended, and no element stream is
/// still delivering it. A stream counts until its reader has closed it after
/// the end, which proves every batch before the end arrived. Reported at the
/// first reader's end instead, a batch still on its way to another reader
/// would be lost with the worker, its splits no longer held, and that reader
/// would wait for a task that is done. Streams send the end without waiting
/// for credit (`TaskRunner::data_has_ended`), and readers read it while
/// their trainer is busy, so a reader that is not consuming holds up
/// nobody's end.
struct Completion {
    /// A reader saw the end of the data first. Kept apart from the watch
    /// below: `due` needs both sides (`data_ended`, `stream_closed`) to store
    /// and then load sequentially consistent atomics, so that one of them
    /// sees the other's store; a watch's lock does not promise that.
    ended: AtomicBool,
    /// The same, for streams waiting for credit: they then send the end.
    ended_watch: tokio::sync::watch::Sender<bool>,
    /// Element streams serving the task.
    streams: AtomicUsize,
    reported: AtomicBool,
}

impl Default for Completion {
    fn default() -> Self {
        Completion {
            ended: AtomicBool::new(false),
            ended_watch: tokio::sync::watch::Sender::new(false),
            streams: AtomicUsize::new(0),
            reported: AtomicBool::new(false),
        }
    }
}

impl Completion {
    /// Whether the task is complete and nobody has said so yet.
    fn due(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
            && self.streams.load(Ordering::SeqCst) == 0
            && !self.reported.swap(true, Ordering::SeqCst)
    }
}

impl Drop for TaskRunner {
    fn drop(&mut self) {
        self.ledger.forget_providers();
    }
}

impl TaskRunner {
    /// A runner with an empty buffer of `capacity` elements; the pipeline
    /// starts with [`run_pipeline`](Self::run_pipeline) once the dataset is loaded.
    pub fn new(def: TaskDef, capacity: usize) -> Self {
        Self::with_cache_budget(def, capacity, 0)
    }

    /// A runner whose cross-trainer cache (if the task uses one) holds up to
    /// `cache_budget_bytes`.
    pub fn with_cache_budget(def: TaskDef, capacity: usize, cache_budget_bytes: u64) -> Self {
        Self::with_limits(def, BufferLimits::elements(capacity), cache_budget_bytes)
    }

    pub fn with_limits(def: TaskDef, limits: BufferLimits, cache_budget_bytes: u64) -> Self {
        TaskRunner {
            producer: Producer::new(TaskId(def.task_id), limits),
            first_come_first_served: FirstComeFirstServed::new(consumed_elements(&def)),
            cache: def
                .use_cross_trainer_cache
                .then(|| CrossTrainerCache::new(cache_budget_bytes)),
            round_robin: def
                .num_consumers
                .map(|n| RoundRobin::new(n.max(1) as usize, consumed_elements(&def))),
            lanes: LaneTask::of(&def),
            def,
            ledger: Arc::new(SplitLedger::idle()),
            span: tracing::Span::none(),
            completion: Completion::default(),
        }
    }

    /// The runner as a worker runs it: with the worker's drain and a span.
    pub fn in_worker(mut self, ledger: Arc<SplitLedger>, span: tracing::Span) -> Self {
        self.ledger = ledger;
        self.span = span;
        self
    }

    pub fn task_id(&self) -> TaskId {
        TaskId(self.def.task_id)
    }

    /// Whether elements are to be compressed (known once the pipeline runs).
    pub fn compress(&self) -> bool {
        self.producer.compress()
    }

    /// The served components that are SparseTensor variants (known once the
    /// pipeline runs): tfdata's element stream cannot carry them.
    pub fn sparse_variants(&self) -> Arc<[usize]> {
        self.producer.form().sparse_variants
    }

    /// Fails the task before its pipeline starts (bad definition, unloadable dataset).
    pub fn fail(&self, err: Error) {
        self.producer.fail(err);
    }

    /// The dispatcher deleted the task: readers still holding it see the
    /// end (without a completion report) and the pipeline stops.
    pub fn cancel(&self) {
        self.first_come_first_served.end();
        self.producer.close();
        if let Some(lanes) = &self.lanes {
            lanes.remove();
        }
    }

    /// The lanes of a deterministic read's task; `None` for other tasks.
    pub fn lanes(&self) -> Option<&LaneTask> {
        self.lanes.as_ref()
    }

    /// Runs `dataset` on a new thread; elements are served in `form`
    /// (compressed, SparseTensor variants; a `bool` means compressed or
    /// not). `ctx` carries the sources' remote split providers in
    /// distributed_epoch mode.
    pub fn run_pipeline(
        &self,
        dataset: Dataset,
        ctx: IterContext,
        form: impl Into<crate::pipeline::ServedForm>,
    ) {
        let ledger = Arc::clone(&self.ledger);
        let _entered = self.span.enter();
        self.producer.run(
            dataset,
            ctx,
            form.into(),
            Box::new(move || ledger.pipeline_ended()),
        );
    }

    /// Coordinated reads: consumer `consumer`'s element of round `round`.
    pub async fn next_for_round(
        &self,
        consumer: i64,
        round: i64,
        allow_skip: bool,
    ) -> Result<Next> {
        let Some(rr) = &self.round_robin else {
            return Err(Error::FailedPrecondition(format!(
                "task {} is not a coordinated-read (round-robin) task; do not send consumer_index",
                self.def.task_id
            )));
        };
        self.producer.check()?;
        rr.get(&self.producer, consumer, round, allow_skip).await
    }

    /// Cross-trainer cache reads: the element at `trainer_id`'s cursor.
    pub async fn next_for_trainer(&self, trainer_id: &str) -> Result<Next> {
        let Some(cache) = &self.cache else {
            return Err(Error::FailedPrecondition(format!(
                "task {} does not use a cross-trainer cache; do not send trainer_id",
                self.def.task_id
            )));
        };
        self.producer.check()?;
        cache.get(&self.producer, trainer_id).await
    }

    /// A reader saw the end of the data first (`first` of an end of
    /// sequence). Returns whether the task is now complete: the caller
    /// reports it.
    #[must_use]
    pub fn data_ended(&self) -> bool {
        self.completion.ended.store(true, Ordering::SeqCst);
        self.completion.ended_watch.send_replace(true);
        self.completion.due()
    }

    /// Returns once a reader has seen the end of the data (at once if one
    /// has): a stream out of credit then sends the end all the same.
    pub async fn data_has_ended(&self) {
        let mut ended = self.completion.ended_watch.subscribe();
        // Err only if the sender is gone, and it lives as long as `self`.
        let _ = ended.wait_for(|e| *e).await;
    }

    /// An element stream starts serving the task; it counts until
    /// [`Self::stream_closed`].
    pub fn stream_opened(&self) {
        self.completion.streams.fetch_add(1, Ordering::SeqCst);
    }

    /// An element stream of the task has ended. Returns whether the task is
    /// now complete: the caller reports it.
    #[must_use]
    pub fn stream_closed(&self) -> bool {
        self.completion.streams.fetch_sub(1, Ordering::SeqCst);
        self.completion.due()
    }

    /// Whether the task is first come, first served (not a coordinated read
    /// nor a cross-trainer cache): the kind element streams serve.
    pub fn first_come_first_served(&self) -> bool {
        self.round_robin.is_none() && self.cache.is_none()
    }

    /// How the task's pipeline has spent its time so far.
    pub fn pipeline_times(&self) -> PipelineTimes {
        self.producer.times()
    }

    /// Elements and bytes waiting in the task's buffer.
    pub fn buffered(&self) -> (usize, usize) {
        self.producer.buffered()
    }

    /// Lets the buffer prefetch up to `elements` for a streaming reader.
    pub fn raise_prefetch(&self, elements: usize) {
        self.producer.raise_capacity(elements);
    }

    /// Moves the task on to element `index` if it is behind it (see
    /// `FirstComeFirstServed::skip_to`).
    pub async fn skip_to(&self, index: i64) {
        self.first_come_first_served
            .skip_to(&self.producer, index)
            .await;
    }

    /// Up to `max_elements` elements (at least one), the later ones only
    /// while their bytes stay within `max_bytes`, waiting for the first;
    /// or the end. Cancel-safe.
    pub async fn next_batch(&self, max_elements: usize, max_bytes: usize) -> Result<Batch> {
        self.first_come_first_served
            .next_batch(&self.producer, max_elements, max_bytes)
            .await
    }

    /// The next element, first come first served. With `allow_skip`, an empty
    /// buffer answers [`Next::Skip`] at once instead of waiting.
    pub async fn next(&self, allow_skip: bool) -> Result<Next> {
        self.first_come_first_served
            .next(&self.producer, allow_skip)
            .await
    }
}

/// A restored shared job's (or coordinated read's) elements consumed
/// before the restore: never served. Malformed ranges (our dispatcher checks them first) are logged
/// and serve everything, as a task of an ordinary job.
fn consumed_elements(def: &TaskDef) -> tfdata_core::ranges::IndexRanges {
    match tfdata_core::ranges::IndexRanges::from_bounds(&def.tfdata_consumed_elements) {
        Ok(ranges) => ranges,
        Err(e) => {
            tracing::warn!(task = def.task_id, error = %e, "task definition has malformed consumed elements; serving every element");
            Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_core::{Element, Tensor, element};
    use tfdata_proto::data::get_element_response::Element as Payload;

    /// An uncompressed element's int64 scalar.
    fn scalar(payload: Payload) -> i64 {
        let Payload::Uncompressed(u) = payload else {
            panic!("compressed")
        };
        element::from_uncompressed(&u).unwrap().components[0]
            .to_scalar::<i64>()
            .unwrap()
    }

    async fn drain(task: &TaskRunner) -> (Vec<i64>, Option<Error>) {
        let mut out = Vec::new();
        loop {
            match task.next(false).await {
                Ok(Next::Element { payload, .. }) => out.push(scalar(payload)),
                Ok(Next::EndOfSequence { .. }) => return (out, None),
                Ok(Next::Skip) => unreachable!(),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    #[tokio::test]
    async fn serves_in_order_then_sticky_end() {
        let task = TaskRunner::new(TaskDef::default(), 2);
        task.run_pipeline(Dataset::range(5), IterContext::new(), false);
        let (values, err) = drain(&task).await;
        assert_eq!(values, vec![0, 1, 2, 3, 4]);
        assert!(err.is_none());
        assert!(matches!(
            task.next(true).await,
            Ok(Next::EndOfSequence { first: false })
        ));
    }

    #[tokio::test]
    async fn a_panicking_function_fails_the_task_stickily() {
        tfdata_dataset::register_function("worker_test_panic_at_3", |e: Element| {
            if e.components[0].to_scalar::<i64>()? == 3 {
                panic!("bad element");
            }
            Ok(Element::single(Tensor::scalar(
                e.components[0].to_scalar::<i64>()?,
            )))
        });
        let task = TaskRunner::new(TaskDef::default(), 1);
        task.run_pipeline(
            Dataset::range(10).map("worker_test_panic_at_3"),
            IterContext::new(),
            false,
        );
        let (values, err) = drain(&task).await;
        assert_eq!(values, vec![0, 1, 2]);
        let msg = err.unwrap().to_string();
        assert!(
            msg.contains("worker_test_panic_at_3") && msg.contains("bad element"),
            "{msg}"
        );
        assert!(task.next(false).await.is_err());
    }

    #[tokio::test]
    async fn a_failed_task_answers_every_later_read_with_the_same_error() {
        let task = TaskRunner::new(TaskDef::default(), 1);
        task.fail(Error::FailedPrecondition("cannot load".into()));
        let first = task.next(false).await.err().unwrap();
        for again in [
            task.next(false).await.err().unwrap(),
            task.next_batch(8, usize::MAX).await.err().unwrap(),
        ] {
            assert_eq!(again.to_string(), first.to_string());
            assert_eq!(again.code(), tonic::Code::FailedPrecondition);
            let status = tonic::Status::from(again);
            assert_eq!(status.message(), "failed precondition: cannot load");
        }
    }

    #[tokio::test]
    async fn a_round_robin_task_that_runs_dry_fails_every_consumer_alike() {
        let def = TaskDef {
            num_consumers: Some(1),
            ..Default::default()
        };
        let task = TaskRunner::new(def, 1);
        task.run_pipeline(Dataset::range(0), IterContext::new(), false);
        let first = task.next_for_round(0, 0, false).await.err().unwrap();
        assert!(first.to_string().contains("end of sequence"), "{first}");
        let again = task.next_for_round(0, 1, false).await.err().unwrap();
        assert_eq!(again.to_string(), first.to_string());
        assert_eq!(again.code(), tonic::Code::FailedPrecondition);
    }

    /// The consumer that waits for a round another consumer runs gets the
    /// end of the data too, not a wait for ever (issue 34).
    #[tokio::test]
    async fn a_round_that_runs_dry_fails_the_consumer_waiting_for_it() {
        let def = TaskDef {
            num_consumers: Some(2),
            ..Default::default()
        };
        let task = TaskRunner::new(def, 4);
        task.run_pipeline(Dataset::range(1), IterContext::new(), false);
        let both = async {
            tokio::join!(
                task.next_for_round(0, 0, false),
                task.next_for_round(1, 0, false)
            )
        };
        let (a, b) = tokio::time::timeout(std::time::Duration::from_secs(10), both)
            .await
            .expect("a consumer waited for a round that can never run");
        for result in [a, b] {
            let err = result.err().unwrap();
            assert!(err.to_string().contains("end of sequence"), "{err}");
            assert_eq!(err.code(), tonic::Code::FailedPrecondition);
        }
    }

    /// A provider of `range` splits whose leases record their release.
    struct LeasingSplits {
        inner: tfdata_dataset::splits::RangeSplitProvider,
        released: std::sync::Arc<std::sync::Mutex<Vec<i64>>>,
    }

    impl tfdata_dataset::splits::SplitProvider for LeasingSplits {
        fn get_next(&self) -> Result<Option<Tensor>> {
            self.inner.get_next()
        }
        fn get_next_leased(&self) -> Result<Option<(Tensor, tfdata_core::Lineage)>> {
            let Some(split) = self.inner.get_next()? else {
                return Ok(None);
            };
            let v = split.to_scalar::<i64>()?;
            let released = std::sync::Arc::clone(&self.released);
            let lease = tfdata_core::SplitLease::new(move || released.lock().unwrap().push(v));
            Ok(Some((split, tfdata_core::Lineage::of(lease))))
        }
        fn reset(&self) -> Result<()> {
            self.inner.reset()
        }
        fn cardinality(&self) -> i64 {
            self.inner.cardinality()
        }
    }

    /// The element's value: the first of its int64s.
    fn value_of(payload: Payload) -> i64 {
        let Payload::Compressed(c) = payload else {
            panic!("a compressed dataset served an uncompressed element")
        };
        element::uncompress(&c).unwrap().components[0]
            .to_vec::<i64>()
            .unwrap()[0]
    }

    #[tokio::test]
    async fn an_element_encoded_ahead_is_served_once_in_order_and_keeps_its_split_until_then() {
        // Large enough (512 KiB) to be encoded ahead when compressed.
        tfdata_dataset::register_function("worker_test_large_element", |e: Element| {
            let v = e.components[0].to_scalar::<i64>()?;
            Ok(Element::single(Tensor::vector(&vec![v; 64 << 10])))
        });
        let source = Dataset::range(12);
        let dataset = source.clone().map("worker_test_large_element");
        let released = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut ctx = IterContext::new();
        ctx.split_providers.insert(
            source.op_key(),
            std::sync::Arc::new(LeasingSplits {
                inner: tfdata_dataset::splits::RangeSplitProvider::new(0, 12, 1),
                released: std::sync::Arc::clone(&released),
            }),
        );
        let task = TaskRunner::new(TaskDef::default(), 4);
        task.run_pipeline(dataset, ctx, true);

        let mut served = Vec::new();
        let check = |served: &[i64]| {
            for v in released.lock().unwrap().iter() {
                assert!(
                    served.contains(v),
                    "split {v} was released before its element was served (served {served:?})"
                );
            }
        };
        // GetElement readers and a stream reader take turns; the stream
        // reader must get the element already taken ahead, not skip it.
        for turn in 0.. {
            if turn % 3 == 2 {
                match task.next_batch(1, usize::MAX).await.unwrap() {
                    Batch::Elements { elements, index } => {
                        assert_eq!(index, served.len() as i64);
                        for e in elements {
                            served.push(e.components[0].to_vec::<i64>().unwrap()[0]);
                        }
                    }
                    Batch::EndOfSequence { .. } => break,
                }
            } else {
                match task.next(false).await.unwrap() {
                    Next::Element { payload, index } => {
                        assert_eq!(index, served.len() as i64);
                        served.push(value_of(payload));
                    }
                    Next::EndOfSequence { .. } => break,
                    Next::Skip => unreachable!("a waiting read skipped"),
                }
            }
            // Give the pipeline time to refill, so the next element is
            // buffered and taken ahead.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            check(&served);
        }
        assert_eq!(served, (0..12).collect::<Vec<_>>());
    }

    /// A restored shared job's task produces the elements its consumers
    /// had consumed and serves none of them, to streams and `GetElement`
    /// alike, numbering the rest as in the sequence.
    #[tokio::test]
    async fn a_restored_task_serves_none_of_the_consumed_elements() {
        let def = TaskDef {
            tfdata_consumed_elements: vec![0, 2, 4, 7, 9, 10],
            ..Default::default()
        };
        let task = TaskRunner::new(def, 3);
        task.run_pipeline(Dataset::range(14), IterContext::new(), false);
        let mut served = Vec::new();
        for turn in 0.. {
            if turn % 2 == 0 {
                match task.next_batch(8, usize::MAX).await.unwrap() {
                    Batch::Elements { elements, index } => {
                        for (i, e) in elements.iter().enumerate() {
                            let v = e.components[0].to_scalar::<i64>().unwrap();
                            assert_eq!(v, index + i as i64, "numbered as in the sequence");
                            served.push(v);
                        }
                    }
                    Batch::EndOfSequence { .. } => break,
                }
            } else {
                match task.next(false).await.unwrap() {
                    Next::Element { payload, index } => {
                        let v = scalar(payload);
                        assert_eq!(v, index);
                        served.push(v);
                    }
                    Next::EndOfSequence { .. } => break,
                    Next::Skip => unreachable!(),
                }
            }
        }
        assert_eq!(served, vec![2, 3, 7, 8, 10, 11, 12, 13]);
    }

    /// A coordinated read's task numbers each round's elements by their
    /// place in the sequence (consumer `c` of 2 gets `k * 2 + c`, also
    /// across a skipped round), and a restored one drops the rounds its
    /// consumers had consumed and numbers the rest from there.
    #[tokio::test]
    async fn round_robin_elements_keep_their_index_and_a_restored_task_skips_consumed_rounds() {
        async fn round(task: &TaskRunner, round: i64) -> Vec<(i64, i64)> {
            let (a, b) = tokio::join!(
                task.next_for_round(0, round, false),
                task.next_for_round(1, round, false)
            );
            [a.unwrap(), b.unwrap()]
                .into_iter()
                .map(|next| match next {
                    Next::Element { payload, index } => (index, scalar(payload)),
                    _ => panic!("no element in a round that waits"),
                })
                .collect()
        }
        let def = TaskDef {
            num_consumers: Some(2),
            ..Default::default()
        };
        let task = TaskRunner::new(def.clone(), 4);
        task.run_pipeline(Dataset::range(100), IterContext::new(), false);
        assert_eq!(round(&task, 0).await, vec![(0, 0), (1, 1)]);
        assert_eq!(round(&task, 1).await, vec![(2, 2), (3, 3)]);

        let restored = TaskRunner::new(
            TaskDef {
                tfdata_consumed_elements: vec![0, 6],
                ..def
            },
            4,
        );
        restored.run_pipeline(Dataset::range(100), IterContext::new(), false);
        assert_eq!(round(&restored, 0).await, vec![(6, 6), (7, 7)]);
        assert_eq!(round(&restored, 1).await, vec![(8, 8), (9, 9)]);
    }

    #[tokio::test]
    async fn skip_when_nothing_is_buffered() {
        let task = TaskRunner::new(TaskDef::default(), 1);
        assert!(matches!(task.next(true).await, Ok(Next::Skip)));
        task.fail(Error::FailedPrecondition("cannot load".into()));
        assert!(task.next(true).await.is_err());
    }
}
