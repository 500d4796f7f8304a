//! Helpers shared by the fuzz targets in `fuzz_targets/` (see
//! docs/fuzzing.md): a reader of structured fuzz input, a gRPC body made
//! of fuzz-chosen frames, bounded iteration of fuzzed pipelines, and the
//! filters that keep fuzzed requests off the network.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use tfdata_dataset::Dataset;

/// Reads structured choices off the front of a fuzz input; every read
/// succeeds (zeros once the input is used up), so any input is valid.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// The next `n` bytes (fewer at the end).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// A part prefixed by its little-endian `u16` length.
    pub fn part(&mut self) -> &'a [u8] {
        let n = self.u16() as usize;
        self.bytes(n)
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        self.bytes(self.data.len())
    }
}

/// Writes what [`Input::part`] reads (the seed generator uses it).
pub fn put_part(out: &mut Vec<u8>, part: &[u8]) {
    let len = u16::try_from(part.len()).expect("a part of at most 64 KiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(part);
}

/// An HTTP body delivering fixed frames: the DATA frames a peer sent, then
/// optionally trailers.
pub struct Frames(VecDeque<Frame<Bytes>>);

impl Frames {
    /// `body` cut into DATA frames of `frame_len` bytes (at least 1), then
    /// trailers with `grpc-status: status` when `status` is given.
    pub fn new(body: &[u8], frame_len: usize, status: Option<&str>) -> Self {
        let mut frames: VecDeque<Frame<Bytes>> = body
            .chunks(frame_len.max(1))
            .map(|c| Frame::data(Bytes::copy_from_slice(c)))
            .collect();
        if let Some(status) = status {
            let mut trailers = tonic::codegen::http::HeaderMap::new();
            if let Ok(value) = status.parse() {
                trailers.insert("grpc-status", value);
            }
            frames.push_back(Frame::trailers(trailers));
        }
        Frames(frames)
    }
}

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.get_mut().0.pop_front().map(Ok))
    }
}

/// One gRPC message with its 5-byte prefix (uncompressed).
pub fn grpc_frame(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 5);
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// Whether a fuzzed request may be handed to a server here. Object-store
/// URLs (anything with `://`) would make a server dial out, and file globs
/// (`list_files`, TensorFlow's `MatchingFiles`) walk this machine's disk;
/// neither is a decoder, so requests naming them are skipped. Protobuf
/// carries strings verbatim, so a substring test over the encoded bytes
/// finds them at any depth.
pub fn offline(encoded: &[u8]) -> bool {
    const NEEDLES: [&[u8]; 3] = [b"://", b"list_files", b"MatchingFiles"];
    !NEEDLES
        .iter()
        .any(|n| encoded.windows(n.len()).any(|w| w == *n))
}

/// Ops whose iteration reads nothing but the pipeline itself (no files, no
/// user or built-in functions, no cache files).
const PURE_OPS: &[&str] = &[
    "range",
    "from_tensors",
    "from_tensor_slices",
    "batch",
    "shuffle",
    "repeat",
    "take",
    "skip",
    "shard",
    "prefetch",
    "zip",
    "concatenate",
    "enumerate",
];

/// The most elements any op of an iterated pipeline may have.
pub const MAX_ITERATED_CARDINALITY: i64 = 64;

/// Whether iterating `ds` is bounded: only [`PURE_OPS`], each of a known
/// cardinality of at most [`MAX_ITERATED_CARDINALITY`], so every op does a
/// bounded amount of work.
pub fn bounded(ds: &Dataset) -> bool {
    fn walk(ds: &Dataset, budget: &mut usize) -> bool {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let op = ds.op();
        PURE_OPS.contains(&op.name())
            && (0..=MAX_ITERATED_CARDINALITY).contains(&op.cardinality())
            && op.inputs().iter().all(|i| walk(i, budget))
    }
    walk(ds, &mut 64)
}

/// Iterates a pipeline that [`bounded`] accepts and checks it yields what
/// its cardinality says (or fails with an error, never a panic).
pub fn iterate_bounded(ds: &Dataset) {
    if !bounded(ds) {
        return;
    }
    let expected = ds.cardinality();
    let Ok(mut it) = ds.iter() else { return };
    let mut n = 0i64;
    loop {
        match it.next() {
            Some(Ok(_)) => n += 1,
            Some(Err(_)) => return,
            None => break,
        }
        assert!(
            n <= MAX_ITERATED_CARDINALITY,
            "{ds:?}: more elements than its cardinality {expected}"
        );
    }
    assert_eq!(n, expected, "{ds:?}: cardinality disagrees with iteration");
}

/// A temporary directory, on tmpfs when there is one (the journal syncs
/// every record; on tmpfs that costs nothing).
pub fn temp_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::Builder::new()
            .prefix("tfdata-fuzz")
            .tempdir_in(shm)
    {
        return dir;
    }
    tempfile::Builder::new()
        .prefix("tfdata-fuzz")
        .tempdir()
        .expect("a temporary directory")
}

/// A single-threaded runtime whose clock is paused: time jumps ahead when
/// every task waits on a timer, so a server's 10 s waits cost nothing and
/// a call that waits on nothing but a timer cannot hang a run.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a tokio runtime")
}

/// The dispatcher's public API the targets use, in one place, so a
/// reorganisation of that crate moves only these paths.
pub mod dispatcher {
    use prost::Message;

    pub use tfdata_dispatcher::state::DispatcherState;
    pub use tfdata_dispatcher::{Clock, Dispatcher, DispatcherConfig, DispatcherGrpc, SystemClock};

    /// Whether two states hold the same facts: their compacted forms
    /// encode to the same bytes (a compacted state holds every fact once; the
    /// derived indexes are rebuilt from it). Not `==`: a split tensor may
    /// carry a NaN in one of `TensorProto`'s value lists, unequal to itself.
    pub fn same_state(a: &DispatcherState, b: &DispatcherState) -> bool {
        a.to_compacted().encode_to_vec() == b.to_compacted().encode_to_vec()
    }
}
