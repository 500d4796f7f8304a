//! `ClientHeartbeat` on the wire from pre-encoded task lists.
//!
//! The generated `DispatcherServiceServer` answers with a
//! `ClientHeartbeatResponse` that prost encodes field by field: for a
//! reader of an iteration with N tasks, N `TaskInfo`s built and encoded per
//! heartbeat. [`HeartbeatFastPath`] sits in front of it and serves that one
//! method itself, with a codec that writes the iteration's task list as the
//! bytes the dispatcher keeps encoded ([`EncodedHeartbeat`]); every other
//! method goes to the generated server unchanged. The bytes on the wire are
//! the same protobuf message (a repeated field's entries, then the other
//! fields), so TensorFlow's clients read it as before.
//!
//! The answer is framed by hand ([`tfdata_rpc::raw_grpc`], as the worker's
//! element stream is): the shared task-list bytes go to HTTP/2 as a part
//! of their own, not copied into tonic's encode buffer. At 1,000 workers
//! each answer lists 1,000 tasks (about 60 KB) and 10,000 readers ask
//! every second; that copy was a fifth of the dispatcher's CPU. A request
//! that arrives compressed (gRPC's `grpc-encoding`) takes tonic's path.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use prost::Message;
use tfdata_proto::data as wire;
use tfdata_rpc::raw_grpc::{self, MessageReader, RopeBody, RopeWriter};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::{BoxFuture, Service, http};
use tonic::server::{NamedService, UnaryService};
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::dispatcher::{Dispatcher, EncodedHeartbeat, requests};
use crate::serving::grpc::DispatcherGrpc;
use crate::serving::request_span::{RequestIds, rpc_span};

const CLIENT_HEARTBEAT_PATH: &str = "/tensorflow.data.DispatcherService/ClientHeartbeat";

/// The dispatcher service `S` (the generated server), with `ClientHeartbeat`
/// answered here (see the module docs).
#[derive(Clone)]
pub struct HeartbeatFastPath<S> {
    inner: S,
    dispatcher: Arc<Dispatcher>,
    max_message_bytes: usize,
}

impl<S> HeartbeatFastPath<S> {
    pub fn new(inner: S, dispatcher: Arc<Dispatcher>, max_message_bytes: usize) -> Self {
        HeartbeatFastPath {
            inner,
            dispatcher,
            max_message_bytes,
        }
    }
}

impl<S: NamedService> NamedService for HeartbeatFastPath<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<tonic::body::Body>> for HeartbeatFastPath<S>
where
    S: Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        if req.uri().path() != CLIENT_HEARTBEAT_PATH {
            return Box::pin(self.inner.call(req));
        }
        let handler = Handler(Arc::clone(&self.dispatcher));
        let max = self.max_message_bytes;
        let compressed = req
            .headers()
            .get("grpc-encoding")
            .is_some_and(|e| e.as_bytes() != b"identity");
        Box::pin(async move {
            if compressed {
                let mut grpc = tonic::server::Grpc::new(HeartbeatCodec)
                    .apply_max_message_size_config(Some(max), Some(max));
                return Ok(grpc.unary(handler, req).await);
            }
            Ok(answer_uncopied(handler, req, max).await)
        })
    }
}

/// One `ClientHeartbeat` call framed by hand: the request read with
/// [`MessageReader`], the answer's task list handed to HTTP/2 as its own
/// part (see the module docs).
async fn answer_uncopied(
    mut handler: Handler,
    req: http::Request<tonic::body::Body>,
    max_message_bytes: usize,
) -> http::Response<tonic::body::Body> {
    let mut requests = MessageReader::requests(req.into_body(), max_message_bytes);
    let request = match requests.message().await {
        Ok(Some(rope)) => match wire::ClientHeartbeatRequest::decode(rope) {
            Ok(request) => request,
            Err(e) => return malformed(e).into_http(),
        },
        Ok(None) => {
            return Status::invalid_argument("ClientHeartbeat call without a request").into_http();
        }
        Err(status) => return status.into_http(),
    };
    let answer = match handler.call(Request::new(request)).await {
        Ok(answer) => answer.into_inner(),
        Err(status) => return status.into_http(),
    };
    if answer.encoded_len() > max_message_bytes {
        return Status::resource_exhausted(format!(
            "the ClientHeartbeat answer is {} bytes, over the {max_message_bytes}-byte limit",
            answer.encoded_len()
        ))
        .into_http();
    }
    let mut message = RopeWriter::new();
    message.put_bytes(answer.task_info);
    message.put_fields(&answer.rest);
    let body = RopeBody::new(futures::stream::iter([Ok(message.into_message())]));
    raw_grpc::response_headers()
        .body(tonic::body::Body::new(body))
        .unwrap_or_else(|_| Status::internal("bad response").into_http())
}

fn malformed(e: prost::DecodeError) -> Status {
    Status::invalid_argument(format!("malformed ClientHeartbeatRequest: {e}"))
}

/// The method itself: the dispatcher's answer, with the span and metrics
/// every other method gets from `crate::serving::grpc`.
struct Handler(Arc<Dispatcher>);

impl UnaryService<wire::ClientHeartbeatRequest> for Handler {
    type Response = EncodedHeartbeat;
    type Future = BoxFuture<Response<EncodedHeartbeat>, Status>;

    fn call(&mut self, r: Request<wire::ClientHeartbeatRequest>) -> Self::Future {
        let dispatcher = Arc::clone(&self.0);
        Box::pin(async move {
            let started = Instant::now();
            let request = r.into_inner();
            let span = rpc_span("ClientHeartbeat");
            request.record(&span);
            let result = match requests::ClientHeartbeat::try_from(request) {
                Ok(request) => {
                    dispatcher
                        .client_heartbeat_encoded(request)
                        .instrument(span)
                        .await
                }
                Err(e) => Err(e),
            };
            DispatcherGrpc(dispatcher).respond("ClientHeartbeat", started, result)
        })
    }
}

/// prost for the request; [`EncodedHeartbeat::encode`] for the answer.
struct HeartbeatCodec;

struct AnswerEncoder;
struct RequestDecoder;

impl Codec for HeartbeatCodec {
    type Encode = EncodedHeartbeat;
    type Decode = wire::ClientHeartbeatRequest;
    type Encoder = AnswerEncoder;
    type Decoder = RequestDecoder;

    fn encoder(&mut self) -> AnswerEncoder {
        AnswerEncoder
    }

    fn decoder(&mut self) -> RequestDecoder {
        RequestDecoder
    }
}

impl Encoder for AnswerEncoder {
    type Item = EncodedHeartbeat;
    type Error = Status;

    fn encode(&mut self, item: EncodedHeartbeat, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.reserve(item.encoded_len());
        item.encode(dst).map_err(Status::from)
    }
}

impl Decoder for RequestDecoder {
    type Item = wire::ClientHeartbeatRequest;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        wire::ClientHeartbeatRequest::decode(src)
            .map(Some)
            .map_err(malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DispatcherConfig;
    use crate::serving::server::DispatchServer;

    /// A dispatcher, a one-thread runtime, and a channel to the dispatcher.
    fn server_and_channel() -> (
        DispatchServer,
        tokio::runtime::Runtime,
        tfdata_rpc::security::RpcChannel,
    ) {
        let server = DispatchServer::new(DispatcherConfig::default()).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let channel = runtime.block_on(async {
            tfdata_rpc::channel::channel(&server.address(), &Default::default()).unwrap()
        });
        (server, runtime, channel)
    }

    /// Over real gRPC, a generated client decodes the answer to the same
    /// message the dispatcher means, and the other methods still reach the
    /// generated server behind the fast path.
    #[test]
    fn a_generated_client_reads_the_encoded_answer() {
        let (server, runtime, channel) = server_and_channel();
        runtime.block_on(async {
            let mut client = tfdata_rpc::channel::dispatcher_client(channel);
            for address in ["w0:1", "w1:1", "w2:1"] {
                client
                    .worker_heartbeat(wire::WorkerHeartbeatRequest {
                        worker_address: address.into(),
                        tfdata_runs_pipelines: true,
                        ..Default::default()
                    })
                    .await
                    .unwrap();
            }
            let pipeline = tfdata_dataset::pipeline::to_pipeline_def(
                &tfdata_dataset::Dataset::range(10),
                false,
            )
            .unwrap();
            let dataset_id = client
                .get_or_register_dataset(wire::GetOrRegisterDatasetRequest {
                    dataset: Some(wire::DatasetDef {
                        tfdata_pipeline: Some(pipeline),
                        ..Default::default()
                    }),
                    metadata: Some(wire::DataServiceMetadata {
                        compression: 1,
                        ..Default::default()
                    }),
                    dataset_id: None,
                })
                .await
                .unwrap()
                .into_inner()
                .dataset_id;
            let job_id = client
                .get_or_create_job(wire::GetOrCreateJobRequest {
                    dataset_id,
                    processing_mode_def: Some(wire::ProcessingModeDef {
                        sharding_policy: 0,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .job_id;
            let reader = client
                .get_or_create_iteration(wire::GetOrCreateIterationRequest {
                    job_id,
                    repetition: 0,
                    tfdata_reports_receipts: false,
                    tfdata_consumed: Vec::new(),
                    tfdata_restore: None,
                    tfdata_consumed_elements: Vec::new(),
                    tfdata_consumed_pieces: Vec::new(),
                })
                .await
                .unwrap()
                .into_inner()
                .iteration_client_id;
            let request = wire::ClientHeartbeatRequest {
                iteration_client_id: reader,
                ..Default::default()
            };
            let over_grpc = client
                .client_heartbeat(request.clone())
                .await
                .unwrap()
                .into_inner();
            let meant = server.dispatcher().client_heartbeat(request).await.unwrap();
            assert_eq!(over_grpc, meant);
            assert_eq!(over_grpc.task_info.len(), 3);
            let unknown = client
                .client_heartbeat(wire::ClientHeartbeatRequest {
                    iteration_client_id: reader + 100,
                    ..Default::default()
                })
                .await
                .unwrap_err();
            assert_eq!(unknown.code(), tonic::Code::NotFound);
        });
        server.stop();
    }

    /// Bad requests on the hand-framed path get clear statuses, and the
    /// dispatcher keeps answering well-formed ones on the same connection.
    #[test]
    fn malformed_and_missing_requests_are_refused_and_serving_goes_on() {
        let (server, runtime, channel) = server_and_channel();
        runtime.block_on(async {
            let call = |messages: Vec<Vec<bytes::Bytes>>| {
                let channel = channel.clone();
                async move {
                    let mut reader = raw_grpc::open_stream(
                        channel,
                        CLIENT_HEARTBEAT_PATH,
                        futures::stream::iter(messages),
                        1 << 20,
                    )
                    .await?;
                    while reader.message().await?.is_some() {}
                    Ok::<(), Status>(())
                }
            };
            // Field 1 (iteration_client_id) as a varint that never ends.
            let garbage = vec![bytes::Bytes::from_static(&[0, 0, 0, 0, 2, 0x08, 0xff])];
            let refused = call(vec![garbage]).await.unwrap_err();
            assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused}");
            assert!(
                refused
                    .message()
                    .contains("malformed ClientHeartbeatRequest"),
                "{refused}"
            );
            let empty = call(vec![]).await.unwrap_err();
            assert_eq!(empty.code(), tonic::Code::InvalidArgument, "{empty}");
            let unknown = call(vec![raw_grpc::small_message(
                &wire::ClientHeartbeatRequest {
                    iteration_client_id: 12345,
                    ..Default::default()
                },
            )])
            .await
            .unwrap_err();
            assert_eq!(unknown.code(), tonic::Code::NotFound, "{unknown}");
            let mut client = tfdata_rpc::channel::dispatcher_client(channel.clone());
            client
                .worker_heartbeat(wire::WorkerHeartbeatRequest {
                    worker_address: "w0:1".into(),
                    ..Default::default()
                })
                .await
                .unwrap();
        });
        server.stop();
    }
}
