//! The tonic adapter: TensorFlow's `DispatcherService` over [`Dispatcher`].

use std::sync::Arc;
use std::time::Instant;

use tfdata_core::Result;
use tfdata_proto::data::{self as wire, dispatcher_service_server::DispatcherService};
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::dispatcher::{Dispatcher, requests};
use crate::serving::request_span::{RequestIds, rpc_span};

/// The tonic adapter around [`Dispatcher`].
#[derive(Clone)]
pub struct DispatcherGrpc(pub Arc<Dispatcher>);

impl DispatcherGrpc {
    /// `result` as tonic's answer, counted in the RPC metrics.
    pub(crate) fn respond<T>(
        &self,
        method: &'static str,
        started: Instant,
        result: Result<T>,
    ) -> Result<Response<T>, Status> {
        let answer = match result {
            Ok(v) => Ok(Response::new(v)),
            Err(e) => {
                tracing::debug!(method, error = %e, "request failed");
                Err(Status::from(e))
            }
        };
        let code = answer
            .as_ref()
            .map_or_else(Status::code, |_| tonic::Code::Ok);
        self.0.metrics().rpc(method, code, started.elapsed());
        answer
    }
}

/// The `DispatcherService` impl: methods that hand the request, converted
/// to its validated type (`requests`), to the `Dispatcher` method of the
/// same name (listed once each); and the rest written out.
macro_rules! dispatcher_service {
    (
        validated { $($vmethod:ident($vreq:ident => $valid:ident) -> $vresp:ident as $vname:literal;)* }
        custom { $($custom:tt)* }
    ) => {
        #[tonic::async_trait]
        impl DispatcherService for DispatcherGrpc {
            $(
                async fn $vmethod(
                    &self,
                    r: Request<wire::$vreq>,
                ) -> Result<Response<wire::$vresp>, Status> {
                    let started = Instant::now();
                    let request = r.into_inner();
                    let span = rpc_span($vname);
                    request.record(&span);
                    let result = match requests::$valid::try_from(request) {
                        Ok(request) => self.0.$vmethod(request).instrument(span).await,
                        Err(e) => Err(e),
                    };
                    self.respond($vname, started, result)
                }
            )*
            $($custom)*
        }
    };
}

dispatcher_service! {
    validated {
        release_iteration_client(ReleaseIterationClientRequest => ReleaseIterationClient)
            -> ReleaseIterationClientResponse as "ReleaseIterationClient";
        maybe_remove_task(MaybeRemoveTaskRequest => MaybeRemoveTask) -> MaybeRemoveTaskResponse
            as "MaybeRemoveTask";
        get_dataset_def(GetDatasetDefRequest => GetDatasetDef) -> GetDatasetDefResponse
            as "GetDatasetDef";
        get_data_service_metadata(GetDataServiceMetadataRequest => GetDataServiceMetadata)
            -> GetDataServiceMetadataResponse as "GetDataServiceMetadata";
        disable_compression_at_runtime(DisableCompressionAtRuntimeRequest => DisableCompressionAtRuntime)
            -> DisableCompressionAtRuntimeResponse as "DisableCompressionAtRuntime";
        get_or_create_iteration(GetOrCreateIterationRequest => GetOrCreateIteration)
            -> GetOrCreateIterationResponse as "GetOrCreateIteration";
        get_or_register_dataset(GetOrRegisterDatasetRequest => GetOrRegisterDataset)
            -> GetOrRegisterDatasetResponse as "GetOrRegisterDataset";
        get_or_create_job(GetOrCreateJobRequest => GetOrCreateJob) -> GetOrCreateJobResponse
            as "GetOrCreateJob";
        snapshot(SnapshotRequest => Snapshot) -> SnapshotResponse as "Snapshot";
        get_snapshot_streams(GetSnapshotStreamsRequest => GetSnapshotStreams)
            -> GetSnapshotStreamsResponse as "GetSnapshotStreams";
        get_snapshot_split(GetSnapshotSplitRequest => GetSnapshotSplit)
            -> GetSnapshotSplitResponse as "GetSnapshotSplit";
        get_split(GetSplitRequest => GetSplit) -> GetSplitResponse as "GetSplit";
        worker_update(WorkerUpdateRequest => WorkerUpdate) -> WorkerUpdateResponse
            as "WorkerUpdate";
    }
    custom {
        // Served by `grpc_heartbeat` in front of this generated server (the
        // answer's task list encoded once per iteration): this decoded
        // answer is what the generated server would give.
        async fn client_heartbeat(
            &self,
            r: Request<wire::ClientHeartbeatRequest>,
        ) -> Result<Response<wire::ClientHeartbeatResponse>, Status> {
            let started = Instant::now();
            let request = r.into_inner();
            let span = rpc_span("ClientHeartbeat");
            request.record(&span);
            let result = match requests::ClientHeartbeat::try_from(request) {
                Ok(request) => self
                    .0
                    .client_heartbeat_encoded(request)
                    .instrument(span)
                    .await
                    .and_then(|answer| answer.decode()),
                Err(e) => Err(e),
            };
            self.respond("ClientHeartbeat", started, result)
        }

        async fn worker_heartbeat(
            &self,
            r: Request<wire::WorkerHeartbeatRequest>,
        ) -> Result<Response<wire::WorkerHeartbeatResponse>, Status> {
            let started = Instant::now();
            // Where the worker's host is: a probe of its address is trusted
            // only when the address is this host (`dispatcher::probes`).
            let peer = r.remote_addr().map(|a| a.ip().to_canonical());
            let request = r.into_inner();
            let span = rpc_span("WorkerHeartbeat");
            request.record(&span);
            let result = match requests::WorkerHeartbeat::try_from(request) {
                Ok(request) => {
                    self.0
                        .worker_heartbeat_held(request, peer)
                        .instrument(span)
                        .await
                }
                Err(e) => Err(e),
            };
            self.respond("WorkerHeartbeat", started, result)
        }

        async fn get_version(
            &self,
            _r: Request<wire::GetVersionRequest>,
        ) -> Result<Response<wire::GetVersionResponse>, Status> {
            let version = wire::GetVersionResponse {
                version: tfdata_proto::DATA_SERVICE_VERSION,
            };
            self.respond("GetVersion", Instant::now(), Ok(version))
        }

        async fn get_workers(
            &self,
            _r: Request<wire::GetWorkersRequest>,
        ) -> Result<Response<wire::GetWorkersResponse>, Status> {
            let started = Instant::now();
            let workers = self.0.get_workers().await.map(|addresses| wire::GetWorkersResponse {
                workers: addresses
                    .into_iter()
                    .map(|address| wire::WorkerInfo { address })
                    .collect(),
            });
            self.respond("GetWorkers", started, workers)
        }

        async fn get_data_service_config(
            &self,
            _r: Request<wire::GetDataServiceConfigRequest>,
        ) -> Result<Response<wire::GetDataServiceConfigResponse>, Status> {
            let config = wire::GetDataServiceConfigResponse {
                config: Some(wire::DataServiceConfig {
                    deployment_mode: self.0.config().deployment_mode as i32,
                }),
            };
            self.respond("GetDataServiceConfig", Instant::now(), Ok(config))
        }
    }
}
