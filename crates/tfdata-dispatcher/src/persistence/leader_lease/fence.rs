//! The fence a leader's writers check: its lease generation, valid only
//! while the lease is renewed in time and not lost.
//!
//! A [`Fence`] is a cheap, cloneable token for one generation. The
//! [`LeaderLease`](super::LeaderLease) that issued it extends its validity
//! after each successful renewal and revokes it when a renewal finds the
//! lease taken; between renewals [`Fence::check`] compares the local
//! monotonic clock with the deadline, without any I/O, so the journal
//! writer can call it before every group write.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tfdata_core::{Error, Result};

/// What the lease shares with its fences.
#[derive(Debug)]
pub(super) struct FenceState {
    /// The generation the lease currently holds; 0 when it holds none.
    generation: u64,
    /// Until when (local monotonic clock) the holder may act as leader.
    valid_until: Option<Instant>,
    /// Why the lease was lost, once it was.
    lost: Option<String>,
}

/// Shared by the lease and every fence it issued.
pub(super) type SharedFence = Arc<Mutex<FenceState>>;

pub(super) fn new_shared() -> SharedFence {
    Arc::new(Mutex::new(FenceState {
        generation: 0,
        valid_until: None,
        lost: None,
    }))
}

fn lock(shared: &SharedFence) -> std::sync::MutexGuard<'_, FenceState> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The lease was won or renewed: `generation` is valid until `until`.
pub(super) fn extend(shared: &SharedFence, generation: u64, until: Instant) {
    let mut state = lock(shared);
    if state.generation != generation {
        state.lost = None;
    }
    state.generation = generation;
    state.valid_until = Some(until);
}

/// The lease is lost (`why`): every fence fails from now on.
pub(super) fn revoke(shared: &SharedFence, why: String) {
    let mut state = lock(shared);
    if state.generation != 0 && state.lost.is_none() {
        state.lost = Some(why);
    }
    state.valid_until = None;
}

/// Permission to write as the leader of one lease generation.
#[derive(Debug, Clone)]
pub struct Fence {
    shared: SharedFence,
    generation: u64,
    location: String,
}

impl Fence {
    pub(super) fn new(shared: SharedFence, generation: u64, location: String) -> Self {
        Self {
            shared,
            generation,
            location,
        }
    }

    /// The lease generation this fence stands for: what journal segments
    /// written under it are tagged with.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// `Ok` while this generation's lease is held and was renewed recently
    /// enough that no standby can have taken it over (see the module docs
    /// of [`super`] for the clock rule); otherwise
    /// [`Error::FailedPrecondition`] saying why. Call it immediately before
    /// each write that only the leader may make.
    pub fn check(&self) -> Result<()> {
        let state = lock(&self.shared);
        let fail = |why: String| {
            Err(Error::FailedPrecondition(format!(
                "not the leader any more (lease {}, generation {}): {why}; \
                 the write is refused so that only the current leader writes",
                self.location, self.generation
            )))
        };
        if state.generation == 0 {
            return fail("the lease is not held".to_string());
        }
        if state.generation != self.generation {
            return fail(format!(
                "this dispatcher now holds generation {}",
                state.generation
            ));
        }
        if let Some(why) = &state.lost {
            return fail(why.clone());
        }
        match state.valid_until {
            Some(until) if Instant::now() < until => Ok(()),
            Some(_) => fail(
                "the lease was not renewed in time, so a standby may have taken it over"
                    .to_string(),
            ),
            None => fail("the lease is not held".to_string()),
        }
    }
}
