//! gRPC framing without tonic's codec copies, for the element stream.
//!
//! tonic encodes every outgoing message into one contiguous buffer and
//! assembles every incoming message into one (two copies of each megabyte a
//! worker sends, on a path where the kernel's socket copies are the only ones
//! needed). Here a message is a *rope*: a list of `Bytes` parts. The sender
//! writes small fields into shared buffers and hands large `bytes` fields
//! (tensor buffers) to HTTP/2 as parts of their own, which h2 writes to the
//! socket with vectored I/O, uncopied. The receiver keeps the HTTP/2 DATA
//! frames as they arrive and decodes protobuf straight from them through a
//! [`Rope`] `Buf`, whose `copy_to_bytes` slices instead of copying when a
//! field lies within one frame (prost decodes `bytes` fields with it).
//!
//! The wire format is plain gRPC (a 5-byte prefix per message: a compressed
//! flag, always 0 here, and a big-endian length; `grpc-status` trailers), so
//! tonic peers interoperate with it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::Stream;
use http_body::{Body, Frame};
use tonic::Status;
use tonic::codegen::http::{self, HeaderMap, HeaderValue};

/// Bytes of gRPC's per-message prefix.
pub const PREFIX_BYTES: usize = 5;

/// Parts at least this long travel as their own `Bytes` (no copy); shorter
/// ones are copied into the current shared buffer (below h2's own chaining
/// threshold a separate part would cost a frame for little data).
pub const OWN_PART_BYTES: usize = 16 << 10;

/// Builds one message as a list of parts (see the module docs).
#[derive(Default)]
pub struct RopeWriter {
    parts: Vec<Bytes>,
    current: BytesMut,
}

impl RopeWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Copies `data` into the current buffer.
    pub fn put_slice(&mut self, data: &[u8]) {
        self.current.extend_from_slice(data);
    }

    /// A protobuf varint.
    pub fn put_varint(&mut self, value: u64) {
        prost::encoding::encode_varint(value, &mut self.current);
    }

    /// A protobuf field key.
    pub fn put_key(&mut self, field: u32, wire_type: prost::encoding::WireType) {
        prost::encoding::encode_key(field, wire_type, &mut self.current);
    }

    /// `message`'s fields (no length prefix), copied.
    pub fn put_fields(&mut self, message: &impl prost::Message) {
        message.encode_raw(&mut self.current);
    }

    /// `data` as a part of its own when it is large, else copied.
    pub fn put_bytes(&mut self, data: Bytes) {
        if data.len() < OWN_PART_BYTES {
            self.current.extend_from_slice(&data);
            return;
        }
        if !self.current.is_empty() {
            self.parts.push(self.current.split().freeze());
        }
        self.parts.push(data);
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum::<usize>() + self.current.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message's parts, with gRPC's prefix in front.
    pub fn into_message(mut self) -> Vec<Bytes> {
        let len = self.len();
        let mut prefix = BytesMut::with_capacity(PREFIX_BYTES);
        prefix.put_u8(0); // not compressed
        prefix.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
        if !self.current.is_empty() {
            self.parts.push(self.current.split().freeze());
        }
        let mut parts = Vec::with_capacity(self.parts.len() + 1);
        parts.push(prefix.freeze());
        parts.extend(self.parts);
        parts
    }
}

/// A response body streaming gRPC messages given as parts, then
/// `grpc-status` trailers (the error's status if the stream ends with one).
pub struct RopeBody<S> {
    messages: S,
    pending: VecDeque<Bytes>,
    done: bool,
    /// Responses end with `grpc-status` trailers; requests just end.
    trailers: bool,
}

impl<S> RopeBody<S> {
    /// A response body.
    pub fn new(messages: S) -> Self {
        RopeBody {
            messages,
            pending: VecDeque::new(),
            done: false,
            trailers: true,
        }
    }

    /// A request body (a client's stream of messages; no trailers).
    pub fn request(messages: S) -> Self {
        RopeBody {
            trailers: false,
            ..Self::new(messages)
        }
    }
}

impl<S> Body for RopeBody<S>
where
    S: Stream<Item = Result<Vec<Bytes>, Status>> + Unpin,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        loop {
            if let Some(part) = this.pending.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(part))));
            }
            if this.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.messages).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(parts))) => this.pending.extend(parts),
                Poll::Ready(Some(Err(status))) => {
                    this.done = true;
                    if !this.trailers {
                        return Poll::Ready(Some(Err(status)));
                    }
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers(&status)))));
                }
                Poll::Ready(None) => {
                    this.done = true;
                    if !this.trailers {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers(&Status::ok(""))))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.pending.is_empty()
    }
}

/// `grpc-status` (and message) trailers for `status`.
pub fn trailers(status: &Status) -> HeaderMap {
    let mut map = HeaderMap::new();
    if status.add_header(&mut map).is_err() {
        // Only a message that cannot be a header value gets here.
        map.insert("grpc-status", HeaderValue::from(status.code() as i32));
    }
    map
}

/// The response headers of a gRPC call that streams messages.
pub fn response_headers() -> http::response::Builder {
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header("content-type", "application/grpc")
}

/// A streaming call's request headers (the channel fills in the origin).
pub fn request_headers(path: &'static str) -> http::request::Builder {
    http::Request::builder()
        .method(http::Method::POST)
        .uri(path)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
}

/// One small message (fields copied) with its prefix.
pub fn small_message(message: &impl prost::Message) -> Vec<Bytes> {
    let mut w = RopeWriter::new();
    w.put_fields(message);
    w.into_message()
}

/// Decodes a message from its frames (`bytes` fields slice the frames).
pub fn decode<M: prost::Message + Default>(rope: Rope) -> Result<M, Status> {
    M::decode(rope).map_err(|e| Status::internal(format!("malformed message: {e}")))
}

/// A message as the DATA frames that carried it, readable as one `Buf`
/// whose `copy_to_bytes` slices a frame instead of copying when it can.
#[derive(Debug, Default)]
pub struct Rope {
    parts: VecDeque<Bytes>,
    remaining: usize,
}

impl Rope {
    pub fn push(&mut self, part: Bytes) {
        if !part.is_empty() {
            self.remaining += part.len();
            self.parts.push_back(part);
        }
    }
}

impl Rope {
    /// The first [`PREFIX_BYTES`] bytes, not consumed (the caller checked
    /// there are that many).
    fn peek_prefix(&self) -> [u8; PREFIX_BYTES] {
        let mut prefix = [0u8; PREFIX_BYTES];
        let mut filled = 0;
        for part in &self.parts {
            let n = (PREFIX_BYTES - filled).min(part.len());
            prefix[filled..filled + n].copy_from_slice(&part[..n]);
            filled += n;
            if filled == PREFIX_BYTES {
                break;
            }
        }
        prefix
    }
}

impl Buf for Rope {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.parts.front().map_or(&[], |p| p.as_ref())
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of a rope");
        self.remaining -= cnt;
        while cnt > 0 {
            let Some(front) = self.parts.front_mut() else {
                return;
            };
            if cnt < front.len() {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.parts.pop_front();
        }
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        assert!(
            len <= self.remaining,
            "copy_to_bytes past the end of a rope"
        );
        if let Some(front) = self.parts.front_mut()
            && len <= front.len()
        {
            let out = front.split_to(len);
            self.remaining -= len;
            if front.is_empty() {
                self.parts.pop_front();
            }
            return out;
        }
        let mut out = BytesMut::with_capacity(len);
        out.put((&mut *self).take(len));
        out.freeze()
    }
}

/// Reads gRPC messages from a response body as [`Rope`]s.
pub struct MessageReader<B> {
    body: B,
    /// Frames received and not yet consumed.
    buffered: Rope,
    max_message_bytes: usize,
    /// The status from the trailers, once seen.
    status: Option<Status>,
    /// Responses end with `grpc-status` trailers; a client's request stream
    /// just ends.
    trailers: bool,
}

impl<B> MessageReader<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    /// Reads a response.
    pub fn new(body: B, max_message_bytes: usize) -> Self {
        MessageReader {
            body,
            buffered: Rope::default(),
            max_message_bytes,
            status: None,
            trailers: true,
        }
    }

    /// Reads a client's stream of requests (on a server).
    pub fn requests(body: B, max_message_bytes: usize) -> Self {
        MessageReader {
            trailers: false,
            ..Self::new(body, max_message_bytes)
        }
    }

    /// The next message, `Ok(None)` at a clean end (status OK), `Err` with
    /// the call's status otherwise.
    pub async fn message(&mut self) -> Result<Option<Rope>, Status> {
        loop {
            if self.buffered.remaining() >= PREFIX_BYTES {
                let prefix = self.buffered.peek_prefix();
                if prefix[0] != 0 {
                    return Err(Status::internal(
                        "compressed gRPC messages are not expected on the element stream",
                    ));
                }
                let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
                if len > self.max_message_bytes {
                    return Err(Status::resource_exhausted(format!(
                        "message of {len} bytes is larger than the limit of {}",
                        self.max_message_bytes
                    )));
                }
                if self.buffered.remaining() >= PREFIX_BYTES + len {
                    self.buffered.advance(PREFIX_BYTES);
                    let mut message = Rope::default();
                    let mut left = len;
                    while left > 0 {
                        let take = left.min(self.buffered.chunk().len());
                        message.push(self.buffered.copy_to_bytes(take));
                        left -= take;
                    }
                    return Ok(Some(message));
                }
            }
            match std::future::poll_fn(|cx| Pin::new(&mut self.body).poll_frame(cx)).await {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => self.buffered.push(data),
                    Err(frame) => {
                        if let Some(trailers) = frame.trailers_ref() {
                            self.status = Some(status_from(trailers));
                        }
                    }
                },
                Some(Err(e)) => return Err(Status::unavailable(format!("h2 protocol error: {e}"))),
                None => {
                    if self.buffered.remaining() > 0 {
                        return Err(Status::internal("the stream ended inside a message"));
                    }
                    return match self.status.take() {
                        Some(status) if status.code() != tonic::Code::Ok => Err(status),
                        Some(_) => Ok(None),
                        None if !self.trailers => Ok(None),
                        None => Err(Status::unavailable(
                            "the stream ended without a grpc-status",
                        )),
                    };
                }
            }
        }
    }
}

/// Opens a bidirectional streaming call on `channel`: `requests` are the
/// client's messages (as parts, see [`small_message`]); the result reads the
/// server's. Errors are statuses: a transport failure is UNAVAILABLE (so it
/// is retried), a server's refusal is its own status (UNIMPLEMENTED from a
/// server without the service).
pub async fn open_stream<S>(
    mut channel: crate::security::RpcChannel,
    path: &'static str,
    requests: S,
    max_message_bytes: usize,
) -> Result<MessageReader<tonic::body::Body>, Status>
where
    S: Stream<Item = Vec<Bytes>> + Send + Unpin + 'static,
{
    use futures::StreamExt;
    use tonic::codegen::Service;
    let body = tonic::body::Body::new(RopeBody::request(requests.map(Ok)));
    let request = request_headers(path)
        .body(body)
        .map_err(|e| Status::internal(format!("building a request to {path}: {e}")))?;
    // The channel's own statuses (security failures) as they are.
    let transport = |e: Box<dyn std::error::Error + Send + Sync>| match e.downcast::<Status>() {
        Ok(status) => *status,
        Err(e) => {
            let mut status = Status::unavailable(format!("transport error: {e}"));
            // Kept, so a refused connection can be told from a slow one
            // (`crate::peer::is_refused`).
            status.set_source(std::sync::Arc::from(e));
            status
        }
    };
    std::future::poll_fn(|cx| channel.poll_ready(cx))
        .await
        .map_err(transport)?;
    let response = channel.call(request).await.map_err(transport)?;
    // A call refused at once ("trailers-only") has its status in the headers.
    if let Some(status) = Status::from_header_map(response.headers())
        && status.code() != tonic::Code::Ok
    {
        return Err(status);
    }
    if response.status() != http::StatusCode::OK {
        return Err(Status::unavailable(format!(
            "{path}: HTTP status {}",
            response.status()
        )));
    }
    Ok(MessageReader::new(response.into_body(), max_message_bytes))
}

/// The status a response's headers or trailers carry (OK when absent).
pub fn status_from(headers: &HeaderMap) -> Status {
    Status::from_header_map(headers).unwrap_or_else(|| Status::ok(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rope_slices_within_a_part_and_copies_across_parts() {
        let mut rope = Rope::default();
        rope.push(Bytes::from_static(b"hello "));
        rope.push(Bytes::from_static(b"world"));
        let a = rope.copy_to_bytes(3);
        assert_eq!(&a[..], b"hel");
        let b = rope.copy_to_bytes(5); // "lo wo" straddles
        assert_eq!(&b[..], b"lo wo");
        assert_eq!(rope.remaining(), 3);
        assert_eq!(rope.chunk(), b"rld");
        rope.advance(3);
        assert_eq!(rope.remaining(), 0);
    }

    #[test]
    fn large_parts_are_not_copied_into_the_message() {
        let big = Bytes::from(vec![7u8; OWN_PART_BYTES]);
        let mut w = RopeWriter::new();
        w.put_varint(300);
        w.put_bytes(big.clone());
        w.put_slice(b"tail");
        let parts = w.into_message();
        assert_eq!(
            parts.len(),
            4,
            "prefix, small head, the big part, small tail"
        );
        assert_eq!(parts[0][..], [0, 0, 0, 0x40, 0x06]); // 2 + 16384 + 4 bytes
        assert_eq!(parts[2].as_ptr(), big.as_ptr(), "the same buffer, uncopied");
    }
}
