//! Autocache profiling on the worker (issue 36; docs/operations.md,
//! "Autocache"): a task the dispatcher asked to profile
//! (`TaskDef.tfdata_autocache_profile`) measures its pipeline at each
//! candidate point before it starts (`tfdata_dataset::autocache::profile`,
//! bounded per point), and every heartbeat carries the result while the
//! task lives (`WorkerHeartbeatRequest.tfdata_autocache_profiles`): the
//! dispatcher keeps the first it receives, so a lost heartbeat costs
//! nothing.

use std::collections::HashMap;
use std::sync::Mutex;

use tfdata_core::{Error, Result, TaskId};
use tfdata_dataset::autocache;
use tfdata_proto::data as wire;
use tfdata_proto::tfdata::pipeline::{OpDef, PipelineDef};

/// The profiles of this worker's tasks, sent with heartbeats.
#[derive(Default)]
pub(crate) struct Profiles {
    by_task: Mutex<HashMap<TaskId, wire::TfdataAutocacheProfile>>,
}

impl Profiles {
    pub fn insert(&self, profile: wire::TfdataAutocacheProfile) {
        self.lock().insert(TaskId(profile.task_id), profile);
    }

    /// The profiles of `running` tasks; the others are forgotten (their
    /// task ended: the dispatcher had every heartbeat since to read them).
    pub fn for_heartbeat(&self, running: &[i64]) -> Vec<wire::TfdataAutocacheProfile> {
        let mut by_task = self.lock();
        by_task.retain(|id, _| running.contains(&id.0));
        let mut profiles: Vec<_> = by_task.values().cloned().collect();
        profiles.sort_by_key(|p| p.task_id);
        profiles
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, wire::TfdataAutocacheProfile>> {
        self.by_task
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Profiles `task`'s pipeline (`dataset_def`) at every candidate point,
/// with scratch chunks under `task.tfdata_autocache_dir`. Blocking (it
/// runs the pipeline's prefixes and writes and reads files): call it off
/// the async threads. A failure is the profile's `error`: the task then
/// runs normally and the dispatcher shows why nothing was cached.
pub(crate) fn profile_task(
    task: &wire::TaskDef,
    dataset_def: &wire::DatasetDef,
) -> wire::TfdataAutocacheProfile {
    let mut profile = wire::TfdataAutocacheProfile {
        task_id: task.task_id,
        dataset_id: task.dataset_id.clone(),
        ..Default::default()
    };
    match measure(dataset_def, &task.tfdata_autocache_dir) {
        Ok(points) => profile.points = points,
        Err(e) => profile.error = e.to_string(),
    }
    profile
}

fn measure(dataset_def: &wire::DatasetDef, dir: &str) -> Result<Vec<wire::TfdataAutocachePoint>> {
    if dir.is_empty() {
        return Err(Error::InvalidArgument(
            "the dispatcher asked for an autocache profile without a scratch directory".into(),
        ));
    }
    let fs: autocache::Resolver<'_> = &tfdata_dataset::io::file_system;
    let limits = autocache::ProfileLimits::default();
    let costs = match &dataset_def.tfdata_pipeline {
        Some(pipeline) => {
            let analysis = autocache::analyse(pipeline);
            let build = |op: &OpDef| {
                tfdata_dataset::pipeline::from_pipeline_def(&PipelineDef {
                    root: Some(op.clone()),
                    ..pipeline.clone()
                })
            };
            autocache::profile(pipeline, &analysis, &build, dir, fs, &limits)?
        }
        // A TensorFlow graph: the same analysis the dispatcher planned
        // with, each candidate's prefix graph built by the translator.
        None => {
            let graph = tfdata_graph::decode_graph(&dataset_def.graph)?;
            let analysis = tfdata_graph::autocache::analyse(&graph)?;
            let points: Vec<(usize, &str)> = analysis
                .candidates
                .iter()
                .map(|c| (c.index, c.label.as_str()))
                .collect();
            let build = |index: usize| {
                let candidate = analysis.candidates.get(index).ok_or_else(|| {
                    Error::Internal(format!("autocache: no graph candidate {index}"))
                })?;
                Ok(tfdata_graph::translate(&candidate.prefix)?.dataset)
            };
            autocache::profile_points(&points, &build, dir, fs, &limits)?
        }
    };
    Ok(costs
        .into_iter()
        .map(|c| wire::TfdataAutocachePoint {
            point: u32::try_from(c.point).unwrap_or(u32::MAX),
            compute_seconds_per_element: c.compute_seconds_per_element,
            read_seconds_per_element: c.read_seconds_per_element,
            bytes_per_element: c.bytes_per_element,
            elements: c.elements,
        })
        .collect())
}
