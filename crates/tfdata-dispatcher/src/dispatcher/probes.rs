//! Noticing a dead worker in seconds, whatever `worker_timeout` is.
//!
//! `worker_timeout` is TensorFlow's 10 minutes by default, and a worker
//! silent that long is all the heartbeats can tell: a dead worker's leased
//! splits would wait that long. But a process that died leaves its host
//! answering for it: its port refuses connections. So when a reader's
//! connection to a worker broke and the worker's port refused the
//! reconnection (`ClientHeartbeatRequest.tfdata_unreachable_workers`), or a
//! worker missed a few heartbeats, the dispatcher probes the worker's
//! address itself ([`tfdata_rpc::peer::probe`]), a few times, and declares
//! it lost only if every probe was refused and it did not heartbeat
//! meanwhile. A worker that is only slow, paused or cut off by the network
//! accepts the probe or does not answer it, and is left to `worker_timeout`.
//!
//! A probe says something of the worker only when its address is the host
//! its heartbeats come from: a worker advertising `localhost:port` on
//! another host would be probed on the dispatcher's own host. So a worker
//! is probed only when its address resolves to the IP its heartbeats come
//! from (or both are loopback); TensorFlow's workers too.
//!
//! Probes run on the dispatcher's runtime, outside the state lock; the one
//! transaction that may follow is the loss itself.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tfdata_core::Result;
use tfdata_rpc::peer::Probe;

use super::Dispatcher;
use super::workers::lose_worker;

/// Probes of one worker before it is declared dead: all must be refused.
pub const PROBES_TO_CONFIRM: usize = 3;
/// Between two of them.
pub const PROBE_SPACING: Duration = Duration::from_millis(250);
/// The longest one probe waits for an answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// The soonest the same worker is probed again.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// A worker silent for this many of its heartbeat intervals is probed.
pub const OVERDUE_HEARTBEATS: f64 = 2.5;
/// ... but not before it was silent this long.
pub const MIN_SILENCE_BEFORE_PROBE: Duration = Duration::from_secs(1);
/// Most workers probed at once (each probe is one connection attempt).
pub const MAX_CONCURRENT_PROBES: usize = 64;
/// Most requests queued (a burst of reader reports about one worker is one).
const MAX_QUEUED: usize = 4096;

/// Why a worker is probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Suspicion {
    /// A reader's connection broke and the port refused it.
    Refused { client: i64 },
    /// No heartbeat for this long (µs).
    Silent { micros: i64 },
}

impl std::fmt::Display for Suspicion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Suspicion::Refused { client } => write!(
                f,
                "reader (client {client}) found its port refusing connections"
            ),
            Suspicion::Silent { micros } => {
                write!(f, "no heartbeat for {} ms", micros / 1000)
            }
        }
    }
}

/// Workers waiting for a probe, and when each was last probed.
#[derive(Default)]
pub(crate) struct Probes {
    queue: Mutex<ProbeQueue>,
    /// Wakes the probe loop.
    pub wanted: tokio::sync::Notify,
}

#[derive(Default)]
struct ProbeQueue {
    requested: HashMap<String, Suspicion>,
    /// When each worker's last probe started (the dispatcher's clock, µs).
    last_probed: HashMap<String, i64>,
}

impl Probes {
    /// Asks for a probe of `worker` unless one ran within
    /// [`PROBE_INTERVAL`] or is queued.
    fn request(&self, worker: &str, why: Suspicion, now: i64) {
        let mut q = lock(&self.queue);
        let recent = q
            .last_probed
            .get(worker)
            .is_some_and(|t| now.saturating_sub(*t) < PROBE_INTERVAL.as_micros() as i64);
        if recent || q.requested.contains_key(worker) || q.requested.len() >= MAX_QUEUED {
            return;
        }
        q.requested.insert(worker.to_string(), why);
        drop(q);
        self.wanted.notify_one();
    }

    fn take(&self, now: i64) -> Vec<(String, Suspicion)> {
        let mut q = lock(&self.queue);
        let taken: Vec<(String, Suspicion)> = q.requested.drain().collect();
        for (w, _) in &taken {
            q.last_probed.insert(w.clone(), now);
        }
        taken
    }

    /// Forgets workers no longer registered (bounds `last_probed`).
    fn retain(&self, known: impl Fn(&str) -> bool) {
        lock(&self.queue).last_probed.retain(|w, _| known(w));
    }
}

impl Dispatcher {
    /// A reader (`client`) says `workers`' ports refused it: probes those
    /// that are registered, not lost, and heartbeat from their address's
    /// host.
    pub(super) fn suspect_refused(&self, client: i64, workers: &[String], now: i64) {
        for w in workers.iter().take(MAX_QUEUED) {
            self.probes.request(w, Suspicion::Refused { client }, now);
        }
    }

    /// One round of probing: the workers readers reported and those
    /// overdue for a heartbeat, each probed up to [`PROBES_TO_CONFIRM`]
    /// times; the dead are declared lost. Returns the workers declared lost.
    pub async fn run_probes(&self) -> Result<Vec<String>> {
        let now = self.clock.now_micros();
        let candidates = {
            let txn = self.ledger.begin().await;
            let overdue = txn.liveness.overdue_workers(
                now,
                OVERDUE_HEARTBEATS,
                MIN_SILENCE_BEFORE_PROBE.as_micros() as i64,
            );
            for (w, micros) in overdue {
                self.probes.request(&w, Suspicion::Silent { micros }, now);
            }
            self.probes
                .retain(|w| txn.state.worker(w).is_some_and(|w| !w.lost));
            let mut candidates = Vec::new();
            for (worker, why) in self.probes.take(now) {
                let live = txn.state.worker(&worker).is_some_and(|w| !w.lost);
                let peer = txn.liveness.worker(&worker).and_then(|h| h.peer);
                if let (true, Some(peer)) = (live, peer) {
                    candidates.push((worker, why, peer));
                }
            }
            candidates
        };
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let mut confirmations = tokio::task::JoinSet::new();
        let mut dead = Vec::new();
        for (worker, why, peer) in candidates {
            if confirmations.len() >= MAX_CONCURRENT_PROBES
                && let Some(Ok(Some(d))) = confirmations.join_next().await
            {
                dead.push(d);
            }
            confirmations
                .spawn(async move { confirm_dead(&worker, peer).await.then_some((worker, why)) });
        }
        while let Some(joined) = confirmations.join_next().await {
            if let Ok(Some(d)) = joined {
                dead.push(d);
            }
        }
        if dead.is_empty() {
            return Ok(Vec::new());
        }
        let mut lost = Vec::new();
        let mut txn = self.ledger.begin().await;
        for (worker, why) in dead {
            // A heartbeat since the probes began: a new process answers
            // at that address (restarted in place); its heartbeat handles it.
            let heard_since = txn.liveness.worker(&worker).is_some_and(|h| h.last > now);
            let Some(w) = txn.state.worker(&worker).filter(|w| !w.lost) else {
                continue;
            };
            if heard_since {
                continue;
            }
            let runs_pipelines = w.runs_pipelines;
            tracing::warn!(
                %worker,
                reason = %why,
                "worker's port refuses connections ({PROBES_TO_CONFIRM} probes by the dispatcher): \
                 the process is gone; declaring it lost without waiting for worker_timeout"
            );
            txn.liveness.forget_worker(&worker);
            lose_worker(&mut txn, &worker)?;
            txn.metrics().workers_probed_lost.inc();
            lost.push((worker, runs_pipelines));
        }
        txn.commit().await?;
        for (worker, runs_pipelines) in &lost {
            self.snapshot_worker_lost(worker, *runs_pipelines);
        }
        Ok(lost.into_iter().map(|(w, _)| w).collect())
    }
}

/// Whether `worker` (`host:port`, heartbeating from `peer`) is dead: its
/// address is `peer`'s host, and every one of [`PROBES_TO_CONFIRM`] probes
/// was refused.
async fn confirm_dead(worker: &str, peer: IpAddr) -> bool {
    if !address_is_host(worker, peer).await {
        tracing::debug!(%worker, %peer, "not probing a worker whose address is not the host its heartbeats come from");
        return false;
    }
    for i in 0..PROBES_TO_CONFIRM {
        if i > 0 {
            tokio::time::sleep(PROBE_SPACING).await;
        }
        let outcome = tfdata_rpc::peer::probe(worker, PROBE_TIMEOUT).await;
        tracing::debug!(%worker, probe = i, ?outcome, "probed a worker");
        if outcome != Probe::Refused {
            return false;
        }
    }
    true
}

/// Whether `address`'s host resolves to `peer` (or both are this host's
/// loopback).
async fn address_is_host(address: &str, peer: IpAddr) -> bool {
    let Ok(Ok(resolved)) =
        tokio::time::timeout(PROBE_TIMEOUT, tokio::net::lookup_host(address)).await
    else {
        return false;
    };
    let ips: Vec<IpAddr> = resolved.take(16).map(|a| a.ip().to_canonical()).collect();
    !ips.is_empty()
        && (ips.contains(&peer) || (peer.is_loopback() && ips.iter().all(IpAddr::is_loopback)))
}

/// Runs [`Dispatcher::run_probes`] whenever a reader reports a worker, and
/// every [`PROBE_INTERVAL`] for workers overdue for a heartbeat.
pub(crate) async fn probe_loop(
    dispatcher: Arc<Dispatcher>,
    shutdown: tfdata_rpc::CancellationToken,
) {
    loop {
        tokio::select! {
            () = dispatcher.probes.wanted.notified() => {}
            () = tokio::time::sleep(PROBE_INTERVAL) => {}
            () = shutdown.cancelled() => return,
        }
        if let Err(e) = dispatcher.run_probes().await {
            tracing::error!(error = %e, "probing workers failed");
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
