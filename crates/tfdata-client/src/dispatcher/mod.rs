//! [`DispatcherClient`]: typed calls to a dispatcher. The first call on a
//! client checks the dispatcher's protocol version (spec §5.10) and fails with
//! [`Error::VersionMismatch`] if it is not ours.
//!
//! # Several dispatchers
//!
//! An address may list several dispatchers, comma-separated
//! (`a:5050,b:5050,c:5050`, or as a service `grpc://a:5050,b:5050`; a
//! tfdata extension: TensorFlow takes one), the members of a
//! high-availability group sharing one `work_dir`, of which one leads and
//! the others answer `UNAVAILABLE`. The client calls one of them at a time;
//! when a call fails `UNAVAILABLE` (a standby's answer, or the dispatcher
//! unreachable) the next call goes to the next address, round robin. The
//! callers already retry `UNAVAILABLE` within their budgets (readers'
//! task refreshes, workers' heartbeats, `dispatcher_timeout`), so those
//! retries find the leader. One address behaves exactly as before.
//!
//! A name that resolves to several addresses is several dispatchers, one
//! per address ([`members`]): clients and workers given one DNS name for a
//! group (a headless Service) find its leader the same way.

mod members;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tfdata_core::{Error, IterationClientId, Result};
use tfdata_proto::DATA_SERVICE_VERSION;
use tfdata_proto::data as wire;
use tfdata_rpc::security::{ClientSecurity, TransportSecurity};

use members::{Member, Members};

/// Bound on one `ReleaseIterationClient` when a reader goes away.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on one `ClientHeartbeat`; a slower answer counts as a transient failure.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30);

/// Most dispatchers one address may list.
pub const MAX_DISPATCHER_ADDRESSES: usize = 16;

#[derive(Clone)]
pub struct DispatcherClient {
    /// As given: one `host:port`, or several comma-separated.
    address: String,
    /// One client per dispatcher: per address given, or per address a
    /// name resolves to.
    members: Arc<Members>,
    /// The index of the member calls go to.
    current: Arc<AtomicUsize>,
    version_checked: Arc<tokio::sync::OnceCell<()>>,
}

macro_rules! rpc {
    ($(#[$doc:meta])* $name:ident, $req:ty, $resp:ty) => {
        $(#[$doc])*
        pub async fn $name(&self, request: $req) -> Result<$resp> {
            self.check_version().await?;
            let (at, member) = self.pick().await;
            let result = member
                .client
                .clone()
                .$name(request)
                .await
                .map(tonic::Response::into_inner)
                .map_err(Error::from);
            self.follow(at, result)
        }
    };
}

/// The `host:port`s of an address that may list several, comma-separated.
pub fn split_addresses(address: &str) -> Result<Vec<String>> {
    let addresses: Vec<String> = address.split(',').map(|a| a.trim().to_string()).collect();
    if let Some(i) = addresses.iter().position(String::is_empty) {
        return Err(Error::InvalidArgument(format!(
            "dispatcher address {address:?}: entry {i} is empty"
        )));
    }
    if let Some(a) = addresses.iter().find(|a| a.contains("://")) {
        return Err(Error::InvalidArgument(format!(
            "dispatcher address {address:?}: {a:?} has a protocol; write it once, \
             before the first address (grpc://a:5050,b:5050)"
        )));
    }
    if addresses.len() > MAX_DISPATCHER_ADDRESSES {
        return Err(Error::InvalidArgument(format!(
            "dispatcher address {address:?} lists {} dispatchers, more than {MAX_DISPATCHER_ADDRESSES}",
            addresses.len()
        )));
    }
    Ok(addresses)
}

impl DispatcherClient {
    /// A client for the dispatcher at `host:port`, secured as this
    /// process's readers are by default
    /// ([`TransportSecurity::process_default`]: the `TFDATA_TLS_*` and
    /// `TFDATA_AUTH_TOKEN*` variables). Connects lazily: an unreachable
    /// dispatcher shows up as a retryable error on the first call.
    pub fn new(address: &str) -> Result<Self> {
        Self::with_security(address, &TransportSecurity::process_default()?.client()?)
    }

    /// A client for the dispatcher at `host:port` (or several,
    /// comma-separated: see the module docs), secured by `security`.
    pub fn with_security(address: &str, security: &ClientSecurity) -> Result<Self> {
        let members = Members::new(split_addresses(address)?, security)?;
        Ok(DispatcherClient {
            address: address.to_string(),
            members: Arc::new(members),
            current: Default::default(),
            version_checked: Default::default(),
        })
    }

    /// The address as given (all of them, when several).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The address calls go to now (the one that answered last, or the
    /// next to try after an `UNAVAILABLE`).
    /// (For a name resolved to several: `name:port (ip:port)`.)
    pub fn current_address(&self) -> String {
        let members = self.members.list();
        members[self.current.load(Ordering::Relaxed) % members.len()]
            .label
            .clone()
    }

    /// The member calls go to now (after resolving names, if due), and
    /// `current` as read (the member's index modulo the members).
    async fn pick(&self) -> (usize, Arc<Member>) {
        let members = self.members.current().await;
        let at = self.current.load(Ordering::Relaxed);
        (at, Arc::clone(&members[at % members.len()]))
    }

    /// After a call picked at `at`: an `UNAVAILABLE` moves the next call to
    /// the next member (unless another call moved it already); once every
    /// member failed in turn, names are resolved again.
    fn follow<T>(&self, at: usize, result: Result<T>) -> Result<T> {
        if let Err(e) = &result
            && e.code() == tonic::Code::Unavailable
        {
            let members = self.members.list();
            let i = at % members.len();
            let next = (i + 1) % members.len();
            if next == 0 {
                self.members.mark_stale();
            }
            if members.len() > 1
                && self
                    .current
                    .compare_exchange(at, next, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                tracing::debug!(
                    from = %members[i].label,
                    to = %members[next].label,
                    error = %e,
                    "dispatcher unavailable; trying the next address"
                );
            }
        }
        result
    }

    /// The retry target naming this dispatcher, for error messages.
    pub fn target(&self) -> tfdata_rpc::retry::Target {
        tfdata_rpc::retry::Target {
            what: "tf.data service dispatcher",
            address: self.address.clone(),
        }
    }

    /// Checks the protocol version once; later calls return at once.
    pub async fn check_version(&self) -> Result<()> {
        self.version_checked
            .get_or_try_init(|| async {
                let (at, member) = self.pick().await;
                let answer = member
                    .client
                    .clone()
                    .get_version(wire::GetVersionRequest {})
                    .await
                    .map_err(Error::from);
                let version = self.follow(at, answer)?.into_inner().version;
                if version == DATA_SERVICE_VERSION {
                    Ok(())
                } else {
                    Err(Error::VersionMismatch {
                        address: self.address.clone(),
                        server: version,
                        client: DATA_SERVICE_VERSION,
                    })
                }
            })
            .await
            .map(|_| ())
    }

    /// A reader's `ClientHeartbeat`, bounded by [`HEARTBEAT_TIMEOUT`]: a
    /// slower answer is a transient (UNAVAILABLE) failure.
    pub(crate) async fn reader_heartbeat(
        &self,
        request: wire::ClientHeartbeatRequest,
    ) -> Result<wire::ClientHeartbeatResponse> {
        let (at, _) = self.pick().await;
        let answer = tokio::time::timeout(HEARTBEAT_TIMEOUT, self.client_heartbeat(request))
            .await
            .unwrap_or_else(|_| Err(Error::Unavailable("client heartbeat timed out".into())));
        self.follow(at, answer)
    }

    /// Releases a reader's iteration client when it goes away, bounded by
    /// [`RELEASE_TIMEOUT`]. Best effort: a failure is logged (the
    /// dispatcher drops silent clients anyway).
    pub(crate) async fn release_reader(&self, client_id: IterationClientId) {
        let release = self.release_iteration_client(wire::ReleaseIterationClientRequest {
            iteration_client_id: client_id.0,
        });
        let client_id = client_id.0;
        match tokio::time::timeout(RELEASE_TIMEOUT, release).await {
            Ok(Ok(_)) => tracing::debug!(client_id, "iteration client released"),
            Ok(Err(e)) => {
                tracing::warn!(client_id, error = %e, "failed to release iteration client")
            }
            Err(_) => tracing::warn!(client_id, "timed out releasing iteration client"),
        }
    }

    rpc!(
        worker_heartbeat,
        wire::WorkerHeartbeatRequest,
        wire::WorkerHeartbeatResponse
    );
    rpc!(
        worker_update,
        wire::WorkerUpdateRequest,
        wire::WorkerUpdateResponse
    );
    rpc!(
        get_dataset_def,
        wire::GetDatasetDefRequest,
        wire::GetDatasetDefResponse
    );
    rpc!(get_split, wire::GetSplitRequest, wire::GetSplitResponse);
    rpc!(snapshot, wire::SnapshotRequest, wire::SnapshotResponse);
    rpc!(
        get_snapshot_streams,
        wire::GetSnapshotStreamsRequest,
        wire::GetSnapshotStreamsResponse
    );
    rpc!(
        /// The next split of one source for a snapshot stream (spec §8.1);
        /// callers retry it within `dispatcher_timeout`.
        get_snapshot_split,
        wire::GetSnapshotSplitRequest,
        wire::GetSnapshotSplitResponse
    );
    rpc!(
        get_or_register_dataset,
        wire::GetOrRegisterDatasetRequest,
        wire::GetOrRegisterDatasetResponse
    );
    rpc!(
        get_or_create_job,
        wire::GetOrCreateJobRequest,
        wire::GetOrCreateJobResponse
    );
    rpc!(
        get_or_create_iteration,
        wire::GetOrCreateIterationRequest,
        wire::GetOrCreateIterationResponse
    );
    rpc!(
        maybe_remove_task,
        wire::MaybeRemoveTaskRequest,
        wire::MaybeRemoveTaskResponse
    );
    rpc!(
        release_iteration_client,
        wire::ReleaseIterationClientRequest,
        wire::ReleaseIterationClientResponse
    );
    rpc!(
        client_heartbeat,
        wire::ClientHeartbeatRequest,
        wire::ClientHeartbeatResponse
    );
    rpc!(
        get_workers,
        wire::GetWorkersRequest,
        wire::GetWorkersResponse
    );
    rpc!(
        get_data_service_metadata,
        wire::GetDataServiceMetadataRequest,
        wire::GetDataServiceMetadataResponse
    );
    rpc!(
        get_data_service_config,
        wire::GetDataServiceConfigRequest,
        wire::GetDataServiceConfigResponse
    );
    rpc!(
        disable_compression_at_runtime,
        wire::DisableCompressionAtRuntimeRequest,
        wire::DisableCompressionAtRuntimeResponse
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_on_commas_and_bad_lists_are_refused() {
        assert_eq!(split_addresses("a:1").unwrap(), vec!["a:1"]);
        assert_eq!(
            split_addresses("a:1, b:2,c:3").unwrap(),
            vec!["a:1", "b:2", "c:3"]
        );
        for (bad, needle) in [
            ("a:1,,b:2", "entry 1 is empty"),
            ("a:1,", "entry 1 is empty"),
            ("a:1,grpc://b:2", "has a protocol"),
            (&["h:1"; 17].join(","), "more than 16"),
        ] {
            let err = split_addresses(bad).unwrap_err().to_string();
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }
}
