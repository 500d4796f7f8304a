//! `tfdata`: run a tf.data service dispatcher or worker. Flags become
//! validated configs; the servers themselves are library functions.

mod deterministic;
mod logging;
mod save;
mod security;
mod status;
mod workers;

use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tfdata_dispatcher::DispatcherConfig;
use tfdata_dispatcher::config::HighAvailability;
use tfdata_rpc::CancellationToken;
use tfdata_worker::WorkerConfig;

#[derive(Parser)]
#[command(name = "tfdata", version, about = "tf.data service, in Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines (on stderr) are written: text, or one JSON object per line.
    #[arg(long, global = true, value_enum, default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Run a dispatcher until SIGINT or SIGTERM.
    Dispatcher(DispatcherArgs),
    /// Run a worker until SIGINT or SIGTERM.
    Worker(WorkerArgs),
    /// Run and supervise local workers, as many as the dispatcher's
    /// scaling controller advises within --min and --max (docs/deploy.md).
    Workers(workers::WorkersArgs),
    /// Register a pipeline (JSON text form, see docs/pipelines.md) and print its dataset id.
    Register(RegisterArgs),
    /// Read a registered dataset through the service and print its elements, one per line.
    Read {
        /// The dispatcher, as grpc://host:port.
        #[arg(long)]
        service: String,
        #[arg(long)]
        dataset_id: String,
        /// parallel_epochs, distributed_epoch, or a sharding policy name.
        #[arg(long, default_value = "parallel_epochs")]
        processing_mode: String,
        #[arg(long)]
        job_name: Option<String>,
        /// Coordinated reads (or, with --deterministic, a deterministic
        /// read's consumers): this reader's index (with --num-consumers).
        #[arg(long)]
        consumer_index: Option<i64>,
        #[arg(long)]
        num_consumers: Option<i64>,
        /// Stop after this many elements.
        #[arg(long)]
        take: Option<usize>,
        #[command(flatten)]
        checkpoints: ReadCheckpoints,
        #[command(flatten)]
        tuning: ReadTuning,
        #[command(flatten)]
        deterministic: deterministic::DeterministicArgs,
        /// `auto`: ask the dispatcher to autocache this job (issue 36;
        /// docs/operations.md, "Autocache"). Not with --deterministic.
        #[arg(long, value_parser = ["auto"])]
        cache: Option<String>,

        #[command(flatten)]
        security: security::ClientSecurityArgs,
    },
    /// Merge the --checkpoint-files of all consumers of a deterministic read
    /// (taken at the same step) into one that restores on any consumer count.
    MergeCheckpoints(deterministic::MergeArgs),
    /// Save a pipeline (JSON) as a distributed snapshot and show its progress.
    Save(save::SaveArgs),
    /// Print a dispatcher's workers, datasets, jobs, iterations, tasks and snapshots.
    Status {
        /// The dispatcher, as host:port or grpc://host:port.
        #[arg(long)]
        dispatcher: String,

        #[command(flatten)]
        security: security::ClientSecurityArgs,
    },
}

#[derive(Args)]
struct RegisterArgs {
    /// The dispatcher, as `grpc://host:port`.
    #[arg(long)]
    service: String,
    /// The pipeline file (JSON).
    #[arg(long)]
    pipeline: std::path::PathBuf,
    /// Register under this id (an existing dataset with this id is kept if it matches).
    #[arg(long)]
    dataset_id: Option<String>,
    /// auto, snappy or none; default: the file's "compress" (true = auto).
    #[arg(long)]
    compression: Option<String>,

    #[command(flatten)]
    security: security::ClientSecurityArgs,
}

/// Reader checkpoints for `tfdata read` (issue 17): a read that is killed
/// and started again with the same file continues where the last
/// checkpoint left off.
#[derive(Args)]
struct ReadCheckpoints {
    /// Restore from this file if it exists, and write a checkpoint to it
    /// (atomically) every `--checkpoint-every` elements. The file holds the
    /// number of elements this run had printed when it was written (8 bytes,
    /// little-endian), then the reader's checkpoint.
    #[arg(long)]
    checkpoint_file: Option<std::path::PathBuf>,
    /// Elements between checkpoints.
    #[arg(long, default_value_t = 100)]
    checkpoint_every: usize,
}

impl ReadCheckpoints {
    /// The reader checkpoint in the file, if there is one.
    fn load(&self) -> anyhow::Result<Option<Vec<u8>>> {
        let Some(path) = &self.checkpoint_file else {
            return Ok(None);
        };
        match std::fs::read(path) {
            Ok(bytes) if bytes.len() >= 8 => Ok(Some(bytes[8..].to_vec())),
            Ok(_) => anyhow::bail!("{} is not a checkpoint file (too short)", path.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow::anyhow!("reading {}: {e}", path.display())),
        }
    }

    /// Writes `checkpoint`, taken after `printed` elements of this run.
    fn save(&self, printed: usize, checkpoint: &[u8]) -> anyhow::Result<()> {
        use std::io::Write;
        let Some(path) = &self.checkpoint_file else {
            return Ok(());
        };
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&(printed as u64).to_le_bytes())?;
        f.write_all(checkpoint)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }
}

/// How `tfdata read` talks to the service, and what it reports.
#[derive(Args)]
struct ReadTuning {
    /// How often the reader asks the dispatcher for its tasks (default 1000).
    #[arg(long)]
    task_refresh_interval_ms: Option<u64>,
    /// How long setup calls retry an unreachable dispatcher (default 60000).
    #[arg(long)]
    dispatcher_timeout_ms: Option<u64>,
    /// At the end, print the elements and bytes read and their rates on stderr.
    #[arg(long)]
    stats: bool,
    /// How many elements each worker's stream may send ahead of the reader
    /// (default 16384).
    #[arg(long)]
    stream_window_elements: Option<u64>,
}

/// What `tfdata read` reads, and how it shares the job.
struct ReadTarget<'a> {
    service: &'a str,
    dataset_id: &'a str,
    mode: &'a str,
    job_name: Option<&'a str>,
    consumers: Option<(i64, i64)>,
    deterministic: Option<tfdata_client::Deterministic>,
    /// `--cache auto`.
    autocache: bool,
}

async fn read(
    target: ReadTarget<'_>,
    take: Option<usize>,
    checkpoints: ReadCheckpoints,
    tuning: ReadTuning,
) -> anyhow::Result<()> {
    use futures::StreamExt;
    let started = std::time::Instant::now();
    let ReadTarget {
        service,
        dataset_id,
        mode,
        job_name,
        consumers,
        deterministic,
        autocache,
    } = target;
    let mut reader = tfdata_client::from_dataset_id(mode, service, dataset_id);
    if let Some(name) = job_name {
        reader = reader.job_name(name);
    }
    if let Some(d) = deterministic {
        reader = reader.deterministic(d);
    } else if let Some((index, count)) = consumers {
        reader = reader.consumers(index, count);
    }
    if autocache {
        reader = reader.autocache(true);
    }
    if let Some(ms) = tuning.task_refresh_interval_ms {
        reader = reader.task_refresh_interval(Duration::from_millis(ms));
    }
    if let Some(ms) = tuning.dispatcher_timeout_ms {
        reader = reader.dispatcher_timeout(Duration::from_millis(ms));
    }
    if let Some(elements) = tuning.stream_window_elements {
        reader = reader.stream_window(elements, 16 << 20);
    }
    let ds = reader.build_async().await?;
    let mut stream = ds.stream().await?;
    if let Some(state) = checkpoints.load()? {
        stream.restore(&state).await?;
    }
    let mut stats = ReadStats::default();
    let every = checkpoints.checkpoint_every.max(1);
    while let Some(element) = stream.next().await {
        let element = element?;
        stats.add(&element, started.elapsed());
        println!("{element}");
        if take.is_some_and(|t| stats.elements >= t) {
            break;
        }
        if checkpoints.checkpoint_file.is_some() && stats.elements % every == 0 {
            checkpoints.save(stats.elements, &stream.checkpoint().await?)?;
        }
    }
    // Released before the process exits, not left to client_timeout.
    stream.close().await;
    if tuning.stats {
        eprintln!("{}", stats.summary(started.elapsed()));
    }
    Ok(())
}

/// What a read received, for `--stats`.
#[derive(Default)]
struct ReadStats {
    elements: usize,
    bytes: usize,
    /// When the first element arrived (setup: job, iteration, tasks, first
    /// connections), and the bytes it brought.
    first: Option<(Duration, usize)>,
}

impl ReadStats {
    fn add(&mut self, element: &tfdata_core::Element, at: Duration) {
        let size: usize = element.components.iter().map(|t| t.byte_size()).sum();
        self.first.get_or_insert((at, size));
        self.elements += 1;
        self.bytes += size;
    }

    /// Rates over the whole read, and from the first element on (the
    /// steady state, without the setup).
    fn summary(&self, total: Duration) -> String {
        let rate = |elements: usize, bytes: usize, seconds: f64| {
            let seconds = seconds.max(1e-9);
            format!(
                "{:.0} elements/s, {:.2} MB/s",
                elements as f64 / seconds,
                bytes as f64 / seconds / 1e6
            )
        };
        let seconds = total.as_secs_f64();
        let mut text = format!(
            "read {} elements, {} bytes in {seconds:.3} s: {}",
            self.elements,
            self.bytes,
            rate(self.elements, self.bytes, seconds)
        );
        if let Some((at, size)) = self.first {
            let after = seconds - at.as_secs_f64();
            text += &format!(
                "; first element after {:.3} s, then {}",
                at.as_secs_f64(),
                rate(self.elements - 1, self.bytes - size, after)
            );
        }
        text
    }
}

async fn register(args: RegisterArgs) -> anyhow::Result<()> {
    use tfdata_client::Compression;
    let text = std::fs::read_to_string(&args.pipeline)
        .with_context(|| format!("reading {}", args.pipeline.display()))?;
    let parsed = tfdata_dataset::json::from_json(&text)
        .with_context(|| format!("in {}", args.pipeline.display()))?;
    let compression = match args
        .compression
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None if parsed.compress => Compression::Auto,
        None => Compression::Off,
        Some("auto") => Compression::Auto,
        Some("snappy") => Compression::Snappy,
        Some("none") | Some("off") => Compression::Off,
        Some(other) => anyhow::bail!("--compression must be auto, snappy or none, got {other:?}"),
    };
    let id = tfdata_client::register_dataset_async(
        &args.service,
        &parsed.dataset,
        compression,
        args.dataset_id.as_deref(),
    )
    .await?;
    println!("{id}");
    Ok(())
}

/// Every `WorkerConfig` field; defaults are TensorFlow's.
#[derive(Args)]
struct WorkerArgs {
    /// host:port of the dispatcher.
    #[arg(long)]
    dispatcher_address: String,
    /// Port to listen on (0 picks a free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// "grpc" or "grpc+local".
    #[arg(long, default_value = "grpc")]
    protocol: String,
    /// Address advertised to the dispatcher and readers; %port% becomes the bound port.
    #[arg(long, default_value = "localhost:%port%")]
    worker_address: String,
    /// Worker tags (comma-separated or repeated), e.g. COLOCATED.
    #[arg(long, value_delimiter = ',')]
    worker_tags: Vec<String>,
    #[arg(long, default_value_t = 30_000)]
    heartbeat_interval_ms: u64,
    #[arg(long, default_value_t = 3_600_000)]
    dispatcher_timeout_ms: u64,
    /// Only "grpc" is served.
    #[arg(long)]
    data_transfer_protocol: Option<String>,
    #[arg(long, default_value_t = 0)]
    data_transfer_port: u16,
    #[arg(long)]
    data_transfer_address: Option<String>,
    #[arg(long, default_value_t = tfdata_worker::config::DEFAULT_CROSS_TRAINER_CACHE_SIZE_BYTES)]
    cross_trainer_cache_size_bytes: u64,
    #[arg(long, default_value_t = tfdata_worker::config::DEFAULT_SNAPSHOT_MAX_CHUNK_SIZE_BYTES)]
    snapshot_max_chunk_size_bytes: u64,
    /// How often a snapshot stream writer commits its chunk; 0 is
    /// TensorFlow's schedule (5 min growing to 30 min).
    #[arg(long, default_value_t = 0)]
    snapshot_commit_interval_ms: u64,
    #[arg(long, default_value_t = 0)]
    shutdown_quiet_period_ms: u64,
    /// Elements each task buffers ahead of readers.
    #[arg(long, default_value_t = tfdata_worker::config::DEFAULT_TASK_BUFFER_ELEMENTS)]
    task_buffer_elements: usize,
    /// The most elements a task buffers when a streaming tfdata reader asks for more.
    #[arg(long, default_value_t = tfdata_worker::config::DEFAULT_TASK_BUFFER_MAX_ELEMENTS)]
    task_buffer_max_elements: usize,
    /// Payload bytes each task buffers at most.
    #[arg(long, default_value_t = tfdata_worker::config::DEFAULT_TASK_BUFFER_BYTES)]
    task_buffer_bytes: u64,
    /// Do not serve tfdata's element stream (tfdata readers then use GetElement).
    #[arg(long)]
    no_element_stream: bool,
    /// Most element streams of deterministic reads (lanes) served at once,
    /// each a pipeline of its own; more are refused (ResourceExhausted).
    #[arg(long, default_value_t = tfdata_worker::lane_task::DEFAULT_MAX_LANE_STREAMS)]
    max_lane_streams: usize,
    /// On SIGTERM, drain for at most this long before stopping: take no new
    /// tasks or splits, finish and hand over the distributed_epoch splits in
    /// hand (docs/deploy.md). 0, the default, stops at once, as TensorFlow's
    /// worker does. A second SIGTERM, or SIGINT, stops at once.
    #[arg(long, default_value_t = 0)]
    drain_timeout_ms: u64,
    /// Stop (draining, with --drain-timeout-ms) when the parent process
    /// exits: `tfdata workers` starts its workers so.
    #[arg(long, hide = true)]
    exit_with_parent: bool,

    #[command(flatten)]
    security: security::ServerSecurityArgs,
    /// Serve /metrics, /healthz and /readyz over HTTP on this port (0 picks
    /// a free one); none by default.
    #[arg(long)]
    http_port: Option<u16>,
}

impl WorkerArgs {
    fn into_config(self) -> anyhow::Result<(WorkerConfig, Duration)> {
        let drain_timeout = Duration::from_millis(self.drain_timeout_ms);
        let config = WorkerConfig {
            dispatcher_address: self.dispatcher_address,
            port: self.port,
            protocol: self.protocol,
            worker_address: self.worker_address,
            worker_tags: self.worker_tags,
            heartbeat_interval: Duration::from_millis(self.heartbeat_interval_ms),
            dispatcher_timeout: Duration::from_millis(self.dispatcher_timeout_ms),
            data_transfer_protocol: self.data_transfer_protocol,
            data_transfer_port: self.data_transfer_port,
            data_transfer_address: self.data_transfer_address,
            cross_trainer_cache_size_bytes: self.cross_trainer_cache_size_bytes,
            snapshot_max_chunk_size_bytes: self.snapshot_max_chunk_size_bytes,
            snapshot_commit_interval: (self.snapshot_commit_interval_ms > 0)
                .then(|| Duration::from_millis(self.snapshot_commit_interval_ms)),
            shutdown_quiet_period: Duration::from_millis(self.shutdown_quiet_period_ms),
            task_buffer_elements: self.task_buffer_elements,
            task_buffer_max_elements: self.task_buffer_max_elements,
            task_buffer_bytes: self.task_buffer_bytes,
            element_stream: !self.no_element_stream,
            max_lane_streams: self.max_lane_streams,
            security: self.security.into_security()?,
            http_port: self.http_port,
        };
        config.validate()?;
        security::check_files(&config.security)?;
        Ok((config, drain_timeout))
    }
}

/// Every `DispatcherConfig` field; defaults are TensorFlow's.
#[derive(Args)]
struct DispatcherArgs {
    /// Port to listen on (0 picks a free port).
    #[arg(long, default_value_t = 5050)]
    port: u16,
    /// "grpc" or "grpc+local".
    #[arg(long, default_value = "grpc")]
    protocol: String,
    /// Directory or object-store URL (s3://, gs://, az://) for datasets (and,
    /// with --fault-tolerant-mode, the journal).
    #[arg(long)]
    work_dir: Option<String>,
    /// Journal state changes in --work-dir and recover them on restart.
    #[arg(long)]
    fault_tolerant_mode: bool,
    /// Fixed list of worker addresses (comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    worker_addresses: Vec<String>,
    /// UNSPECIFIED, COLOCATED, REMOTE or HYBRID.
    #[arg(long, default_value = "UNSPECIFIED")]
    deployment_mode: String,
    #[arg(long, default_value_t = 600_000)]
    job_gc_check_interval_ms: u64,
    /// Negative: never collect (and no maintenance loop).
    #[arg(long, default_value_t = 300_000, allow_hyphen_values = true)]
    job_gc_timeout_ms: i64,
    #[arg(long)]
    gc_dynamic_sharding_jobs: bool,
    #[arg(long, default_value_t = 300_000)]
    client_timeout_ms: u64,
    #[arg(long, default_value_t = 600_000)]
    worker_timeout_ms: u64,
    #[arg(long, default_value_t = 3)]
    worker_max_concurrent_snapshots: u32,
    /// How often the scaling controller decides the worker count that
    /// GetScalingAdvice answers (and `tfdata workers` follows); also how
    /// long a change settles before it is judged (docs/operations.md,
    /// "Scaling").
    #[arg(long, default_value_t = 5_000)]
    scaling_period_ms: u64,

    #[command(flatten)]
    security: security::ServerSecurityArgs,
    /// Serve /metrics, /healthz and /readyz over HTTP on this port (0 picks
    /// a free one); none by default.
    #[arg(long)]
    http_port: Option<u16>,
    /// High availability (tfdata's own): one of several dispatchers sharing
    /// --work-dir, leading under a leader lease of this many milliseconds
    /// (renewed every fifth of it) and otherwise standing by, answering
    /// UNAVAILABLE. Exits non-zero when it loses the lease after leading.
    /// Requires --fault-tolerant-mode.
    #[arg(long)]
    leader_lease_ms: Option<u64>,
    /// With --leader-lease-ms: the host:port written into the lease while
    /// this dispatcher leads, named by the standbys (default: this host's
    /// name and --port).
    #[arg(long)]
    advertised_address: Option<String>,
    /// Autocache every job (issue 36; docs/operations.md, "Autocache"):
    /// the first epoch is profiled, the cheapest deterministic prefix
    /// cached, later jobs over it read the cache. Deterministic reads never
    /// are.
    #[arg(long)]
    autocache: bool,
    /// Where autocache keeps its caches: a directory or an object-store URL
    /// (default: <work-dir>/autocache; with neither, nothing is cached).
    #[arg(long)]
    autocache_dir: Option<String>,
}

impl DispatcherArgs {
    fn into_config(self) -> anyhow::Result<DispatcherConfig> {
        let mode = format!("DEPLOYMENT_MODE_{}", self.deployment_mode.to_uppercase());
        let deployment_mode = tfdata_proto_deployment_mode(&mode)
            .with_context(|| format!("unknown --deployment-mode {:?}", self.deployment_mode))?;
        let config = DispatcherConfig {
            port: self.port,
            protocol: self.protocol,
            work_dir: self.work_dir,
            fault_tolerant_mode: self.fault_tolerant_mode,
            worker_addresses: self.worker_addresses,
            deployment_mode,
            job_gc_check_interval: Duration::from_millis(self.job_gc_check_interval_ms),
            job_gc_timeout: u64::try_from(self.job_gc_timeout_ms)
                .ok()
                .map(Duration::from_millis),
            gc_dynamic_sharding_jobs: self.gc_dynamic_sharding_jobs,
            client_timeout: Duration::from_millis(self.client_timeout_ms),
            worker_timeout: Duration::from_millis(self.worker_timeout_ms),
            worker_max_concurrent_snapshots: self.worker_max_concurrent_snapshots,
            scaling_period: Duration::from_millis(self.scaling_period_ms),
            security: self.security.into_security()?,
            http_port: self.http_port,
            high_availability: match (self.leader_lease_ms, self.advertised_address) {
                (Some(ms), address) => Some(HighAvailability {
                    advertised_address: address,
                    ..HighAvailability::with_lease_duration(Duration::from_millis(ms))
                }),
                (None, Some(_)) => {
                    anyhow::bail!("--advertised-address is only used with --leader-lease-ms")
                }
                (None, None) => None,
            },
            autocache: self.autocache,
            autocache_dir: self.autocache_dir,
        };
        config.validate()?;
        security::check_files(&config.security)?;
        Ok(config)
    }
}

fn tfdata_proto_deployment_mode(name: &str) -> Option<tfdata_dispatcher::config::DeploymentMode> {
    tfdata_dispatcher::config::DeploymentMode::from_str_name(name)
}

/// Binds `--http-port`, if given, before anything is printed: a port in
/// use is an error naming it.
fn bind_http(port: Option<u16>) -> anyhow::Result<Option<std::net::TcpListener>> {
    Ok(port.map(tfdata_rpc::admin::bind).transpose()?)
}

/// `tfdata <role> http listening on port N`, for scripts and tests.
fn print_http_port(role: &str, http: Option<&std::net::TcpListener>) -> anyhow::Result<()> {
    if let Some(http) = http {
        println!(
            "tfdata {role} http listening on port {}",
            http.local_addr()?.port()
        );
    }
    Ok(())
}

/// Cancels `stop` on SIGINT or SIGTERM. With `drain`, the first SIGTERM
/// cancels `drain` instead (Kubernetes sends SIGTERM, then SIGKILL after the
/// grace period), and SIGINT or a second SIGTERM cancels `stop`.
fn stop_on_signals(stop: CancellationToken, drain: Option<CancellationToken>) {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => {
                    let mut drain = drain;
                    loop {
                        tokio::select! {
                            _ = tokio::signal::ctrl_c() => break,
                            _ = term.recv() => match drain.take() {
                                Some(d) => {
                                    tracing::info!("draining on SIGTERM (a second SIGTERM stops at once)");
                                    d.cancel();
                                }
                                None => break,
                            },
                        }
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = drain;
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("stopping on signal");
        stop.cancel();
    });
}

/// mimalloc, not glibc's malloc: see the workspace Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    logging::init(cli.log_format);
    let shutdown = CancellationToken::new();
    // Only workers drain; everything else stops on the first signal.
    let drain = match &cli.command {
        Command::Worker(args) if args.drain_timeout_ms > 0 => Some(CancellationToken::new()),
        _ => None,
    };
    // The supervisor handles its signals itself: the first drains its workers.
    if !matches!(cli.command, Command::Workers(_)) {
        stop_on_signals(shutdown.clone(), drain.clone());
    }
    match cli.command {
        Command::Dispatcher(args) => {
            let config = args.into_config()?;
            let listener = tfdata_rpc::server::bind(config.port)?;
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let http = bind_http(config.http_port)?;
            println!(
                "tfdata dispatcher listening on port {}",
                listener.local_addr()?.port()
            );
            print_http_port("dispatcher", http.as_ref())?;
            tfdata_dispatcher::serving::server::serve_with_http(listener, http, config, shutdown)
                .await?;
        }
        Command::Register(mut args) => {
            std::mem::take(&mut args.security).install()?;
            register(args).await?
        }
        Command::Save(args) => save::run(args).await?,
        Command::MergeCheckpoints(args) => deterministic::merge(&args)?,
        Command::Status {
            dispatcher,
            security,
        } => {
            security.install()?;
            status::run(&dispatcher).await?
        }
        Command::Read {
            service,
            dataset_id,
            processing_mode,
            job_name,
            consumer_index,
            num_consumers,
            take,
            checkpoints,
            tuning,
            deterministic,
            cache,
            security,
        } => {
            security.install()?;
            let consumers = match (consumer_index, num_consumers) {
                (Some(c), Some(n)) => Some((c, n)),
                (None, None) => None,
                _ => anyhow::bail!("--consumer-index and --num-consumers go together"),
            };
            let deterministic = deterministic.setting(consumers)?;
            let job = job_name.as_deref();
            let target = ReadTarget {
                service: &service,
                dataset_id: &dataset_id,
                mode: &processing_mode,
                job_name: job,
                consumers,
                deterministic,
                autocache: cache.is_some(),
            };
            read(target, take, checkpoints, tuning).await?
        }
        Command::Workers(args) => workers::run(args, cli.log_format).await?,
        Command::Worker(args) => {
            if args.exit_with_parent {
                workers::exit_with_parent(shutdown.clone(), drain.clone());
            }
            let (config, drain_timeout) = args.into_config()?;
            let listener = tfdata_rpc::server::bind(config.port)?;
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let port = listener.local_addr()?.port();
            let http = bind_http(config.http_port)?;
            println!(
                "tfdata worker listening on port {port} as {}",
                config.resolved_worker_address(port)
            );
            let drain = drain.map(|signal| tfdata_worker::Drain {
                signal,
                timeout: drain_timeout,
            });
            print_http_port("worker", http.as_ref())?;
            tfdata_worker::server::serve_with_http(listener, http, config, shutdown, drain).await?;
        }
    }
    Ok(())
}
