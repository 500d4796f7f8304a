//! `DispatchServer` and `WorkerServer` as Python objects.
//!
//! The Python classes of `tfdata.experimental.service` build these from
//! their configs. Each handle is frozen and shares its server through an
//! `Arc`, so `stop()` from one thread while another blocks in `join()` is
//! safe. Garbage collection only *starts* stopping the server, on a thread
//! of its own: the finalizer runs with the GIL held, and a pipeline thread
//! still finishing a Python function needs the GIL to get there.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tfdata::security::{Secret, SecuritySettings, TransportSecurity};
use tfdata::{DispatcherConfig, WorkerConfig};
use tfdata_proto::config as wire;

use crate::errors::IntoPyResult;
use crate::wait;

/// What the Rust servers share, for the methods their handles share.
trait Served: Send + Sync + 'static {
    fn start(&self) -> tfdata::Result<()>;
    fn join_timeout(&self, timeout: std::time::Duration) -> Option<tfdata::Result<()>>;
    fn stop(&self);
}

macro_rules! served {
    ($t:ty) => {
        impl Served for $t {
            fn start(&self) -> tfdata::Result<()> {
                <$t>::start(self)
            }
            fn join_timeout(&self, timeout: std::time::Duration) -> Option<tfdata::Result<()>> {
                <$t>::join_timeout(self, timeout)
            }
            fn stop(&self) {
                <$t>::stop(self)
            }
        }
    };
}
served!(tfdata::DispatchServer);
served!(tfdata::WorkerServer);

/// A server shared by its Python handle and whoever waits on it.
struct Shared<S: Served>(Arc<S>);

impl<S: Served> Shared<S> {
    fn new(
        py: Python<'_>,
        start: bool,
        make: impl FnOnce() -> tfdata::Result<S> + Send,
    ) -> PyResult<Self>
    where
        S: Send,
    {
        // Binding and (a dispatcher in fault-tolerant mode) replaying the journal.
        let server = py.detach(make).py_err()?;
        if start {
            server.start().py_err()?;
        }
        Ok(Shared(Arc::new(server)))
    }

    fn start(&self) -> PyResult<()> {
        self.0.start().py_err()
    }

    /// Blocks until the server stops; Ctrl-C interrupts the wait.
    fn join(&self, py: Python<'_>) -> PyResult<()> {
        let server = &self.0;
        wait::poll_until(py, || server.join_timeout(wait::SLICE))?.py_err()
    }

    fn stop(&self, py: Python<'_>) {
        py.detach(|| self.0.stop());
    }
}

impl<S: Served> Drop for Shared<S> {
    fn drop(&mut self) {
        let server = Arc::clone(&self.0);
        let spawned = std::thread::Builder::new()
            .name("tfdata-stop".into())
            .spawn(move || server.stop());
        if let Err(e) = spawned {
            // The server still stops when its last reference goes; just later.
            eprintln!("tfdata: cannot start a thread to stop a server: {e}");
        }
    }
}

/// The keys `security` may have: the configs' keyword-only TLS and token
/// settings (docs/security.md).
const SECURITY_KEYS: [&str; 8] = [
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_client_cert",
    "tls_client_key",
    "tls_require_client_cert",
    "auth_token_file",
    "auth_token",
];

/// A server's transport security from the `security` dict the Python
/// configs build (`None` values count as unset); `None` is plaintext.
fn security(settings: Option<&Bound<'_, PyDict>>) -> PyResult<TransportSecurity> {
    let Some(settings) = settings else {
        return Ok(TransportSecurity::plaintext());
    };
    for key in settings.keys() {
        let key: String = key.extract()?;
        if !SECURITY_KEYS.contains(&key.as_str()) {
            return Err(PyValueError::new_err(format!(
                "unknown security setting {key:?}; expected one of {SECURITY_KEYS:?}"
            )));
        }
    }
    let path = |key: &str| -> PyResult<Option<std::path::PathBuf>> {
        match settings.get_item(key)? {
            Some(v) if !v.is_none() => Ok(Some(v.extract()?)),
            _ => Ok(None),
        }
    };
    let require = match settings.get_item("tls_require_client_cert")? {
        Some(v) if !v.is_none() => v.extract()?,
        _ => false,
    };
    let auth_token = match settings.get_item("auth_token")? {
        Some(v) if !v.is_none() => Some(Secret::new(v.extract::<String>()?).py_err()?),
        _ => None,
    };
    SecuritySettings {
        tls_ca: path("tls_ca")?,
        tls_cert: path("tls_cert")?,
        tls_key: path("tls_key")?,
        tls_client_cert: path("tls_client_cert")?,
        tls_client_key: path("tls_client_key")?,
        tls_require_client_cert: require,
        auth_token_file: path("auth_token_file")?,
        auth_token,
    }
    .into_security()
    .py_err()
}

/// TensorFlow's `DispatchServer`, configured with the fields of
/// `DispatcherConfig` (TensorFlow's proto semantics: 0 means "default").
#[pyclass(frozen, module = "tfdata._native")]
pub struct DispatchServer {
    server: Shared<tfdata::DispatchServer>,
}

#[pymethods]
impl DispatchServer {
    #[new]
    #[pyo3(signature = (*, start, port, protocol, work_dir, fault_tolerant_mode, worker_addresses,
        job_gc_check_interval_ms, job_gc_timeout_ms, worker_timeout_ms,
        worker_max_concurrent_snapshots, client_timeout_ms, gc_dynamic_sharding_jobs, http_port,
        security=None, autocache=false, autocache_dir=None, scaling_period_ms=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        start: bool,
        port: i64,
        protocol: String,
        work_dir: String,
        fault_tolerant_mode: bool,
        worker_addresses: Vec<String>,
        job_gc_check_interval_ms: i64,
        job_gc_timeout_ms: i64,
        worker_timeout_ms: i64,
        worker_max_concurrent_snapshots: i64,
        client_timeout_ms: i64,
        gc_dynamic_sharding_jobs: bool,
        http_port: Option<u16>,
        security: Option<&Bound<'_, PyDict>>,
        autocache: bool,
        autocache_dir: Option<String>,
        scaling_period_ms: Option<u64>,
    ) -> PyResult<Self> {
        let proto = wire::DispatcherConfig {
            port,
            protocol,
            work_dir,
            fault_tolerant_mode,
            worker_addresses,
            job_gc_check_interval_ms,
            job_gc_timeout_ms,
            worker_timeout_ms,
            worker_max_concurrent_snapshots,
            client_timeout_ms,
            gc_dynamic_sharding_jobs,
            ..Default::default()
        };
        let mut config = DispatcherConfig::from_proto(&proto).py_err()?;
        config.http_port = http_port;
        config.security = self::security(security)?;
        config.autocache = autocache;
        config.autocache_dir = autocache_dir;
        if let Some(ms) = scaling_period_ms {
            config.scaling_period = std::time::Duration::from_millis(ms);
        }
        config.validate().py_err()?;
        let server = Shared::new(py, start, || tfdata::DispatchServer::new_stopped(config))?;
        Ok(DispatchServer { server })
    }

    fn start(&self) -> PyResult<()> {
        self.server.start()
    }

    fn join(&self, py: Python<'_>) -> PyResult<()> {
        self.server.join(py)
    }

    fn stop(&self, py: Python<'_>) {
        self.server.stop(py)
    }

    #[getter]
    fn port(&self) -> u16 {
        self.server.0.port()
    }

    #[getter]
    fn http_port(&self) -> Option<u16> {
        self.server.0.http_port()
    }

    fn num_workers(&self, py: Python<'_>) -> usize {
        py.detach(|| self.server.0.num_workers())
    }
}

/// TensorFlow's `WorkerServer`, configured with the fields of `WorkerConfig`.
#[pyclass(frozen, module = "tfdata._native")]
pub struct WorkerServer {
    server: Shared<tfdata::WorkerServer>,
}

#[pymethods]
impl WorkerServer {
    #[new]
    #[pyo3(signature = (*, start, dispatcher_address, worker_address, port, protocol,
        heartbeat_interval_ms, dispatcher_timeout_ms, data_transfer_protocol,
        data_transfer_address, worker_tags, element_stream, http_port, security=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        start: bool,
        dispatcher_address: String,
        worker_address: String,
        port: i64,
        protocol: String,
        heartbeat_interval_ms: i64,
        dispatcher_timeout_ms: i64,
        data_transfer_protocol: String,
        data_transfer_address: String,
        worker_tags: Vec<String>,
        element_stream: bool,
        http_port: Option<u16>,
        security: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let proto = wire::WorkerConfig {
            port,
            protocol,
            dispatcher_address,
            worker_address,
            worker_tags,
            heartbeat_interval_ms,
            dispatcher_timeout_ms,
            data_transfer_protocol,
            data_transfer_address,
            ..Default::default()
        };
        let mut config = WorkerConfig::from_proto(&proto).py_err()?;
        config.element_stream = element_stream;
        config.http_port = http_port;
        config.security = self::security(security)?;
        let server = Shared::new(py, start, || tfdata::WorkerServer::new_stopped(config))?;
        Ok(WorkerServer { server })
    }

    fn start(&self) -> PyResult<()> {
        self.server.start()
    }

    fn join(&self, py: Python<'_>) -> PyResult<()> {
        self.server.join(py)
    }

    fn stop(&self, py: Python<'_>) {
        self.server.stop(py)
    }

    #[getter]
    fn port(&self) -> u16 {
        self.server.0.port()
    }

    #[getter]
    fn http_port(&self) -> Option<u16> {
        self.server.0.http_port()
    }

    /// The address the worker advertises to the dispatcher.
    #[getter]
    fn address(&self) -> String {
        self.server.0.address().to_string()
    }
}
