//! The tonic adapter: TensorFlow's `DispatcherService` over [`Dispatcher`].

use std::sync::Arc;

use tfdata_core::Result;
use tfdata_proto::data::{self as wire, dispatcher_service_server::DispatcherService};
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::dispatcher::Dispatcher;
use crate::request_span::{RequestIds, rpc_span};

/// The tonic adapter around [`Dispatcher`].
#[derive(Clone)]
pub struct DispatcherGrpc(pub Arc<Dispatcher>);

fn respond<T>(method: &'static str, result: Result<T>) -> Result<Response<T>, Status> {
    match result {
        Ok(v) => Ok(Response::new(v)),
        Err(e) => {
            tracing::debug!(method, error = %e, "request failed");
            Err(e.into())
        }
    }
}

/// The `DispatcherService` impl: methods that hand the request to the
/// `Dispatcher` method of the same name (listed once each), and the rest
/// written out.
macro_rules! dispatcher_service {
    (
        delegated { $($method:ident($req:ident) -> $resp:ident as $name:literal;)* }
        custom { $($custom:tt)* }
    ) => {
        #[tonic::async_trait]
        impl DispatcherService for DispatcherGrpc {
            $(
                async fn $method(
                    &self,
                    r: Request<wire::$req>,
                ) -> Result<Response<wire::$resp>, Status> {
                    let request = r.into_inner();
                    let span = rpc_span($name);
                    request.record(&span);
                    respond($name, self.0.$method(request).instrument(span).await)
                }
            )*
            $($custom)*
        }
    };
}

dispatcher_service! {
    delegated {
        worker_heartbeat(WorkerHeartbeatRequest) -> WorkerHeartbeatResponse as "WorkerHeartbeat";
        worker_update(WorkerUpdateRequest) -> WorkerUpdateResponse as "WorkerUpdate";
        get_dataset_def(GetDatasetDefRequest) -> GetDatasetDefResponse as "GetDatasetDef";
        get_split(GetSplitRequest) -> GetSplitResponse as "GetSplit";
        get_or_register_dataset(GetOrRegisterDatasetRequest) -> GetOrRegisterDatasetResponse
            as "GetOrRegisterDataset";
        get_or_create_job(GetOrCreateJobRequest) -> GetOrCreateJobResponse as "GetOrCreateJob";
        get_or_create_iteration(GetOrCreateIterationRequest) -> GetOrCreateIterationResponse
            as "GetOrCreateIteration";
        maybe_remove_task(MaybeRemoveTaskRequest) -> MaybeRemoveTaskResponse as "MaybeRemoveTask";
        release_iteration_client(ReleaseIterationClientRequest) -> ReleaseIterationClientResponse
            as "ReleaseIterationClient";
        client_heartbeat(ClientHeartbeatRequest) -> ClientHeartbeatResponse as "ClientHeartbeat";
        get_data_service_metadata(GetDataServiceMetadataRequest) -> GetDataServiceMetadataResponse
            as "GetDataServiceMetadata";
        disable_compression_at_runtime(DisableCompressionAtRuntimeRequest) -> DisableCompressionAtRuntimeResponse
            as "DisableCompressionAtRuntime";
        snapshot(SnapshotRequest) -> SnapshotResponse as "Snapshot";
        get_snapshot_split(GetSnapshotSplitRequest) -> GetSnapshotSplitResponse as "GetSnapshotSplit";
        get_snapshot_streams(GetSnapshotStreamsRequest) -> GetSnapshotStreamsResponse
            as "GetSnapshotStreams";
    }
    custom {
        async fn get_version(
            &self,
            _r: Request<wire::GetVersionRequest>,
        ) -> Result<Response<wire::GetVersionResponse>, Status> {
            Ok(Response::new(wire::GetVersionResponse {
                version: tfdata_proto::DATA_SERVICE_VERSION,
            }))
        }

        async fn get_workers(
            &self,
            _r: Request<wire::GetWorkersRequest>,
        ) -> Result<Response<wire::GetWorkersResponse>, Status> {
            let workers = self.0.get_workers().await.map(|addresses| wire::GetWorkersResponse {
                workers: addresses
                    .into_iter()
                    .map(|address| wire::WorkerInfo { address })
                    .collect(),
            });
            respond("GetWorkers", workers)
        }

        async fn get_data_service_config(
            &self,
            _r: Request<wire::GetDataServiceConfigRequest>,
        ) -> Result<Response<wire::GetDataServiceConfigResponse>, Status> {
            Ok(Response::new(wire::GetDataServiceConfigResponse {
                config: Some(wire::DataServiceConfig {
                    deployment_mode: self.0.config().deployment_mode as i32,
                }),
            }))
        }
    }
}
