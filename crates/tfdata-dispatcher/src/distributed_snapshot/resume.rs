//! Recovering a snapshot after a dispatcher restart from the files under its
//! path, as TensorFlow's `SnapshotManager::Resume` does: `DONE` and `ERROR`
//! settle it; otherwise each stream's `owner_worker` file gives its writer,
//! its split files how many splits each source gave it (the providers are
//! fast-forwarded past all of them), and its `DONE` file whether it is
//! finished. Global split indices must be unique and dense: a gap or a
//! duplicate means splits were lost or handed out twice.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use prost::Message;
use tfdata_core::{Error, Result};
use tfdata_dataset::io::fs::FileSystem;
use tfdata_dataset::snapshot::{files, layout, metadata};
use tfdata_dataset::splits::SplitProvider;
use tfdata_proto::data::{DatasetDef, DistributedSnapshotMetadata};

use super::assignments::Assignments;
use super::manager::{Inner, Mode, Runners, SnapshotManager, Stream, sources_of};

/// Streams one snapshot may have (one per worker that ever wrote it).
pub const MAX_STREAMS: usize = 1 << 16;
/// Split files one snapshot may list on recovery.
pub const MAX_SPLIT_FILES: usize = 1 << 26;

/// Recovers the snapshot at `path`. `providers` builds a dataset's split
/// providers. Blocking I/O.
pub fn resume(
    path: &str,
    fs: Arc<dyn FileSystem>,
    assignments: &Mutex<Assignments>,
    providers: impl FnOnce(&DatasetDef) -> Result<(Vec<Box<dyn SplitProvider>>, Runners)>,
) -> Result<SnapshotManager> {
    let restore_error = |reason: String| {
        Error::Internal(format!(
            "Failed to recover tf.data snapshot at {path}: {reason}"
        ))
    };
    let finished = |mode: Mode, metadata: DistributedSnapshotMetadata| {
        SnapshotManager::new(
            path.to_string(),
            Arc::clone(&fs),
            Inner {
                mode,
                metadata,
                streams: BTreeMap::new(),
                assignments: HashMap::new(),
                orphans: BTreeSet::new(),
                sources: Vec::new(),
                num_assigned_splits: 0,
                num_total_splits: 0,
                final_file_pending: false,
            },
        )
    };
    if fs.exists(&layout::done_file(path))? {
        tracing::info!(snapshot = %path, "recovered finished tf.data snapshot");
        return Ok(finished(
            Mode::Done,
            read_metadata(fs.as_ref(), path).unwrap_or_default(),
        ));
    }
    let error_file = layout::error_file(path);
    if fs.exists(&error_file)? {
        let status = metadata::status_from_text(&error_file, &fs.read_all(&error_file)?)?;
        return Ok(finished(
            Mode::Error(status),
            read_metadata(fs.as_ref(), path).unwrap_or_default(),
        ));
    }
    if !fs.exists(path)? {
        return Err(restore_error("the snapshot path doesn't exist.".into()));
    }
    let meta = read_metadata(fs.as_ref(), path)?;
    let def_file = layout::dataset_def_file(path);
    if !fs.exists(&def_file)? {
        return Err(restore_error("snapshot has no dataset_def.proto".into()));
    }
    let def = DatasetDef::decode(fs.read_all(&def_file)?).map_err(|e| Error::DataLoss {
        location: def_file.clone(),
        reason: format!("not a DatasetDef: {e}"),
    })?;
    let (providers, runners) = providers(&def)?;
    let mut sources = sources_of(providers)?;
    let num_sources = sources.len();

    // Streams: those whose owner file exists (a dispatcher killed between
    // creating a stream's directory and writing its owner never answered
    // with that stream, so nobody writes it).
    let owners = fs.glob(&layout::join(
        &layout::streams_dir(path),
        "stream_*/owner_worker",
    ))?;
    if owners.len() > MAX_STREAMS {
        return Err(restore_error(format!(
            "{} streams is more than {MAX_STREAMS}",
            owners.len()
        )));
    }
    let mut streams = BTreeMap::new();
    let mut assigned = HashMap::new();
    let mut global_indices = BTreeSet::new();
    for owner_file in &owners {
        let dir_name = owner_file
            .rsplit('/')
            .nth(1)
            .ok_or_else(|| restore_error(format!("unexpected owner file {owner_file}")))?;
        let stream = layout::parse_indexed_dir(dir_name, "stream").map_err(|e| {
            restore_error(format!("can't parse stream directory of {owner_file}: {e}"))
        })?;
        let owner =
            String::from_utf8(fs.read_all(owner_file)?.to_vec()).map_err(|_| Error::DataLoss {
                location: owner_file.clone(),
                reason: "the owner worker's address is not UTF-8".into(),
            })?;
        let mut per_source = vec![0i64; num_sources];
        let split_files = fs.glob(&layout::join(
            &layout::splits_dir(path, stream),
            "source_*/repetition_*/split_*",
        ))?;
        if global_indices.len() + split_files.len() > MAX_SPLIT_FILES {
            return Err(restore_error(format!(
                "more than {MAX_SPLIT_FILES} split files"
            )));
        }
        for split_file in &split_files {
            let mut parts = split_file.rsplit('/');
            let (Some(name), Some(_repetition), Some(source_dir)) =
                (parts.next(), parts.next(), parts.next())
            else {
                return Err(restore_error(format!("unexpected split file {split_file}")));
            };
            if name.ends_with(layout::TEMP_SUFFIX) {
                continue;
            }
            let source = layout::parse_indexed_dir(source_dir, "source")
                .map_err(|e| restore_error(e.to_string()))?;
            let Some(count) = usize::try_from(source)
                .ok()
                .and_then(|s| per_source.get_mut(s))
            else {
                return Err(restore_error(format!(
                    "found conflict between the number of sources, {num_sources}, and the \
                     filename of {split_file}"
                )));
            };
            let indices =
                layout::parse_split_name(name).map_err(|e| restore_error(e.to_string()))?;
            if !global_indices.insert(indices.global) {
                return Err(restore_error(format!(
                    "found duplicate global split index in split {split_file}."
                )));
            }
            *count += 1;
        }
        let done = fs.exists(&layout::stream_done_file(path, stream))?;
        if !done {
            if !lock(assignments).try_add(path, &owner, stream)? {
                return Err(restore_error(format!(
                    "worker {owner} was assigned too many streams. At most {} streams are allowed.",
                    lock(assignments).max_per_worker()
                )));
            }
            if let Some(other) = assigned.insert(owner.clone(), stream) {
                return Err(restore_error(format!(
                    "worker {owner} owns streams {other} and {stream}"
                )));
            }
        }
        streams.insert(
            stream,
            Stream {
                done,
                assigned_per_source: per_source,
                owner_runs_pipelines: None,
                initialized: true,
            },
        );
    }
    // Fast-forward each source past every split any stream was given.
    for (s, source) in sources.iter_mut().enumerate() {
        let taken: i64 = streams.values().map(|st| st.assigned_per_source[s]).sum();
        for _ in 0..taken {
            if source.provider.get_next()?.is_none() {
                source.provider.reset()?;
                source.repetition += 1;
                if source.provider.get_next()?.is_none() {
                    // An empty source: nothing was really taken from it.
                    break;
                }
            }
        }
    }
    let num_assigned = global_indices.len() as i64;
    if let Some(gap) = (0..num_assigned).find(|i| !global_indices.contains(i)) {
        return Err(restore_error(format!(
            "Found missing global split index {gap}."
        )));
    }
    let num_total_splits = sources.iter().map(|s| s.cardinality).sum();
    let all_done = !streams.is_empty() && streams.values().all(|s| s.done);
    let manager = SnapshotManager::new(
        path.to_string(),
        Arc::clone(&fs),
        Inner {
            mode: if all_done { Mode::Done } else { Mode::Active },
            metadata: meta,
            streams,
            assignments: assigned,
            orphans: BTreeSet::new(),
            sources,
            num_assigned_splits: num_assigned,
            num_total_splits,
            // Written below, before the manager is returned.
            final_file_pending: false,
        },
    )
    .with_runners(runners);
    if all_done {
        files::write_atomically(fs.as_ref(), &layout::done_file(path), b"")?;
        tracing::info!(snapshot = %path, "finished writing tf.data distributed snapshot");
    } else {
        tracing::info!(snapshot = %path, splits = num_assigned, "resumed writing tf.data distributed snapshot");
    }
    Ok(manager)
}

fn read_metadata(fs: &dyn FileSystem, path: &str) -> Result<DistributedSnapshotMetadata> {
    let file = layout::metadata_file(path);
    if !fs.exists(&file)? {
        return Err(Error::Internal(format!(
            "Failed to recover snapshot at {path}: snapshot has no snapshot.metadata"
        )));
    }
    metadata::from_text(&file, &fs.read_all(&file)?)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
