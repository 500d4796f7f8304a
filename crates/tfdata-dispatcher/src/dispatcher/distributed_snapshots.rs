//! `distributed_save` (spec §8.1): the `Snapshot`, `GetSnapshotSplit` and
//! `GetSnapshotStreams` RPCs, the snapshot part of worker heartbeats, and
//! recovering journaled snapshots at start. The bookkeeping itself is
//! [`crate::distributed_snapshot`]'s; this module runs its blocking file
//! I/O off the async threads and journals what the state machine keeps
//! (the paths).

use std::sync::Arc;

use tfdata_core::{Error, Result};
use tfdata_dataset::INFINITE_CARDINALITY;
use tfdata_dataset::io::registry;
use tfdata_proto::data::{self as wire, update::UpdateType};

use super::errors::task_failed;
use super::splits::split_providers_for;
use super::{Dispatcher, requests};
use crate::distributed_snapshot::manager::{Runners, SnapshotManager};
use crate::distributed_snapshot::{Snapshots, resume};

impl Dispatcher {
    /// `Snapshot`: starts writing `req.dataset` to `req.path`.
    pub(crate) async fn snapshot(&self, req: requests::Snapshot) -> Result<wire::SnapshotResponse> {
        if !self.config.fault_tolerant_mode {
            return Err(Error::InvalidArgument(
                "tf.data distributed snapshot requires running tf.data service in the fault \
                 tolerant mode. To enable the fault tolerant mode, set \
                 `DispatcherConfig.fault_tolerant_mode` to true and provide a valid \
                 `DispatcherConfig.work_dir`."
                    .into(),
            ));
        }
        self.start_snapshot(req).await?;
        Ok(wire::SnapshotResponse {})
    }

    /// Starts writing a snapshot: `Snapshot`'s work, and autocache's
    /// (whose caches need no fault-tolerant mode: they are found again by
    /// their files, not the journal).
    pub(super) async fn start_snapshot(&self, req: requests::Snapshot) -> Result<()> {
        // One start at a time, so a path is checked and claimed at once.
        let _starting = self.snapshot_starts.lock().await;
        let path = req.path().to_string();
        if self.snapshots.contains(&path) {
            return Err(Error::AlreadyExists(format!(
                "tf.data snapshot at {path} is already started or completed"
            )));
        }
        let manager = tokio::task::spawn_blocking(move || -> Result<SnapshotManager> {
            let req = req.wire();
            let def = req.dataset.clone().unwrap_or_default();
            refuse_infinite(&def)?;
            let providers = split_providers_for(&def)
                .map_err(|e| Error::InvalidArgument(format!("distributed_save: {e}")))?;
            let fs = registry::file_system(&req.path)?;
            Ok(SnapshotManager::start(fs, req, providers)?.with_runners(runners_of(&def)))
        })
        .await
        .map_err(|e| task_failed("starting a snapshot", e))??;
        self.snapshots.insert(manager);
        let mut txn = self.ledger.begin().await;
        txn.apply(UpdateType::Snapshot(wire::SnapshotUpdate {
            path: path.clone(),
        }))?;
        txn.commit().await?;
        // Every worker may write one of its streams: held heartbeats are
        // answered now, not at the workers' next heartbeat.
        self.ledger.news.tell_everyone();
        tracing::info!(snapshot = %path, "started writing tf.data distributed snapshot");
        Ok(())
    }

    /// `GetSnapshotSplit`: the next split for one stream's source, written
    /// to the stream's directory before it is returned.
    pub(crate) async fn get_snapshot_split(
        &self,
        req: requests::GetSnapshotSplit,
    ) -> Result<wire::GetSnapshotSplitResponse> {
        let manager = self.snapshot_manager(&req.wire().base_path)?;
        tokio::task::spawn_blocking(move || manager.get_snapshot_split(req.wire()))
            .await
            .map_err(|e| task_failed("GetSnapshotSplit", e))?
    }

    /// `GetSnapshotStreams`: each stream's state.
    pub(crate) async fn get_snapshot_streams(
        &self,
        req: requests::GetSnapshotStreams,
    ) -> Result<wire::GetSnapshotStreamsResponse> {
        let manager = self.snapshot_manager(&req.path)?;
        Ok(wire::GetSnapshotStreamsResponse {
            streams: manager.progress().streams,
        })
    }

    fn snapshot_manager(&self, path: &str) -> Result<Arc<SnapshotManager>> {
        self.snapshots.get(path).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the dispatcher does not know of a snapshot at {path}"
            ))
        })
    }

    /// The snapshot streams a heartbeating worker should write. A snapshot
    /// whose files cannot be written is left out of this answer (its
    /// worker asks again with the next heartbeat); the others still are.
    pub(super) async fn snapshot_tasks(
        &self,
        req: &wire::WorkerHeartbeatRequest,
    ) -> Result<Vec<wire::SnapshotTaskDef>> {
        let parts = self.snapshots.worker_heartbeat(req)?;
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        if parts.iter().any(|p| p.stream_done) {
            self.ledger.news.tell(&req.worker_address);
        }
        if parts.iter().any(|p| p.finished) {
            self.ledger.news.tell_everyone();
        }
        tokio::task::spawn_blocking(move || {
            let mut tasks = Vec::new();
            for part in parts {
                if !part.io.is_empty()
                    && let Err(e) = part.manager.run_io(&part.io)
                {
                    tracing::error!(snapshot = %part.manager.path(), error = %e, "writing a snapshot's files failed");
                    continue;
                }
                tasks.extend(part.task);
            }
            tasks
        })
        .await
        .map_err(|e| task_failed("snapshot heartbeat", e))
    }

    /// Retries the `DONE`/`ERROR` files finished snapshots could not write
    /// (a store outage when they finished), off the async threads.
    pub async fn retry_snapshot_final_files(&self) -> Result<()> {
        let pending = self.snapshots.with_final_file_pending();
        if pending.is_empty() {
            return Ok(());
        }
        tokio::task::spawn_blocking(move || {
            for manager in pending {
                match manager.retry_final_file() {
                    None => {}
                    Some(Ok(())) => tracing::info!(
                        snapshot = %manager.path(),
                        state = manager.mode().describe(),
                        "wrote the snapshot's final file after an earlier failure"
                    ),
                    Some(Err(e)) => tracing::warn!(
                        snapshot = %manager.path(),
                        error = %e,
                        "still cannot write the snapshot's DONE or ERROR file; will retry"
                    ),
                }
            }
        })
        .await
        .map_err(|e| task_failed("retrying snapshot files", e))
    }

    /// The dispatcher lost a worker: its snapshot streams wait for another.
    pub(super) fn snapshot_worker_lost(&self, worker: &str, runs_pipelines: bool) {
        self.snapshots.worker_lost(worker, runs_pipelines);
        // Its streams wait for another worker to adopt them.
        self.ledger.news.tell_everyone();
    }

    pub fn distributed_snapshots(&self) -> &Snapshots {
        &self.snapshots
    }
}

/// The workers that can run `def`: a tfdata pipeline only ours, a graph
/// TensorFlow's, and ours if they support all its ops.
fn runners_of(def: &wire::DatasetDef) -> Runners {
    match &def.tfdata_pipeline {
        Some(_) => Runners {
            tfdata: true,
            tensorflow: false,
        },
        None => {
            let support = super::datasets::graph_support(&def.graph);
            Runners {
                tfdata: support.unsupported_ops.is_empty(),
                tensorflow: !support.tensorflow_cannot_run,
            }
        }
    }
}

/// TensorFlow's `DistributedSave` op refuses infinite datasets before it
/// calls `Snapshot`; tfdata checks again here for its own pipelines, whose
/// cardinality is known without running them.
fn refuse_infinite(def: &wire::DatasetDef) -> Result<()> {
    let Some(pipeline) = &def.tfdata_pipeline else {
        return Ok(());
    };
    let dataset = tfdata_dataset::pipeline::from_pipeline_def(pipeline)?;
    if dataset.cardinality() == INFINITE_CARDINALITY {
        return Err(Error::InvalidArgument(format!(
            "Saving an infinite dataset is not allowed: {}",
            dataset.op().name()
        )));
    }
    Ok(())
}

/// Recovers every journaled snapshot from its files (blocking). A snapshot
/// that does not recover is kept failed in memory, with the cause, so the
/// dispatcher still starts and serves everything else; the next start
/// tries it again (its files are left as they are).
pub(super) fn resume_snapshots(paths: impl IntoIterator<Item = String>, snapshots: &Snapshots) {
    for path in paths {
        let manager = registry::file_system(&path).and_then(|fs| {
            resume::resume(&path, Arc::clone(&fs), snapshots.assignments(), |def| {
                Ok((split_providers_for(def)?, runners_of(def)))
            })
        });
        match manager {
            Ok(manager) => snapshots.insert(manager),
            Err(e) => {
                tracing::error!(snapshot = %path, error = %e, "a distributed snapshot does not recover");
                snapshots.insert(SnapshotManager::failed(
                    path.clone(),
                    tfdata_proto::tensorflow::StatusProto {
                        code: e.code() as i32,
                        message: e.to_string(),
                        ..Default::default()
                    },
                ));
            }
        }
    }
}
