//! The vocabulary every other tfdata crate shares: [`Tensor`] and [`Element`]
//! with their two wire encodings (TensorFlow's `CompressedElement` and
//! `UncompressedElement`), the typed ids of dispatcher entities, the
//! [`Error`] type that survives a gRPC round trip, and TFRecord framing.
//!
//! This crate knows nothing of sockets, runtimes or dataset pipelines.

pub mod batch;
pub mod element;
pub mod error;
pub mod ids;
pub mod lineage;
pub mod positions;
pub mod ranges;
mod snappy;
pub mod tensor;
pub mod tfrecord;

pub use element::Element;
pub use error::{Error, Result};
pub use ids::{DatasetId, IterationClientId, IterationId, JobId, TaskId};
pub use lineage::{Lineage, SplitLease, SplitName, SplitsNamed};
pub use tensor::{DType, NativeType, Tensor};
/// The gRPC (= TensorFlow) status code an [`Error`] carries.
pub use tonic::Code;
