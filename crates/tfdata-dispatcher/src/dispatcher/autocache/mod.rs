//! Autocache in the dispatcher (issue 36; docs/operations.md,
//! "Autocache"). The analysis, fingerprints, rewrite and choice are the
//! engine's (`tfdata_dataset::autocache`); this module decides when they
//! run and acts on them:
//!
//! * at job creation ([`Dispatcher::autocache_job`]): the dataset's
//!   pipeline analysed, each candidate's fingerprint taken (file metadata:
//!   off the lock and the async threads), caches whose files changed
//!   dropped; a complete cache of a candidate (deepest first) makes the job
//!   read it: the rewritten pipeline registered as a dataset like any other
//!   and the job created on it. Otherwise the job's first task is asked to
//!   profile ([`Dispatcher::autocache_profiles_task`]);
//! * at a heartbeat carrying that profile ([`Dispatcher::autocache_profiles`]):
//!   the first profile decides (`choose`), and a chosen point's cache is
//!   written by the existing distributed snapshot writer at once, while
//!   the epoch runs;
//! * [`book`]: what it knows per dataset, for the status page and metrics.
//!
//! Nothing here is journaled beyond what `distributed_save` journals: a
//! restarted dispatcher finds complete caches by their `DONE` files.

mod book;
mod survey;

use tfdata_core::{DatasetId, Error, JobId, Result, TaskId};
use tfdata_dataset::autocache::{self, Choice, PointCost};
use tfdata_dataset::io::registry;
use tfdata_proto::data as wire;

pub(crate) use book::{Book, CacheState};
use book::{Figures, Plan, PlannedPoint};
use survey::{Survey, survey};

use super::Dispatcher;
use super::errors::task_failed;
use super::requests::GetOrRegisterDataset;
use crate::state::DispatcherState;

/// Why a deterministic read is never autocached.
const DETERMINISTIC_REFUSAL: &str = "deterministic reads (issue 35) are never autocached: their \
     order is the contract, and a cache written by several workers keeps the elements, not \
     their order";

/// Why a TensorFlow graph that tfdata workers cannot run is never
/// autocached: TensorFlow's workers serve it, and they cannot read caches.
const GRAPH_ON_TENSORFLOW_WORKERS: &str = "the TensorFlow graph uses ops tfdata workers cannot \
     run, so TensorFlow workers serve it, and they cannot read tfdata's caches";

/// Why a TensorFlow graph is not autocached while TensorFlow workers are
/// registered: the graph reading a cache uses tfdata's private op
/// (`TfdataAutocacheLoadDataset`), and a TensorFlow worker given one of its
/// tasks could not run it.
const GRAPH_WITH_TENSORFLOW_WORKERS: &str = "TensorFlow workers are registered, and a \
     TensorFlow graph reading a cache uses tfdata's private load op, which they cannot run";

/// What autocache makes of a new job.
#[derive(Default)]
pub(super) struct AutocacheJob {
    /// The dataset the job reads instead of the one asked for: the
    /// pipeline rewritten to read a complete cache.
    pub serve: Option<DatasetId>,
    /// The job's first task profiles the pipeline against this plan.
    profile: Option<Plan>,
}

impl Dispatcher {
    /// Autocache's part in `GetOrCreateJob` for a new job over `dataset`
    /// in `mode` (see the module doc). Never fails the job: what goes
    /// wrong is logged and shown on the status page, and the job runs
    /// uncached.
    pub(super) async fn autocache_job(
        &self,
        dataset: &DatasetId,
        mode: &wire::ProcessingModeDef,
    ) -> AutocacheJob {
        if !(mode.tfdata_autocache || self.config.autocache) {
            return AutocacheJob::default();
        }
        let book = &self.autocache;
        // Writes that finished since anyone looked: what follows asks the
        // book whether a write is under way.
        self.autocache_refresh();
        if mode.tfdata_deterministic.is_some() {
            book.not_cached(dataset, DETERMINISTIC_REFUSAL.into());
            return AutocacheJob::default();
        }
        let Some(root) = self.config.autocache_root() else {
            book.not_cached(
                dataset,
                "no storage: the dispatcher has neither autocache_dir (--autocache-dir) nor \
                 work_dir (--work-dir) to keep caches in"
                    .into(),
            );
            return AutocacheJob::default();
        };
        match self
            .ledger
            .read(|g| {
                let tensorflow_workers = g.state.workers().iter().any(|w| !w.runs_pipelines);
                g.state
                    .dataset(dataset)
                    .map(|d| (d.is_pipeline, d.tfdata_runs_graph, tensorflow_workers))
            })
            .await
        {
            Ok(Some((true, _, _))) => {}
            Ok(Some((false, true, false))) => {}
            Ok(Some((false, false, _))) => {
                book.not_cached(dataset, GRAPH_ON_TENSORFLOW_WORKERS.into());
                return AutocacheJob::default();
            }
            Ok(Some((false, true, true))) => {
                book.not_cached(dataset, GRAPH_WITH_TENSORFLOW_WORKERS.into());
                return AutocacheJob::default();
            }
            // Unknown dataset or a failed journal: the job's own checks say so.
            _ => return AutocacheJob::default(),
        }
        let (store, id) = (self.store.clone(), dataset.clone());
        let surveyed = tokio::task::spawn_blocking(move || survey(&store, &id, &root))
            .await
            .map_err(|e| task_failed("autocache survey", e))
            .and_then(|r| r);
        let (plan, complete) = match surveyed {
            Err(e) => {
                tracing::warn!(dataset = %dataset, error = %e, "autocache could not examine the pipeline; the job runs uncached");
                book.not_cached(dataset, format!("examining the pipeline failed: {e}"));
                return AutocacheJob::default();
            }
            Ok(Survey::Refused(reason)) => {
                tracing::info!(dataset = %dataset, %reason, "autocache: nothing to cache");
                book.not_cached(dataset, reason);
                return AutocacheJob::default();
            }
            Ok(Survey::Planned {
                plan,
                dropped,
                complete,
            }) => {
                if !dropped.is_empty() {
                    tracing::info!(dataset = %dataset, dropped = ?dropped, "autocache dropped caches whose files changed");
                    book.dropped(dataset, &dropped);
                }
                (plan, complete)
            }
        };
        if let Some((point, rewritten)) = complete.map(|c| *c) {
            match self.register_cached(dataset, rewritten).await {
                Ok(served) => {
                    book.served(dataset, point.label(), &point.cache_path);
                    self.metrics().autocache_jobs_served.inc();
                    tracing::info!(dataset = %dataset, served = %served, point = point.label(), cache = %point.cache_path, "autocache: the job reads the cache");
                    return AutocacheJob {
                        serve: Some(served),
                        profile: None,
                    };
                }
                Err(e) => {
                    tracing::warn!(dataset = %dataset, error = %e, "autocache could not register the cached pipeline; the job runs uncached");
                }
            }
        }
        let wants = self
            .ledger
            .read(|g| book.wants_profile(dataset, &plan, |job| job_running(&g.state, job)))
            .await
            .unwrap_or(false);
        AutocacheJob {
            serve: None,
            profile: wants.then_some(plan),
        }
    }

    /// After the job is created: if it profiles, its first task will.
    pub(super) fn autocache_job_created(
        &self,
        dataset: &DatasetId,
        job: JobId,
        plan: AutocacheJob,
    ) {
        if let Some(plan) = plan.profile {
            tracing::info!(dataset = %dataset, job = %job, points = plan.points.len(), "autocache: the job's first task profiles the pipeline");
            self.autocache.profile_with(dataset, job, plan);
        }
    }

    /// The scratch directory `task` (of `job`) profiles in, if it is the
    /// task asked to (`TaskDef.tfdata_autocache_profile`).
    pub(super) fn autocache_profiles_task(&self, job: JobId, task: TaskId) -> Option<String> {
        if !self.autocache.profiles(job, task) {
            return None;
        }
        self.config.autocache_root()
    }

    /// Profiles from a worker's heartbeat: the first for a dataset
    /// decides, and a chosen point's cache starts being written at once.
    pub(super) async fn autocache_profiles(&self, profiles: &[wire::TfdataAutocacheProfile]) {
        for profile in profiles {
            let dataset = DatasetId(profile.dataset_id.clone());
            let Some(plan) = self.autocache.take_plan(&dataset) else {
                continue;
            };
            self.decide(&dataset, &plan, profile).await;
        }
    }

    async fn decide(
        &self,
        dataset: &DatasetId,
        plan: &Plan,
        profile: &wire::TfdataAutocacheProfile,
    ) {
        let book = &self.autocache;
        if !profile.error.is_empty() {
            tracing::warn!(dataset = %dataset, task = profile.task_id, error = %profile.error, "autocache profiling failed; nothing is cached");
            book.not_cached(
                dataset,
                plan.explain(&format!("profiling failed: {}", profile.error)),
            );
            return;
        }
        let costs: Vec<PointCost> = profile
            .points
            .iter()
            .map(|p| PointCost {
                point: p.point as usize,
                compute_seconds_per_element: p.compute_seconds_per_element,
                read_seconds_per_element: p.read_seconds_per_element,
                bytes_per_element: p.bytes_per_element,
                elements: p.elements,
            })
            .collect();
        let figures_of = |index: usize| {
            costs
                .iter()
                .find(|c| c.point == index)
                .map_or(Figures::default(), |c| Figures {
                    compute_seconds_per_element: c.compute_seconds_per_element,
                    read_seconds_per_element: c.read_seconds_per_element,
                    bytes_per_element: c.bytes_per_element,
                })
        };
        let in_memory: Vec<usize> = plan
            .points
            .iter()
            .filter(|p| p.candidate.in_memory)
            .map(|p| p.candidate.index)
            .collect();
        let index = match autocache::choose(&costs, &in_memory) {
            Choice::Cache { index } => index,
            Choice::None { reason } => {
                tracing::info!(dataset = %dataset, %reason, "autocache: no point worth caching");
                let best = costs.iter().max_by(|a, b| {
                    let saving =
                        |c: &PointCost| c.compute_seconds_per_element - c.read_seconds_per_element;
                    saving(a).total_cmp(&saving(b))
                });
                book.decided_against(
                    dataset,
                    plan.explain(&reason),
                    best.map_or(Figures::default(), |c| figures_of(c.point)),
                );
                return;
            }
        };
        let Some(point) = plan.points.iter().find(|p| p.candidate.index == index) else {
            book.not_cached(
                dataset,
                format!("the profile chose point {index}, which the analysis does not list"),
            );
            return;
        };
        let figures = figures_of(index);
        let why = plan.explain(&format!(
            "{} costs {:.3} ms per element to compute and {:.3} ms to read back ({:.0} bytes): \
             its cache is being written",
            point.label(),
            figures.compute_seconds_per_element * 1e3,
            figures.read_seconds_per_element * 1e3,
            figures.bytes_per_element
        ));
        if book.is_writing(&point.cache_path) {
            book.writing(dataset, point, figures, why);
            return;
        }
        match self.start_cache_write(point).await {
            Ok(()) => {
                tracing::info!(dataset = %dataset, point = point.label(), cache = %point.cache_path, "autocache: writing the cache");
                book.writing(dataset, point, figures, why);
            }
            Err(e) => {
                tracing::warn!(dataset = %dataset, point = point.label(), error = %e, "autocache could not start writing the cache");
                book.not_cached(
                    dataset,
                    format!(
                        "starting to write the cache of {} failed: {e}",
                        point.label()
                    ),
                );
            }
        }
    }

    /// Starts a distributed snapshot of `point`'s prefix at its cache path
    /// (the path of `distributed_save`, without its fault-tolerant-mode
    /// requirement: an unjournaled cache is found again by its files, and
    /// an incomplete one is written again).
    async fn start_cache_write(&self, point: &PlannedPoint) -> Result<()> {
        let prefix = point.candidate.prefix.clone();
        let path = point.cache_path.clone();
        let known = self.distributed_snapshots().contains(&path);
        let request = tokio::task::spawn_blocking(move || -> Result<wire::SnapshotRequest> {
            let fs = registry::file_system(&path)?;
            // An incomplete cache of an earlier life (not journaled, so no
            // snapshot resumes it): written again from the start.
            if !known && fs.exists(&path)? {
                autocache::drop_cache(&path, &registry::file_system)?;
            }
            let dataset = match &prefix.tfdata_pipeline {
                Some(pipeline) => tfdata_dataset::pipeline::from_pipeline_def(pipeline)?,
                // The translator compiles the graph (no element is made),
                // for the element spec the snapshot's metadata records.
                None => tfdata_graph::translate_bytes(&prefix.graph)?.dataset,
            };
            let element_spec = dataset
                .element_spec()?
                .map(|s| {
                    prost::Message::encode_to_vec(&tfdata_dataset::spec_coder::to_structured_value(
                        &s,
                    ))
                })
                .unwrap_or_default();
            Ok(wire::SnapshotRequest {
                dataset: Some(prefix),
                path,
                metadata: Some(wire::DistributedSnapshotMetadata {
                    element_spec: element_spec.into(),
                    compression: autocache::CACHE_COMPRESSION.as_str().into(),
                }),
            })
        })
        .await
        .map_err(|e| task_failed("preparing an autocache write", e))??;
        self.start_snapshot(request.try_into()?).await
    }

    /// Registers `rewritten` (the definition reading a cache) as a dataset,
    /// with `original`'s metadata, under an id derived from its bytes: the
    /// same rewrite is the same dataset, in this life and after a restart.
    async fn register_cached(
        &self,
        original: &DatasetId,
        rewritten: wire::DatasetDef,
    ) -> Result<DatasetId> {
        let metadata = self
            .ledger
            .read(|g| g.state.dataset(original).map(|d| d.metadata.clone()))
            .await?
            .ok_or_else(|| Error::not_found("dataset", &original.0))?;
        let bytes = prost::Message::encode_to_vec(&rewritten);
        let id = DatasetId(format!(
            "{}_autocache_{:016x}",
            original.0,
            tfdata_dataset::splits::lanes::fingerprint(&bytes)
        ));
        let response = self
            .get_or_register_dataset(GetOrRegisterDataset {
                def: rewritten,
                metadata,
                dataset_id: Some(id),
            })
            .await?;
        Ok(DatasetId(response.dataset_id))
    }

    /// Caches finished writing, their `DONE` or `ERROR` file written:
    /// `Cached`, or `NotCached` with the snapshot's error. Called before
    /// the status is shown.
    pub(super) fn autocache_refresh(&self) {
        for path in self.autocache.written_paths() {
            let Some(manager) = self.distributed_snapshots().get(&path) else {
                continue;
            };
            // The mode turns `Done` under the manager's lock; its `DONE`
            // file is written after, outside it. Until that file exists
            // the cache is not complete on disk: a reader (or a restarted
            // dispatcher) would not take it for one.
            if manager.final_file_pending() {
                continue;
            }
            match manager.mode() {
                crate::distributed_snapshot::manager::Mode::Done => {
                    self.autocache.write_finished(&path, Ok(()))
                }
                crate::distributed_snapshot::manager::Mode::Error(status) => {
                    self.autocache.write_finished(&path, Err(status.message))
                }
                _ => {}
            }
        }
    }
}

/// Whether `job` may still profile: it exists and has an iteration not
/// yet finished (or none yet).
fn job_running(state: &DispatcherState, job: JobId) -> bool {
    if state.job(job).is_none() {
        return false;
    }
    let mut iterations = state.iterations().filter(|it| it.job_id == job).peekable();
    iterations.peek().is_none() || iterations.any(|it| !it.finished && !it.garbage_collected)
}
