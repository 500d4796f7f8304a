//! `WorkerConfig` (spec §2.2): TensorFlow's fields with TensorFlow's defaults,
//! plus the bounds of each task's element buffer and whether tfdata's own
//! element stream is served.

use std::time::Duration;

use tfdata_core::{Error, Result};
use tfdata_proto::config as wire;
pub use tfdata_rpc::security::TransportSecurity;

#[derive(Debug, Clone, PartialEq)]
pub struct WorkerConfig {
    /// `host:port` of the dispatcher (a `grpc://` prefix is tolerated).
    pub dispatcher_address: String,
    /// Listen port on `0.0.0.0`; 0 picks a free port.
    pub port: u16,
    /// `"grpc"` or `"grpc+local"`.
    pub protocol: String,
    /// Address advertised to the dispatcher and readers; the first `%port%`
    /// becomes the bound port. It is the worker's identity.
    pub worker_address: String,
    /// Free-form tags; `COLOCATED` matters to readers with `target_workers=AUTO`.
    pub worker_tags: Vec<String>,
    /// Period of heartbeats to the dispatcher.
    pub heartbeat_interval: Duration,
    /// How long split requests retry an unreachable dispatcher.
    pub dispatcher_timeout: Duration,
    /// Alternative data-transfer protocol; only gRPC (unset) is served.
    pub data_transfer_protocol: Option<String>,
    pub data_transfer_port: u16,
    pub data_transfer_address: Option<String>,
    /// Budget of each cross-trainer cache (not used yet).
    pub cross_trainer_cache_size_bytes: u64,
    /// Largest distributed-snapshot chunk file, counted in the bytes of the
    /// elements written to it: a chunk is committed before an element would
    /// take it past this (an element larger than this is a chunk alone).
    pub snapshot_max_chunk_size_bytes: u64,
    /// How long a snapshot stream writer fills a chunk before committing
    /// it: `None` is TensorFlow's schedule, `min(30 min, 5 min + 0.5 min ×
    /// chunk index)` ([`commit_interval`]). Committed elements survive a
    /// worker restart; uncommitted ones are written again.
    pub snapshot_commit_interval: Option<Duration>,
    /// Pause during stop so in-flight responses can finish.
    pub shutdown_quiet_period: Duration,
    /// Elements each task buffers ahead of readers (tfdata's own setting;
    /// TensorFlow's first-come-first-served runner buffers one).
    pub task_buffer_elements: usize,
    /// The most elements a task buffers when a streaming reader asks for
    /// more than `task_buffer_elements` (prefetch follows demand up to here).
    pub task_buffer_max_elements: usize,
    /// Payload bytes each task buffers at most, whatever the element count
    /// (one element larger than this still passes, alone).
    pub task_buffer_bytes: u64,
    /// Serve tfdata's own `ElementStream` to tfdata readers (TensorFlow
    /// readers use `GetElement` either way). Off, tfdata readers fall back to
    /// `GetElement` too.
    pub element_stream: bool,
    /// Most element streams of deterministic reads (lanes) served at once;
    /// each runs a pipeline thread with its own buffer. Beyond it, an
    /// opening is refused with ResourceExhausted (the reader opens the
    /// lane on another worker).
    pub max_lane_streams: usize,
    /// Port of the admin HTTP endpoint (`/metrics`, `/healthz`, `/readyz`)
    /// on `0.0.0.0`, apart from the gRPC port; 0 picks a free port, `None`
    /// (the default) serves none. Not in TensorFlow's config.
    pub http_port: Option<u16>,

    // --- Transport security (tfdata's own; docs/security.md) ---
    /// TLS and the bearer token: for the worker's port and for its calls
    /// to the dispatcher (where it presents its server certificate, or
    /// `tls.client_identity`, if the dispatcher asks for one). The
    /// default, plaintext without a token, is what TensorFlow peers need.
    pub security: TransportSecurity,
}

pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(30);
pub const DEFAULT_DISPATCHER_TIMEOUT: Duration = Duration::from_secs(60 * 60);
pub const DEFAULT_CROSS_TRAINER_CACHE_SIZE_BYTES: u64 = 10 << 30;
pub const DEFAULT_SNAPSHOT_MAX_CHUNK_SIZE_BYTES: u64 = 6 << 30;
pub const DEFAULT_TASK_BUFFER_ELEMENTS: usize = 8;
/// Two full stream batches of small elements (see `stream::MAX_BATCH_ELEMENTS`).
pub const DEFAULT_TASK_BUFFER_MAX_ELEMENTS: usize = 16_384;
/// Enough for a few stream batches of large elements ahead of the reader.
pub const DEFAULT_TASK_BUFFER_BYTES: u64 = 32 << 20;

/// TensorFlow's commit schedule for a snapshot stream: chunks commit
/// often while a stream is young (so a restart loses little) and at most
/// every 30 minutes later.
pub const MAX_SNAPSHOT_COMMIT_INTERVAL: Duration = Duration::from_secs(30 * 60);

/// How long a stream writer fills chunk `chunk_index` before committing it:
/// `configured`, or TensorFlow's `min(30 min, 5 min + 0.5 min × chunk_index)`.
pub fn commit_interval(configured: Option<Duration>, chunk_index: i64) -> Duration {
    configured.unwrap_or_else(|| {
        let half_minutes = u64::try_from(chunk_index).unwrap_or(0).saturating_add(10);
        Duration::from_secs(half_minutes.saturating_mul(30)).min(MAX_SNAPSHOT_COMMIT_INTERVAL)
    })
}

impl WorkerConfig {
    /// A config with TensorFlow's defaults for a dispatcher at `host:port`.
    pub fn new(dispatcher_address: impl Into<String>) -> Self {
        WorkerConfig {
            dispatcher_address: dispatcher_address.into(),
            port: 0,
            protocol: "grpc".into(),
            worker_address: "localhost:%port%".into(),
            worker_tags: Vec::new(),
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            dispatcher_timeout: DEFAULT_DISPATCHER_TIMEOUT,
            data_transfer_protocol: None,
            data_transfer_port: 0,
            data_transfer_address: None,
            cross_trainer_cache_size_bytes: DEFAULT_CROSS_TRAINER_CACHE_SIZE_BYTES,
            snapshot_max_chunk_size_bytes: DEFAULT_SNAPSHOT_MAX_CHUNK_SIZE_BYTES,
            snapshot_commit_interval: None,
            shutdown_quiet_period: Duration::ZERO,
            task_buffer_elements: DEFAULT_TASK_BUFFER_ELEMENTS,
            task_buffer_max_elements: DEFAULT_TASK_BUFFER_MAX_ELEMENTS,
            task_buffer_bytes: DEFAULT_TASK_BUFFER_BYTES,
            element_stream: true,
            max_lane_streams: crate::lane_task::DEFAULT_MAX_LANE_STREAMS,
            http_port: None,
            security: TransportSecurity::default(),
        }
    }

    /// The dispatcher's `host:port`, without a protocol prefix.
    pub fn dispatcher_host_port(&self) -> Result<String> {
        let (_protocol, address) = tfdata_rpc::channel::parse_service(&self.dispatcher_address)
            .map_err(|e| Error::InvalidConfig {
                field: "dispatcher_address",
                reason: e.to_string(),
            })?;
        Ok(address)
    }

    pub fn validate(&self) -> Result<()> {
        if self.dispatcher_address.is_empty() {
            return Err(Error::InvalidConfig {
                field: "dispatcher_address",
                reason: "is required".into(),
            });
        }
        self.dispatcher_host_port()?;
        tfdata_rpc::channel::check_protocol(&self.protocol).map_err(|e| Error::InvalidConfig {
            field: "protocol",
            reason: e.to_string(),
        })?;
        if self.worker_address.is_empty() {
            return Err(Error::InvalidConfig {
                field: "worker_address",
                reason: "is empty (the default is localhost:%port%)".into(),
            });
        }
        if self.worker_tags.iter().any(String::is_empty) {
            return Err(Error::InvalidConfig {
                field: "worker_tags",
                reason: "tags must not be empty strings".into(),
            });
        }
        if let Some(p) = &self.data_transfer_protocol
            && p != "grpc"
        {
            return Err(Error::InvalidConfig {
                field: "data_transfer_protocol",
                reason: format!("{p:?} is not supported; tfdata workers serve elements over gRPC"),
            });
        }
        if self.heartbeat_interval.is_zero() || self.dispatcher_timeout.is_zero() {
            return Err(Error::InvalidConfig {
                field: "heartbeat_interval",
                reason: "heartbeat_interval and dispatcher_timeout must be positive".into(),
            });
        }
        if self.snapshot_max_chunk_size_bytes == 0 {
            return Err(Error::InvalidConfig {
                field: "snapshot_max_chunk_size_bytes",
                reason: "must be positive".into(),
            });
        }
        if self.snapshot_commit_interval.is_some_and(|d| d.is_zero()) {
            return Err(Error::InvalidConfig {
                field: "snapshot_commit_interval",
                reason: "must be positive (unset is TensorFlow's schedule)".into(),
            });
        }
        if self.max_lane_streams == 0 {
            return Err(Error::InvalidConfig {
                field: "max_lane_streams",
                reason: "must be at least 1".into(),
            });
        }
        if self.task_buffer_elements == 0 {
            return Err(Error::InvalidConfig {
                field: "task_buffer_elements",
                reason: "must be at least 1".into(),
            });
        }
        if self.task_buffer_max_elements < self.task_buffer_elements {
            return Err(Error::InvalidConfig {
                field: "task_buffer_max_elements",
                reason: format!(
                    "{} is less than task_buffer_elements ({})",
                    self.task_buffer_max_elements, self.task_buffer_elements
                ),
            });
        }
        if self.task_buffer_bytes == 0 || usize::try_from(self.task_buffer_bytes).is_err() {
            return Err(Error::InvalidConfig {
                field: "task_buffer_bytes",
                reason: format!("{} is not a usable byte bound", self.task_buffer_bytes),
            });
        }
        self.security.validate_for_server()?;
        Ok(())
    }

    /// The advertised address once the port is known.
    pub fn resolved_worker_address(&self, port: u16) -> String {
        self.worker_address.replacen("%port%", &port.to_string(), 1)
    }

    /// From TensorFlow's proto, applying TensorFlow's defaults to zero fields.
    pub fn from_proto(p: &wire::WorkerConfig) -> Result<Self> {
        let mut c = WorkerConfig::new(p.dispatcher_address.clone());
        let port = |field, v: i64| {
            u16::try_from(v).map_err(|_| Error::InvalidConfig {
                field,
                reason: format!("{v} is not a TCP port"),
            })
        };
        let ms = |v: i64, default| {
            if v <= 0 {
                default
            } else {
                Duration::from_millis(v as u64)
            }
        };
        c.port = port("port", p.port)?;
        if !p.protocol.is_empty() {
            c.protocol = p.protocol.clone();
        }
        if !p.worker_address.is_empty() {
            c.worker_address = p.worker_address.clone();
        }
        c.worker_tags = p.worker_tags.clone();
        c.heartbeat_interval = ms(p.heartbeat_interval_ms, c.heartbeat_interval);
        c.dispatcher_timeout = ms(p.dispatcher_timeout_ms, c.dispatcher_timeout);
        c.data_transfer_protocol =
            (!p.data_transfer_protocol.is_empty()).then(|| p.data_transfer_protocol.clone());
        c.data_transfer_port = port("data_transfer_port", p.data_transfer_port)?;
        c.data_transfer_address =
            (!p.data_transfer_address.is_empty()).then(|| p.data_transfer_address.clone());
        if p.cross_trainer_cache_size_bytes > 0 {
            c.cross_trainer_cache_size_bytes = p.cross_trainer_cache_size_bytes as u64;
        }
        if p.snapshot_max_chunk_size_bytes > 0 {
            c.snapshot_max_chunk_size_bytes = p.snapshot_max_chunk_size_bytes as u64;
        }
        c.shutdown_quiet_period = ms(p.shutdown_quiet_period_ms, Duration::ZERO);
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_validation() {
        let c = WorkerConfig::new("localhost:5050");
        c.validate().unwrap();
        assert_eq!(c.resolved_worker_address(1234), "localhost:1234");
        assert_eq!(c.dispatcher_host_port().unwrap(), "localhost:5050");
        assert_eq!(
            WorkerConfig::new("grpc://h:1")
                .dispatcher_host_port()
                .unwrap(),
            "h:1"
        );
        assert!(WorkerConfig::new("").validate().is_err());
        let mut tags = WorkerConfig::new("h:1");
        tags.worker_tags = vec!["".into()];
        assert!(
            tags.validate()
                .unwrap_err()
                .to_string()
                .contains("worker_tags")
        );
        let from = WorkerConfig::from_proto(&wire::WorkerConfig {
            dispatcher_address: "h:1".into(),
            heartbeat_interval_ms: 250,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(from.heartbeat_interval, Duration::from_millis(250));
        assert_eq!(from.dispatcher_timeout, DEFAULT_DISPATCHER_TIMEOUT);
        let mut zero = WorkerConfig::new("h:1");
        zero.snapshot_commit_interval = Some(Duration::ZERO);
        assert!(zero.validate().is_err());
    }

    #[test]
    fn tensorflows_commit_schedule() {
        let minutes = |c| commit_interval(None, c).as_secs_f64() / 60.0;
        assert_eq!(minutes(0), 5.0);
        assert_eq!(minutes(1), 5.5);
        assert_eq!(minutes(10), 10.0);
        assert_eq!(minutes(50), 30.0);
        assert_eq!(minutes(i64::MAX), 30.0);
        let every = Some(Duration::from_millis(20));
        assert_eq!(commit_interval(every, 7), Duration::from_millis(20));
    }
}
