//! The leader lease over a `work_dir`: which of several dispatchers sharing
//! one `work_dir` leads, and the fence that stops a deposed leader from
//! writing (issue 17, item 3; used by [`crate::serving::high_availability`]).
//!
//! # The record
//!
//! One record, `<work_dir>/leader_lease` ([`LEASE_NAME`]), holds the
//! holder's id and address, the **generation** (strictly increasing: a
//! takeover writes the previous one + 1) and a **renewal counter** (see
//! [`record::LeaseRecord`]). It is only ever replaced by a compare-and-swap
//! against the version that was read ([`storage`]): a conditional `PUT` on
//! object stores (`If-None-Match: *` to create, `If-Match: <etag>` to
//! replace), an `flock`-guarded read-compare-rename on local directories.
//! So of several contenders replacing the same version exactly one
//! succeeds; the others get [`Role::Follower`], never an error.
//!
//! # Expiry without agreeing clocks
//!
//! Nobody compares wall clocks. A contender considers the lease expired
//! only after it has itself seen the same record — the same `(generation,
//! renewals)` and the same store version — for the whole lease
//! [`duration`](LeaseConfig::duration), measured on its own monotonic clock
//! from the moment a read **returned** that record. The holder, for its
//! part, counts its lease valid until `duration - safety_margin` after the
//! moment it **sent** the successful write. The write was sent before it
//! landed, which is before any read could return it, so with clocks that
//! tick at the same rate the holder's validity always ends `safety_margin`
//! before any contender may take over. The only clock assumption is
//! therefore on rates: two machines' monotonic clocks must not drift apart
//! by more than `safety_margin` over one `duration` (default: 20%, far
//! beyond real clock drift; it also absorbs scheduling delay between a
//! [`Fence::check`] and the write it guards, see below). A contender that
//! just started waits a full duration before its first takeover, even if
//! the holder died long ago.
//!
//! # Fencing
//!
//! The generation is the fence. [`LeaderLease::fence`] hands out a
//! [`Fence`] for the generation held; [`Fence::check`] fails with
//! [`tfdata_core::Error::FailedPrecondition`] once the lease has not been renewed
//! in time or a renewal found it taken (the conditional write failed
//! because another contender wrote generation + 1). The journal writer
//! calls it before each group write.
//!
//! A check cannot close the race alone: a leader that passes the check and
//! is then paused (SIGSTOP, a long GC-like stall, a slow network) past its
//! expiry can still issue the write it already decided to make. The
//! journal (`crate::persistence::journal`, not this module) makes the storage refuse
//! that write on object stores, and makes it invisible locally:
//!
//! * Object stores: a fenced writer creates its segments only if absent
//!   (`PutMode::Create`). A standby that wins the lease lists the journal
//!   and, before writing anything, creates the **next segment name of the
//!   old leader's run** as an empty marker (retrying with the following
//!   sequence number if the old leader's write just won that name;
//!   bounded). The old leader writes sequence numbers strictly in order,
//!   so its delayed write finds its name taken (`AlreadyExists`) and is
//!   never acknowledged; the takeover's compaction supersedes the run.
//! * Local directories: the takeover's compaction deletes the old
//!   leader's journal file, so a late append lands in an unlinked file no
//!   replay reads; and the writer checks the fence again after each write,
//!   so such a write is never acknowledged.
//!
//! # Limits
//!
//! * A record this module cannot decode, or one at generation `u64::MAX`,
//!   is never taken over (a [`tfdata_core::Error::DataLoss`] naming it): it
//!   may be a newer dispatcher's or a hostile one, and overwriting it could
//!   reuse a generation. An operator deletes it once no dispatcher runs;
//!   generations then start again at 1.
//! * Locally, a process stopped (SIGSTOP) inside the few milliseconds it
//!   holds the lock file blocks every contender's writes (each reports
//!   [`tfdata_core::Error::Unavailable`] after waiting a second) until it
//!   resumes or dies; the kernel releases a dead process's lock.
//! * A renewal whose reply is lost although it landed costs the lease: the
//!   next renewal's version no longer matches. That is safe (the fence
//!   fails, a standby takes over after a duration) and rare.
//!
//! # Use
//!
//! A dispatcher calls [`LeaderLease::tick`] every
//! [`renew_interval`](LeaseConfig::renew_interval): as leader it renews, as
//! follower it observes the record and takes over when the rule above says
//! the lease expired. An error from `tick` (the store unreachable) changes
//! nothing held: the leader's fence simply runs out if renewals keep
//! failing.

mod fence;
pub mod record;
pub mod storage;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use tfdata_core::{Error, Result};

pub use fence::Fence;
pub use record::LeaseRecord;
pub use storage::{LEASE_NAME, LeaseStorage};

use fence::SharedFence;
use storage::{Swap, Version};

/// How long a lease lasts and how it is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// How long a record must stay unchanged before a contender may take
    /// the lease over. Failover takes between one and two of these (plus a
    /// renew interval).
    pub duration: Duration,
    /// How often [`LeaderLease::tick`] is meant to be called, by leaders
    /// (renewing) and followers (observing). Well under
    /// `duration - safety_margin`, so that a few slow renewals in a row do
    /// not lose the lease.
    pub renew_interval: Duration,
    /// How much earlier than a contender could take over the holder stops
    /// trusting its lease (see the module docs).
    pub safety_margin: Duration,
}

impl Default for LeaseConfig {
    /// 5 s leases renewed every second, with a 1 s margin.
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(5),
            renew_interval: Duration::from_secs(1),
            safety_margin: Duration::from_secs(1),
        }
    }
}

impl LeaseConfig {
    /// Refuses settings under which the lease could not be kept.
    pub fn validate(&self) -> Result<()> {
        let invalid = |reason: String| Error::InvalidConfig {
            field: "leader_lease",
            reason,
        };
        if self.duration.is_zero() || self.renew_interval.is_zero() {
            return Err(invalid(
                "the duration and renew interval must be positive".into(),
            ));
        }
        if self.safety_margin >= self.duration {
            return Err(invalid(format!(
                "safety margin {:?} must be shorter than the duration {:?}",
                self.safety_margin, self.duration
            )));
        }
        if self.renew_interval >= self.duration - self.safety_margin {
            return Err(invalid(format!(
                "renew interval {:?} must be shorter than the duration minus the margin ({:?}), \
                 or the leader's fence runs out between renewals",
                self.renew_interval,
                self.duration - self.safety_margin
            )));
        }
        Ok(())
    }
}

/// What [`LeaderLease::tick`] found.
#[derive(Debug, Clone)]
pub enum Role {
    /// This process leads, under the fence's generation.
    Leader(Fence),
    /// Another process leads (or did, until the lease expires).
    Follower {
        /// The record read, if any: the leader's id, address, generation.
        leader: Option<LeaseRecord>,
        /// How much longer this process will wait, if the record stays as
        /// it is, before taking over.
        takeover_in: Duration,
    },
}

/// A record seen by a follower, and since when (local clock).
#[derive(Debug)]
struct Observation {
    record: LeaseRecord,
    version: Version,
    since: Instant,
}

#[derive(Debug)]
enum State {
    Following(Option<Observation>),
    Leading {
        record: LeaseRecord,
        version: Version,
    },
}

/// One contender for the lease: see the module docs.
#[derive(Debug)]
pub struct LeaderLease {
    storage: LeaseStorage,
    holder: String,
    address: String,
    config: LeaseConfig,
    state: State,
    fence: SharedFence,
}

impl LeaderLease {
    /// A contender over `storage`, reachable at `address`. Its holder id is
    /// `address` plus the process id and a random number, unique per
    /// contender even when a restarted dispatcher reuses its address.
    pub fn new(storage: LeaseStorage, address: &str, config: LeaseConfig) -> Result<Self> {
        config.validate()?;
        let holder = format!(
            "{address}#{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        );
        Ok(Self {
            storage,
            holder,
            address: address.to_string(),
            config,
            state: State::Following(None),
            fence: fence::new_shared(),
        })
    }

    /// A contender on the local directory `dir` (a local `work_dir`).
    pub fn local(dir: impl Into<PathBuf>, address: &str, config: LeaseConfig) -> Result<Self> {
        Self::new(LeaseStorage::Local { dir: dir.into() }, address, config)
    }

    /// A contender on the object `key` of `store`; `url` names it in
    /// messages.
    pub fn object_store(
        store: Arc<dyn ObjectStore>,
        key: ObjectPath,
        url: &str,
        address: &str,
        config: LeaseConfig,
    ) -> Result<Self> {
        let storage = LeaseStorage::ObjectStore {
            store,
            key,
            url: url.to_string(),
        };
        Self::new(storage, address, config)
    }

    /// This contender's holder id, as written in the record.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Where the record is kept.
    pub fn storage(&self) -> &LeaseStorage {
        &self.storage
    }

    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// The fence of the generation held, if this contender leads.
    pub fn fence(&self) -> Option<Fence> {
        match &self.state {
            State::Leading { record, .. } => Some(Fence::new(
                Arc::clone(&self.fence),
                record.generation,
                self.storage.location(),
            )),
            State::Following(_) => None,
        }
    }

    /// `Ok` while this contender leads and its lease is fresh: the
    /// [`Fence::check`] of its current generation.
    pub fn check_still_leader(&self) -> Result<()> {
        match self.fence() {
            Some(fence) => fence.check(),
            None => Err(Error::FailedPrecondition(format!(
                "not the leader (lease {})",
                self.storage.location()
            ))),
        }
    }

    /// One step: renew as leader, or observe (and take over an expired
    /// lease) as follower. See the module docs.
    pub async fn tick(&mut self) -> Result<Role> {
        match std::mem::replace(&mut self.state, State::Following(None)) {
            State::Leading { record, version } => self.renew(record, version).await,
            State::Following(observed) => self.observe(observed).await,
        }
    }

    /// Gives the lease up: a leader that stops renewing. The record stays
    /// (a successor still waits out the duration: nothing guarantees this
    /// process's earlier writes are done), but every fence fails from now.
    pub fn resign(&mut self) {
        fence::revoke(&self.fence, "resigned".to_string());
        self.state = State::Following(None);
    }

    async fn renew(&mut self, held: LeaseRecord, version: Version) -> Result<Role> {
        let next = LeaseRecord::new(
            &self.holder,
            &self.address,
            held.generation,
            held.renewals.saturating_add(1),
            self.config.duration,
        );
        let sent = Instant::now();
        match self
            .storage
            .swap(Some(&version), Bytes::from(next.encode()))
            .await
        {
            Ok(Swap::Written(version)) => Ok(self.lead(next, version, sent)),
            Ok(Swap::Conflict) => {
                fence::revoke(
                    &self.fence,
                    format!(
                        "renewing generation {} found the lease replaced",
                        held.generation
                    ),
                );
                // Report who leads now; the next tick starts observing.
                self.observe(None).await
            }
            Err(e) => {
                // Unknown whether it landed: keep trying with the version
                // held (if it did land, the next renewal conflicts and the
                // lease is lost, which is safe). The fence runs out alone.
                self.state = State::Leading {
                    record: held,
                    version,
                };
                Err(e)
            }
        }
    }

    async fn observe(&mut self, observed: Option<Observation>) -> Result<Role> {
        let location = self.storage.location();
        let Some(stored) = self.storage.read().await? else {
            // No lease at all: the first dispatcher (or the record was
            // deleted by an operator). Generations start at 1.
            return self.take(None, 1).await;
        };
        let seen = Instant::now();
        let record = LeaseRecord::decode(&location, &stored.bytes)?;
        let observation = match observed {
            Some(o)
                if o.version == stored.version
                    && o.record.generation == record.generation
                    && o.record.renewals == record.renewals =>
            {
                o
            }
            _ => Observation {
                record,
                version: stored.version,
                since: seen,
            },
        };
        let unchanged_for = seen.saturating_duration_since(observation.since);
        if unchanged_for >= self.config.duration {
            let generation = observation
                .record
                .generation
                .checked_add(1)
                .ok_or_else(|| Error::DataLoss {
                    location: location.clone(),
                    reason: "the lease's generation is at its maximum (u64::MAX) and cannot \
                             be taken over; a hostile or corrupt record? If no dispatcher \
                             is running on this work_dir, delete it"
                        .to_string(),
                })?;
            return self
                .take(Some((observation.version, observation.record)), generation)
                .await;
        }
        let role = Role::Follower {
            leader: Some(observation.record.clone()),
            takeover_in: self.config.duration - unchanged_for,
        };
        self.state = State::Following(Some(observation));
        Ok(role)
    }

    /// Tries to write `generation` over `previous` (`None`: no record).
    async fn take(
        &mut self,
        previous: Option<(Version, LeaseRecord)>,
        generation: u64,
    ) -> Result<Role> {
        let record = LeaseRecord::new(
            &self.holder,
            &self.address,
            generation,
            0,
            self.config.duration,
        );
        let sent = Instant::now();
        let expected = previous.as_ref().map(|(v, _)| v);
        match self
            .storage
            .swap(expected, Bytes::from(record.encode()))
            .await?
        {
            Swap::Written(version) => Ok(self.lead(record, version, sent)),
            Swap::Conflict => {
                // Someone else took it (or renewed): start watching afresh.
                self.state = State::Following(None);
                Ok(Role::Follower {
                    leader: previous.map(|(_, r)| r),
                    takeover_in: self.config.duration,
                })
            }
        }
    }

    fn lead(&mut self, record: LeaseRecord, version: Version, sent: Instant) -> Role {
        let valid_for = self.config.duration - self.config.safety_margin;
        fence::extend(&self.fence, record.generation, sent + valid_for);
        let fence = Fence::new(
            Arc::clone(&self.fence),
            record.generation,
            self.storage.location(),
        );
        self.state = State::Leading { record, version };
        Role::Leader(fence)
    }
}

#[cfg(test)]
mod tests;
