//! Elements as a reader receives them, and the one fact a writable view of
//! their memory (numpy's, in the Python layer) rests on: nothing else can
//! read or write a received tensor's bytes.
//!
//! A fetcher decodes each message it reads off the network (a stream batch,
//! a `GetElement` answer) into elements whose tensors are cuts of that
//! message's buffers (the transport's frames, or a chunk it decompressed),
//! one cut per tensor, and then drops the message: each cut is the only
//! handle to its bytes, though several may share an allocation (one frame
//! holds many small tensors). No `Bytes` API can check that
//! (`Bytes::is_unique` asks about the whole allocation), so it is kept by
//! construction instead: a [`ReceivedElement`] is made only in `fetch`, by
//! [`ReceivedElement::decoded`] right where a received message is decoded
//! and consumed; it is not `Clone` and lends no `&Element`, so no second
//! handle to its buffers can be made while it keeps the promise; and it
//! gives its buffers out as [`ExclusiveBytes`], which have the same
//! property. Bytes from anywhere else become `ExclusiveBytes` only when
//! their whole allocation is provably theirs ([`ExclusiveBytes::from_unique`]).

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Element};

/// Bytes that no other handle can read or write: either the only handle to
/// a received tensor's bytes ([`ReceivedElement`]), or a `Bytes` that was
/// the only handle to its whole allocation. The bytes live in heap memory
/// the allocator gave as writable (the transport's buffers, a decompressed
/// chunk, a `Vec`), never in a `Bytes::from_static`'s. No `Bytes` handle to
/// them is given out except by [`into_bytes`](Self::into_bytes), which
/// ends the promise. So the holder may write through
/// [`as_ptr`](Self::as_ptr) while it keeps this value and makes no `&[u8]`
/// of the bytes meanwhile.
#[derive(Debug)]
pub struct ExclusiveBytes(Bytes);

impl ExclusiveBytes {
    /// `bytes` if it is the only handle to its allocation (a static
    /// `Bytes` never is), else `bytes` back.
    pub fn from_unique(bytes: Bytes) -> Result<Self, Bytes> {
        // Holding the only handle, nothing can clone it between this check
        // and the move.
        if bytes.is_unique() {
            Ok(ExclusiveBytes(bytes))
        } else {
            Err(bytes)
        }
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The bytes as a `Bytes` again, to share: the promise ends here.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }
}

/// An element a fetcher received: each tensor buffer is the only handle to
/// its bytes (see the module docs).
#[derive(Debug)]
pub struct ReceivedElement(Element);

impl ReceivedElement {
    /// An element just decoded from a received message that the caller
    /// consumed: its tensors are cuts of that message's buffers, one each,
    /// and nothing else holds the message. Only `fetch`'s decoders call
    /// this, right where they decode a message they read off the network.
    pub(super) fn decoded(element: Element) -> Self {
        ReceivedElement(element)
    }

    /// The element, to share like any other: the promise ends here.
    pub fn into_element(self) -> Element {
        self.0
    }

    /// The tensors, their buffers as [`ExclusiveBytes`].
    pub fn into_tensors(self) -> impl ExactSizeIterator<Item = ReceivedTensor> {
        self.0.components.into_iter().map(|tensor| {
            let (dtype, shape, data) = tensor.into_parts();
            let data = match data {
                TensorData::Buffer(bytes) => ReceivedData::Buffer(ExclusiveBytes(bytes)),
                TensorData::Strings(strings) => ReceivedData::Strings(strings),
            };
            ReceivedTensor { dtype, shape, data }
        })
    }
}

/// One tensor of a [`ReceivedElement`].
#[derive(Debug)]
pub struct ReceivedTensor {
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub data: ReceivedData,
}

/// A received tensor's data.
#[derive(Debug)]
pub enum ReceivedData {
    /// A fixed-width tensor's bytes.
    Buffer(ExclusiveBytes),
    /// A string tensor's strings (never viewed in place, so never promised).
    Strings(Vec<Bytes>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_core::Tensor;

    #[test]
    fn only_a_unique_allocation_is_exclusive_by_itself() {
        let unique = Bytes::from(vec![1u8, 2, 3]);
        let exclusive = ExclusiveBytes::from_unique(unique).expect("the only handle");
        assert_eq!(exclusive.len(), 3);

        let shared = Bytes::from(vec![1u8, 2, 3]);
        let other = shared.clone();
        let back = ExclusiveBytes::from_unique(shared).expect_err("two handles");
        assert_eq!(back, other);

        // Two disjoint cuts of one allocation: each may be its range's
        // only handle, but only a received element can say so.
        let frame = Bytes::from(vec![0u8; 8]);
        let (a, b) = (frame.slice(..4), frame.slice(4..));
        drop(frame);
        assert!(ExclusiveBytes::from_unique(a).is_err());
        drop(b);

        assert!(ExclusiveBytes::from_unique(Bytes::from_static(b"static")).is_err());
    }

    #[test]
    fn a_received_element_gives_its_buffers_as_exclusive_bytes() {
        let frame = Bytes::from((0u8..16).collect::<Vec<_>>());
        let element = Element::new(vec![
            Tensor::new(DType::Int32, vec![2], TensorData::Buffer(frame.slice(..8)))
                .expect("int32[2]"),
            Tensor::scalar_string(Bytes::from_static(b"name")),
            Tensor::new(DType::Int64, vec![1], TensorData::Buffer(frame.slice(8..)))
                .expect("int64[1]"),
        ]);
        let start = frame.as_ptr() as usize;
        drop(frame);
        let tensors: Vec<_> = ReceivedElement::decoded(element).into_tensors().collect();
        assert_eq!(tensors.len(), 3);
        match (&tensors[0].data, &tensors[1].data, &tensors[2].data) {
            (ReceivedData::Buffer(a), ReceivedData::Strings(s), ReceivedData::Buffer(b)) => {
                // The cuts themselves, not copies.
                assert_eq!((a.as_ptr() as usize, a.len()), (start, 8));
                assert_eq!((b.as_ptr() as usize, b.len()), (start + 8, 8));
                assert_eq!(s, &vec![Bytes::from_static(b"name")]);
            }
            other => panic!("unexpected tensors {other:?}"),
        }
        assert_eq!(tensors[2].dtype, DType::Int64);
        assert_eq!(tensors[0].shape, vec![2]);
    }
}
