//! Deterministic distributed_epoch reads (issue 35; docs/fault-tolerance.md,
//! "Deterministic reads"): the reader reads lanes, not workers.
//!
//! Each epoch's splits are dealt to K lanes; lane k is one instance of the
//! pipeline over its splits, served by whichever worker the reader opens
//! its stream on. Element j of lane k has global position q = j*K + k, and
//! consumer c of n reads the lanes k with k % n == c, merged in q order, so
//! what it reads depends on the pipeline, its seeds, the epoch and K only.
//!
//! * [`placement`]: which task serves each lane, and moving a lane whose
//!   stream failed;
//! * [`merge`]: the ordered merge and its bounded reorder window;
//! * [`lanes`]: the driver (heartbeats, one stream per lane, the merge);
//! * [`checkpoint`]: a consumer's lane positions, and merging the
//!   checkpoints of all consumers of one step.

mod checkpoint;
mod lanes;
mod merge;
mod placement;

use tfdata_core::{Error, Result};
use tfdata_proto::data as wire;

pub use checkpoint::merge_checkpoints;
pub(crate) use checkpoint::{Consumed, LaneStart, restore_start};

use std::sync::Arc;
use std::time::Duration;

use tfdata_core::IterationClientId;
use tfdata_proto::tfdata::stream::Compression as StreamCompression;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::security::ClientSecurity;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::dispatcher::DispatcherClient;
use crate::fetch::Item;
use crate::metrics::ReaderStats;

/// The most lanes a job may have (the dispatcher refuses more too): each
/// lane is a pipeline instance and a stream, so K bounds both per read.
pub const MAX_LANES: u32 = 4096;

/// Default reorder window, in elements: enough that a lane served by a
/// worker a few hundred elements behind the others does not stall the
/// merge, at a few KiB of bookkeeping.
pub const DEFAULT_REORDER_WINDOW_ELEMENTS: usize = 4096;

/// Default reorder window, in payload bytes: what a reader may buffer ahead
/// of its merge point across its lanes. 256 MiB holds 4096 elements of up to
/// 64 KiB (a batch of small images) and stays well under a trainer host's
/// memory.
pub const DEFAULT_REORDER_WINDOW_BYTES: u64 = 256 << 20;

/// A deterministic read's setting ([`crate::Distribute::deterministic`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deterministic {
    /// K, the number of lanes (1..=4096), fixed for the job; the global
    /// sequence depends on it.
    pub lanes: u32,
    /// Set: each epoch's splits are permuted with this seed (and the
    /// epoch) before they are dealt to lanes.
    pub split_shuffle_seed: Option<u64>,
    /// This reader is consumer `consumer_index` of `num_consumers`, which
    /// must divide `lanes`: it reads the lanes k with k % n == c.
    pub consumer_index: u32,
    pub num_consumers: u32,
    /// The reorder window: elements and payload bytes buffered across the
    /// reader's lanes beyond its merge point (each lane's stream credit is
    /// its share).
    pub reorder_window_elements: usize,
    pub reorder_window_bytes: u64,
}

impl Default for Deterministic {
    fn default() -> Self {
        Deterministic {
            lanes: 24,
            split_shuffle_seed: None,
            consumer_index: 0,
            num_consumers: 1,
            reorder_window_elements: DEFAULT_REORDER_WINDOW_ELEMENTS,
            reorder_window_bytes: DEFAULT_REORDER_WINDOW_BYTES,
        }
    }
}

impl Deterministic {
    /// The checks made when a read is set up (`coordinated`: `consumers()`
    /// was set; `cross_trainer_cache`: a trainer id was).
    pub(crate) fn validate(
        &self,
        distributed_epoch: bool,
        coordinated: bool,
        cross_trainer_cache: bool,
    ) -> Result<()> {
        let refuse =
            |why: String| Err(Error::InvalidArgument(format!("deterministic read: {why}")));
        if !distributed_epoch {
            return refuse(
                "needs processing mode distributed_epoch (lanes deal out the epoch's splits)"
                    .into(),
            );
        }
        if !(1..=MAX_LANES).contains(&self.lanes) {
            return refuse(format!(
                "lanes must be in 1..={MAX_LANES}, got {}",
                self.lanes
            ));
        }
        if self.num_consumers == 0 || !self.lanes.is_multiple_of(self.num_consumers) {
            return refuse(format!(
                "num_consumers must be at least 1 and divide lanes ({}), got {}",
                self.lanes, self.num_consumers
            ));
        }
        if self.consumer_index >= self.num_consumers {
            return refuse(format!(
                "consumer_index must be in [0, num_consumers), got consumer_index={}, \
                 num_consumers={}",
                self.consumer_index, self.num_consumers
            ));
        }
        if coordinated {
            return refuse(
                "cannot be combined with consumers() (coordinated reads): give the consumer \
                 index and count in Deterministic instead"
                    .into(),
            );
        }
        if cross_trainer_cache {
            return refuse("cannot be combined with cross_trainer_cache".into());
        }
        if self.reorder_window_elements == 0 || self.reorder_window_bytes == 0 {
            return refuse("the reorder window must allow at least one element and byte".into());
        }
        Ok(())
    }

    /// The job's setting, as its ProcessingModeDef carries it.
    pub(crate) fn to_proto(self) -> wire::TfdataDeterministic {
        wire::TfdataDeterministic {
            lanes: i64::from(self.lanes),
            split_shuffle_seed: self.split_shuffle_seed,
        }
    }

    /// This consumer's lanes, ascending.
    pub(crate) fn own_lanes(&self) -> Vec<u32> {
        (self.consumer_index..self.lanes)
            .step_by(self.num_consumers.max(1) as usize)
            .collect()
    }
}

/// What a deterministic read's driver is started with.
pub(crate) struct ReadParams {
    pub setting: Deterministic,
    pub start: LaneStart,
    pub compression: StreamCompression,
    pub security: ClientSecurity,
    /// The heartbeat period.
    pub refresh: Duration,
    pub stats: Arc<ReaderStats>,
    /// Merged elements handed over and not yet taken (beyond the window).
    pub channel_capacity: usize,
}

/// Starts the driver of the iteration `client_id` on `handle`: the
/// reader's channel, and its record of what it consumed.
pub(crate) fn spawn(
    dispatcher: DispatcherClient,
    read: ReadParams,
    client_id: IterationClientId,
    cancel: &CancellationToken,
    handle: &tokio::runtime::Handle,
    span: tracing::Span,
) -> (mpsc::Receiver<Item>, Consumed) {
    let (tx, rx) = mpsc::channel(read.channel_capacity.max(1));
    let ends = Arc::default();
    let consumed = Consumed::new(read.setting, &read.start, Arc::clone(&ends));
    let params = lanes::DriveParams {
        setting: read.setting,
        start: read.start,
        compression: read.compression,
        security: read.security,
        refresh: read.refresh,
        stats: read.stats,
        ends,
    };
    handle.spawn(lanes::drive(dispatcher, params, client_id, tx, cancel.clone()).instrument(span));
    (rx, consumed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_each_mistake() {
        let ok = Deterministic::default();
        assert!(ok.validate(true, false, false).is_ok());
        let msg = |d: Deterministic, de, co, ct| d.validate(de, co, ct).unwrap_err().to_string();
        assert!(msg(ok, false, false, false).contains("distributed_epoch"));
        assert!(msg(Deterministic { lanes: 0, ..ok }, true, false, false).contains("1..=4096"));
        assert!(msg(Deterministic { lanes: 4097, ..ok }, true, false, false).contains("1..=4096"));
        let five = Deterministic {
            num_consumers: 5,
            ..ok
        };
        assert!(msg(five, true, false, false).contains("divide lanes"));
        let c = Deterministic {
            consumer_index: 3,
            num_consumers: 3,
            ..ok
        };
        assert!(msg(c, true, false, false).contains("consumer_index"));
        assert!(msg(ok, true, true, false).contains("consumers()"));
        assert!(msg(ok, true, false, true).contains("cross_trainer_cache"));
    }

    #[test]
    fn own_lanes_are_those_congruent_to_the_consumer() {
        let d = Deterministic {
            lanes: 12,
            consumer_index: 1,
            num_consumers: 3,
            ..Default::default()
        };
        assert_eq!(d.own_lanes(), vec![1, 4, 7, 10]);
    }
}
