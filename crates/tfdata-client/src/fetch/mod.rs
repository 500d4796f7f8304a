//! The fetchers: how a reader gets one task's elements from its worker,
//! used by the per-iterator driver (`iteration`) and by coordinated reads
//! (`rounds`) alike.
//!
//! A fetcher first opens tfdata's element stream on the task's worker
//! ([`stream`]); a worker that answers UNIMPLEMENTED (TensorFlow's, or ours
//! with the stream off) is read with `GetElement` from then on
//! ([`get_element`]). What they share (the reader's channel and budgets,
//! one connection per worker, the wording and retrying of a worker's
//! errors) is in [`context`], which depends on neither. Both hand the reader
//! [`received`] elements, whose buffers are provably theirs alone.

mod context;
mod get_element;
pub mod received;
mod stream;

use std::sync::Arc;

use tfdata_proto::data as wire;

pub(crate) use context::{
    Delivery, FetchContext, FetchEnd, FetchParams, Item, Origin, StreamWindow, TaskEndpoint,
};
pub(crate) use get_element::decode_off_runtime;
pub(crate) use received::ReceivedElement;
pub(crate) use stream::decode_batch_off_runtime;

/// Reads one task until its end of sequence: streamed from tfdata workers,
/// with `GetElement` from others (and for cross-trainer caches).
pub(crate) async fn fetch_task(ctx: Arc<FetchContext>, task: wire::TaskInfo) -> FetchEnd {
    let task = TaskEndpoint::of(&task);
    if ctx.trainer_id.is_empty() {
        match ctx.stream_channel(&task.address) {
            Ok(Some(channel)) => match stream::stream_task(&ctx, &task, channel).await {
                stream::Streamed::Ended(end) => return end,
                stream::Streamed::NotOffered => {
                    tracing::debug!(worker = %task.address, "no element stream; reading with GetElement");
                    ctx.no_stream(&task.address);
                }
            },
            Ok(None) => {}
            Err(e) => return ctx.fail(e).await,
        }
    }
    get_element::get_elements(ctx, task).await
}
