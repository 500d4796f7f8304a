//! Reading a task with `GetElement`, one element per call (TensorFlow's
//! workers, workers with the stream off, cross-trainer caches). Each fetcher
//! holds at most one call in flight; the context's permits bound requests in
//! flight plus elements buffered for the reader (a permit travels with its
//! element and is returned when the reader takes it).

use std::sync::Arc;

use tfdata_core::{Error, Result, element};
use tfdata_proto::data::{self as wire, get_element_response};
use tfdata_rpc::retry::backoff;

use super::context::{
    DECODE_OFF_RUNTIME_BYTES, Delivery, FetchContext, FetchEnd, Origin, TaskEndpoint, retry_or_fail,
};
use super::received::ReceivedElement;

/// A `GetElement` answer's element. The answer was read off the network
/// and is consumed here: the element's buffers are cuts of it (or of the
/// chunk it decompresses) that nothing else holds.
fn decode(
    task: &TaskEndpoint,
    element: Option<get_element_response::Element>,
) -> Result<ReceivedElement> {
    let decoded = match element {
        Some(get_element_response::Element::Compressed(c)) => element::uncompress(&c),
        Some(get_element_response::Element::Uncompressed(u)) => element::from_uncompressed(&u),
        None => Err(Error::Internal(format!(
            "worker {} answered GetElement for task {} with no element",
            task.address, task.task_id
        ))),
    };
    decoded.map(ReceivedElement::decoded)
}

/// A `GetElement` answer's element, decoded on a blocking thread when the
/// payload is large and compressed.
pub(crate) async fn decode_off_runtime(
    task: &TaskEndpoint,
    element: Option<get_element_response::Element>,
) -> Result<ReceivedElement> {
    let large = matches!(&element, Some(get_element_response::Element::Compressed(c))
        if c.data.len() >= DECODE_OFF_RUNTIME_BYTES);
    if !large {
        return decode(task, element);
    }
    let task = task.clone();
    tokio::task::spawn_blocking(move || decode(&task, element))
        .await
        .map_err(|e| Error::Internal(format!("decoding an element failed: {e}")))?
}

/// Reads `task` with `GetElement` until its end of sequence.
pub(crate) async fn get_elements(ctx: Arc<FetchContext>, task: TaskEndpoint) -> FetchEnd {
    let mut client = match ctx.worker(&task.address) {
        Ok(c) => c,
        Err(e) => return ctx.fail(e).await,
    };
    let mut attempt = 0u32;
    loop {
        let Some(permit) = ctx.permit().await else {
            return FetchEnd::Stopped;
        };
        let request = wire::GetElementRequest {
            task_id: task.task_id.0,
            allow_skip: false,
            trainer_id: ctx.trainer_id.clone(),
            ..Default::default()
        };
        let response = tokio::select! {
            r = client.get_element(request) => r,
            () = ctx.cancel.cancelled() => return FetchEnd::Stopped,
        };
        let response = match response {
            Ok(r) => r.into_inner(),
            Err(status) => {
                drop(permit);
                match retry_or_fail(&ctx, &task, status, &mut attempt).await {
                    Some(end) => return end,
                    None => continue,
                }
            }
        };
        attempt = 0;
        if response.end_of_sequence {
            return FetchEnd::EndOfSequence;
        }
        if response.skip_task {
            drop(permit);
            tokio::time::sleep(backoff(0)).await;
            continue;
        }
        let bytes = prost::Message::encoded_len(&response) as u64;
        ctx.received(false, 1, bytes);
        let element = match decode_off_runtime(&task, response.element).await {
            Ok(element) => element,
            Err(e) => return ctx.fail(e).await,
        };
        if !ctx
            .send(Ok(Delivery::element(
                element,
                permit,
                Origin::Unnumbered {
                    worker: Arc::clone(&task.worker),
                },
            )))
            .await
        {
            return FetchEnd::Stopped;
        }
    }
}
