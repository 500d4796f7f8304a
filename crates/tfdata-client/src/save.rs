//! `distributed_save(dataset, path, service, compression)`: asks the
//! dispatcher to write `dataset` to `path` as a distributed snapshot in
//! TensorFlow's format (spec §3.4, §8), and ways to watch it:
//! [`snapshot_progress`] (streams from the dispatcher, committed chunks from
//! the files) and [`wait_for_snapshot`].

use std::time::{Duration, Instant};

use tfdata_core::{Error, Result};
use tfdata_dataset::snapshot::{layout, layout::SnapshotCompression, metadata};
use tfdata_dataset::{Dataset, INFINITE_CARDINALITY};
use tfdata_proto::data::{self as wire, snapshot_stream_info::State as StreamState};
use tfdata_rpc::retry::retry;
use tokio_util::sync::CancellationToken;

use crate::dispatcher::DispatcherClient;
use crate::runtime;

/// How long `distributed_save` retries an unreachable dispatcher
/// (TensorFlow's op retries `Snapshot` for up to an hour).
pub const SAVE_RETRY_DEADLINE: Duration = Duration::from_secs(3600);
/// How often [`wait_for_snapshot`] looks at the snapshot's files.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Starts writing `dataset` to `path`; returns once the dispatcher has
/// accepted it (the workers write it afterwards). `compression` is
/// `distributed_save`'s: `"AUTO"` (Snappy), `"SNAPPY"`, `"GZIP"`, `"ZLIB"`,
/// or `None` for none.
pub fn distributed_save(
    dataset: &Dataset,
    path: &str,
    service: &str,
    compression: Option<&str>,
) -> Result<()> {
    runtime::block_on(
        "distributed_save",
        distributed_save_async(dataset, path, service, compression),
    )?
}

pub async fn distributed_save_async(
    dataset: &Dataset,
    path: &str,
    service: &str,
    compression: Option<&str>,
) -> Result<()> {
    if path.is_empty() {
        return Err(Error::InvalidArgument(
            "distributed_save: path is empty".into(),
        ));
    }
    if dataset.cardinality() == INFINITE_CARDINALITY {
        return Err(Error::InvalidArgument(format!(
            "Saving an infinite dataset is not allowed: {}",
            dataset.op().name()
        )));
    }
    let compression = SnapshotCompression::from_user(compression)?;
    let element_spec = dataset
        .element_spec()?
        .map(|s| {
            prost::Message::encode_to_vec(&tfdata_dataset::spec_coder::to_structured_value(&s))
        })
        .unwrap_or_default();
    let request = wire::SnapshotRequest {
        dataset: Some(wire::DatasetDef {
            graph: Default::default(),
            tfdata_pipeline: Some(tfdata_dataset::pipeline::to_pipeline_def(dataset, false)?),
        }),
        path: path.to_string(),
        metadata: Some(wire::DistributedSnapshotMetadata {
            element_spec: element_spec.into(),
            compression: compression.as_str().into(),
        }),
    };
    let (_protocol, address) = tfdata_rpc::channel::parse_service(service)?;
    let dispatcher = DispatcherClient::new(&address)?;
    retry(
        &dispatcher.target(),
        Some(SAVE_RETRY_DEADLINE),
        &CancellationToken::new(),
        || dispatcher.snapshot(request.clone()),
    )
    .await?;
    Ok(())
}

/// Where a snapshot is.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SnapshotProgress {
    /// `DONE` is written: the chunks are final.
    pub done: bool,
    /// The contents of `ERROR`, if the snapshot failed.
    pub error: Option<String>,
    /// Streams as the dispatcher reports them: (index, done).
    pub streams: Vec<(i64, bool)>,
    /// Committed chunks, their elements and bytes.
    pub chunks: u64,
    pub elements: u64,
    pub bytes: u64,
}

/// The progress of the snapshot at `path`: streams from the dispatcher at
/// `service` (if given), everything else from the files.
pub async fn snapshot_progress(path: &str, service: Option<&str>) -> Result<SnapshotProgress> {
    let mut progress = {
        let path = path.to_string();
        tokio::task::spawn_blocking(move || files_progress(&path))
            .await
            .map_err(|e| Error::Internal(format!("reading a snapshot's progress: {e}")))??
    };
    if let Some(service) = service {
        let (_protocol, address) = tfdata_rpc::channel::parse_service(service)?;
        let streams = DispatcherClient::new(&address)?
            .get_snapshot_streams(wire::GetSnapshotStreamsRequest {
                path: path.to_string(),
            })
            .await?;
        progress.streams = streams
            .streams
            .iter()
            .map(|s| (s.index, s.state == StreamState::Done as i32))
            .collect();
    }
    Ok(progress)
}

fn files_progress(path: &str) -> Result<SnapshotProgress> {
    let fs = tfdata_dataset::io::registry::file_system(path)?;
    let mut progress = SnapshotProgress {
        done: fs.exists(&layout::done_file(path))?,
        ..Default::default()
    };
    let error_file = layout::error_file(path);
    if fs.exists(&error_file)? {
        let status = metadata::status_from_text(&error_file, &fs.read_all(&error_file)?)?;
        progress.error = Some(status.message);
    }
    let chunks = layout::chunks_dir(path);
    for name in fs.list(&chunks)? {
        if name.ends_with(layout::TEMP_SUFFIX) {
            continue;
        }
        let chunk = layout::parse_chunk_name(&name)?;
        progress.chunks += 1;
        progress.elements += chunk.num_elements.max(0) as u64;
        progress.bytes += fs.file_size(&layout::join(&chunks, &name))?;
    }
    Ok(progress)
}

/// Waits until the snapshot at `path` is `DONE` (its progress) or `ERROR`
/// (the error, with its message), for at most `timeout`.
pub fn wait_for_snapshot(path: &str, timeout: Duration) -> Result<SnapshotProgress> {
    let deadline = Instant::now() + timeout;
    loop {
        let progress = files_progress(path)?;
        if let Some(error) = &progress.error {
            return Err(Error::Internal(format!(
                "the snapshot at {path} failed: {error}"
            )));
        }
        if progress.done {
            return Ok(progress);
        }
        if Instant::now() >= deadline {
            return Err(Error::Unavailable(format!(
                "the snapshot at {path} is not done after {timeout:?}"
            )));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}
