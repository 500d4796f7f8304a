//! Serving: the dispatcher's logic ([`crate::dispatcher`]) on the network.
//!
//! * [`grpc`]: the tonic adapter of TensorFlow's `DispatcherService`, each
//!   call in a span with the ids its request names (`request_span`);
//! * [`grpc_heartbeat`]: `ClientHeartbeat` answered in front of it, from the
//!   iterations' task lists kept encoded;
//! * [`status`]: the introspection service `tfdata status` reads;
//! * [`http`]: the admin HTTP endpoint's routes (`/metrics`, `/healthz`,
//!   `/readyz`);
//! * [`status_page`]: the status page (`/`) and its JSON (`/api/status`)
//!   merged into them, with the bottleneck verdict;
//! * [`server`]: [`serve`](server::serve) (the library function the CLI and
//!   tests call) and the in-process `DispatchServer`;
//! * [`high_availability`]: several dispatchers on one `work_dir`, the
//!   lease's holder leading and the others answering `UNAVAILABLE` behind
//!   gates until they take over.
//!
//! This module itself holds what the single dispatcher and the dispatchers
//! of a high-availability group serve alike: the health, the admin
//! endpoint, the maintenance loop and the journal watch.

pub mod grpc;
pub mod grpc_heartbeat;
pub mod high_availability;
pub mod http;
mod request_span;
pub mod server;
pub mod status;
pub mod status_page;

use std::net::TcpListener as StdTcpListener;
use std::sync::Arc;

use tfdata_core::Result;
use tfdata_proto::data::dispatcher_service_server::DispatcherServiceServer;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::admin;
use tfdata_rpc::health::Health;
use tfdata_rpc::security::TransportSecurity;
use tonic::server::NamedService;

use crate::dispatcher::Dispatcher;
use crate::serving::grpc::DispatcherGrpc;
use crate::serving::http::DispatcherSlot;

/// The health of a dispatcher not serving yet.
pub(crate) fn new_health(reason: &str) -> Health {
    Health::new(
        &[<DispatcherServiceServer<DispatcherGrpc> as NamedService>::NAME],
        reason,
    )
}

pub(crate) type HttpTask = Option<tokio::task::JoinHandle<Result<()>>>;

/// Starts the admin endpoint on `http`, if given: HTTPS when `security`
/// has TLS, the token on all but the probes.
pub(crate) fn start_http(
    http: Option<StdTcpListener>,
    security: &TransportSecurity,
    slot: &DispatcherSlot,
    health: &Health,
    shutdown: &CancellationToken,
) -> Result<HttpTask> {
    let Some(listener) = http else {
        return Ok(None);
    };
    let security = security.admin_server()?;
    let router = crate::serving::http::router(slot.clone(), health.clone())
        .merge(crate::serving::status_page::routes(slot.clone()));
    Ok(Some(tokio::spawn(admin::serve(
        listener,
        router,
        shutdown.clone(),
        security,
    ))))
}

/// Waits for the admin endpoint to stop (`shutdown` must be cancelled or
/// about to be): its error, if it failed.
pub(crate) async fn stop_http(http: HttpTask, shutdown: &CancellationToken) -> Result<()> {
    shutdown.cancel();
    match http {
        Some(task) => admin::stopped(task).await,
        None => Ok(()),
    }
}

/// A token sent in plaintext can be read by anyone on the network path.
pub(crate) fn warn_if_token_in_plaintext(security: &tfdata_rpc::security::ServerSecurity) {
    if security.requires_token() && !security.is_tls() {
        tracing::warn!(
            "a bearer token is required but TLS is off: tokens cross the network in \
             plaintext (set --tls-cert, --tls-key and --tls-ca)"
        );
    }
}

/// Declares the dispatcher unhealthy once a journal write has failed: it
/// refuses every state change until restarted, and a restart recovers it.
pub(crate) async fn watch_journal(
    dispatcher: Arc<Dispatcher>,
    health: Health,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(JOURNAL_CHECK_INTERVAL);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return,
        }
        if dispatcher.journal_failed() {
            health.set_unhealthy(
                "a journal write failed; restart the dispatcher to recover from its journal",
            );
            return;
        }
    }
}

/// How often the health follows the journal.
const JOURNAL_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// How often finished snapshots whose `DONE`/`ERROR` file could not be
/// written try again.
const SNAPSHOT_FILE_RETRY_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Pushes tasks created for workers that are not asking
/// ([`Dispatcher::push_created_tasks`]) as soon as a transaction makes one.
async fn task_push_loop(dispatcher: Arc<Dispatcher>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = dispatcher.tasks_created() => {}
            () = shutdown.cancelled() => return,
        }
        if let Err(e) = dispatcher.push_created_tasks().await {
            tracing::error!(error = %e, "pushing new tasks to workers failed");
        }
    }
}

/// Answers the heartbeats held for workers ([`Dispatcher::release_held_heartbeats`])
/// when dropped: when the maintenance loop ends with `shutdown`, or is
/// aborted because this dispatcher lost its leader lease. So a stop is not
/// held up by them, nor a deposed leader left holding them.
struct ReleaseHeldHeartbeats(Arc<Dispatcher>);

impl Drop for ReleaseHeldHeartbeats {
    fn drop(&mut self) {
        self.0.release_held_heartbeats();
    }
}

/// Runs [`Dispatcher::check_liveness`] every
/// [`Dispatcher::liveness_check_interval`] and [`Dispatcher::collect_garbage`]
/// every `job_gc_check_interval` (not at all when `job_gc_timeout` is unset,
/// TensorFlow's -1): noticing a dead worker or client follows its own
/// timeout, not the garbage collector's schedule. The scaling controller
/// decides every `scaling_period` ([`Dispatcher::scaling_step`]).
///
/// Probing suspected workers (`dispatcher::probes`) runs beside it, as long
/// as it does: a probe takes up to a few seconds and must not hold up the
/// liveness checks.
pub(crate) async fn maintenance_loop(dispatcher: Arc<Dispatcher>, shutdown: CancellationToken) {
    let _release = ReleaseHeldHeartbeats(Arc::clone(&dispatcher));
    let _probes = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(
        crate::dispatcher::probe_loop(Arc::clone(&dispatcher), shutdown.clone()),
    ));
    let _pushes = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(task_push_loop(
        Arc::clone(&dispatcher),
        shutdown.clone(),
    )));
    let ticker = |period| {
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    };
    let mut liveness = ticker(dispatcher.liveness_check_interval());
    let gc_enabled = dispatcher.config().job_gc_timeout.is_some();
    let mut gc = ticker(dispatcher.config().job_gc_check_interval);
    let mut snapshot_files = ticker(SNAPSHOT_FILE_RETRY_INTERVAL);
    let mut scaling = ticker(dispatcher.scaling_period());
    loop {
        let result = tokio::select! {
            _ = liveness.tick() => dispatcher.check_liveness().await,
            _ = gc.tick(), if gc_enabled => dispatcher.collect_garbage().await,
            _ = snapshot_files.tick() => dispatcher.retry_snapshot_final_files().await,
            _ = scaling.tick() => {
                dispatcher.scaling_step().await;
                Ok(())
            }
            () = shutdown.cancelled() => return,
        };
        if let Err(e) = result {
            tracing::error!(error = %e, "dispatcher maintenance failed");
        }
    }
}
