//! The options a read is set up with, shared by `distribute` and
//! `from_dataset_id` (their builders' setters are [`read_option_setters`]),
//! their defaults, and TensorFlow's client-side checks of them, refused
//! where the read is made rather than when it first fails.

use std::time::Duration;

use tfdata_core::{Error, Result};
use tfdata_rpc::security::{ClientSecurity, TransportSecurity};

use crate::deterministic::Deterministic;
use crate::dispatcher::DispatcherClient;
use crate::fetch::StreamWindow;
use crate::options::{ProcessingMode, TargetWorkers};

/// How long calls that set a read up (registration, job and iteration
/// creation, metadata) retry an unreachable dispatcher before failing.
/// TensorFlow retries registration for an hour and job creation forever; a
/// reader that cannot reach its dispatcher for a minute is usually
/// misconfigured, so tfdata says so sooner. Configurable per read.
pub const DEFAULT_DISPATCHER_TIMEOUT: Duration = Duration::from_secs(60);

/// Client heartbeat period (`task_refresh_interval_hint_ms`'s default).
pub const DEFAULT_TASK_REFRESH_INTERVAL: Duration = Duration::from_secs(1);

/// `max_outstanding_requests` when left to AUTOTUNE.
pub const DEFAULT_MAX_OUTSTANDING_REQUESTS: usize = 16;

/// Options shared by `distribute` and `from_dataset_id`.
#[derive(Debug, Clone)]
pub(crate) struct ReadOptions {
    pub(crate) mode: std::result::Result<ProcessingMode, String>,
    pub(crate) service: String,
    pub(crate) job_name: Option<String>,
    pub(crate) consumer_index: Option<i64>,
    pub(crate) num_consumers: Option<i64>,
    pub(crate) trainer_id: Option<String>,
    pub(crate) data_transfer_protocol: Option<String>,
    pub(crate) max_outstanding_requests: Option<usize>,
    pub(crate) target_workers: TargetWorkers,
    pub(crate) task_refresh_interval: Duration,
    pub(crate) dispatcher_timeout: Duration,
    /// Per-task element-stream window.
    pub(crate) stream_window: StreamWindow,
    /// TLS and token; `None` is the process default (environment).
    pub(crate) security: Option<TransportSecurity>,
    /// A deterministic read (issue 35).
    pub(crate) deterministic: Option<Deterministic>,
    /// Ask the dispatcher to autocache the job (issue 36).
    pub(crate) autocache: bool,
}

impl ReadOptions {
    pub(crate) fn new(mode: Result<ProcessingMode>, service: &str) -> Self {
        ReadOptions {
            mode: mode.map_err(|e| e.to_string()),
            service: service.to_string(),
            job_name: None,
            consumer_index: None,
            num_consumers: None,
            trainer_id: None,
            data_transfer_protocol: None,
            max_outstanding_requests: None,
            target_workers: TargetWorkers::Auto,
            task_refresh_interval: DEFAULT_TASK_REFRESH_INTERVAL,
            dispatcher_timeout: DEFAULT_DISPATCHER_TIMEOUT,
            stream_window: StreamWindow::default(),
            security: None,
            deterministic: None,
            autocache: false,
        }
    }

    pub(crate) fn validate(&self) -> Result<(ProcessingMode, DispatcherClient, ClientSecurity)> {
        let mode = self.mode.clone().map_err(Error::InvalidArgument)?;
        if self.job_name.as_deref() == Some("") {
            return Err(Error::InvalidArgument("job_name must not be empty".into()));
        }
        // TensorFlow's client-side checks, with its wording where it has one.
        match (self.consumer_index, self.num_consumers) {
            (None, None) => {}
            (Some(c), Some(n)) => {
                if self.job_name.is_none() {
                    return Err(Error::InvalidArgument(
                        "job_name must be set when setting num_consumers".into(),
                    ));
                }
                if n <= 0 || c < 0 || c >= n {
                    return Err(Error::InvalidArgument(format!(
                        "consumer_index must be in [0, num_consumers), got consumer_index={c}, num_consumers={n}"
                    )));
                }
                if self.target_workers == TargetWorkers::Local {
                    return Err(Error::InvalidArgument(
                        "coordinated reads require non-local workers, but target_workers is LOCAL"
                            .into(),
                    ));
                }
                if self.trainer_id.is_some() {
                    return Err(Error::InvalidArgument(
                        "cross-trainer caching does not support coordinated reads (num_consumers)"
                            .into(),
                    ));
                }
            }
            _ => {
                return Err(Error::InvalidArgument(
                    "Must either set both consumer_index and num_consumers, or neither.".into(),
                ));
            }
        }
        if let Some(trainer_id) = &self.trainer_id {
            if trainer_id.is_empty() {
                return Err(Error::InvalidArgument(
                    "cross_trainer_cache needs a non-empty trainer_id".into(),
                ));
            }
            if self.job_name.is_none() {
                return Err(Error::InvalidArgument(
                    "cross-trainer caching requires a named job: set job_name".into(),
                ));
            }
        }
        if let Some(p) = &self.data_transfer_protocol
            && p != "grpc"
        {
            return Err(Error::Unimplemented(format!(
                "data_transfer_protocol {p:?}: tfdata reads from workers over gRPC only"
            )));
        }
        if self.max_outstanding_requests == Some(0) {
            return Err(Error::InvalidArgument(
                "max_outstanding_requests must be greater than zero (or unset for AUTOTUNE)".into(),
            ));
        }
        if self.task_refresh_interval.is_zero() {
            return Err(Error::InvalidArgument(
                "task_refresh_interval must be positive".into(),
            ));
        }
        if self.autocache && self.deterministic.is_some() {
            return Err(Error::InvalidArgument(
                "a deterministic read is never autocached: its order is the contract, and a \
                 cache written by several workers keeps the elements, not their order; drop \
                 autocache or deterministic"
                    .into(),
            ));
        }
        if let Some(d) = &self.deterministic {
            d.validate(
                mode == ProcessingMode::DistributedEpoch,
                self.consumer_index.is_some() || self.num_consumers.is_some(),
                self.trainer_id.is_some(),
            )?;
        }
        let (_protocol, address) = tfdata_rpc::channel::parse_service(&self.service)?;
        let security = match &self.security {
            Some(security) => security.client()?,
            None => TransportSecurity::process_default()?.client()?,
        };
        let dispatcher = DispatcherClient::with_security(&address, &security)?;
        Ok((mode, dispatcher, security))
    }
}

macro_rules! read_option_setters {
    () => {
        /// Share one job (and its elements, first come first served) with every
        /// reader using the same name.
        pub fn job_name(mut self, name: &str) -> Self {
            self.options.job_name = Some(name.to_string());
            self
        }

        /// Coordinated reads: this reader is consumer `consumer_index` of
        /// `num_consumers` sharing the job (`job_name` required).
        pub fn consumers(mut self, consumer_index: i64, num_consumers: i64) -> Self {
            self.options.consumer_index = Some(consumer_index);
            self.options.num_consumers = Some(num_consumers);
            self
        }

        /// `cross_trainer_cache=CrossTrainerCache(trainer_id)`: trainers sharing
        /// the job read one sliding window of its elements.
        pub fn cross_trainer_cache(mut self, trainer_id: &str) -> Self {
            self.options.trainer_id = Some(trainer_id.to_string());
            self
        }

        /// `data_transfer_protocol`; only `"grpc"` is supported.
        pub fn data_transfer_protocol(mut self, protocol: &str) -> Self {
            self.options.data_transfer_protocol = Some(protocol.to_string());
            self
        }

        /// Limit on elements requested or buffered at once; unset = AUTOTUNE.
        pub fn max_outstanding_requests(mut self, n: usize) -> Self {
            self.options.max_outstanding_requests = Some(n);
            self
        }

        pub fn target_workers(mut self, target: TargetWorkers) -> Self {
            self.options.target_workers = target;
            self
        }

        /// How often the reader heartbeats to learn of tasks (default 1 s).
        pub fn task_refresh_interval(mut self, interval: Duration) -> Self {
            self.options.task_refresh_interval = interval;
            self
        }

        /// How far each task's element stream may run ahead of the reader:
        /// `elements` and payload `bytes` (defaults 16384 and 16 MiB). Only
        /// tfdata workers stream; `GetElement` reads follow
        /// `max_outstanding_requests`.
        pub fn stream_window(mut self, elements: u64, bytes: u64) -> Self {
            self.options.stream_window = StreamWindow {
                elements: elements.max(1),
                bytes: bytes.max(1),
            };
            self
        }

        /// A deterministic distributed_epoch read (issue 35): the epoch's
        /// splits are dealt to `d.lanes` lanes, and this reader (consumer
        /// `d.consumer_index` of `d.num_consumers`) reads its lanes merged
        /// in global order, the same whatever the workers do. Checked when
        /// the read is set up: distributed_epoch only, 1..=4096 lanes,
        /// `num_consumers` dividing them, not with `consumers()` or
        /// `cross_trainer_cache`.
        pub fn deterministic(mut self, d: $crate::Deterministic) -> Self {
            self.options.deterministic = Some(d);
            self
        }

        /// `cache="auto"` (issue 36; docs/operations.md, "Autocache"): the
        /// dispatcher profiles this job's first epoch, caches the cheapest
        /// deterministic prefix of its pipeline, and later jobs over that
        /// prefix read the cache. Not with [`deterministic`](Self::deterministic).
        pub fn autocache(mut self, on: bool) -> Self {
            self.options.autocache = on;
            self
        }

        /// How long setup calls retry an unreachable dispatcher (default 60 s).
        pub fn dispatcher_timeout(mut self, timeout: Duration) -> Self {
            self.options.dispatcher_timeout = timeout;
            self
        }

        /// TLS and the bearer token for the dispatcher and the workers
        /// (default: [`TransportSecurity::process_default`], the
        /// `TFDATA_TLS_*` and `TFDATA_AUTH_TOKEN*` variables). Certificate
        /// files are read when the read is set up.
        pub fn security(mut self, security: TransportSecurity) -> Self {
            self.options.security = Some(security);
            self
        }
    };
}
pub(crate) use read_option_setters;
