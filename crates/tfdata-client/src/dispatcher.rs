//! [`DispatcherClient`]: typed calls to a dispatcher. The first call on a
//! client checks the dispatcher's protocol version (spec §5.10) and fails with
//! [`Error::VersionMismatch`] if it is not ours.

use std::sync::Arc;
use std::time::Duration;

use tfdata_core::{Error, IterationClientId, Result};
use tfdata_proto::DATA_SERVICE_VERSION;
use tfdata_proto::data::{self as wire, dispatcher_service_client::DispatcherServiceClient};
use tfdata_rpc::security::{ClientSecurity, RpcChannel, TransportSecurity};

/// Bound on one `ReleaseIterationClient` when a reader goes away.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on one `ClientHeartbeat`; a slower answer counts as a transient failure.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub struct DispatcherClient {
    address: String,
    client: DispatcherServiceClient<RpcChannel>,
    version_checked: Arc<tokio::sync::OnceCell<()>>,
}

macro_rules! rpc {
    ($(#[$doc:meta])* $name:ident, $req:ty, $resp:ty) => {
        $(#[$doc])*
        pub async fn $name(&self, request: $req) -> Result<$resp> {
            self.check_version().await?;
            self.client
                .clone()
                .$name(request)
                .await
                .map(tonic::Response::into_inner)
                .map_err(Error::from)
        }
    };
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

    /// A client for the dispatcher at `host:port`, secured by `security`.
    pub fn with_security(address: &str, security: &ClientSecurity) -> Result<Self> {
        Ok(DispatcherClient {
            address: address.to_string(),
            client: tfdata_rpc::channel::dispatcher_client(tfdata_rpc::channel::channel(
                address, security,
            )?),
            version_checked: Default::default(),
        })
    }

    pub fn address(&self) -> &str {
        &self.address
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
                let version = self
                    .client
                    .clone()
                    .get_version(wire::GetVersionRequest {})
                    .await
                    .map_err(Error::from)?
                    .into_inner()
                    .version;
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
        tokio::time::timeout(HEARTBEAT_TIMEOUT, self.client_heartbeat(request))
            .await
            .unwrap_or_else(|_| Err(Error::Unavailable("client heartbeat timed out".into())))
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
