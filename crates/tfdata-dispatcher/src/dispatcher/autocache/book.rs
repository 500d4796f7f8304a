//! What autocache knows, per dataset (the dataset a job asked for): its
//! state, why, the point chosen and its figures, the jobs it served; which
//! job's first task profiles the dataset; which caches are being written.
//! Plain data behind one lock, never journaled: a restarted dispatcher
//! finds complete caches by their files (`DONE`), and profiles again
//! otherwise.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use tfdata_core::{DatasetId, JobId, TaskId};
use tfdata_proto::data as wire;

use crate::overview::AutocacheOverview;

/// Where a dataset stands. Each has its word on the status page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CacheState {
    /// A task measures the candidate points.
    Profiling,
    /// The chosen point's cache is being written (a distributed snapshot).
    Writing,
    /// A complete cache serves the dataset's jobs.
    Cached,
    /// Nothing is cached; `reason` says why.
    NotCached,
    /// A cache was dropped because the dataset's files changed.
    Dropped,
}

impl CacheState {
    pub const ALL: [CacheState; 5] = [
        CacheState::Profiling,
        CacheState::Writing,
        CacheState::Cached,
        CacheState::NotCached,
        CacheState::Dropped,
    ];

    /// The metric label: the name without spaces.
    pub fn label(self) -> &'static str {
        match self {
            CacheState::NotCached => "not_cached",
            other => other.name(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CacheState::Profiling => "profiling",
            CacheState::Writing => "writing",
            CacheState::Cached => "cached",
            CacheState::NotCached => "not cached",
            CacheState::Dropped => "dropped",
        }
    }
}

/// A candidate point of a dataset (a tfdata pipeline's or a TensorFlow
/// graph's: the analyses' `Candidate` and `GraphCandidate`), as deciding
/// and writing need it.
#[derive(Debug, Clone)]
pub(crate) struct PointCandidate {
    /// Position on the main chain from its bottom (0: the source).
    pub index: usize,
    /// `"2: map(resize)"`, for the status page.
    pub label: String,
    /// An in-memory source alone: profiled, never cached.
    pub in_memory: bool,
    /// The definition of the prefix (the pipeline or graph returning the
    /// point's output): what the cache's snapshot writer runs.
    pub prefix: wire::DatasetDef,
}

/// One candidate point of a dataset, with where its cache is
/// (`<root>/<prefix fp>/<files fp>`).
#[derive(Debug, Clone)]
pub(crate) struct PlannedPoint {
    pub candidate: PointCandidate,
    pub cache_path: String,
}

impl PlannedPoint {
    pub fn label(&self) -> &str {
        &self.candidate.label
    }
}

/// What deciding needs of a dataset's analysis: its candidate points
/// (those whose fingerprints could be taken).
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub points: Vec<PlannedPoint>,
    /// Why the points above the last candidate are not candidates (the
    /// analysis' sentence), told with every decision.
    pub stopped: Option<String>,
}

impl Plan {
    /// `reason`, and why later points were not considered.
    pub fn explain(&self, reason: &str) -> String {
        match &self.stopped {
            Some(stopped) => format!("{reason}; later points are not candidates: {stopped}"),
            None => reason.to_string(),
        }
    }
}

/// The figures a decision was made on.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Figures {
    pub compute_seconds_per_element: f64,
    pub read_seconds_per_element: f64,
    pub bytes_per_element: f64,
}

#[derive(Debug, Clone)]
struct Entry {
    state: CacheState,
    reason: String,
    point: String,
    path: String,
    figures: Figures,
    jobs_served: i64,
    /// Set while a profile is awaited; taken by the first profile.
    plan: Option<Arc<Plan>>,
    /// The job asked to profile, while the profile is awaited.
    profiler: Option<JobId>,
}

impl Entry {
    fn new(state: CacheState, reason: String) -> Self {
        Entry {
            state,
            reason,
            point: String::new(),
            path: String::new(),
            figures: Figures::default(),
            jobs_served: 0,
            plan: None,
            profiler: None,
        }
    }
}

#[derive(Default)]
struct Inner {
    entries: BTreeMap<DatasetId, Entry>,
    /// Jobs whose first task profiles: the dataset, and the task once one
    /// is chosen (the same task is asked again when its definition is sent
    /// again).
    profilers: HashMap<JobId, (DatasetId, Option<TaskId>)>,
    /// Caches being written, by path: a prefix is written once however
    /// many datasets share it.
    writing: HashSet<String>,
}

/// Autocache's book; see the module doc.
#[derive(Default)]
pub(crate) struct Book {
    inner: Mutex<Inner>,
}

impl Book {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `dataset` is not cached, and why (kept until something changes it).
    pub fn not_cached(&self, dataset: &DatasetId, reason: String) {
        let mut inner = self.lock();
        let entry = inner
            .entries
            .entry(dataset.clone())
            .or_insert_with(|| Entry::new(CacheState::NotCached, String::new()));
        let jobs_served = entry.jobs_served;
        *entry = Entry::new(CacheState::NotCached, reason);
        entry.jobs_served = jobs_served;
    }

    /// Caches of `dataset`'s prefixes were dropped (their files changed).
    pub fn dropped(&self, dataset: &DatasetId, paths: &[String]) {
        let mut inner = self.lock();
        for path in paths {
            inner.writing.remove(path);
        }
        let entry = inner
            .entries
            .entry(dataset.clone())
            .or_insert_with(|| Entry::new(CacheState::Dropped, String::new()));
        *entry = Entry::new(
            CacheState::Dropped,
            format!(
                "the dataset's files changed (size or modification time): dropped {}",
                paths.join(", ")
            ),
        );
    }

    /// A job over `dataset` reads the complete cache at `path`.
    pub fn served(&self, dataset: &DatasetId, point: &str, path: &str) {
        let mut inner = self.lock();
        let entry = inner
            .entries
            .entry(dataset.clone())
            .or_insert_with(|| Entry::new(CacheState::Cached, String::new()));
        if entry.state != CacheState::Cached || entry.path != path {
            entry.state = CacheState::Cached;
            entry.reason = format!("jobs read the cache of {point}");
            entry.point = point.to_string();
            entry.path = path.to_string();
        }
        entry.plan = None;
        entry.profiler = None;
        entry.jobs_served += 1;
    }

    /// Whether a new job over `dataset` should profile it: not while a
    /// profile is awaited from a job still running (`job_running`), nor a
    /// cache of one of `plan`'s points is being written, nor once a
    /// decision was made that nothing is worth caching.
    pub fn wants_profile(
        &self,
        dataset: &DatasetId,
        plan: &Plan,
        job_running: impl Fn(JobId) -> bool,
    ) -> bool {
        let inner = self.lock();
        if let Some(writing) = plan
            .points
            .iter()
            .find(|p| inner.writing.contains(&p.cache_path))
        {
            drop(inner);
            self.set_writing_elsewhere(dataset, writing);
            return false;
        }
        match inner.entries.get(dataset) {
            None => true,
            Some(e) => match e.state {
                CacheState::Profiling => !e.profiler.is_some_and(&job_running),
                // The cache is being written (or was, and is now gone:
                // `Cached` is only set when jobs are served from files).
                CacheState::Writing | CacheState::Cached | CacheState::Dropped => true,
                // Decided; an error or a refusal says why.
                CacheState::NotCached => false,
            },
        }
    }

    fn set_writing_elsewhere(&self, dataset: &DatasetId, point: &PlannedPoint) {
        let mut inner = self.lock();
        let entry = inner
            .entries
            .entry(dataset.clone())
            .or_insert_with(|| Entry::new(CacheState::Writing, String::new()));
        entry.state = CacheState::Writing;
        entry.point = point.label().to_string();
        entry.path = point.cache_path.clone();
        if entry.reason.is_empty() {
            entry.reason = format!("the cache of {} is being written", point.label());
        }
    }

    /// `job`'s first task profiles `dataset` against `plan`.
    pub fn profile_with(&self, dataset: &DatasetId, job: JobId, plan: Plan) {
        let mut inner = self.lock();
        let entry = inner
            .entries
            .entry(dataset.clone())
            .or_insert_with(|| Entry::new(CacheState::Profiling, String::new()));
        let jobs_served = entry.jobs_served;
        *entry = Entry::new(
            CacheState::Profiling,
            format!(
                "job {job} profiles {} candidate point(s) during its first epoch",
                plan.points.len()
            ),
        );
        entry.jobs_served = jobs_served;
        entry.plan = Some(Arc::new(plan));
        entry.profiler = Some(job);
        // An earlier job of this dataset that never got a task to ask is
        // superseded (and forgotten: the map stays one entry per dataset).
        inner.profilers.retain(|_, (d, _)| d != dataset);
        inner.profilers.insert(job, (dataset.clone(), None));
    }

    /// Whether `task` (of `job`) is the one asked to profile: the first
    /// task of a profiling job asked about is chosen.
    pub fn profiles(&self, job: JobId, task: TaskId) -> bool {
        let mut inner = self.lock();
        match inner.profilers.get_mut(&job) {
            Some((_, chosen @ None)) => {
                *chosen = Some(task);
                true
            }
            Some((_, Some(chosen))) => *chosen == task,
            None => false,
        }
    }

    /// The plan a profile of `dataset` decides on, if one is awaited; the
    /// first profile takes it, so later ones are ignored.
    pub fn take_plan(&self, dataset: &DatasetId) -> Option<Arc<Plan>> {
        let mut inner = self.lock();
        let entry = inner.entries.get_mut(dataset)?;
        if entry.state != CacheState::Profiling {
            return None;
        }
        let plan = entry.plan.take()?;
        if let Some(job) = entry.profiler.take() {
            inner.profilers.remove(&job);
        }
        Some(plan)
    }

    /// Writing `point`'s cache started (`started`: by this dataset's
    /// decision; else another dataset's write of the same prefix).
    pub fn writing(
        &self,
        dataset: &DatasetId,
        point: &PlannedPoint,
        figures: Figures,
        why: String,
    ) {
        let mut inner = self.lock();
        inner.writing.insert(point.cache_path.clone());
        let entry = inner
            .entries
            .entry(dataset.clone())
            .or_insert_with(|| Entry::new(CacheState::Writing, String::new()));
        entry.state = CacheState::Writing;
        entry.reason = why;
        entry.point = point.label().to_string();
        entry.path = point.cache_path.clone();
        entry.figures = figures;
    }

    /// Whether a cache at `path` is being written (by any dataset).
    pub fn is_writing(&self, path: &str) -> bool {
        self.lock().writing.contains(path)
    }

    /// A decision against caching, with the figures it was made on.
    pub fn decided_against(&self, dataset: &DatasetId, reason: String, figures: Figures) {
        self.not_cached(dataset, reason);
        if let Some(entry) = self.lock().entries.get_mut(dataset) {
            entry.figures = figures;
        }
    }

    /// Caches being written, to check against their snapshots.
    pub fn written_paths(&self) -> Vec<String> {
        self.lock().writing.iter().cloned().collect()
    }

    /// A write finished: complete (`Ok`) or failed (the error).
    pub fn write_finished(&self, path: &str, result: Result<(), String>) {
        let mut inner = self.lock();
        inner.writing.remove(path);
        for entry in inner.entries.values_mut() {
            if entry.state != CacheState::Writing || entry.path != path {
                continue;
            }
            match &result {
                Ok(()) => {
                    entry.state = CacheState::Cached;
                    entry.reason = format!(
                        "the cache of {} is complete; the next jobs read it",
                        entry.point
                    );
                }
                Err(e) => {
                    entry.state = CacheState::NotCached;
                    entry.reason = format!("writing the cache of {} failed: {e}", entry.point);
                }
            }
        }
    }

    /// Every dataset's row, by dataset id.
    pub fn overview(&self) -> Vec<AutocacheOverview> {
        self.lock()
            .entries
            .iter()
            .map(|(id, e)| AutocacheOverview {
                dataset_id: id.clone(),
                state: e.state.name(),
                reason: e.reason.clone(),
                point: e.point.clone(),
                path: e.path.clone(),
                compute_seconds_per_element: e.figures.compute_seconds_per_element,
                read_seconds_per_element: e.figures.read_seconds_per_element,
                bytes_per_element: e.figures.bytes_per_element,
                jobs_served: e.jobs_served,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(paths: &[&str]) -> Plan {
        Plan {
            points: paths
                .iter()
                .enumerate()
                .map(|(index, path)| PlannedPoint {
                    candidate: PointCandidate {
                        index,
                        label: format!("{index}: map(f)"),
                        prefix: wire::DatasetDef::default(),
                        in_memory: false,
                    },
                    cache_path: path.to_string(),
                })
                .collect(),
            stopped: Some("unseeded random op `random_crop` at 2: map(random_crop)".into()),
        }
    }

    fn ds(id: &str) -> DatasetId {
        DatasetId(id.into())
    }

    fn state_of(book: &Book, id: &str) -> (&'static str, String, i64) {
        let row = book
            .overview()
            .into_iter()
            .find(|r| r.dataset_id.0 == id)
            .unwrap();
        (row.state, row.reason, row.jobs_served)
    }

    #[test]
    fn one_task_of_the_profiling_job_is_asked_and_asked_again() {
        let book = Book::default();
        book.profile_with(&ds("a"), JobId(1), plan(&["/c/p/f"]));
        assert!(book.profiles(JobId(1), TaskId(5)));
        assert!(!book.profiles(JobId(1), TaskId(6)), "one task per job");
        assert!(
            book.profiles(JobId(1), TaskId(5)),
            "its definition sent again"
        );
        assert!(
            !book.profiles(JobId(2), TaskId(7)),
            "another job does not profile"
        );
        // The first profile takes the plan; later ones find none.
        assert!(book.take_plan(&ds("a")).is_some());
        assert!(book.take_plan(&ds("a")).is_none());
        assert!(!book.profiles(JobId(1), TaskId(5)), "no longer asked");
    }

    #[test]
    fn a_profile_is_asked_again_only_when_its_job_is_gone() {
        let book = Book::default();
        let p = plan(&["/c/p/f"]);
        assert!(book.wants_profile(&ds("a"), &p, |_| true));
        book.profile_with(&ds("a"), JobId(1), p.clone());
        assert!(!book.wants_profile(&ds("a"), &p, |_| true), "awaited");
        assert!(
            book.wants_profile(&ds("a"), &p, |_| false),
            "its job ended first"
        );
    }

    #[test]
    fn a_prefix_is_written_once_and_its_completion_serves() {
        let book = Book::default();
        let p = plan(&["/c/p/f0", "/c/p/f1"]);
        book.profile_with(&ds("a"), JobId(1), p.clone());
        let taken = book.take_plan(&ds("a")).unwrap();
        book.writing(&ds("a"), &taken.points[1], Figures::default(), "why".into());
        assert!(book.is_writing("/c/p/f1"));
        // Another dataset with the same prefix waits for that write.
        assert!(!book.wants_profile(&ds("b"), &p, |_| false));
        assert_eq!(state_of(&book, "b").0, "writing");
        book.write_finished("/c/p/f1", Ok(()));
        assert!(!book.is_writing("/c/p/f1"));
        assert_eq!(state_of(&book, "a").0, "cached");
        assert_eq!(state_of(&book, "b").0, "cached");
        book.served(&ds("a"), "1: map(f)", "/c/p/f1");
        book.served(&ds("a"), "1: map(f)", "/c/p/f1");
        assert_eq!(state_of(&book, "a").2, 2);
    }

    #[test]
    fn a_failed_write_and_a_decision_against_say_why_and_hold() {
        let book = Book::default();
        let p = plan(&["/c/p/f"]);
        book.profile_with(&ds("a"), JobId(1), p.clone());
        let taken = book.take_plan(&ds("a")).unwrap();
        book.writing(&ds("a"), &taken.points[0], Figures::default(), "why".into());
        book.write_finished("/c/p/f", Err("disk full".into()));
        let (state, reason, _) = state_of(&book, "a");
        assert_eq!(state, "not cached");
        assert!(reason.contains("disk full"), "{reason}");
        assert!(!book.wants_profile(&ds("a"), &p, |_| false), "decided");

        book.decided_against(&ds("c"), p.explain("no point pays"), Figures::default());
        let (_, reason, _) = state_of(&book, "c");
        assert!(reason.contains("no point pays"), "{reason}");
        assert!(
            reason.contains("unseeded random op `random_crop`"),
            "{reason}"
        );
    }

    #[test]
    fn dropped_caches_are_shown_and_profiled_again() {
        let book = Book::default();
        let p = plan(&["/c/p/new"]);
        book.dropped(&ds("a"), &["/c/p/old".to_string()]);
        let (state, reason, _) = state_of(&book, "a");
        assert_eq!(state, "dropped");
        assert!(reason.contains("/c/p/old"), "{reason}");
        assert!(book.wants_profile(&ds("a"), &p, |_| false));
        assert_eq!(CacheState::NotCached.label(), "not_cached");
    }
}
