//! When workers and clients were last heard from. Kept apart from the
//! journaled state: it is not replayed, and a restart treats everyone it
//! recovers as having just heartbeated.

use std::collections::{HashMap, HashSet};

use tfdata_core::IterationClientId;

use crate::state::DispatcherState;

/// A worker_timeout shorter than this many of a worker's heartbeat
/// intervals would declare it lost between two heartbeats (one late or
/// retried heartbeat is enough): such a worker's timeout is raised to it.
pub const MIN_HEARTBEATS_PER_TIMEOUT: u32 = 3;

/// What the dispatcher knows of a worker's heartbeats.
#[derive(Debug, Clone, Default)]
pub(crate) struct WorkerHeard {
    /// The last one (µs, the dispatcher's clock).
    pub last: i64,
    /// The interval it said it heartbeats at (tfdata workers), in µs.
    pub reported_interval: Option<i64>,
    /// The gap between its last two heartbeats (µs): TensorFlow's workers
    /// do not say their interval.
    pub observed_gap: Option<i64>,
    /// Where its heartbeats come from (the IP of its host, unless a proxy
    /// or NAT sits between): a probe of its address means something only
    /// when that address is this host.
    pub peer: Option<std::net::IpAddr>,
    /// A contradiction between worker_timeout and its interval was logged.
    pub warned: bool,
}

impl WorkerHeard {
    /// How long it may stay silent before it is lost: `worker_timeout`,
    /// raised to [`MIN_HEARTBEATS_PER_TIMEOUT`] of the interval it reported.
    pub fn timeout(&self, worker_timeout: i64) -> i64 {
        let floor = self.reported_interval.map_or(0, |i| {
            i.saturating_mul(i64::from(MIN_HEARTBEATS_PER_TIMEOUT))
        });
        worker_timeout.max(floor)
    }

    /// Its heartbeat interval as best known (µs): reported, else observed.
    pub fn interval(&self) -> Option<i64> {
        self.reported_interval.or(self.observed_gap)
    }

    /// Why `worker_timeout` contradicts its heartbeats, if it does: with
    /// the interval it reported, its timeout is raised; with one observed
    /// (a TensorFlow worker), it is not, and may be declared lost between
    /// heartbeats.
    pub fn timeout_warning(&self, worker_timeout: i64) -> Option<String> {
        let ms = |us: i64| us / 1000;
        let few = i64::from(MIN_HEARTBEATS_PER_TIMEOUT);
        if let Some(interval) = self.reported_interval {
            return (worker_timeout < interval.saturating_mul(few)).then(|| {
                format!(
                    "worker_timeout_ms={} is shorter than {few} of this worker's heartbeats \
                     (heartbeat_interval_ms={}): its timeout is raised to {} ms",
                    ms(worker_timeout),
                    ms(interval),
                    ms(self.timeout(worker_timeout))
                )
            });
        }
        let gap = self.observed_gap?;
        (worker_timeout < gap.saturating_mul(few)).then(|| {
            format!(
                "worker_timeout_ms={} is shorter than {few} of this worker's heartbeats (they \
                 came {} ms apart; TensorFlow workers do not say their heartbeat_interval_ms): \
                 it may be declared lost while alive; raise worker_timeout_ms or lower the \
                 worker's heartbeat_interval_ms",
                ms(worker_timeout),
                ms(gap)
            )
        })
    }
}

/// Last heartbeat times (µs, the dispatcher's clock).
#[derive(Debug, Default)]
pub(crate) struct Liveness {
    workers: HashMap<String, WorkerHeard>,
    /// `i64::MAX` until a client's first heartbeat, so a slow starter is not
    /// timed out (TensorFlow's behaviour).
    clients: HashMap<IterationClientId, i64>,
    /// Workers whose last heartbeat said they are draining (SIGTERM): they
    /// get no new tasks. Their own heartbeats keep it true after a restart.
    draining: HashSet<String>,
}

impl Liveness {
    /// Everyone in `state` heard from at `now`.
    pub fn recovered(state: &DispatcherState, now: i64) -> Self {
        Liveness {
            workers: state
                .workers()
                .iter()
                .map(|w| {
                    let heard = WorkerHeard {
                        last: now,
                        ..Default::default()
                    };
                    (w.address.to_string(), heard)
                })
                .collect(),
            clients: state.clients().map(|(c, _)| (c, now)).collect(),
            draining: HashSet::new(),
        }
    }

    /// A heartbeat from `address` at `now`, saying its interval (µs) if it
    /// is a tfdata worker, from `peer` if the transport told.
    pub fn worker_heard(
        &mut self,
        address: &str,
        now: i64,
        reported_interval: Option<i64>,
        peer: Option<std::net::IpAddr>,
    ) -> &mut WorkerHeard {
        let heard = self.workers.entry(address.to_string()).or_default();
        if heard.last > 0 && now > heard.last {
            heard.observed_gap = Some(now - heard.last);
        }
        heard.last = now;
        if reported_interval.is_some() {
            heard.reported_interval = reported_interval;
        }
        if peer.is_some() {
            heard.peer = peer;
        }
        heard
    }

    pub fn worker(&self, address: &str) -> Option<&WorkerHeard> {
        self.workers.get(address)
    }

    pub fn forget_worker(&mut self, address: &str) {
        self.workers.remove(address);
        self.draining.remove(address);
    }

    /// Records what the worker's latest heartbeat said about draining.
    pub fn set_draining(&mut self, address: &str, draining: bool) {
        if draining {
            self.draining.insert(address.to_string());
        } else {
            self.draining.remove(address);
        }
    }

    pub fn is_draining(&self, address: &str) -> bool {
        self.draining.contains(address)
    }

    /// A client just acquired: not timed out before its first heartbeat.
    pub fn client_acquired(&mut self, client: IterationClientId) {
        self.clients.insert(client, i64::MAX);
    }

    pub fn client_heard(&mut self, client: IterationClientId, now: i64) {
        self.clients.insert(client, now);
    }

    pub fn forget_client(&mut self, client: IterationClientId) {
        self.clients.remove(&client);
    }

    /// Workers not heard from for longer than their timeout:
    /// `worker_timeout` µs, raised for those whose interval needs more
    /// ([`WorkerHeard::timeout`]).
    pub fn silent_workers(&self, now: i64, worker_timeout: i64) -> Vec<String> {
        self.workers
            .iter()
            .filter(|(_, h)| now.saturating_sub(h.last) > h.timeout(worker_timeout))
            .map(|(w, _)| w.clone())
            .collect()
    }

    /// Workers silent for longer than `heartbeats` of their intervals (and
    /// at least `at_least` µs), with how long: worth a probe.
    pub fn overdue_workers(&self, now: i64, heartbeats: f64, at_least: i64) -> Vec<(String, i64)> {
        self.workers
            .iter()
            .filter_map(|(w, h)| {
                let silent = now.saturating_sub(h.last);
                let due = h.interval().map(|i| (i as f64 * heartbeats) as i64)?;
                (silent > due.max(at_least)).then(|| (w.clone(), silent))
            })
            .collect()
    }

    /// Clients that heartbeated once and then not for more than `timeout` µs.
    pub fn silent_clients(&self, now: i64, timeout: i64) -> Vec<IterationClientId> {
        self.clients
            .iter()
            .filter(|(_, last)| **last != i64::MAX && now.saturating_sub(**last) > timeout)
            .map(|(c, _)| *c)
            .collect()
    }

    /// The workers' last heartbeat times (for introspection).
    pub fn worker_heartbeats(&self) -> HashMap<String, i64> {
        self.workers
            .iter()
            .map(|(w, h)| (w.clone(), h.last))
            .collect()
    }
}
