//! A server's health, as one value that both the admin HTTP endpoint
//! (`/healthz`, `/readyz`, [`crate::admin`]) and gRPC's standard health
//! service (`grpc.health.v1.Health`, for Kubernetes `grpc:` probes) report.
//!
//! * **live**: the process serves and can recover by itself. A dispatcher
//!   whose journal write failed is not: it refuses every state change until
//!   it is restarted, so it reports itself unhealthy and a liveness probe
//!   restarts it.
//! * **ready**: it should be sent work now. A dispatcher once its journal is
//!   replayed and it serves; a worker once registered and while it hears
//!   from its dispatcher.
//!
//! gRPC health reports `SERVING` for the overall service `""` and for each
//! named service while the server is live and ready, `NOT_SERVING`
//! otherwise (and `NOT_SERVING` once it is stopping).

use std::sync::Arc;

use tokio::sync::watch;
use tonic_health::ServingStatus;

/// Health as last set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub live: bool,
    pub ready: bool,
    /// Why it is not ready or not live (empty when it is both).
    pub reason: String,
}

impl Status {
    fn serving(&self) -> ServingStatus {
        if self.live && self.ready {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        }
    }
}

/// A server's health; clones share it. Starts live and not ready.
#[derive(Debug, Clone)]
pub struct Health {
    state: Arc<watch::Sender<Status>>,
    /// The gRPC services reported besides `""`, e.g.
    /// `tensorflow.data.DispatcherService`.
    services: Arc<[&'static str]>,
}

impl Health {
    /// Not ready yet, for `reason`; `services` are the gRPC service names
    /// health reports on (besides `""`).
    pub fn new(services: &[&'static str], reason: impl Into<String>) -> Self {
        let (state, _) = watch::channel(Status {
            live: true,
            ready: false,
            reason: reason.into(),
        });
        Health {
            state: Arc::new(state),
            services: services.into(),
        }
    }

    pub fn status(&self) -> Status {
        self.state.borrow().clone()
    }

    fn set(&self, status: Status) {
        self.state.send_if_modified(|current| {
            let changed = *current != status;
            if changed {
                tracing::info!(
                    live = status.live,
                    ready = status.ready,
                    reason = %status.reason,
                    "health changed"
                );
                *current = status;
            }
            changed
        });
    }

    /// Ready (and live) now.
    pub fn set_ready(&self) {
        self.set(Status {
            live: true,
            ready: true,
            reason: String::new(),
        });
    }

    /// Live but not ready, for `reason`.
    pub fn set_not_ready(&self, reason: impl Into<String>) {
        self.set(Status {
            live: true,
            ready: false,
            reason: reason.into(),
        });
    }

    /// Neither live nor ready: only a restart helps.
    pub fn set_unhealthy(&self, reason: impl Into<String>) {
        self.set(Status {
            live: false,
            ready: false,
            reason: reason.into(),
        });
    }

    /// `grpc.health.v1.Health` following this health: statuses are set
    /// before it is returned, and a task on the current runtime updates
    /// them on every change until the last clone of `self` is dropped.
    pub async fn grpc_service(
        &self,
    ) -> tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health + use<>,
    > {
        let (reporter, server) = tonic_health::server::health_reporter();
        let services = Arc::clone(&self.services);
        let mut changes = self.state.subscribe();
        let first = changes.borrow_and_update().serving();
        report(&reporter, &services, first).await;
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let serving = changes.borrow_and_update().serving();
                report(&reporter, &services, serving).await;
            }
        });
        server
    }
}

async fn report(
    reporter: &tonic_health::server::HealthReporter,
    services: &[&'static str],
    status: ServingStatus,
) {
    reporter.set_service_status("", status).await;
    for service in services {
        reporter.set_service_status(service, status).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_live_not_ready_and_changes() {
        let health = Health::new(&["x.Service"], "starting");
        assert_eq!(
            health.status(),
            Status {
                live: true,
                ready: false,
                reason: "starting".into()
            }
        );
        health.set_ready();
        assert!(health.status().ready && health.status().live);
        health.set_unhealthy("journal failed");
        let status = health.status();
        assert!(!status.live && !status.ready);
        assert_eq!(status.serving(), ServingStatus::NotServing);
    }
}
