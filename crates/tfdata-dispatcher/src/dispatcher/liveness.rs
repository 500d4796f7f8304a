//! When workers and clients were last heard from. Kept apart from the
//! journaled state: it is not replayed, and a restart treats everyone it
//! recovers as having just heartbeated.

use std::collections::{HashMap, HashSet};

use tfdata_core::IterationClientId;

use crate::state::DispatcherState;

/// Last heartbeat times (µs, the dispatcher's clock).
#[derive(Debug, Default)]
pub(crate) struct Liveness {
    workers: HashMap<String, i64>,
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
                .map(|w| (w.address.clone(), now))
                .collect(),
            clients: state.clients().map(|(c, _)| (c, now)).collect(),
            draining: HashSet::new(),
        }
    }

    pub fn worker_heard(&mut self, address: &str, now: i64) {
        match self.workers.get_mut(address) {
            Some(last) => *last = now,
            None => {
                self.workers.insert(address.to_string(), now);
            }
        }
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

    /// Workers not heard from for more than `timeout` µs.
    pub fn silent_workers(&self, now: i64, timeout: i64) -> Vec<String> {
        self.workers
            .iter()
            .filter(|(_, last)| now.saturating_sub(**last) > timeout)
            .map(|(w, _)| w.clone())
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
    pub fn worker_heartbeats(&self) -> &HashMap<String, i64> {
        &self.workers
    }
}
