//! A task of a deterministic read (issue 35; `ProcessingModeDef.
//! tfdata_deterministic`): it runs no pipeline of its own. Its definition
//! is loaded once ([`LaneSource`]: the `DatasetDef`, checked to build, and
//! how elements are served), and each element stream that opens a lane
//! (`crate::stream::lane`) runs a pipeline instance of its own over the
//! lane's splits. Any worker can serve any lane: a lane's elements depend
//! on the dataset, the epoch and the lane alone
//! ([`tfdata_dataset::splits::lanes`]).
//!
//! Also the worker's bound on lane streams ([`LaneStreamSlots`]): each is a
//! pipeline thread and a buffer.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tfdata_core::{Error, Result};
use tfdata_proto::data::{self as wire, TaskDef};
use tfdata_rpc::CancellationToken;

use crate::pipeline::ServedForm;

/// Default of `WorkerConfig::max_lane_streams`.
pub const DEFAULT_MAX_LANE_STREAMS: usize = 256;

/// What every lane stream of a task builds its pipeline from.
pub struct LaneSource {
    pub dataset_def: wire::DatasetDef,
    /// FNV-1a of the encoded `DatasetDef`: a lane's seeds derive from it.
    pub fingerprint: u64,
    /// How elements are served (compression as the dispatcher decided it).
    pub form: ServedForm,
}

type Loaded = Option<std::result::Result<Arc<LaneSource>, Arc<Error>>>;

/// A deterministic task's lanes: the job's setting, its definition once
/// loaded, and the cancellation that stops its lane streams.
pub struct LaneTask {
    /// `K`: lanes are 0..K.
    pub lanes: u64,
    pub split_shuffle_seed: Option<u64>,
    loaded: tokio::sync::watch::Sender<Loaded>,
    /// Cancelled when the task is removed: its lane streams stop.
    removed: CancellationToken,
}

impl LaneTask {
    /// The lanes of `def`'s job, if it is a deterministic read
    /// (`lanes >= 1`; the dispatcher validates the upper bound, streams
    /// check their lane against it).
    pub fn of(def: &TaskDef) -> Option<Self> {
        let setting = def.processing_mode_def.as_ref()?.tfdata_deterministic?;
        (setting.lanes >= 1).then(|| LaneTask {
            lanes: setting.lanes as u64,
            split_shuffle_seed: setting.split_shuffle_seed,
            loaded: tokio::sync::watch::Sender::new(None),
            removed: CancellationToken::new(),
        })
    }

    /// The definition is loaded: waiting streams go on.
    pub fn set_loaded(&self, source: LaneSource) {
        self.loaded.send_replace(Some(Ok(Arc::new(source))));
    }

    /// The definition cannot be loaded: every stream gets `err`.
    pub fn set_failed(&self, err: Error) {
        self.loaded.send_replace(Some(Err(Arc::new(err))));
    }

    /// The definition, once loaded (waits for it), or why it is not.
    pub async fn source(&self) -> Result<Arc<LaneSource>> {
        let mut loaded = self.loaded.subscribe();
        let state = tokio::select! {
            state = loaded.wait_for(Option::is_some) => state
                .map_err(|_| Error::Internal("the task's definition was never loaded".into()))?
                .clone(),
            () = self.removed.cancelled() => return Err(self.removed_error()),
        };
        match state {
            Some(Ok(source)) => Ok(source),
            Some(Err(err)) => Err(Error::Context {
                context: None,
                source: err,
            }),
            None => Err(Error::Internal(
                "the task's definition was never loaded".into(),
            )),
        }
    }

    /// The task is removed: its lane streams stop.
    pub fn remove(&self) {
        self.removed.cancel();
    }

    pub fn removed(&self) -> &CancellationToken {
        &self.removed
    }

    /// What a lane stream of a removed task answers: Unavailable, so the
    /// reader opens the lane again elsewhere (a removed task is not the
    /// lane's end).
    pub fn removed_error(&self) -> Error {
        Error::Unavailable("the task was removed from this worker; its lane streams stop".into())
    }

    /// Refuses a lane outside `[0, lanes)`.
    pub fn check_lane(&self, lane: i64) -> Result<u64> {
        u64::try_from(lane)
            .ok()
            .filter(|&k| k < self.lanes)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "lane {lane} does not exist: this deterministic read has lanes 0 to {}",
                    self.lanes - 1
                ))
            })
    }
}

/// The worker's lane streams running now, at most `max`.
pub struct LaneStreamSlots {
    used: Arc<AtomicUsize>,
    max: usize,
}

/// One lane stream's place; freed when dropped.
pub struct LaneStreamSlot(Arc<AtomicUsize>);

impl Drop for LaneStreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl LaneStreamSlots {
    pub fn new(max: usize) -> Self {
        LaneStreamSlots {
            used: Arc::default(),
            max,
        }
    }

    /// A place for one more lane stream, or `None` when `max` run already.
    pub fn acquire(&self) -> Option<LaneStreamSlot> {
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| LaneStreamSlot(Arc::clone(&self.used)))
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Lane streams running now.
    pub fn in_use(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_proto::data::{ProcessingModeDef, TfdataDeterministic};

    #[test]
    fn slots_are_bounded_and_freed() {
        let slots = LaneStreamSlots::new(2);
        let a = slots.acquire().unwrap();
        let _b = slots.acquire().unwrap();
        assert!(slots.acquire().is_none());
        drop(a);
        assert_eq!(slots.in_use(), 1);
        assert!(slots.acquire().is_some());
    }

    #[test]
    fn lanes_come_from_the_processing_mode() {
        let def = |lanes| TaskDef {
            processing_mode_def: Some(ProcessingModeDef {
                tfdata_deterministic: Some(TfdataDeterministic {
                    lanes,
                    split_shuffle_seed: Some(3),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(LaneTask::of(&TaskDef::default()).is_none());
        assert!(LaneTask::of(&def(0)).is_none());
        let task = LaneTask::of(&def(4)).unwrap();
        assert_eq!((task.lanes, task.split_shuffle_seed), (4, Some(3)));
        assert_eq!(task.check_lane(3).unwrap(), 3);
        for bad in [-1, 4, i64::MAX] {
            let err = task.check_lane(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        }
    }
}
