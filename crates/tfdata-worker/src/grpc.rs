//! The tonic adapter: TensorFlow's `WorkerService` over [`Worker`]: wire
//! messages in and out, errors as status codes.

use std::sync::Arc;

use tfdata_core::Error;
use tfdata_proto::data::{self as wire, worker_service_server::WorkerService};
use tonic::{Request, Response, Status};

use crate::get_element::ElementRequest;
use crate::strategy::Next;
use crate::worker::Worker;

/// The tonic adapter around [`Worker`].
#[derive(Clone)]
pub struct WorkerGrpc(pub Arc<Worker>);

impl WorkerGrpc {
    /// `GetElement`'s answer on the wire, its elements counted in the
    /// metrics.
    fn element_response(&self, request: &ElementRequest, next: Next) -> wire::GetElementResponse {
        match next {
            Next::Element { payload, index } => {
                let response = wire::GetElementResponse {
                    element: Some(payload),
                    element_index: index,
                    end_of_sequence: false,
                    skip_task: false,
                    // A round's element: its index in the task's sequence,
                    // which coordinated readers' checkpoints count by.
                    tfdata_element_index: request.round.map(|_| index),
                };
                let sent = &self.0.metrics().get_element;
                sent.elements.inc();
                sent.bytes
                    .inc_by(prost::Message::encoded_len(&response) as u64);
                response
            }
            Next::Skip => wire::GetElementResponse {
                skip_task: true,
                ..Default::default()
            },
            Next::EndOfSequence { .. } => wire::GetElementResponse {
                end_of_sequence: true,
                ..Default::default()
            },
        }
    }
}

#[tonic::async_trait]
impl WorkerService for WorkerGrpc {
    async fn process_task(
        &self,
        r: Request<wire::ProcessTaskRequest>,
    ) -> Result<Response<wire::ProcessTaskResponse>, Status> {
        let Some(task) = r.into_inner().task else {
            return Err(Error::InvalidArgument("ProcessTask without a task".into()).into());
        };
        self.0.start_task(task);
        Ok(Response::new(wire::ProcessTaskResponse {}))
    }

    async fn get_element(
        &self,
        r: Request<wire::GetElementRequest>,
    ) -> Result<Response<wire::GetElementResponse>, Status> {
        let answer = async {
            let request = ElementRequest::try_from(r.into_inner())?;
            let next = self.0.get_element(&request).await?;
            Ok::<_, Error>(self.element_response(&request, next))
        };
        match answer.await {
            Ok(resp) => Ok(Response::new(resp)),
            Err(e) => {
                tracing::debug!(error = %e, "GetElement failed");
                Err(e.into())
            }
        }
    }

    async fn get_worker_tasks(
        &self,
        _r: Request<wire::GetWorkerTasksRequest>,
    ) -> Result<Response<wire::GetWorkerTasksResponse>, Status> {
        let tasks = self
            .0
            .running_tasks()
            .iter()
            .map(|t| wire::TaskInfo {
                worker_address: self.0.address().to_string(),
                task_id: t.def.task_id,
                iteration_id: t.def.iteration_id,
                ..Default::default()
            })
            .collect();
        Ok(Response::new(wire::GetWorkerTasksResponse { tasks }))
    }

    async fn get_snapshot_task_progresses(
        &self,
        _r: Request<wire::GetSnapshotTaskProgressesRequest>,
    ) -> Result<Response<wire::GetSnapshotTaskProgressesResponse>, Status> {
        Ok(Response::new(wire::GetSnapshotTaskProgressesResponse {
            snapshot_task_progresses: self.0.snapshot_progress(),
        }))
    }
}
