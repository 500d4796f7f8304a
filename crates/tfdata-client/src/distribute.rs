//! `distribute`, `register_dataset` and `from_dataset_id` (spec §3.1–§3.3).
//! The options they share, with TensorFlow's client-side checks, are in
//! [`crate::read_options`].

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tfdata_core::{DatasetId, Element, Error, Result};
use tfdata_dataset::Dataset;
use tfdata_proto::data as wire;
use tfdata_rpc::CancellationToken;
use tfdata_rpc::retry::retry;
use tfdata_rpc::security::{ClientSecurity, TransportSecurity};

use crate::checkpoint::Positions;
use crate::dispatcher::DispatcherClient;
use crate::fetch::{ReceivedElement, StreamWindow};
use crate::iteration::{self, Iteration, IterationParams};
use crate::options::{Compression, IntoProcessingMode, ProcessingMode, TargetWorkers};
pub use crate::read_options::{
    DEFAULT_DISPATCHER_TIMEOUT, DEFAULT_MAX_OUTSTANDING_REQUESTS, DEFAULT_TASK_REFRESH_INTERVAL,
};
use crate::read_options::{ReadOptions, read_option_setters};
use crate::runtime;

/// The element stream's compression for a dataset registered with `compression`.
fn stream_compression(compression: i32) -> tfdata_proto::tfdata::stream::Compression {
    use tfdata_proto::tfdata::stream::Compression as S;
    use wire::data_service_metadata::Compression as C;
    match C::try_from(compression) {
        Ok(C::ForcedSnappy) => S::Always,
        Ok(C::Off) => S::Never,
        _ => S::Auto,
    }
}

/// `tf.data.experimental.service.distribute(...)`: a transformation that
/// registers a dataset with the service and reads it back from the workers.
///
/// ```no_run
/// use tfdata_client::{distribute, ProcessingMode};
/// use tfdata_dataset::Dataset;
/// let ds = distribute(ProcessingMode::ParallelEpochs, "grpc://localhost:5050")
///     .apply(&Dataset::range(10))?;
/// for element in ds.iter()? {
///     println!("{}", element?);
/// }
/// # Ok::<(), tfdata_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Distribute {
    options: ReadOptions,
    compression: Compression,
}

/// Starts a `distribute` transformation; `mode` is a [`ProcessingMode`] or
/// TensorFlow's string (`"parallel_epochs"`, `"distributed_epoch"`).
pub fn distribute(mode: impl IntoProcessingMode, service: &str) -> Distribute {
    Distribute {
        options: ReadOptions::new(mode.into_processing_mode(), service),
        compression: Compression::Auto,
    }
}

impl Distribute {
    read_option_setters!();

    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Registers `dataset` and returns it as read through the service.
    pub fn apply(&self, dataset: &Dataset) -> Result<DistributedDataset> {
        runtime::block_on("distribute(...).apply", self.apply_async(dataset))?
    }

    pub async fn apply_async(&self, dataset: &Dataset) -> Result<DistributedDataset> {
        let (mode, dispatcher, security) = self.options.validate()?;
        let dataset_id = register(
            &dispatcher,
            dataset,
            self.compression,
            None,
            self.options.dispatcher_timeout,
        )
        .await?;
        DistributedDataset::connect(
            dispatcher,
            security,
            mode,
            DatasetId(dataset_id),
            self.options.clone(),
        )
        .await
    }
}

/// `register_dataset(service, dataset, compression, dataset_id)`: registers
/// `dataset` and returns its id. With an explicit `dataset_id` that is already
/// registered, the existing dataset is kept (its metadata must match).
pub fn register_dataset(
    service: &str,
    dataset: &Dataset,
    compression: Compression,
    dataset_id: Option<&str>,
) -> Result<String> {
    runtime::block_on(
        "register_dataset",
        register_dataset_async(service, dataset, compression, dataset_id),
    )?
}

pub async fn register_dataset_async(
    service: &str,
    dataset: &Dataset,
    compression: Compression,
    dataset_id: Option<&str>,
) -> Result<String> {
    let (_protocol, address) = tfdata_rpc::channel::parse_service(service)?;
    let dispatcher = DispatcherClient::new(&address)?;
    register(
        &dispatcher,
        dataset,
        compression,
        dataset_id,
        DEFAULT_DISPATCHER_TIMEOUT,
    )
    .await
}

async fn register(
    dispatcher: &DispatcherClient,
    dataset: &Dataset,
    compression: Compression,
    dataset_id: Option<&str>,
    timeout: Duration,
) -> Result<String> {
    let pipeline =
        tfdata_dataset::pipeline::to_pipeline_def(dataset, compression != Compression::Off)?;
    // TensorFlow's encoding, so TensorFlow readers need not be told the spec.
    let element_spec = dataset.element_spec()?.map(|s| {
        prost::Message::encode_to_vec(&tfdata_dataset::spec_coder::to_structured_value(&s)).into()
    });
    let request = wire::GetOrRegisterDatasetRequest {
        dataset: Some(wire::DatasetDef {
            graph: Default::default(),
            tfdata_pipeline: Some(pipeline),
        }),
        metadata: Some(wire::DataServiceMetadata {
            element_spec,
            compression: compression.to_metadata() as i32,
            cardinality: dataset.cardinality(),
        }),
        dataset_id: dataset_id.map(str::to_string),
    };
    let response = retry(
        &dispatcher.target(),
        Some(timeout),
        &CancellationToken::new(),
        || dispatcher.get_or_register_dataset(request.clone()),
    )
    .await?;
    Ok(response.dataset_id)
}

/// `from_dataset_id(processing_mode, service, dataset_id, ...)`: reads a dataset
/// registered earlier, by this or any other client (TensorFlow's included).
#[derive(Debug, Clone)]
pub struct FromDatasetId {
    options: ReadOptions,
    dataset_id: String,
}

pub fn from_dataset_id(
    mode: impl IntoProcessingMode,
    service: &str,
    dataset_id: &str,
) -> FromDatasetId {
    FromDatasetId {
        options: ReadOptions::new(mode.into_processing_mode(), service),
        dataset_id: dataset_id.to_string(),
    }
}

impl FromDatasetId {
    read_option_setters!();

    pub fn build(&self) -> Result<DistributedDataset> {
        runtime::block_on("from_dataset_id(...).build", self.build_async())?
    }

    pub async fn build_async(&self) -> Result<DistributedDataset> {
        let (mode, dispatcher, security) = self.options.validate()?;
        let mut options = self.options.clone();
        // TensorFlow 2.21 scopes the job name by dataset id here (not in distribute).
        options.job_name = options
            .job_name
            .map(|name| format!("dataset_id=/{}/{name}", self.dataset_id));
        let dataset_id = DatasetId(self.dataset_id.clone());
        DistributedDataset::connect(dispatcher, security, mode, dataset_id, options).await
    }
}

/// A dataset read through tf.data service. Each iterator is a new repetition
/// (epoch) of the job, as with a `tf.data` dataset iterated again.
#[derive(Clone)]
pub struct DistributedDataset {
    inner: Arc<Inner>,
}

struct Inner {
    dispatcher: DispatcherClient,
    /// How the workers are reached (as the dispatcher is).
    security: ClientSecurity,
    mode: ProcessingMode,
    dataset_id: DatasetId,
    metadata: wire::DataServiceMetadata,
    options: ReadOptions,
    next_repetition: AtomicI64,
    /// The fingerprint of the dataset's definition, fetched from the
    /// dispatcher for the first reader checkpoint or restore.
    fingerprint: tokio::sync::OnceCell<u64>,
}

impl DistributedDataset {
    async fn connect(
        dispatcher: DispatcherClient,
        security: ClientSecurity,
        mode: ProcessingMode,
        dataset_id: DatasetId,
        options: ReadOptions,
    ) -> Result<Self> {
        let cancel = CancellationToken::new();
        let timeout = Some(options.dispatcher_timeout);
        let request = wire::GetDataServiceMetadataRequest {
            dataset_id: dataset_id.0.clone(),
        };
        let metadata = retry(&dispatcher.target(), timeout, &cancel, || {
            dispatcher.get_data_service_metadata(request.clone())
        })
        .await?
        .metadata
        .unwrap_or_default();
        if metadata.compression == wire::data_service_metadata::Compression::Unspecified as i32 {
            return Err(Error::InvalidArgument(format!(
                "dataset {dataset_id} was registered without a compression setting"
            )));
        }
        let config = retry(&dispatcher.target(), timeout, &cancel, || {
            dispatcher.get_data_service_config(wire::GetDataServiceConfigRequest {})
        })
        .await?
        .config
        .unwrap_or_default();
        // TensorFlow's clients propose (never, in open source) to turn
        // compression off; the first proposal per dataset is recorded and the
        // workers follow it. Readers decode both forms either way.
        if metadata.compression != wire::data_service_metadata::Compression::Off as i32 {
            let request = wire::DisableCompressionAtRuntimeRequest {
                dataset_id: dataset_id.0.clone(),
                disable_compression_at_runtime: false,
            };
            retry(&dispatcher.target(), timeout, &cancel, || {
                dispatcher.disable_compression_at_runtime(request.clone())
            })
            .await?;
        }
        // COLOCATED deployments with static sharding read only local workers.
        let mut options = options;
        let colocated = config.deployment_mode == wire::DeploymentMode::Colocated as i32;
        let static_sharding = !matches!(
            mode,
            ProcessingMode::ParallelEpochs | ProcessingMode::DistributedEpoch
        );
        if colocated && static_sharding && options.target_workers == TargetWorkers::Auto {
            options.target_workers = TargetWorkers::Local;
        }
        Ok(DistributedDataset {
            inner: Arc::new(Inner {
                dispatcher,
                security,
                mode,
                dataset_id,
                metadata,
                options,
                next_repetition: AtomicI64::new(0),
                fingerprint: tokio::sync::OnceCell::new(),
            }),
        })
    }

    pub fn dataset_id(&self) -> &str {
        &self.inner.dataset_id.0
    }

    pub fn processing_mode(&self) -> ProcessingMode {
        self.inner.mode
    }

    /// The element structure registered with the dataset, if it was
    /// (TensorFlow's graph-mode registrations and undeclared user functions
    /// leave it out).
    pub fn element_spec(&self) -> Result<Option<tfdata_dataset::Structure>> {
        use prost::Message;
        let Some(bytes) = &self.inner.metadata.element_spec else {
            return Ok(None);
        };
        let value =
            tfdata_proto::tensorflow::StructuredValue::decode(bytes.clone()).map_err(|e| {
                Error::InvalidArgument(format!(
                    "dataset {} has a malformed element_spec: {e}",
                    self.inner.dataset_id
                ))
            })?;
        tfdata_dataset::spec_coder::from_structured_value(&value).map(Some)
    }

    /// Cardinality registered with the dataset (−1 infinite, −2 unknown).
    pub fn registered_cardinality(&self) -> i64 {
        self.inner.metadata.cardinality
    }

    /// A blocking iterator over the elements (not for use inside an async
    /// runtime: use [`stream`](Self::stream) there).
    pub fn iter(&self) -> Result<ElementIterator> {
        let handle = runtime::handle()?;
        let repetition = self.next_repetition();
        let iteration = runtime::block_on(
            "DistributedDataset::iter",
            self.start(handle.clone(), repetition, Positions::default()),
        )??;
        Ok(ElementIterator {
            iteration,
            handle,
            dataset: self.clone(),
            repetition,
        })
    }

    /// [`iter`](Self::iter) from async code: the iterator's driver runs on the
    /// shared client runtime (as with `iter`), but setting it up is awaited
    /// here, so a caller can bound or cancel the wait. Its blocking methods
    /// must then be used outside any runtime.
    pub async fn iter_async(&self) -> Result<ElementIterator> {
        let handle = runtime::handle()?;
        let repetition = self.next_repetition();
        let iteration = self
            .start(handle.clone(), repetition, Positions::default())
            .await?;
        Ok(ElementIterator {
            iteration,
            handle,
            dataset: self.clone(),
            repetition,
        })
    }

    /// An async stream of the elements, driven on the current runtime.
    pub async fn stream(&self) -> Result<ElementStream> {
        let repetition = self.next_repetition();
        let iteration = self
            .start(
                tokio::runtime::Handle::current(),
                repetition,
                Positions::default(),
            )
            .await?;
        Ok(ElementStream {
            iteration,
            dataset: self.clone(),
            repetition,
        })
    }

    /// This dataset as reader checkpoints name it: its definition's
    /// fingerprint (one `GetDatasetDef` call, then cached).
    async fn identity(&self) -> Result<crate::checkpoint::DatasetIdentity<'_>> {
        let inner = &self.inner;
        let fingerprint = inner
            .fingerprint
            .get_or_try_init(|| async {
                let request = wire::GetDatasetDefRequest {
                    dataset_id: inner.dataset_id.0.clone(),
                };
                let def = retry(
                    &inner.dispatcher.target(),
                    Some(inner.options.dispatcher_timeout),
                    &CancellationToken::new(),
                    || inner.dispatcher.get_dataset_def(request.clone()),
                )
                .await?
                .dataset_def
                .unwrap_or_default();
                Ok::<_, Error>(crate::checkpoint::fingerprint(
                    &prost::Message::encode_to_vec(&def),
                ))
            })
            .await?;
        Ok(crate::checkpoint::DatasetIdentity {
            id: &inner.dataset_id.0,
            fingerprint: *fingerprint,
            mode: inner.mode,
        })
    }

    /// A new read of repetition `repetition` starting at `checkpoint`'s
    /// positions, to replace `current` (which must not have started).
    async fn restored(
        &self,
        current: &Iteration,
        repetition: i64,
        checkpoint: &[u8],
        handle: tokio::runtime::Handle,
    ) -> Result<Iteration> {
        if current.started() {
            return Err(Error::FailedPrecondition(
                "restore() must come before the iterator's first element".into(),
            ));
        }
        let inner = &self.inner;
        if let Some(setting) = inner.options.deterministic {
            let start =
                crate::deterministic::restore_start(checkpoint, self.identity().await?, &setting)?;
            // Later iterations go on from the checkpoint's epoch.
            let epoch = i64::try_from(start.epoch).map_err(|_| {
                Error::InvalidArgument(format!("reader checkpoint names epoch {}", start.epoch))
            })?;
            inner
                .next_repetition
                .fetch_max(epoch.saturating_add(1), Ordering::SeqCst);
            return self
                .start_read(handle, epoch, Positions::default(), Some((setting, start)))
                .await;
        }
        if let Some(reason) = crate::checkpoint::unresumable_read(
            inner.mode,
            inner.options.consumer_index.is_some(),
            inner.options.trainer_id.is_some(),
        ) {
            return Err(Error::FailedPrecondition(reason));
        }
        let start = Positions::decode(checkpoint, self.identity().await?)?;
        let coordinated = inner
            .options
            .consumer_index
            .zip(inner.options.num_consumers)
            .map(|(consumer, consumers)| crate::checkpoint::Coordinated {
                consumer,
                consumers,
            });
        if start.coordinated != coordinated {
            let describe = |c: Option<crate::checkpoint::Coordinated>| match c {
                Some(c) => format!(
                    "consumer {} of {} of a coordinated read",
                    c.consumer, c.consumers
                ),
                None => "a read that is not coordinated".to_string(),
            };
            return Err(Error::InvalidArgument(format!(
                "the checkpoint was taken by {}; this read is {}",
                describe(start.coordinated),
                describe(coordinated)
            )));
        }
        match (inner.options.job_name.is_some(), start.shared.is_some()) {
            (true, false) => {
                return Err(Error::FailedPrecondition(
                    "the checkpoint was taken by a reader of a job of its own; a read that \
                     shares a job (job_name is set) restores checkpoints of a shared job's \
                     consumers"
                        .into(),
                ));
            }
            (false, true) => {
                return Err(Error::FailedPrecondition(
                    "the checkpoint was taken by a consumer of a shared job: restore it into \
                     a read with a job_name, with every other consumer's checkpoint"
                        .into(),
                ));
            }
            _ => {}
        }
        self.start(handle, repetition, start).await
    }

    fn next_repetition(&self) -> i64 {
        self.inner.next_repetition.fetch_add(1, Ordering::SeqCst)
    }

    async fn start(
        &self,
        handle: tokio::runtime::Handle,
        repetition: i64,
        start: Positions,
    ) -> Result<Iteration> {
        // A deterministic read's epoch is its iteration's count.
        let lanes = self.inner.options.deterministic.map(|d| {
            let epoch = crate::deterministic::LaneStart::fresh(&d, repetition.max(0) as u64);
            (d, epoch)
        });
        self.start_read(handle, repetition, start, lanes).await
    }

    async fn start_read(
        &self,
        handle: tokio::runtime::Handle,
        repetition: i64,
        start: Positions,
        deterministic: Option<(crate::Deterministic, crate::deterministic::LaneStart)>,
    ) -> Result<Iteration> {
        let inner = &self.inner;
        let params = IterationParams {
            dataset_id: inner.dataset_id.clone(),
            mode: inner.mode,
            job_name: inner.options.job_name.clone(),
            target_workers: inner.options.target_workers,
            consumer_index: inner.options.consumer_index,
            num_consumers: inner.options.num_consumers,
            trainer_id: inner.options.trainer_id.clone(),
            cardinality: inner.metadata.cardinality,
            repetition,
            max_outstanding_requests: inner
                .options
                .max_outstanding_requests
                .unwrap_or(DEFAULT_MAX_OUTSTANDING_REQUESTS),
            task_refresh_interval: inner.options.task_refresh_interval,
            dispatcher_timeout: inner.options.dispatcher_timeout,
            compression: stream_compression(inner.metadata.compression),
            stream_window: inner.options.stream_window,
            security: inner.security.clone(),
            start,
            deterministic,
            autocache: inner.options.autocache,
        };
        iteration::start(inner.dispatcher.clone(), params, handle).await
    }
}

/// Blocking iterator over a distributed dataset's elements. Dropping it
/// releases the iteration at the dispatcher.
pub struct ElementIterator {
    iteration: Iteration,
    handle: tokio::runtime::Handle,
    /// What a restore starts again from.
    dataset: DistributedDataset,
    repetition: i64,
}

impl ElementIterator {
    /// Where this reader is, as opaque bytes to store with the trainer's
    /// checkpoint: restoring them into a fresh iterator of the same
    /// dataset continues after the last element taken from this one (see
    /// [`crate::checkpoint`] for what is covered). A read that is not
    /// covered fails here, saying why, instead of resuming wrongly.
    pub fn checkpoint(&self) -> Result<Vec<u8>> {
        runtime::block_on("ElementIterator::checkpoint", async {
            let bytes = self.iteration.checkpoint(self.dataset.identity().await?)?;
            // Only a checkpoint that exists counts its reader in.
            self.iteration.register_checkpoints().await?;
            Ok(bytes)
        })?
    }

    /// Continues the epoch from `checkpoint` (bytes from
    /// [`checkpoint`](Self::checkpoint), in this process or another) before
    /// the first element is taken, like TensorFlow's iterator restore. The
    /// read this iterator began is released and a new one starts at the
    /// checkpoint's position on every worker.
    pub fn restore(&mut self, checkpoint: &[u8]) -> Result<()> {
        let restored = self.dataset.restored(
            &self.iteration,
            self.repetition,
            checkpoint,
            self.handle.clone(),
        );
        let iteration = runtime::block_on("ElementIterator::restore", restored)??;
        // The read begun by `iter()` is released as it is dropped here.
        self.iteration = iteration;
        Ok(())
    }

    /// The next element if one has already arrived; `Pending` otherwise.
    pub fn try_next(&mut self) -> std::task::Poll<Option<Result<Element>>> {
        self.try_next_received().map(into_elements)
    }

    /// [`try_next`](Self::try_next), the element as received: its buffers
    /// provably its own (a writable view of them is sound).
    pub fn try_next_received(&mut self) -> std::task::Poll<Option<Result<ReceivedElement>>> {
        self.iteration.try_next()
    }

    /// The next element, waiting at most `timeout` for it: `Pending` if
    /// none arrived in time. Lets a caller that must stay responsive (to
    /// Ctrl-C in Python, say) wait in slices.
    pub fn next_timeout(&mut self, timeout: Duration) -> std::task::Poll<Option<Result<Element>>> {
        self.next_timeout_received(timeout).map(into_elements)
    }

    /// [`next_timeout`](Self::next_timeout), the element as received.
    pub fn next_timeout_received(
        &mut self,
        timeout: Duration,
    ) -> std::task::Poll<Option<Result<ReceivedElement>>> {
        self.iteration.next_within(&self.handle, timeout)
    }
}

/// A received element as one to share like any other.
fn into_elements(next: Option<Result<ReceivedElement>>) -> Option<Result<Element>> {
    next.map(|r| r.map(ReceivedElement::into_element))
}

impl Iterator for ElementIterator {
    type Item = Result<Element>;
    fn next(&mut self) -> Option<Result<Element>> {
        into_elements(self.iteration.next_blocking())
    }
}

/// Async stream of a distributed dataset's elements. Dropping it releases the
/// iteration at the dispatcher.
pub struct ElementStream {
    iteration: Iteration,
    dataset: DistributedDataset,
    repetition: i64,
}

impl ElementStream {
    /// Ends the read and releases the reader at the dispatcher before
    /// returning (waiting at most 5 s). Dropping the stream releases it too,
    /// but in the background: a process that exits right after would leave
    /// its reader to the dispatcher's client_timeout, and the scaling
    /// controller would count it as reading until then.
    pub async fn close(self) {
        self.iteration.close(Duration::from_secs(5)).await;
    }

    /// [`ElementIterator::checkpoint`] for async code.
    pub async fn checkpoint(&self) -> Result<Vec<u8>> {
        let bytes = self.iteration.checkpoint(self.dataset.identity().await?)?;
        self.iteration.register_checkpoints().await?;
        Ok(bytes)
    }

    /// [`ElementIterator::restore`] for async code; the new read is driven
    /// on the current runtime.
    pub async fn restore(&mut self, checkpoint: &[u8]) -> Result<()> {
        let handle = tokio::runtime::Handle::current();
        self.iteration = self
            .dataset
            .restored(&self.iteration, self.repetition, checkpoint, handle)
            .await?;
        Ok(())
    }
}

impl futures::Stream for ElementStream {
    type Item = Result<Element>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Element>>> {
        self.iteration.poll_next(cx).map(into_elements)
    }
}
