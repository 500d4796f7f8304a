//! `DispatcherConfig` (spec §2.1): TensorFlow's fields with TensorFlow's
//! defaults, as validated Rust types.

use std::time::Duration;

use tfdata_core::{Error, Result};
use tfdata_proto::config as wire;
pub use tfdata_proto::data::DeploymentMode;
pub use tfdata_rpc::security::TransportSecurity;

/// The dispatcher's configuration. `Default` is TensorFlow's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatcherConfig {
    /// Listen port on `0.0.0.0`; 0 picks a free port.
    pub port: u16,
    /// `"grpc"` (plaintext) or `"grpc+local"`.
    pub protocol: String,
    /// Directory for registered datasets (`<work_dir>/datasets/<id>`) and, in
    /// fault-tolerant mode, the journal: a local path, a `file://` URL, or an
    /// object-store URL (`s3://bucket/prefix`, `gs://...`, `az://...`; see
    /// [`crate::persistence::work_dir`]). Another scheme is a config error.
    pub work_dir: Option<String>,
    /// Journal every state change (synced before the RPC is answered) in
    /// `<work_dir>/tf_data_dispatcher_journal/` and replay it at start.
    /// Requires `work_dir`.
    pub fault_tolerant_mode: bool,
    /// Fixed worker list: when non-empty, other workers are refused at
    /// registration and static sharding uses the list's order.
    pub worker_addresses: Vec<String>,
    /// Reported to clients; COLOCATED changes how they pick workers.
    pub deployment_mode: DeploymentMode,
    /// Period of the maintenance loop (client timeouts, iteration GC).
    pub job_gc_check_interval: Duration,
    /// How long an iteration without clients lives; `None` never collects
    /// (and, as in TensorFlow, disables the maintenance loop).
    pub job_gc_timeout: Option<Duration>,
    /// Also garbage-collect distributed_epoch iterations.
    pub gc_dynamic_sharding_jobs: bool,
    /// A client silent this long is released.
    pub client_timeout: Duration,
    /// A worker silent this long is considered lost.
    pub worker_timeout: Duration,
    /// Distributed-snapshot streams one worker writes at once.
    pub worker_max_concurrent_snapshots: u32,
    /// Port of the admin HTTP endpoint (`/metrics`, `/healthz`, `/readyz`)
    /// on `0.0.0.0`, apart from the gRPC port; 0 picks a free port, `None`
    /// (the default) serves none. Not in TensorFlow's config.
    pub http_port: Option<u16>,
    /// How often the scaling controller decides (`GetScalingAdvice`,
    /// docs/operations.md "Scaling"): also how long a change settles
    /// before it is judged. Not in TensorFlow's config (its estimate is
    /// updated on the GC interval and acted on by nothing).
    pub scaling_period: Duration,

    // --- Transport security (tfdata's own; docs/security.md) ---
    /// TLS (mutual with `require_client_cert`) and the bearer token: for
    /// the dispatcher's port and for its calls to workers. The default,
    /// plaintext without a token, is what TensorFlow peers need.
    pub security: TransportSecurity,

    // --- High availability (tfdata's own; docs/fault-tolerance.md) ---
    /// Several dispatchers share `work_dir`; one leads under a leader lease
    /// and the others stand by (see [`HighAvailability`]). `None` (the
    /// default): this dispatcher is the only one. Requires
    /// `fault_tolerant_mode`.
    pub high_availability: Option<HighAvailability>,

    // --- Autocache (tfdata's own, issue 36; docs/operations.md, "Autocache") ---
    /// Autocache every job, not only those that ask
    /// (`ProcessingModeDef.tfdata_autocache`). Deterministic reads never are.
    pub autocache: bool,
    /// Where caches live: a local directory or an object-store URL. `None`:
    /// `<work_dir>/autocache`; with neither, autocache jobs run uncached
    /// and the status page says why.
    pub autocache_dir: Option<String>,
}

/// Settings of a dispatcher that is one of several sharing a `work_dir`
/// (`crate::serving::server`'s high-availability mode): the lease it contends for
/// and the address it tells clients to find it at.
#[derive(Debug, Clone, PartialEq)]
pub struct HighAvailability {
    /// The leader lease's duration, renewal interval and safety margin.
    pub lease: crate::persistence::leader_lease::LeaseConfig,
    /// `host:port` written into the lease record when this dispatcher
    /// leads, and named by standbys' `UNAVAILABLE` answers. `None`: this
    /// host's name and the gRPC port.
    pub advertised_address: Option<String>,
}

impl HighAvailability {
    /// A lease of `duration`, renewed every fifth of it, with a fifth as
    /// the safety margin (the defaults: 5 s, 1 s, 1 s).
    pub fn with_lease_duration(duration: Duration) -> Self {
        HighAvailability {
            lease: crate::persistence::leader_lease::LeaseConfig {
                duration,
                renew_interval: duration / 5,
                safety_margin: duration / 5,
            },
            advertised_address: None,
        }
    }
}

pub const DEFAULT_JOB_GC_CHECK_INTERVAL: Duration = Duration::from_secs(10 * 60);
pub const DEFAULT_JOB_GC_TIMEOUT: Duration = Duration::from_secs(5 * 60);
pub const DEFAULT_CLIENT_TIMEOUT: Duration = Duration::from_secs(5 * 60);
pub const DEFAULT_WORKER_TIMEOUT: Duration = Duration::from_secs(10 * 60);
pub const DEFAULT_WORKER_MAX_CONCURRENT_SNAPSHOTS: u32 = 3;

impl Default for DispatcherConfig {
    fn default() -> Self {
        DispatcherConfig {
            port: 0,
            protocol: "grpc".into(),
            work_dir: None,
            fault_tolerant_mode: false,
            worker_addresses: Vec::new(),
            deployment_mode: DeploymentMode::Unspecified,
            job_gc_check_interval: DEFAULT_JOB_GC_CHECK_INTERVAL,
            job_gc_timeout: Some(DEFAULT_JOB_GC_TIMEOUT),
            gc_dynamic_sharding_jobs: false,
            client_timeout: DEFAULT_CLIENT_TIMEOUT,
            worker_timeout: DEFAULT_WORKER_TIMEOUT,
            worker_max_concurrent_snapshots: DEFAULT_WORKER_MAX_CONCURRENT_SNAPSHOTS,
            http_port: None,
            scaling_period: crate::scaling::DEFAULT_SCALING_PERIOD,
            security: TransportSecurity::default(),
            high_availability: None,
            autocache: false,
            autocache_dir: None,
        }
    }
}

impl DispatcherConfig {
    /// Checks what can be checked before binding a port.
    pub fn validate(&self) -> Result<()> {
        tfdata_rpc::channel::check_protocol(&self.protocol).map_err(|e| Error::InvalidConfig {
            field: "protocol",
            reason: e.to_string(),
        })?;
        if let Some(dir) = &self.work_dir {
            crate::persistence::work_dir::validate(dir)?;
        }
        if self.fault_tolerant_mode && self.work_dir.is_none() {
            return Err(Error::InvalidConfig {
                field: "fault_tolerant_mode",
                reason: "requires work_dir to be set".into(),
            });
        }
        if let Some(empty) = self.worker_addresses.iter().position(String::is_empty) {
            return Err(Error::InvalidConfig {
                field: "worker_addresses",
                reason: format!("entry {empty} is empty"),
            });
        }
        for (field, d) in [
            ("job_gc_check_interval", self.job_gc_check_interval),
            ("client_timeout", self.client_timeout),
            ("worker_timeout", self.worker_timeout),
            ("scaling_period", self.scaling_period),
        ] {
            if d.is_zero() {
                return Err(Error::InvalidConfig {
                    field,
                    reason: "must be greater than zero".into(),
                });
            }
        }
        if let Some(dir) = &self.autocache_dir {
            crate::persistence::work_dir::validate(dir).map_err(|e| Error::InvalidConfig {
                field: "autocache_dir",
                reason: e.to_string(),
            })?;
        }
        self.security.validate_for_server()?;
        if let Some(ha) = &self.high_availability {
            let invalid = |reason: &str| Error::InvalidConfig {
                field: "high_availability",
                reason: reason.to_string(),
            };
            if !self.fault_tolerant_mode {
                return Err(invalid(
                    "requires fault_tolerant_mode (the standbys take over from the journal)",
                ));
            }
            if self.work_dir.is_none() {
                return Err(invalid(
                    "requires work_dir (the dispatchers share it: the lease and the journal)",
                ));
            }
            ha.lease.validate()?;
            if ha
                .advertised_address
                .as_deref()
                .is_some_and(|a| a.is_empty() || a.contains(',') || a.contains("://"))
            {
                return Err(invalid(
                    "advertised_address must be one host:port, without a scheme",
                ));
            }
        }
        Ok(())
    }

    /// Where autocache keeps its caches: `autocache_dir`, else
    /// `<work_dir>/autocache`; `None` when neither is set.
    pub fn autocache_root(&self) -> Option<String> {
        if let Some(dir) = &self.autocache_dir {
            return Some(dir.trim_end_matches('/').to_string());
        }
        let work_dir = self.work_dir.as_deref()?;
        Some(format!("{}/autocache", work_dir.trim_end_matches('/')))
    }

    /// The local directory behind `work_dir`, if it is one (`None` when
    /// unset or an object-store URL).
    pub fn work_dir_path(&self) -> Option<std::path::PathBuf> {
        self.work_dir
            .as_deref()
            .and_then(crate::persistence::work_dir::local_path)
    }

    /// From TensorFlow's proto, applying TensorFlow's defaults to zero fields.
    pub fn from_proto(p: &wire::DispatcherConfig) -> Result<Self> {
        let d = DispatcherConfig::default();
        let ms = |v: i64, default: Duration| {
            if v <= 0 {
                default
            } else {
                Duration::from_millis(v as u64)
            }
        };
        let port = u16::try_from(p.port).map_err(|_| Error::InvalidConfig {
            field: "port",
            reason: format!("{} is not a TCP port", p.port),
        })?;
        let config = DispatcherConfig {
            port,
            protocol: if p.protocol.is_empty() {
                d.protocol
            } else {
                p.protocol.clone()
            },
            work_dir: (!p.work_dir.is_empty()).then(|| p.work_dir.clone()),
            fault_tolerant_mode: p.fault_tolerant_mode,
            worker_addresses: p.worker_addresses.clone(),
            deployment_mode: DeploymentMode::try_from(p.deployment_mode).map_err(|_| {
                Error::InvalidConfig {
                    field: "deployment_mode",
                    reason: format!("unknown value {}", p.deployment_mode),
                }
            })?,
            job_gc_check_interval: ms(p.job_gc_check_interval_ms, d.job_gc_check_interval),
            job_gc_timeout: match p.job_gc_timeout_ms {
                v if v < 0 => None,
                0 => d.job_gc_timeout,
                v => Some(Duration::from_millis(v as u64)),
            },
            gc_dynamic_sharding_jobs: p.gc_dynamic_sharding_jobs,
            client_timeout: ms(p.client_timeout_ms, d.client_timeout),
            worker_timeout: ms(p.worker_timeout_ms, d.worker_timeout),
            worker_max_concurrent_snapshots: match p.worker_max_concurrent_snapshots {
                v if v <= 0 => d.worker_max_concurrent_snapshots,
                v => u32::try_from(v).unwrap_or(u32::MAX),
            },
            http_port: None,
            scaling_period: d.scaling_period,
            security: TransportSecurity::default(),
            high_availability: None,
            autocache: false,
            autocache_dir: None,
        };
        config.validate()?;
        Ok(config)
    }

    pub fn to_proto(&self) -> wire::DispatcherConfig {
        wire::DispatcherConfig {
            port: self.port.into(),
            protocol: self.protocol.clone(),
            work_dir: self.work_dir.clone().unwrap_or_default(),
            fault_tolerant_mode: self.fault_tolerant_mode,
            worker_addresses: self.worker_addresses.clone(),
            deployment_mode: self.deployment_mode as i32,
            job_gc_check_interval_ms: self.job_gc_check_interval.as_millis() as i64,
            job_gc_timeout_ms: self.job_gc_timeout.map_or(-1, |d| d.as_millis() as i64),
            gc_dynamic_sharding_jobs: self.gc_dynamic_sharding_jobs,
            client_timeout_ms: self.client_timeout.as_millis() as i64,
            worker_timeout_ms: self.worker_timeout.as_millis() as i64,
            worker_max_concurrent_snapshots: self.worker_max_concurrent_snapshots.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_proto_fields_get_tensorflow_defaults() {
        let c = DispatcherConfig::from_proto(&wire::DispatcherConfig::default()).unwrap();
        assert_eq!(c, DispatcherConfig::default());
        assert_eq!(DispatcherConfig::from_proto(&c.to_proto()).unwrap(), c);
        let never = wire::DispatcherConfig {
            job_gc_timeout_ms: -1,
            ..Default::default()
        };
        assert_eq!(
            DispatcherConfig::from_proto(&never).unwrap().job_gc_timeout,
            None
        );
    }

    #[test]
    fn invalid_configs_are_rejected_with_the_field() {
        let err = DispatcherConfig {
            fault_tolerant_mode: true,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("fault_tolerant_mode"), "{err}");
        let err = DispatcherConfig {
            protocol: "http".into(),
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("protocol"), "{err}");
        for (bad, needle) in [
            ("", "empty"),
            ("hdfs://namenode/dir", "unknown scheme 'hdfs'"),
            ("gs:///dir", "no bucket"),
        ] {
            let err = DispatcherConfig {
                work_dir: Some(bad.into()),
                ..Default::default()
            }
            .validate()
            .unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::InvalidConfig {
                        field: "work_dir",
                        ..
                    }
                ),
                "{err}"
            );
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
    }

    #[test]
    fn high_availability_needs_fault_tolerance_a_work_dir_and_a_keepable_lease() {
        let ha = HighAvailability::with_lease_duration(Duration::from_secs(5));
        assert_eq!(
            ha.lease,
            crate::persistence::leader_lease::LeaseConfig::default()
        );
        let base = DispatcherConfig {
            work_dir: Some("/tmp/ha".into()),
            fault_tolerant_mode: true,
            high_availability: Some(ha.clone()),
            ..Default::default()
        };
        base.validate().unwrap();
        let cases = [
            (
                DispatcherConfig {
                    fault_tolerant_mode: false,
                    ..base.clone()
                },
                "requires fault_tolerant_mode",
            ),
            (
                DispatcherConfig {
                    high_availability: Some(HighAvailability::with_lease_duration(Duration::ZERO)),
                    ..base.clone()
                },
                "must be positive",
            ),
            (
                DispatcherConfig {
                    high_availability: Some(HighAvailability {
                        advertised_address: Some("grpc://a:1".into()),
                        ..ha.clone()
                    }),
                    ..base.clone()
                },
                "one host:port",
            ),
        ];
        for (config, needle) in cases {
            let err = config.validate().unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
        // fault_tolerant_mode without work_dir is refused before HA is looked at.
        let err = DispatcherConfig {
            work_dir: None,
            ..base
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("requires work_dir"), "{err}");
    }

    #[test]
    fn object_store_and_file_work_dirs_are_accepted() {
        for dir in [
            "gs://bucket/dir",
            "s3://bucket/dir/",
            "az://container/dir",
            "file:///tmp/dir",
            "/tmp/dir",
        ] {
            let config = DispatcherConfig {
                work_dir: Some(dir.into()),
                fault_tolerant_mode: true,
                ..Default::default()
            };
            config.validate().unwrap();
            // The proto carries the URL unchanged.
            assert_eq!(
                DispatcherConfig::from_proto(&config.to_proto()).unwrap(),
                config
            );
        }
        let local = |dir: &str| DispatcherConfig {
            work_dir: Some(dir.into()),
            ..Default::default()
        };
        assert_eq!(
            local("file:///tmp/dir").work_dir_path(),
            Some("/tmp/dir".into())
        );
        assert_eq!(local("s3://bucket/dir").work_dir_path(), None);
    }
}
