//! The driver of a deterministic read: heartbeats the dispatcher to learn
//! the iteration's tasks, keeps one element stream open per own lane (each
//! on the task [`Placement`] gives it), feeds what arrives to the ordered
//! [`Merge`] and hands the merged elements to the reader, one delivery
//! each, tagged with their lane and lane index (the reader's checkpoint).
//!
//! A lane's stream that fails (its worker died, restarted, was stopped)
//! is moved to another task and reopened at the first lane index not
//! received; the merge drops anything received twice. Only an error that a
//! retry cannot cure (the pipeline's own, a refused request) ends the read.
//! The read ends when every own lane ended and was handed out; nothing is
//! reported to the dispatcher about splits (lanes are remade from their
//! start, so nothing is lost with a worker).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tfdata_core::{Error, IterationClientId, Result, TaskId};
use tfdata_proto::data as wire;
use tfdata_proto::tfdata::stream::{Compression as StreamCompression, ElementBatch, StreamRequest};
use tfdata_rpc::CancellationToken;
use tfdata_rpc::security::{ClientSecurity, RpcChannel};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::Deterministic;
use super::checkpoint::LaneStart;
use super::merge::{Merge, Next};
use super::placement::Placement;
use crate::dispatcher::DispatcherClient;
use crate::fetch::{Delivery, Item, ReceivedElement, TaskEndpoint, decode_batch_off_runtime};
use crate::metrics::{ReaderStats, TargetTime};

/// The most merged elements handed to the reader in one delivery. The
/// reader's channel holds `max_outstanding_requests` deliveries, so up to
/// that many runs wait there outside the reorder window, as stream batches
/// do in other reads.
const RUN_ELEMENTS: usize = 64;
/// The first wait before a failed lane's stream reopens; it doubles per
/// failure in a row up to [`MAX_REOPEN_BACKOFF`].
const REOPEN_BACKOFF: Duration = Duration::from_millis(20);
const MAX_REOPEN_BACKOFF: Duration = Duration::from_secs(1);

/// A lane whose stream fails this many times in a row without delivering
/// anything ends the read: some error is not going away.
pub(crate) const MAX_LANE_FAILURES_IN_A_ROW: u32 = 600;

pub(crate) struct DriveParams {
    pub setting: Deterministic,
    pub start: LaneStart,
    pub compression: StreamCompression,
    pub security: ClientSecurity,
    pub refresh: Duration,
    pub stats: Arc<ReaderStats>,
    /// Lanes whose end the driver read, with their length (the reader's
    /// checkpoint says a lane ended once it consumed that far).
    pub ends: Arc<Mutex<HashMap<u32, i64>>>,
}

/// What a lane's stream tells the driver.
enum LaneEvent {
    Batch {
        lane: u32,
        generation: u64,
        first: i64,
        elements: Vec<(ReceivedElement, u64)>,
    },
    End {
        lane: u32,
        generation: u64,
    },
    Failed {
        lane: u32,
        generation: u64,
        status: tonic::Status,
    },
}

/// A lane's open stream.
struct LaneStream {
    task: TaskId,
    worker: Arc<str>,
    generation: u64,
    requests: mpsc::UnboundedSender<StreamRequest>,
    abort: AbortHandle,
    /// Credit given back by the merge, not yet sent.
    returned: (u64, u64),
}

impl Drop for LaneStream {
    fn drop(&mut self) {
        self.abort.abort();
    }
}

/// The driver's state.
struct Driver {
    epoch: u64,
    compression: StreamCompression,
    security: ClientSecurity,
    merge: Merge<ReceivedElement>,
    placement: Placement,
    streams: HashMap<u32, LaneStream>,
    /// Lanes without a stream, and when they may (re)open.
    unplaced: HashMap<u32, Instant>,
    failures: HashMap<u32, u32>,
    generation: u64,
    channels: HashMap<String, RpcChannel>,
    events_tx: mpsc::UnboundedSender<LaneEvent>,
    ends: Arc<Mutex<HashMap<u32, i64>>>,
    /// The lane the merge waits on while others hold elements, since when.
    waiting: Option<(u32, Instant)>,
    /// Reorder waits since the last heartbeat, per (worker, lane).
    waits: HashMap<(Arc<str>, u32), Duration>,
    /// Workers whose port refused a stream, for the next heartbeat.
    refused: Vec<String>,
    /// The window fill last added to the process gauge.
    gauge: i64,
    stats: Arc<ReaderStats>,
}

pub(crate) async fn drive(
    dispatcher: DispatcherClient,
    params: DriveParams,
    client_id: IterationClientId,
    tx: mpsc::Sender<Item>,
    cancel: CancellationToken,
) {
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let starts = params.start.lanes.iter().map(|(k, (i, e))| (*k, *i, *e));
    let merge = Merge::new(
        starts,
        params.setting.reorder_window_elements,
        params.setting.reorder_window_bytes,
    );
    let now = Instant::now();
    let unplaced = params
        .start
        .lanes
        .iter()
        .filter(|(_, (_, ended))| !ended)
        .map(|(k, _)| (*k, now))
        .collect();
    let mut d = Driver {
        epoch: params.start.epoch,
        compression: params.compression,
        security: params.security,
        merge,
        placement: Placement::default(),
        streams: HashMap::new(),
        unplaced,
        failures: HashMap::new(),
        generation: 0,
        channels: HashMap::new(),
        events_tx,
        ends: params.ends,
        waiting: None,
        waits: HashMap::new(),
        refused: Vec::new(),
        gauge: 0,
        stats: Arc::clone(&params.stats),
    };
    let mut target = TargetTime::default();
    let mut next_heartbeat = Instant::now();
    let outcome: Result<()> = loop {
        match d.hand_out(&tx) {
            HandOut::Done => break Ok(()),
            HandOut::ReaderGone => break Ok(()),
            HandOut::Blocked | HandOut::Waiting => {}
        }
        d.track_wait();
        d.return_credit();
        if let Err(e) = d.place_lanes() {
            break Err(e);
        }
        let blocked = d.merge.ready();
        let next_reopen = d
            .unplaced
            .values()
            .min()
            .copied()
            .filter(|_| !d.placement.is_empty());
        tokio::select! {
            () = cancel.cancelled() => break Ok(()),
            () = tokio::time::sleep_until(next_heartbeat) => {
                next_heartbeat = Instant::now() + params.refresh;
                if let Err(e) = d.heartbeat(&dispatcher, client_id, &mut target, &params.stats).await {
                    break Err(e);
                }
            }
            Some(event) = events.recv() => {
                if let Err(e) = d.on_event(event) {
                    break Err(e);
                }
            }
            permit = tx.reserve(), if blocked => {
                let Ok(permit) = permit else { break Ok(()) };
                if let Some(run) = d.take_run() {
                    permit.send(Ok(run));
                }
            }
            () = sleep_until_some(next_reopen) => {}
        }
    };
    d.streams.clear();
    crate::metrics::reorder_window_changed(-d.gauge);
    if let Err(e) = outcome {
        let _ = tx.send(Err(e)).await;
    }
    drop(tx);
    // Whatever waits were counted still go to the dispatcher's view.
    let waits = d.reorder_waits();
    if !waits.is_empty() {
        let request = wire::ClientHeartbeatRequest {
            iteration_client_id: client_id.0,
            tfdata_reorder_waits: waits,
            ..Default::default()
        };
        let _ = dispatcher.reader_heartbeat(request).await;
    }
    dispatcher.release_reader(client_id).await;
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

enum HandOut {
    Done,
    ReaderGone,
    /// The reader's channel is full.
    Blocked,
    /// The merge waits on a lane.
    Waiting,
}

impl Driver {
    /// Hands the reader every element the merge has ready, as far as its
    /// channel has room.
    fn hand_out(&mut self, tx: &mpsc::Sender<Item>) -> HandOut {
        loop {
            if !self.merge.ready() {
                return HandOut::Waiting;
            }
            if self.merge.done() {
                return HandOut::Done;
            }
            let permit = match tx.try_reserve() {
                Ok(permit) => permit,
                Err(mpsc::error::TrySendError::Full(())) => return HandOut::Blocked,
                Err(mpsc::error::TrySendError::Closed(())) => return HandOut::ReaderGone,
            };
            match self.take_run() {
                Some(run) => permit.send(Ok(run)),
                None if self.merge.done() => return HandOut::Done,
                None => return HandOut::Waiting,
            }
        }
    }

    /// Up to [`RUN_ELEMENTS`] elements the merge has ready, in order, as one
    /// delivery; `None` when the next one has not arrived (or all ended).
    /// One delivery per element cost the reader a channel send and a thread
    /// wake-up each: a third of the deterministic read's time in
    /// `tfdata-bench --scenario dynamic-deterministic`.
    fn take_run(&mut self) -> Option<Delivery> {
        let mut elements = Vec::new();
        let mut positions = Vec::new();
        while elements.len() < RUN_ELEMENTS {
            let Next::Element {
                lane,
                index,
                element,
                bytes,
            } = self.merge.next()
            else {
                break;
            };
            self.given_out(lane, bytes);
            elements.push(element);
            positions.push((lane, index));
        }
        (!elements.is_empty()).then(|| Delivery::lane_run(elements, positions))
    }

    /// An element of `lane` left the window: its credit goes back.
    fn given_out(&mut self, lane: u32, bytes: u64) {
        if let Some(s) = self.streams.get_mut(&lane) {
            s.returned.0 += 1;
            s.returned.1 += bytes;
        }
    }

    /// Sends each stream the credit the merge gave back.
    fn return_credit(&mut self) {
        for s in self.streams.values_mut() {
            let (elements, bytes) = std::mem::take(&mut s.returned);
            if elements > 0 || bytes > 0 {
                let _ = s.requests.send(StreamRequest {
                    credit_elements: elements,
                    credit_bytes: bytes,
                    ..Default::default()
                });
            }
        }
    }

    /// Counts the merge's wait on a lane while other lanes hold elements.
    fn track_wait(&mut self) {
        let now = Instant::now();
        let waiting_on = self
            .merge
            .waiting_on()
            .filter(|_| self.merge.buffered().0 > 0);
        if let Some((lane, since)) = self.waiting
            && waiting_on != Some(lane)
        {
            self.add_wait(lane, now - since);
            self.waiting = None;
        }
        if self.waiting.is_none()
            && let Some(lane) = waiting_on
        {
            self.waiting = Some((lane, now));
        }
        let fill = self.merge.buffered().0 as i64;
        crate::metrics::reorder_window_changed(fill - self.gauge);
        self.gauge = fill;
    }

    fn add_wait(&mut self, lane: u32, waited: Duration) {
        let worker: Arc<str> = self
            .streams
            .get(&lane)
            .map_or_else(|| Arc::from("(unplaced)"), |s| Arc::clone(&s.worker));
        crate::metrics::reorder_waited(&worker, waited);
        *self.waits.entry((worker, lane)).or_default() += waited;
    }

    /// The waits since the last heartbeat, for the next one (a wait under
    /// way counts up to now).
    fn reorder_waits(&mut self) -> Vec<wire::TfdataReorderWait> {
        if let Some((lane, since)) = self.waiting {
            let now = Instant::now();
            self.add_wait(lane, now - since);
            self.waiting = Some((lane, now));
        }
        let (elements, _) = self.merge.buffered();
        let limit = self.merge.window_elements() as u64;
        let mut waits: Vec<wire::TfdataReorderWait> = self
            .waits
            .drain()
            .map(|((worker, lane), waited)| wire::TfdataReorderWait {
                worker_address: worker.to_string(),
                lane: i64::from(lane),
                waited_ms: waited.as_millis() as u64,
                window_elements: elements as u64,
                window_limit: limit,
            })
            .filter(|w| w.waited_ms > 0)
            .collect();
        waits.sort_by_key(|w| w.lane);
        waits
    }

    async fn heartbeat(
        &mut self,
        dispatcher: &DispatcherClient,
        client_id: IterationClientId,
        target: &mut TargetTime,
        stats: &ReaderStats,
    ) -> Result<()> {
        let (target_processing_time_nsec, stats) = target.heartbeat(stats);
        let request = wire::ClientHeartbeatRequest {
            iteration_client_id: client_id.0,
            target_processing_time_nsec,
            tfdata_stats: Some(stats),
            tfdata_reorder_waits: self.reorder_waits(),
            tfdata_unreachable_workers: std::mem::take(&mut self.refused),
            ..Default::default()
        };
        match dispatcher.reader_heartbeat(request).await {
            Ok(response) => {
                let gone = self.placement.update(response.task_info);
                let now = Instant::now();
                // Lanes on a task that left (its worker was lost) move now.
                let moved: Vec<u32> = self
                    .streams
                    .iter()
                    .filter(|(_, s)| gone.contains(&s.task))
                    .map(|(lane, _)| *lane)
                    .collect();
                for lane in moved {
                    self.streams.remove(&lane);
                    self.unplaced.insert(lane, now);
                }
                Ok(())
            }
            // The dispatcher restarting, or unreachable a while: the lanes
            // read on from the workers meanwhile.
            Err(e) if e.is_retryable() => {
                tracing::debug!(error = %e, "client heartbeat failed; will retry");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Opens a stream for every lane due to (re)open.
    fn place_lanes(&mut self) -> Result<()> {
        let now = Instant::now();
        let due: Vec<u32> = self
            .unplaced
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(lane, _)| *lane)
            .collect();
        for lane in due {
            let Some(task) = self.placement.place(lane, now) else {
                return Ok(());
            };
            self.unplaced.remove(&lane);
            self.open(lane, &task)?;
        }
        Ok(())
    }

    fn channel(&mut self, address: &str) -> Result<RpcChannel> {
        if let Some(c) = self.channels.get(address) {
            return Ok(c.clone());
        }
        let channel = tfdata_rpc::channel::channel(address, &self.security)?;
        self.channels.insert(address.to_string(), channel.clone());
        Ok(channel)
    }

    /// Opens `lane`'s stream on `task` at the first index not received,
    /// with the lane's credit less what it holds in the window.
    fn open(&mut self, lane: u32, task: &wire::TaskInfo) -> Result<()> {
        let endpoint = TaskEndpoint::of(task);
        let channel = self.channel(&endpoint.address)?;
        let (credit_elements, credit_bytes) = self.merge.lane_credit();
        let (held_elements, held_bytes) = self.merge.lane_buffered(lane);
        self.generation += 1;
        let generation = self.generation;
        let (requests, rx) = mpsc::unbounded_channel();
        let start_index = self.merge.resume_index(lane);
        let _ = requests.send(StreamRequest {
            task_id: task.task_id,
            compression: self.compression as i32,
            credit_elements: credit_elements.saturating_sub(held_elements).max(1),
            credit_bytes: credit_bytes.saturating_sub(held_bytes).max(1),
            start_index,
            received_batches: 0,
            lane: Some(i64::from(lane)),
            epoch: self.epoch,
        });
        tracing::debug!(lane, task = task.task_id, worker = %task.worker_address, start_index, "opening lane stream");
        let handle = tokio::spawn(stream_lane(
            channel,
            rx,
            lane,
            generation,
            self.events_tx.clone(),
        ));
        self.streams.insert(
            lane,
            LaneStream {
                task: endpoint.task_id,
                worker: Arc::clone(&endpoint.worker),
                generation,
                requests,
                abort: handle.abort_handle(),
                returned: (0, 0),
            },
        );
        Ok(())
    }

    fn current(&self, lane: u32, generation: u64) -> bool {
        self.streams
            .get(&lane)
            .is_some_and(|s| s.generation == generation)
    }

    fn on_event(&mut self, event: LaneEvent) -> Result<()> {
        match event {
            LaneEvent::Batch {
                lane,
                generation,
                first,
                elements,
            } => {
                if !self.current(lane, generation) {
                    return Ok(());
                }
                let count = elements.len();
                let received_bytes: u64 = elements.iter().map(|(_, b)| *b).sum();
                crate::metrics::received(true).add(&self.stats, count as u64, received_bytes);
                let sizes: Vec<u64> = elements.iter().map(|(_, b)| *b).collect();
                let kept = self.merge.accept(lane, first, elements)?;
                // Elements received twice (a reopened stream started
                // behind) are dropped; the worker counted their credit.
                let dropped: u64 = sizes[..count - kept].iter().sum();
                if let Some(s) = self.streams.get_mut(&lane) {
                    s.returned.0 += (count - kept) as u64;
                    s.returned.1 += dropped;
                }
                self.failures.remove(&lane);
            }
            LaneEvent::End { lane, generation } => {
                if !self.current(lane, generation) {
                    return Ok(());
                }
                self.merge.end(lane);
                let length = self.merge.resume_index(lane);
                self.ends
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(lane, length);
                self.streams.remove(&lane);
            }
            LaneEvent::Failed {
                lane,
                generation,
                status,
            } => {
                if !self.current(lane, generation) {
                    return Ok(());
                }
                let stream = self.streams.remove(&lane).expect("current stream");
                if tfdata_rpc::peer::is_refused(&status) {
                    self.refused.push(stream.worker.to_string());
                }
                // A worker at its lane-stream limit (`max_lane_streams`)
                // refuses with RESOURCE_EXHAUSTED: another worker may have
                // room, so the lane moves as it does off a failed worker.
                let full = status.code() == tonic::Code::ResourceExhausted;
                let err = Error::from(status);
                let failures = self.failures.entry(lane).or_default();
                *failures += 1;
                if !(err.is_retryable() || full) || *failures > MAX_LANE_FAILURES_IN_A_ROW {
                    return Err(Error::Context {
                        context: Some(format!(
                            "Failed to read lane {lane} of the deterministic read from worker {} \
                             (task {})",
                            stream.worker, stream.task
                        )),
                        source: Arc::new(err),
                    });
                }
                tracing::debug!(lane, worker = %stream.worker, error = %err, "lane stream failed; moving the lane");
                let now = Instant::now();
                self.placement.avoid(stream.task, now);
                let backoff = REOPEN_BACKOFF
                    .saturating_mul(1 << (*failures - 1).min(6))
                    .min(MAX_REOPEN_BACKOFF);
                self.unplaced.insert(lane, now + backoff);
            }
        }
        Ok(())
    }
}

/// Reads one lane's stream, telling the driver what arrives, until the
/// lane's end or the stream's failure.
async fn stream_lane(
    channel: RpcChannel,
    requests: mpsc::UnboundedReceiver<StreamRequest>,
    lane: u32,
    generation: u64,
    events: mpsc::UnboundedSender<LaneEvent>,
) {
    let failed = |status| LaneEvent::Failed {
        lane,
        generation,
        status,
    };
    let requests = tokio_stream::wrappers::UnboundedReceiverStream::new(requests);
    let mut stream = match tfdata_rpc::channel::open_element_stream(channel, requests).await {
        Ok(stream) => stream,
        Err(status) => {
            let _ = events.send(failed(status));
            return;
        }
    };
    loop {
        let batch = match stream.message().await.and_then(|m| {
            m.map(tfdata_rpc::raw_grpc::decode::<ElementBatch>)
                .transpose()
        }) {
            Ok(Some(batch)) => batch,
            Ok(None) => {
                let _ = events.send(failed(tonic::Status::unavailable(format!(
                    "the stream of lane {lane} ended before the lane's end"
                ))));
                return;
            }
            Err(status) => {
                let _ = events.send(failed(status));
                return;
            }
        };
        let end = batch.end_of_sequence;
        let first = batch.first_element_index;
        let payload = batch.payload_bytes;
        let elements = match decode_batch_off_runtime(batch).await {
            Ok(elements) => elements,
            Err(e) => {
                let _ = events.send(failed(tonic::Status::data_loss(format!(
                    "lane {lane}: a batch could not be decoded: {e}"
                ))));
                return;
            }
        };
        if !elements.is_empty() {
            // The worker counts a batch's payload against the credit; each
            // element carries its share, so the credit returns exactly.
            let n = elements.len() as u64;
            let elements = elements
                .into_iter()
                .enumerate()
                .map(|(i, e)| (e, payload / n + u64::from((i as u64) < payload % n)))
                .collect();
            let sent = events.send(LaneEvent::Batch {
                lane,
                generation,
                first,
                elements,
            });
            if sent.is_err() {
                return;
            }
        }
        if end {
            let _ = events.send(LaneEvent::End { lane, generation });
            return;
        }
    }
}
