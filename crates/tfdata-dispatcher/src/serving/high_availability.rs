//! Several dispatchers on one `work_dir`: one leads, the others stand by
//! (issue 17, item 3; [`DispatcherConfig::high_availability`]).
//!
//! [`serve`] binds nothing itself: it serves the listener from the start,
//! every service behind a [`Gate`]. Meanwhile it ticks the
//! [`LeaderLease`] on `<work_dir>/leader_lease`:
//!
//! * **Standby.** Every `DispatcherService` (and status) call is answered
//!   `UNAVAILABLE` naming the leader's address from the lease record, so
//!   TensorFlow's clients and workers, and ours, retry (ours move on to
//!   the next dispatcher address). Liveness (`/healthz`, and the process
//!   answering at all) passes; readiness (`/readyz`, `grpc.health`) does
//!   not, so a Kubernetes Service routes only to the leader.
//! * **Takeover.** When the lease is won (it expired: the leader died or
//!   stalled), the journal is replayed exactly as at a restart
//!   ([`Dispatcher::with_work_dir_fenced`]), with the lease's [`Fence`]
//!   handed to the journal writer; the lease keeps being renewed during
//!   the replay. Then the gates open and readiness passes.
//! * **Leader.** Renews the lease every `renew_interval`. The journal
//!   writer checks the fence before every group write and compaction, and
//!   the gates check it before every call (no I/O), so a leader resumed
//!   after a pause answers nothing from its stale state.
//! * **Deposed.** When a renewal finds the lease replaced, or the fence
//!   runs out (renewals failed for `duration - safety_margin`, or the
//!   process was paused), the dispatcher closes its gates (`UNAVAILABLE`),
//!   marks itself unhealthy and [`serve`] returns an error: the
//!   `tfdata dispatcher` process **exits non-zero**, and its supervisor
//!   (Kubernetes, systemd, the tests) restarts it, as a standby. Its
//!   in-memory state is never trusted again; writes it had queued are
//!   refused by the fence, and RPCs waiting for them get `UNAVAILABLE`.
//!
//! A standby tails the journal on object stores: every second it lists the
//! journal and reads the objects written since ([`Prefetched`]), so the
//! replay at takeover — the one a restart does, bounded by compaction —
//! reads only the last second's objects from the store. A local journal is read from disk at takeover.

use std::convert::Infallible;
use std::net::TcpListener as StdTcpListener;
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tfdata_core::{Error, Result};
use tfdata_proto::data::dispatcher_service_server::DispatcherServiceServer;
use tfdata_proto::tfdata::status::status_service_server::StatusServiceServer;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::channel::MAX_MESSAGE_BYTES;
use tonic::Status;
use tonic::codegen::{BoxFuture, Service, http};
use tonic::server::NamedService;

use crate::config::DispatcherConfig;
use crate::dispatcher::{Dispatcher, SystemClock};
use crate::persistence::journal::Prefetched;
use crate::persistence::leader_lease::{
    Fence, LEASE_NAME, LeaderLease, LeaseConfig, LeaseRecord, Role,
};
use crate::persistence::work_dir::WorkDir;
use crate::serving::grpc::DispatcherGrpc;
use crate::serving::grpc_heartbeat::HeartbeatFastPath;
use crate::serving::http::DispatcherSlot;
use crate::serving::status::StatusGrpc;

/// How often a standby reads the journal ahead (one listing, and the
/// objects written since, per read): a takeover reads at most this much of
/// the journal's tail from the store.
const READ_AHEAD_INTERVAL: Duration = Duration::from_secs(5);

/// How long a deposed dispatcher waits for its gRPC server to stop before
/// returning anyway (its gates already refuse every call).
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A service that answers `UNAVAILABLE` with a message until it is
/// opened with the real service, and again once closed.
pub struct Gate<S> {
    state: Arc<RwLock<GateState<S>>>,
}

enum GateState<S> {
    Closed(String),
    /// Serving, while the fence holds (checked per call: no I/O).
    Open(S, Fence),
}

impl<S> Clone for Gate<S> {
    fn clone(&self) -> Self {
        Gate {
            state: Arc::clone(&self.state),
        }
    }
}

impl<S: Clone> Gate<S> {
    /// A closed gate answering `UNAVAILABLE: <why>`.
    pub fn closed(why: impl Into<String>) -> Self {
        Gate {
            state: Arc::new(RwLock::new(GateState::Closed(why.into()))),
        }
    }

    /// Serves `service` from now on, each call only while `fence` holds:
    /// a leader paused past its lease answers nothing from its stale state
    /// when it resumes.
    pub fn open(&self, service: S, fence: Fence) {
        *self.state.write().unwrap_or_else(PoisonError::into_inner) =
            GateState::Open(service, fence);
    }

    /// Answers `UNAVAILABLE: <why>` from now on.
    pub fn close(&self, why: impl Into<String>) {
        *self.state.write().unwrap_or_else(PoisonError::into_inner) = GateState::Closed(why.into());
    }

    /// Changes the message of a closed gate (an open one stays open).
    pub fn set_reason(&self, why: impl Into<String>) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        if let GateState::Closed(reason) = &mut *state {
            *reason = why.into();
        }
    }

    fn current(&self) -> std::result::Result<S, String> {
        match &*self.state.read().unwrap_or_else(PoisonError::into_inner) {
            GateState::Open(service, fence) => match fence.check() {
                Ok(()) => Ok(service.clone()),
                Err(e) => Err(e.to_string()),
            },
            GateState::Closed(why) => Err(why.clone()),
        }
    }
}

impl<S: NamedService> NamedService for Gate<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<tonic::body::Body>> for Gate<S>
where
    S: Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The services behind the gate (tonic's generated servers) are
        // always ready; readiness is checked on the clone in `call`.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        match self.current() {
            Ok(mut service) => Box::pin(async move {
                std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
                service.call(req).await
            }),
            Err(why) => Box::pin(async move { Ok(Status::unavailable(why).into_http()) }),
        }
    }
}

type DispatcherGate = Gate<HeartbeatFastPath<DispatcherServiceServer<DispatcherGrpc>>>;
type StatusGate = Gate<StatusServiceServer<StatusGrpc>>;

/// The two gates a dispatcher serves behind.
#[derive(Clone)]
struct Gates {
    dispatcher: DispatcherGate,
    status: StatusGate,
}

impl Gates {
    fn closed(why: &str) -> Self {
        Gates {
            dispatcher: Gate::closed(why),
            status: Gate::closed(why),
        }
    }

    fn set_reason(&self, why: &str) {
        self.dispatcher.set_reason(why);
        self.status.set_reason(why);
    }

    fn open(&self, dispatcher: &Arc<Dispatcher>, fence: &Fence) {
        let service = DispatcherServiceServer::new(DispatcherGrpc(Arc::clone(dispatcher)))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        self.dispatcher.open(
            HeartbeatFastPath::new(service, Arc::clone(dispatcher), MAX_MESSAGE_BYTES),
            fence.clone(),
        );
        self.status.open(
            StatusServiceServer::new(StatusGrpc(Arc::clone(dispatcher))),
            fence.clone(),
        );
    }

    fn close(&self, why: &str) {
        self.dispatcher.close(why);
        self.status.close(why);
    }
}

/// The address this dispatcher advertises in the lease: the configured
/// one, else `<hostname>:<port>`.
fn advertised_address(config: &DispatcherConfig, port: u16) -> String {
    if let Some(address) = config
        .high_availability
        .as_ref()
        .and_then(|ha| ha.advertised_address.clone())
    {
        return address;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "localhost".to_string());
    format!("{host}:{port}")
}

/// The lease over `work_dir`: `<work_dir>/leader_lease`, through the io
/// layer's process-wide object-store client for object stores.
pub fn lease_for(work_dir: &WorkDir, address: &str, config: LeaseConfig) -> Result<LeaderLease> {
    match work_dir {
        WorkDir::Local(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
            LeaderLease::local(dir.clone(), address, config)
        }
        WorkDir::ObjectStore(dir) => {
            let url = dir.join(LEASE_NAME);
            let (store, key) = tfdata_dataset::io::object_store::global().object_store(&url)?;
            LeaderLease::object_store(store, key, &url, address, config)
        }
    }
}

/// What a standby answers.
fn standby_reason(leader: Option<&LeaseRecord>, takeover_in: Duration) -> String {
    match leader {
        Some(record) => format!(
            "this dispatcher is a standby; the leader is {} (lease generation {}); \
             retry there, or here: this standby takes over if the leader's lease \
             is not renewed within {:.1}s",
            record.address,
            record.generation,
            takeover_in.as_secs_f64()
        ),
        None => "this dispatcher is a standby contending for the leader lease; retry shortly"
            .to_string(),
    }
}

/// Serves `config` (with `high_availability` set) on `listener` as one of
/// several dispatchers sharing its `work_dir`; see the module docs.
/// Returns `Ok` when `shutdown` fires, an error when this dispatcher lost
/// the lease after leading (it must then be restarted, as a standby).
pub async fn serve(
    listener: tokio::net::TcpListener,
    http: Option<StdTcpListener>,
    config: DispatcherConfig,
    shutdown: CancellationToken,
) -> Result<()> {
    config.validate()?;
    let Some(ha) = config.high_availability.clone() else {
        return Err(Error::InvalidConfig {
            field: "high_availability",
            reason: "not set; use server::serve for a single dispatcher".into(),
        });
    };
    let work_dir = WorkDir::parse(config.work_dir.as_deref().unwrap_or_default())?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    let address = advertised_address(&config, port);
    let lease = lease_for(&work_dir, &address, ha.lease)?;
    let server_security = config.security.server()?;
    crate::serving::warn_if_token_in_plaintext(&server_security);

    let health = crate::serving::new_health("standby: contending for the leader lease");
    let slot = DispatcherSlot::default();
    // Stopped by `shutdown` or by losing the lease.
    let stop = shutdown.child_token();
    let http = crate::serving::start_http(http, &config.security, &slot, &health, &stop)?;
    let gates = Gates::closed(&standby_reason(None, ha.lease.duration));
    let grpc_health = health.grpc_service().await;
    let server = {
        let stopping = {
            let (health, stop) = (health.clone(), stop.clone());
            async move {
                stop.cancelled().await;
                health.set_not_ready("stopping");
            }
        };
        let router = tonic::transport::Server::builder()
            .layer(server_security.auth_layer())
            .add_service(gates.dispatcher.clone())
            .add_service(gates.status.clone())
            .add_service(grpc_health);
        let incoming = tfdata_rpc::server::incoming(listener, &server_security);
        tokio::spawn(async move {
            router
                .serve_with_incoming_shutdown(incoming, stopping)
                .await
        })
    };
    tracing::info!(
        port,
        address = %address,
        work_dir = %work_dir.display(),
        lease = %lease.storage().location(),
        holder = %lease.holder(),
        "tf.data service dispatcher serving as a standby until it wins the leader lease"
    );

    let outcome = lead_or_stand_by(
        lease,
        LeaderContext {
            config,
            work_dir,
            gates: gates.clone(),
            health: health.clone(),
            slot,
            prefetched: Prefetched::default(),
        },
        &stop,
    )
    .await;
    if let Err(e) = &outcome {
        gates.close(&format!(
            "this dispatcher stopped leading ({e}); another dispatcher leads now"
        ));
        health.set_unhealthy(format!("lost the leader lease: {e}"));
    }
    stop.cancel();
    match tokio::time::timeout(STOP_GRACE, server).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) if outcome.is_ok() => {
            return Err(Error::Internal(format!(
                "dispatcher gRPC server failed: {e}"
            )));
        }
        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "the gRPC server failed too"),
        Ok(Err(e)) => tracing::warn!(error = %e, "the gRPC server task failed"),
        Err(_) => tracing::warn!("the gRPC server did not stop within {STOP_GRACE:?}"),
    }
    let http_result = crate::serving::stop_http(http, &stop).await;
    outcome?;
    http_result?;
    tracing::info!(port, "tf.data service dispatcher stopped");
    Ok(())
}

/// What taking over needs.
struct LeaderContext {
    config: DispatcherConfig,
    work_dir: WorkDir,
    gates: Gates,
    health: tfdata_rpc::health::Health,
    slot: DispatcherSlot,
    /// The journal objects read ahead while standing by.
    prefetched: Prefetched,
}

/// The leader's background tasks, aborted when it stops.
struct Leading {
    fence: Fence,
    dispatcher: Arc<Dispatcher>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Leading {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The lease loop: stand by, take over, lead; `Ok` on `stop`, an error
/// once a lease held is lost.
async fn lead_or_stand_by(
    mut lease: LeaderLease,
    cx: LeaderContext,
    stop: &CancellationToken,
) -> Result<()> {
    let renew_interval = lease.config().renew_interval;
    let mut tick = tokio::time::interval(renew_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut recovering: Option<(Fence, Instant, tokio::task::JoinHandle<Result<Dispatcher>>)> =
        None;
    let mut leading: Option<Leading> = None;
    let mut last_leader: Option<(String, u64)> = None;
    // A standby's read-ahead of the journal, one at a time.
    let mut reading_ahead: Option<tokio::task::JoinHandle<Result<usize>>> = None;
    let mut last_read_ahead: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            joined = async {
                match recovering.as_mut() {
                    Some((_, _, task)) => task.await,
                    None => std::future::pending().await,
                }
            } => {
                let Some((fence, started, _)) = recovering.take() else {
                    continue;
                };
                let dispatcher = joined
                    .map_err(|e| Error::Internal(format!("the takeover's replay failed: {e}")))
                    .and_then(|r| r)?;
                // The replay may have outlived the lease (a stall): serve
                // only under a fence that still holds.
                fence.check()?;
                let dispatcher = Arc::new(dispatcher);
                cx.prefetched.clear();
                cx.slot.set(Arc::clone(&dispatcher));
                cx.gates.open(&dispatcher, &fence);
                cx.health.set_ready();
                tracing::info!(
                    generation = fence.generation(),
                    replay_ms = started.elapsed().as_millis() as u64,
                    "this dispatcher now leads: journal replayed, serving"
                );
                leading = Some(Leading {
                    tasks: vec![
                        tokio::spawn(crate::serving::maintenance_loop(
                            Arc::clone(&dispatcher),
                            stop.clone(),
                        )),
                        tokio::spawn(crate::serving::watch_journal(
                            Arc::clone(&dispatcher),
                            cx.health.clone(),
                            stop.clone(),
                        )),
                    ],
                    fence,
                    dispatcher,
                });
                continue;
            }
            () = stop.cancelled() => {
                if leading.is_some() || recovering.is_some() {
                    lease.resign();
                }
                return Ok(());
            }
        }
        let held = leading
            .as_ref()
            .map(|l| &l.fence)
            .or(recovering.as_ref().map(|(f, _, _)| f));
        match lease.tick().await {
            Ok(Role::Leader(fence)) => {
                if held.is_none() {
                    tracing::info!(
                        generation = fence.generation(),
                        "won the leader lease; replaying the journal to take over"
                    );
                    cx.health
                        .set_not_ready("taking over as leader: replaying the journal");
                    cx.gates.set_reason(
                        "this dispatcher is taking over as leader (replaying the journal); retry shortly",
                    );
                    let (config, work_dir, task_fence, prefetched) = (
                        cx.config.clone(),
                        cx.work_dir.clone(),
                        fence.clone(),
                        cx.prefetched.clone(),
                    );
                    let task = tokio::task::spawn_blocking(move || {
                        let dispatcher = Dispatcher::taking_over(
                            config,
                            Arc::new(SystemClock),
                            Some(work_dir),
                            Some(task_fence),
                            Some(&prefetched),
                        );
                        let (from_read_ahead, read_ahead) = prefetched.stats();
                        tracing::info!(
                            from_read_ahead,
                            read_ahead,
                            "journal objects taken from the standby's read-ahead"
                        );
                        dispatcher
                    });
                    recovering = Some((fence, Instant::now(), task));
                }
            }
            Ok(Role::Follower {
                leader,
                takeover_in,
            }) => {
                if let Some(fence) = held {
                    return Err(Error::FailedPrecondition(format!(
                        "lost the leader lease of generation {} to {}; exiting: restart \
                         this dispatcher to stand by",
                        fence.generation(),
                        leader
                            .as_ref()
                            .map_or("another dispatcher", |r| r.address.as_str())
                    )));
                }
                let key = leader.as_ref().map(|r| (r.address.clone(), r.generation));
                if key != last_leader {
                    tracing::info!(
                        leader = leader.as_ref().map_or("none", |r| r.address.as_str()),
                        generation = leader.as_ref().map_or(0, |r| r.generation),
                        "standing by"
                    );
                    last_leader = key;
                }
                let reason = standby_reason(leader.as_ref(), takeover_in);
                cx.gates.set_reason(&reason);
                cx.health.set_not_ready(reason);
                // Tail the journal (object stores), so that a takeover reads
                // only what was written since the last tick.
                if reading_ahead.as_ref().is_none_or(|t| t.is_finished())
                    && last_read_ahead.is_none_or(|t| t.elapsed() >= READ_AHEAD_INTERVAL)
                {
                    last_read_ahead = Some(Instant::now());
                    if let Some(done) = reading_ahead.take() {
                        match done.await {
                            Ok(Ok(_)) => {}
                            Ok(Err(e)) => {
                                tracing::debug!(error = %e, "reading the journal ahead failed")
                            }
                            Err(e) => {
                                tracing::debug!(error = %e, "the journal read-ahead task failed")
                            }
                        }
                    }
                    let (prefetched, work_dir) = (cx.prefetched.clone(), cx.work_dir.clone());
                    reading_ahead = Some(tokio::task::spawn_blocking(move || {
                        prefetched.refresh(&work_dir)
                    }));
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "the leader lease could not be read or renewed");
            }
        }
        if let Some(fence) = leading
            .as_ref()
            .map(|l| &l.fence)
            .or(recovering.as_ref().map(|(f, _, _)| f))
        {
            fence.check()?;
        }
        if let Some(l) = &leading
            && l.dispatcher.deposed()
        {
            return Err(Error::FailedPrecondition(
                "a journal write was refused by the lease's fence".into(),
            ));
        }
    }
}
