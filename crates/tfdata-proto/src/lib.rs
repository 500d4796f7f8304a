//! The wire: every message and service of tf.data service as TensorFlow 2.21
//! speaks it (protocol version 9), plus tfdata's pipeline extension.
//!
//! This crate is the only place wire types are defined. Other crates convert
//! them to validated domain types at the edge.

#![allow(clippy::all, clippy::pedantic)]

/// Package `tensorflow`: tensors, shapes, dtypes, status.
pub mod tensorflow {
    tonic::include_proto!("tensorflow");

    /// Package `tensorflow.data`: the services, tasks, elements and journal.
    pub mod data {
        tonic::include_proto!("tensorflow.data");

        /// Package `tensorflow.data.experimental`: server configs.
        pub mod experimental {
            tonic::include_proto!("tensorflow.data.experimental");
        }
    }
}

/// Package `tfdata.pipeline`: tfdata's own dataset pipelines.
pub mod tfdata {
    pub mod pipeline {
        tonic::include_proto!("tfdata.pipeline");
    }

    /// Package `tfdata.compaction`: the dispatcher state for journal
    /// compaction.
    pub mod compaction {
        tonic::include_proto!("tfdata.compaction");
    }

    /// Package `tfdata.stream`: the data plane between tfdata readers and
    /// tfdata workers (batched elements under credit-based flow control).
    pub mod stream {
        tonic::include_proto!("tfdata.stream");
    }

    /// Package `tfdata.checkpoint`: a reader's checkpoint (its opaque bytes).
    pub mod checkpoint {
        tonic::include_proto!("tfdata.checkpoint");
    }

    /// Package `tfdata.status`: the dispatcher's introspection service.
    pub mod status {
        tonic::include_proto!("tfdata.status");
    }
}

pub use tensorflow::data;
pub use tensorflow::data::experimental as config;

/// The tf.data service protocol version TensorFlow 2.21 speaks. Peers require
/// exact equality.
pub const DATA_SERVICE_VERSION: i64 = 9;

/// Marker so `prost` paths resolve in generated code that references the
/// `tensorflow` package from `tensorflow.data`.
#[doc(hidden)]
pub use prost;
