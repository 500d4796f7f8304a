//! `tfdata workers`: a local supervisor that runs `tfdata worker` processes
//! and sizes them to the dispatcher's scaling controller (issue 36). Every
//! poll interval it asks `GetScalingAdvice{min, max}` and converges:
//! workers are started up to the target; above it, the surplus is
//! drained at once (SIGTERM: each worker hands its splits over, nothing is
//! lost or read twice) and waited for. A worker that dies is started again, at most
//! `--max-restarts-per-minute` times a minute. SIGINT or SIGTERM drains
//! every worker and exits; a second one stops them at once.
//!
//! Without a controller (UNIMPLEMENTED: a TensorFlow dispatcher, or an
//! older tfdata one) it says so and keeps `--min` workers. Without an
//! answer it keeps the workers it has and asks again with back-off.
//!
//! [`plan`] decides, [`children`] owns the processes, [`advice`] asks.

mod advice;
mod children;
pub mod plan;

use std::ffi::OsString;
use std::time::{Duration, Instant};

use clap::Args;
use tfdata_rpc::CancellationToken;

use self::advice::{AdviceClient, Reply};
use self::children::Worker;
use self::plan::{Answer, Bounds, RestartBudget, Step};
use crate::logging::LogFormat;
use crate::security::ServerSecurityArgs;

/// The longest wait between calls to an unreachable dispatcher.
const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// How often dead children are reaped and drains checked, between polls.
const TICK: Duration = Duration::from_millis(100);
/// Past a worker's own drain timeout, how long it gets to exit before
/// SIGKILL: its last heartbeat and its stop.
const DRAIN_GRACE: Duration = Duration::from_secs(10);
/// The window of `--max-restarts-per-minute`.
const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// `tfdata workers` flags. Those the supervisor does not know pass to
/// every worker after `--`.
#[derive(Args)]
pub struct WorkersArgs {
    /// host:port (or grpc://host:port) of the dispatcher.
    #[arg(long)]
    dispatcher_address: String,
    /// Fewest workers to run.
    #[arg(long, default_value_t = 1)]
    min: usize,
    /// Most workers to run.
    #[arg(long)]
    max: usize,
    /// How often to ask the dispatcher for its advice.
    #[arg(long, default_value_t = 1_000)]
    poll_interval_ms: u64,
    /// Workers that die on their own are started again at most this many
    /// times in any minute; past it, the supervisor waits (and logs).
    #[arg(long, default_value_t = 5)]
    max_restarts_per_minute: usize,
    /// Worker `slot` listens on this port + slot (slots count from 0 and
    /// are reused); 0, the default, lets each pick a free port.
    #[arg(long, default_value_t = 0)]
    base_port: u16,
    /// Worker `slot` serves /metrics on this port + slot; none by default.
    #[arg(long)]
    http_base_port: Option<u16>,
    /// Each worker's drain timeout (`tfdata worker --drain-timeout-ms`).
    /// Scaling down drains: 0 would stop a worker at once and put the
    /// splits it was reading back whole, read again from their start.
    #[arg(long, default_value_t = 60_000)]
    drain_timeout_ms: u64,
    /// Each worker's heartbeat interval (default: the worker's, 30000).
    /// The controller sees a worker as live after its first heartbeat, and
    /// a drain hands splits over on heartbeats: shorter scales faster.
    #[arg(long)]
    heartbeat_interval_ms: Option<u64>,
    /// Each worker's advertised address (`%port%` becomes its port).
    #[arg(long)]
    worker_address: Option<String>,
    /// TLS and token flags, passed to every worker and used for the
    /// supervisor's own calls to the dispatcher.
    #[command(flatten)]
    security: ServerSecurityArgs,
    /// Further `tfdata worker` flags, after `--`.
    #[arg(last = true)]
    worker_args: Vec<OsString>,
}

impl WorkersArgs {
    /// The flags every worker gets; `slot`'s ports are added per worker.
    fn common_worker_args(&self, address: &str, log_format: LogFormat) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--dispatcher-address".into(),
            address.into(),
            "--drain-timeout-ms".into(),
            self.drain_timeout_ms.to_string().into(),
            "--log-format".into(),
            match log_format {
                LogFormat::Text => "text",
                LogFormat::Json => "json",
            }
            .into(),
        ];
        if let Some(ms) = self.heartbeat_interval_ms {
            args.extend(["--heartbeat-interval-ms".into(), ms.to_string().into()]);
        }
        if let Some(a) = &self.worker_address {
            args.extend(["--worker-address".into(), a.into()]);
        }
        args.extend(self.security.worker_flags());
        args.extend(self.worker_args.iter().cloned());
        args
    }

    /// `base + slot`, or 0 (any free port) without a base.
    fn port(base: u16, slot: usize) -> anyhow::Result<u16> {
        if base == 0 {
            return Ok(0);
        }
        u16::try_from(slot)
            .ok()
            .and_then(|s| base.checked_add(s))
            .ok_or_else(|| anyhow::anyhow!("port {base} + slot {slot} is above 65535"))
    }
}

/// The supervisor's state between ticks.
struct Supervisor {
    exe: std::path::PathBuf,
    worker_args: Vec<OsString>,
    base_port: u16,
    http_base_port: Option<u16>,
    drain_limit: Duration,
    workers: Vec<Worker>,
    restarts: RestartBudget,
    /// Whether the last start was held back by the restart budget (logged once).
    starts_held: bool,
}

impl Supervisor {
    fn running_slots(&self) -> Vec<usize> {
        self.workers
            .iter()
            .filter(|w| w.draining_since.is_none())
            .map(|w| w.slot)
            .collect()
    }

    /// Reaps exited workers; a worker that exited without being asked
    /// counts against the restart budget. A drain that overran its
    /// timeout and grace is ended with SIGKILL.
    fn reap(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.workers.len() {
            let w = &mut self.workers[i];
            let status = match w.exited() {
                Ok(status) => status,
                Err(e) => {
                    tracing::warn!(slot = w.slot, pid = w.pid(), "cannot wait for worker: {e}");
                    None
                }
            };
            match (status, w.draining_since) {
                (Some(status), Some(since)) => tracing::info!(
                    slot = w.slot,
                    pid = w.pid(),
                    drain_ms = now.saturating_duration_since(since).as_millis() as u64,
                    "worker drained and exited ({})",
                    children::describe(status)
                ),
                (Some(status), None) => {
                    self.restarts.record_death(now);
                    tracing::warn!(
                        slot = w.slot,
                        pid = w.pid(),
                        "worker died ({}); restarts in the last minute: {}",
                        children::describe(status),
                        self.restarts.recent(now)
                    );
                }
                (None, Some(since)) if now.saturating_duration_since(since) > self.drain_limit => {
                    tracing::warn!(
                        slot = w.slot,
                        pid = w.pid(),
                        "worker still draining after {:?}: killing it",
                        self.drain_limit
                    );
                    w.kill();
                }
                (None, _) => {
                    i += 1;
                    continue;
                }
            }
            self.workers.swap_remove(i);
        }
    }

    /// Takes one step towards `target`.
    fn converge(&mut self, target: usize, now: Instant) {
        match plan::step(target, &self.running_slots()) {
            Step::Hold => {}
            Step::Start(n) => {
                let used: Vec<usize> = self.workers.iter().map(|w| w.slot).collect();
                for slot in plan::free_slots(&used, n) {
                    if !self.restarts.allows_start(now) {
                        if !self.starts_held {
                            tracing::warn!(
                                "not starting workers: {} died in the last minute (--max-restarts-per-minute); waiting",
                                self.restarts.recent(now)
                            );
                        }
                        self.starts_held = true;
                        return;
                    }
                    self.starts_held = false;
                    if let Err(e) = self.start(slot) {
                        // Counts as a death: a start that fails every time
                        // is bounded like a worker that dies every time.
                        self.restarts.record_death(now);
                        tracing::error!(slot, "cannot start a worker: {e:#}");
                    }
                }
            }
            Step::Drain(slots) => {
                for slot in slots {
                    if let Some(w) = self.workers.iter_mut().find(|w| w.slot == slot) {
                        tracing::info!(slot, pid = w.pid(), "draining worker (SIGTERM)");
                        if let Err(e) = w.drain(now) {
                            tracing::warn!(slot, pid = w.pid(), "cannot signal worker: {e}");
                        }
                    }
                }
            }
        }
    }

    fn start(&mut self, slot: usize) -> anyhow::Result<()> {
        let mut args = self.worker_args.clone();
        args.extend([
            "--port".into(),
            WorkersArgs::port(self.base_port, slot)?.to_string().into(),
        ]);
        if let Some(base) = self.http_base_port {
            args.extend([
                "--http-port".into(),
                WorkersArgs::port(base, slot)?.to_string().into(),
            ]);
        }
        let worker = Worker::start(&self.exe, slot, &args)?;
        tracing::info!(slot, pid = worker.pid(), "started worker");
        self.workers.push(worker);
        Ok(())
    }
}

/// Runs the supervisor until a signal; returns when every worker exited.
pub async fn run(args: WorkersArgs, log_format: LogFormat) -> anyhow::Result<()> {
    let bounds = Bounds::new(args.min, args.max).map_err(anyhow::Error::msg)?;
    if args.poll_interval_ms == 0 {
        anyhow::bail!("--poll-interval-ms must be above 0");
    }
    let (_protocol, address) = tfdata_rpc::channel::parse_service(&args.dispatcher_address)?;
    let worker_args = args.common_worker_args(&address, log_format);
    // The workers' own flags serve the supervisor's calls too; their
    // files are read now, so a bad one stops it before any worker starts.
    let security = args.security.into_security()?;
    crate::security::check_files(&security)?;
    tfdata_rpc::security::TransportSecurity::set_process_default(Some(security));
    let mut client = AdviceClient::new(&address)?;
    let poll = Duration::from_millis(args.poll_interval_ms);
    let mut supervisor = Supervisor {
        exe: std::env::current_exe()?,
        worker_args,
        base_port: args.base_port,
        http_base_port: args.http_base_port,
        drain_limit: Duration::from_millis(args.drain_timeout_ms) + DRAIN_GRACE,
        workers: Vec::new(),
        restarts: RestartBudget::new(args.max_restarts_per_minute, RESTART_WINDOW),
        starts_held: false,
    };
    println!(
        "tfdata workers supervising {}..{} workers of dispatcher {address}",
        bounds.min, bounds.max
    );
    let (drain, stop) = (CancellationToken::new(), CancellationToken::new());
    signals(drain.clone(), stop.clone());

    let mut answer = Answer::Unreachable;
    let mut last_logged: Option<(usize, String)> = None;
    let mut failures = 0u32;
    let mut next_poll = Instant::now();
    while !drain.is_cancelled() {
        let now = Instant::now();
        supervisor.reap(now);
        if now >= next_poll {
            let running = supervisor.running_slots().len();
            answer = match client.ask(bounds).await {
                Reply::Advice(a) => {
                    failures = 0;
                    let target = plan::target(
                        &Answer::Advice {
                            target: a.target_workers,
                            reason: a.reason.clone(),
                        },
                        running,
                        bounds,
                    );
                    if last_logged.as_ref().is_none_or(|(t, _)| *t != target) {
                        tracing::info!(
                            target,
                            live = running,
                            dispatcher_live = a.live_workers,
                            estimate = a.estimate,
                            phase = %a.phase,
                            "scaling to {target} workers: {}",
                            a.reason
                        );
                        last_logged = Some((target, a.reason.clone()));
                    }
                    Answer::Advice {
                        target: a.target_workers,
                        reason: a.reason,
                    }
                }
                Reply::NoController(message) => {
                    failures = 0;
                    if answer != Answer::NoController {
                        tracing::warn!(
                            target = bounds.min,
                            live = running,
                            "the dispatcher at {address} has no scaling controller \
                             (GetScalingAdvice: UNIMPLEMENTED: {message}); keeping --min {} workers",
                            bounds.min
                        );
                        last_logged = Some((bounds.min, "no scaling controller".into()));
                    }
                    Answer::NoController
                }
                Reply::Failed(why) => {
                    failures = failures.saturating_add(1);
                    let keep = plan::target(&Answer::Unreachable, running, bounds);
                    tracing::warn!(
                        target = keep,
                        live = running,
                        failures,
                        retry_in_ms = plan::backoff(poll, failures, BACKOFF_CAP).as_millis() as u64,
                        "keeping {keep} workers until the dispatcher answers: {why}"
                    );
                    Answer::Unreachable
                }
            };
            next_poll = Instant::now() + plan::backoff(poll, failures, BACKOFF_CAP);
        }
        let target = plan::target(&answer, supervisor.running_slots().len(), bounds);
        supervisor.converge(target, Instant::now());
        tokio::select! {
            _ = drain.cancelled() => {}
            _ = tokio::time::sleep(TICK) => {}
        }
    }

    // Drain everything; a second signal stops the workers at once (their
    // own second SIGTERM does that).
    tracing::info!(
        workers = supervisor.workers.len(),
        "draining every worker before exiting (a second signal stops them at once)"
    );
    let now = Instant::now();
    for w in &mut supervisor.workers {
        if let Err(e) = w.drain(now) {
            tracing::warn!(slot = w.slot, "cannot signal worker: {e}");
        }
    }
    let mut forwarded = false;
    while !supervisor.workers.is_empty() {
        supervisor.reap(Instant::now());
        if stop.is_cancelled() && !forwarded {
            forwarded = true;
            for w in &supervisor.workers {
                let _ = w.signal(children::Signal::TERM);
            }
        }
        tokio::time::sleep(TICK).await;
    }
    tracing::info!("every worker exited");
    Ok(())
}

/// The first SIGINT or SIGTERM cancels `drain`, the next `stop`.
fn signals(drain: CancellationToken, stop: CancellationToken) {
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (mut term, mut int) = match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(t), Ok(i)) => (t, i),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!("cannot watch SIGTERM and SIGINT: {e}");
                return;
            }
        };
        for token in [drain, stop] {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            token.cancel();
        }
    });
}

/// How often a worker started with `--exit-with-parent` looks at its parent.
const PARENT_CHECK: Duration = Duration::from_millis(500);

/// For a worker started by the supervisor: when the supervisor is gone
/// (the worker was re-parented, even after a SIGKILL that let the
/// supervisor drain nothing), drain if draining is configured, else stop.
/// Polling, because the only notice Linux gives (PR_SET_PDEATHSIG) needs
/// `unsafe` code between fork and exec.
pub fn exit_with_parent(stop: CancellationToken, drain: Option<CancellationToken>) {
    let parent = std::os::unix::process::parent_id();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(PARENT_CHECK).await;
            if std::os::unix::process::parent_id() != parent {
                break;
            }
        }
        // Stop first: the supervisor's end of our stderr may be gone too.
        match drain {
            Some(d) => d.cancel(),
            None => stop.cancel(),
        }
        tracing::warn!(parent, "the supervisor exited: stopping");
    });
}
