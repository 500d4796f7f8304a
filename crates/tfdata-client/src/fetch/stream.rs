//! Reading a task over tfdata's element stream (`tfdata.stream.ElementStream`,
//! tfdata workers only): the worker sends batches of elements within the
//! credit the fetcher grants, a window of elements and bytes per task
//! ([`StreamWindow`](super::context::StreamWindow)); a batch's credit is
//! granted again once the reader has taken all its elements, so a slow
//! reader slows the worker instead of growing memory. The fetcher reads on
//! while the reader is busy (within the window), so it reads the end of
//! sequence, which needs no credit, as soon as the worker sends it, and
//! closes the stream: the worker's sign that every batch arrived.

use std::collections::VecDeque;
use std::sync::Arc;

use tfdata_core::batch::BatchSplits;
use tfdata_core::{Error, Result};
use tfdata_proto::tfdata::stream::{ElementBatch, StreamRequest};
use tfdata_rpc::security::RpcChannel;
use tokio::sync::mpsc;

use super::context::{
    CreditPool, CreditReturn, DECODE_OFF_RUNTIME_BYTES, Delivery, FetchContext, FetchEnd, Item,
    Origin, TaskEndpoint, lock, retry_or_fail,
};
use super::received::ReceivedElement;

pub(crate) enum Streamed {
    Ended(FetchEnd),
    /// The worker does not serve the element stream.
    NotOffered,
}

/// The elements of a stream batch, decompressed on a blocking thread when it
/// carries large compressed chunks.
pub(crate) async fn decode_batch_off_runtime(batch: ElementBatch) -> Result<Vec<ReceivedElement>> {
    let large = batch
        .chunks
        .iter()
        .any(|c| c.snappy_uncompressed_size >= DECODE_OFF_RUNTIME_BYTES as u64);
    // The batch was read off the stream and is consumed here: its
    // elements' buffers are cuts of it that nothing else holds.
    let decode = move || {
        tfdata_core::batch::decode_batch(batch)
            .map(|elements| elements.into_iter().map(ReceivedElement::decoded).collect())
    };
    if !large {
        return decode();
    }
    tokio::task::spawn_blocking(decode)
        .await
        .map_err(|e| Error::Internal(format!("decoding a batch failed: {e}")))?
}

/// Reads `task` over the element stream, reconnecting after transient
/// failures. Elements in flight when a stream breaks are lost, as a
/// `GetElement` response in flight is, unless the read is positioned
/// (`FetchContext::positioned`): then every stream opens at the index after
/// the last element received, and a worker that restarted its task skips
/// to it.
pub(crate) async fn stream_task(
    ctx: &FetchContext,
    task: &TaskEndpoint,
    channel: RpcChannel,
) -> Streamed {
    let pool = Arc::new(CreditPool::default());
    let window = ctx.stream_window;
    let mut attempt = 0u32;
    let mut opened_once = false;
    loop {
        // A new stream may send the window minus what the reader still holds.
        let (credit_elements, credit_bytes) = {
            let mut st = lock(&pool.state);
            st.returned_elements = 0;
            st.returned_bytes = 0;
            (
                window.elements.saturating_sub(st.held_elements).max(1),
                window.bytes.saturating_sub(st.held_bytes).max(1),
            )
        };
        let (requests, rx) = mpsc::channel(4);
        let open = StreamRequest {
            task_id: task.task_id.0,
            compression: ctx.compression as i32,
            credit_elements,
            credit_bytes,
            // The task's index of the next element this reader wants.
            start_index: if ctx.positioned {
                ctx.next_index(&task.worker)
            } else {
                0
            },
            received_batches: 0,
            lane: None,
            epoch: 0,
        };
        if requests.try_send(open).is_err() {
            return Streamed::Ended(FetchEnd::Stopped);
        }
        let call = tokio::select! {
            r = tfdata_rpc::channel::open_element_stream(
                channel.clone(),
                tokio_stream::wrappers::ReceiverStream::new(rx),
            ) => r,
            () = ctx.cancel.cancelled() => return Streamed::Ended(FetchEnd::Stopped),
        };
        let mut stream = match call {
            Ok(reader) => reader,
            Err(status) if status.code() == tonic::Code::Unimplemented && !opened_once => {
                return Streamed::NotOffered;
            }
            Err(status) => match retry_or_fail(ctx, task, status, &mut attempt).await {
                Some(end) => return Streamed::Ended(end),
                None => continue,
            },
        };
        opened_once = true;
        // Batches read and not yet handed to the reader. The fetcher reads
        // on while its trainer is busy (at most the window: the worker sends
        // no more), so it reads the end at once and closes the stream, which
        // tells the worker everything arrived (the task may complete), and a
        // broken stream is noticed with what came before it kept.
        let mut pending: VecDeque<Pending> = VecDeque::new();
        // Batches of this stream handed over: the worker counts their
        // splits delivered once told (`StreamRequest.received_batches`).
        let mut handed: u64 = 0;
        loop {
            let message = tokio::select! {
                m = stream.message() => m,
                permit = ctx.reserve(), if !pending.is_empty() => {
                    let Some(permit) = permit else {
                        return Streamed::Ended(FetchEnd::Stopped);
                    };
                    if let Some(p) = pending.pop_front() {
                        p.hand_over(ctx, task, permit);
                        handed += 1;
                        // Best effort: every credit grant says it again.
                        let _ = requests.try_send(StreamRequest {
                            received_batches: handed,
                            ..Default::default()
                        });
                    }
                    continue;
                }
                () = pool.returned.notified() => {
                    let (elements, bytes) = {
                        let mut st = lock(&pool.state);
                        (std::mem::take(&mut st.returned_elements), std::mem::take(&mut st.returned_bytes))
                    };
                    if elements > 0 || bytes > 0 {
                        let credit = StreamRequest {
                            credit_elements: elements,
                            credit_bytes: bytes,
                            received_batches: handed,
                            ..Default::default()
                        };
                        // The stream is gone if this fails; reading says why.
                        let _ = requests.send(credit).await;
                    }
                    continue;
                }
                () = ctx.cancel.cancelled() => return Streamed::Ended(FetchEnd::Stopped),
            };
            let mut message_bytes = 0;
            let mut batch = match message.and_then(|m| {
                m.map(|rope| {
                    message_bytes = bytes::Buf::remaining(&rope) as u64;
                    tfdata_rpc::raw_grpc::decode::<ElementBatch>(rope)
                })
                .transpose()
            }) {
                Ok(Some(batch)) => batch,
                // A worker ends a stream only after the end of sequence; an
                // early end is a broken stream.
                Ok(None) => {
                    if !hand_over_all(ctx, task, &mut pending).await {
                        return Streamed::Ended(FetchEnd::Stopped);
                    }
                    let status = tonic::Status::unavailable(format!(
                        "element stream of task {} ended early",
                        task.task_id
                    ));
                    match retry_or_fail(ctx, task, status, &mut attempt).await {
                        Some(end) => return Streamed::Ended(end),
                        None => break,
                    }
                }
                Err(status) => {
                    if !hand_over_all(ctx, task, &mut pending).await {
                        return Streamed::Ended(FetchEnd::Stopped);
                    }
                    match retry_or_fail(ctx, task, status, &mut attempt).await {
                        Some(end) => return Streamed::Ended(end),
                        None => break,
                    }
                }
            };
            attempt = 0;
            let end = batch.end_of_sequence;
            let payload_bytes = batch.payload_bytes;
            let first = batch.first_element_index;
            let released = std::mem::take(&mut batch.released_splits);
            let decoded = match tfdata_core::batch::whole_splits(&batch) {
                Ok(names) => decode_batch_off_runtime(batch).await.map(|e| (names, e)),
                Err(e) => Err(e),
            };
            let (whole_splits, elements) = match decoded {
                Ok(decoded) => decoded,
                Err(e) => {
                    // The elements before the bad batch go first, as
                    // before a worker's error.
                    if !hand_over_all(ctx, task, &mut pending).await {
                        return Streamed::Ended(FetchEnd::Stopped);
                    }
                    return Streamed::Ended(ctx.fail(task.error(e)).await);
                }
            };
            if !elements.is_empty() {
                let count = elements.len() as u64;
                ctx.received(true, count, message_bytes);
                {
                    let mut st = lock(&pool.state);
                    st.held_elements += count;
                    st.held_bytes += payload_bytes;
                }
                let credit = CreditReturn {
                    pool: Arc::clone(&pool),
                    elements: count,
                    bytes: payload_bytes,
                };
                ctx.arrived(&task.worker, first, count as i64);
                let origin = Origin::Numbered {
                    worker: Arc::clone(&task.worker),
                    first,
                };
                // distributed_epoch: the names go to the receipts, and with
                // the batch (every element, named or not) to the reader's
                // checkpoint accounting.
                let splits = ctx.reports_receipts().then_some(whole_splits);
                let receipts = splits.clone();
                pending.push_back(Pending {
                    delivery: Delivery::batch(elements, credit, origin, splits),
                    receipts,
                    released,
                });
            }
            if end {
                ctx.read_end(task.task_id);
                // Closed: the worker's sign that every batch arrived.
                drop((stream, requests));
                if !hand_over_all(ctx, task, &mut pending).await {
                    return Streamed::Ended(FetchEnd::Stopped);
                }
                return Streamed::Ended(FetchEnd::EndOfSequence);
            }
        }
    }
}

/// A batch read from a stream, waiting to be handed to the reader.
struct Pending {
    delivery: Delivery,
    /// What it holds of splits, for the receipts once handed over.
    receipts: Option<BatchSplits>,
    /// Splits the worker says the dispatcher released since its last batch.
    released: Vec<tfdata_proto::data::TfdataSplitRanges>,
}

impl Pending {
    /// Hands the batch over and records its receipts, with no await in
    /// between: a fetcher stopped meanwhile records nothing it did not
    /// deliver.
    fn hand_over(self, ctx: &FetchContext, task: &TaskEndpoint, permit: mpsc::Permit<'_, Item>) {
        permit.send(Ok(self.delivery));
        if let Some(splits) = &self.receipts {
            ctx.record_receipts(task.task_id, splits, &self.released);
        }
    }
}

/// Hands every pending batch over, in order; `false` if the reader is gone.
async fn hand_over_all(
    ctx: &FetchContext,
    task: &TaskEndpoint,
    pending: &mut VecDeque<Pending>,
) -> bool {
    while let Some(p) = pending.pop_front() {
        let Some(permit) = ctx.reserve().await else {
            return false;
        };
        p.hand_over(ctx, task, permit);
    }
    true
}
