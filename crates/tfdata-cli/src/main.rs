//! `tfdata`: run a tf.data service dispatcher or worker. Flags become
//! validated configs; the servers themselves are library functions.

mod save;
mod status;

use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tfdata_dispatcher::DispatcherConfig;
use tfdata_rpc::CancellationToken;
use tfdata_worker::WorkerConfig;

#[derive(Parser)]
#[command(name = "tfdata", version, about = "tf.data service, in Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a dispatcher until SIGINT or SIGTERM.
    Dispatcher(DispatcherArgs),
    /// Run a worker until SIGINT or SIGTERM.
    Worker(WorkerArgs),
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
        /// Coordinated reads: this reader's index (with --num-consumers).
        #[arg(long)]
        consumer_index: Option<i64>,
        #[arg(long)]
        num_consumers: Option<i64>,
        /// Stop after this many elements.
        #[arg(long)]
        take: Option<usize>,
    },
    /// Save a pipeline (JSON) as a distributed snapshot and show its progress.
    Save(save::SaveArgs),
    /// Print a dispatcher's workers, datasets, jobs, iterations, tasks and snapshots.
    Status {
        /// The dispatcher, as host:port or grpc://host:port.
        #[arg(long)]
        dispatcher: String,
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
}

async fn read(
    service: &str,
    dataset_id: &str,
    mode: &str,
    job_name: Option<&str>,
    consumers: Option<(i64, i64)>,
    take: Option<usize>,
) -> anyhow::Result<()> {
    use futures::StreamExt;
    let mut reader = tfdata_client::from_dataset_id(mode, service, dataset_id);
    if let Some(name) = job_name {
        reader = reader.job_name(name);
    }
    if let Some((index, count)) = consumers {
        reader = reader.consumers(index, count);
    }
    let ds = reader.build_async().await?;
    let mut stream = ds.stream().await?;
    let mut n = 0;
    while let Some(element) = stream.next().await {
        println!("{}", element?);
        n += 1;
        if take.is_some_and(|t| n >= t) {
            break;
        }
    }
    Ok(())
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
    /// Serve /metrics, /healthz and /readyz over HTTP on this port (0 picks
    /// a free one); none by default.
    #[arg(long)]
    http_port: Option<u16>,
}

impl WorkerArgs {
    fn into_config(self) -> anyhow::Result<WorkerConfig> {
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
            http_port: self.http_port,
        };
        config.validate()?;
        Ok(config)
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
    /// Serve /metrics, /healthz and /readyz over HTTP on this port (0 picks
    /// a free one); none by default.
    #[arg(long)]
    http_port: Option<u16>,
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
            http_port: self.http_port,
        };
        config.validate()?;
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

/// Cancels the token on SIGINT or SIGTERM.
fn stop_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => {
                    tokio::select! {
                        _ = ctrl_c => {}
                        _ = term.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = ctrl_c.await;
                }
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("stopping on signal");
        token.cancel();
    });
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TFDATA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    let shutdown = CancellationToken::new();
    stop_on_signals(shutdown.clone());
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
            tfdata_dispatcher::server::serve_with_http(listener, http, config, shutdown).await?;
        }
        Command::Register(args) => register(args).await?,
        Command::Save(args) => save::run(args).await?,
        Command::Status { dispatcher } => status::run(&dispatcher).await?,
        Command::Read {
            service,
            dataset_id,
            processing_mode,
            job_name,
            consumer_index,
            num_consumers,
            take,
        } => {
            let consumers = match (consumer_index, num_consumers) {
                (Some(c), Some(n)) => Some((c, n)),
                (None, None) => None,
                _ => anyhow::bail!("--consumer-index and --num-consumers go together"),
            };
            let job = job_name.as_deref();
            read(
                &service,
                &dataset_id,
                &processing_mode,
                job,
                consumers,
                take,
            )
            .await?
        }
        Command::Worker(args) => {
            let config = args.into_config()?;
            let listener = tfdata_rpc::server::bind(config.port)?;
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let port = listener.local_addr()?.port();
            let http = bind_http(config.http_port)?;
            println!(
                "tfdata worker listening on port {port} as {}",
                config.resolved_worker_address(port)
            );
            print_http_port("worker", http.as_ref())?;
            tfdata_worker::server::serve_with_http(listener, http, config, shutdown).await?;
        }
    }
    Ok(())
}
