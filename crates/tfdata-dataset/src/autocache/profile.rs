//! What each candidate point costs, measured on a worker before its task
//! runs: computing the prefix's elements, and reading such elements back
//! from a cache chunk in the cache's storage.
//!
//! Per candidate: build the prefix (with the caller's `build`, which links
//! the user functions), pull a bounded sample ([`ProfileLimits`]: up to 64
//! elements, 2 s and 256 MiB per point, at least one element), timing the
//! pull in the profile's CPU (its own thread and the threads it starts:
//! [`cpu`]) and wall time;
//! compute cost = max(CPU, wall) per element after the first (the first
//! carries start-up, which an epoch pays once), the resource the elements hold
//! (wall for I/O-bound prefixes, CPU for parallel maps that burn several
//! cores). Then write the sample with the snapshot chunk writer
//! ([`CACHE_COMPRESSION`], as caches are written) to a scratch file
//! `<scratch_dir>/.profile-<unique>` through the io layer, read it back
//! with the chunk reader (timed the same way, the fastest of up to five
//! passes: read cost per element),
//! delete it; bytes per element = the chunk's bytes / n.
//!
//! CPU leaves out the worker's other threads (other tasks), which would
//! make a busy worker overstate compute; the max with wall time counts
//! what CPU misses (I/O waits, a shared runtime's threads). Pulling starts the pipeline afresh per point; start-up
//! (opening files, spawning threads) ends with the first element, which
//! the figures leave out (reading back too: opening the chunk). Buffered
//! pipelines (prefetch, parallel maps) may have made more than one element
//! by then, so their figures read somewhat low.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tfdata_core::{DType, Element, Error, Result};
use tfdata_proto::tfdata::pipeline::{OpDef, PipelineDef};

use super::{Analysis, CACHE_COMPRESSION, Resolver};
use crate::dataset::Dataset;
use crate::snapshot::chunk::{ChunkReader, ChunkWriter};
use crate::snapshot::layout::join;

/// Bounds on one point's sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProfileLimits {
    /// Elements pulled at most (the sample stops at the first bound hit).
    pub max_elements: u64,
    /// Time spent pulling at most; at least one element is pulled anyway.
    pub max_time: Duration,
    /// In-memory bytes of the sample at most (it is held to be written).
    pub max_bytes: u64,
}

impl Default for ProfileLimits {
    /// 64 elements, 2 s, 256 MiB: enough elements to average out per-element
    /// noise, short enough that a pipeline of a few points delays its
    /// task by seconds, not minutes.
    fn default() -> Self {
        ProfileLimits {
            max_elements: 64,
            max_time: Duration::from_secs(2),
            max_bytes: 256 << 20,
        }
    }
}

/// Read-back passes over a point's sample at most (the fastest counts),
/// and the time after which no further pass starts.
const READ_PASSES: usize = 5;
const READ_PASSES_TIME: Duration = Duration::from_millis(200);

/// One point's figures: the proto's `TfdataAutocachePoint`.
#[derive(Debug, Clone, PartialEq)]
pub struct PointCost {
    /// The candidate's index (its position in [`Analysis::candidates`]).
    pub point: usize,
    pub compute_seconds_per_element: f64,
    pub read_seconds_per_element: f64,
    pub bytes_per_element: f64,
    /// Elements the figures are over (0: the prefix is empty).
    pub elements: u64,
}

/// Profiles every candidate of `analysis` (of `def`); see the module docs.
/// `build` makes a runnable dataset of a prefix (the worker's pipeline
/// builder: user functions resolved); `scratch_dir` is the cache storage
/// (a local path or an object-store URL), where the scratch chunk goes.
/// [`profile_points`] over the analysis, each candidate checked to be a
/// point of `def`.
pub fn profile(
    def: &PipelineDef,
    analysis: &Analysis,
    build: &dyn Fn(&OpDef) -> Result<Dataset>,
    scratch_dir: &str,
    fs: Resolver<'_>,
    limits: &ProfileLimits,
) -> Result<Vec<PointCost>> {
    let chain = def.root.as_ref().map(super::analyse::main_chain);
    for candidate in &analysis.candidates {
        // The analysis must be of `def`: the same prefix at the same place.
        let matches = chain.as_ref().is_some_and(|chain| {
            chain.len() > candidate.index
                && *chain[chain.len() - 1 - candidate.index] == candidate.prefix
        });
        if !matches {
            return Err(Error::InvalidArgument(format!(
                "autocache profile: candidate {} is not a point of this pipeline",
                candidate.label
            )));
        }
    }
    let points: Vec<(usize, &str)> = analysis
        .candidates
        .iter()
        .map(|c| (c.index, c.label.as_str()))
        .collect();
    let build_point = |position: usize| build(&analysis.candidates[position].prefix);
    profile_points(&points, &build_point, scratch_dir, fs, limits)
}

/// Profiles candidate points of any definition (a tfdata pipeline or a
/// TensorFlow graph): `points` are the candidates' `(index, label)`,
/// bottom first, indices `0, 1, ...` in order (as analyses number them);
/// `build(index)` makes the runnable prefix of point `index`. The figures
/// are those of [`profile`].
pub fn profile_points(
    points: &[(usize, &str)],
    build: &dyn Fn(usize) -> Result<Dataset>,
    scratch_dir: &str,
    fs: Resolver<'_>,
    limits: &ProfileLimits,
) -> Result<Vec<PointCost>> {
    if limits.max_elements == 0 {
        return Err(Error::InvalidArgument(
            "autocache profile: max_elements must be at least 1".into(),
        ));
    }
    let mut out = Vec::with_capacity(points.len());
    for (position, &(index, label)) in points.iter().enumerate() {
        if position != index {
            return Err(Error::InvalidArgument(format!(
                "autocache profile: point {label} is listed at position {position}; points \
                 must be numbered bottom first from 0"
            )));
        }
        let dataset =
            build(index).map_err(|e| in_context(format!("building autocache point {label}"), e))?;
        let cost = profile_point(&dataset, scratch_dir, fs, limits)
            .map_err(|e| in_context(format!("profiling autocache point {label}"), e))?;
        out.push(PointCost {
            point: index,
            ..cost
        });
    }
    Ok(out)
}

fn in_context(context: String, source: Error) -> Error {
    Error::Context {
        context: Some(context),
        source: std::sync::Arc::new(source),
    }
}

/// Resource time of a span: the larger of the profile's CPU and wall time.
struct Meter {
    cpu: Option<cpu::Sample>,
    wall: Instant,
}

impl Meter {
    fn start() -> Self {
        Meter {
            cpu: cpu::Sample::now(),
            wall: Instant::now(),
        }
    }

    fn seconds(&self) -> f64 {
        let wall = self.wall.elapsed().as_secs_f64();
        let cpu = match (&self.cpu, cpu::Sample::now()) {
            (Some(start), Some(end)) => end.seconds_since(start),
            _ => 0.0,
        };
        wall.max(cpu)
    }
}

/// Time per element after the first: a second meter starts when the
/// first element arrives, so opening (a pipeline's threads and files, a
/// chunk's file and decompressor) is left out, as an epoch pays it once.
/// With one element there is nothing after it: the whole span counts.
#[derive(Default)]
struct Steady {
    after_first: Option<Meter>,
    elements: u64,
}

impl Steady {
    fn element(&mut self) {
        self.elements += 1;
        if self.after_first.is_none() {
            self.after_first = Some(Meter::start());
        }
    }

    fn seconds_per_element(&self, whole: &Meter) -> f64 {
        match &self.after_first {
            Some(after) if self.elements >= 2 => after.seconds() / (self.elements - 1) as f64,
            _ => whole.seconds() / self.elements.max(1) as f64,
        }
    }
}

fn profile_point(
    dataset: &Dataset,
    scratch_dir: &str,
    fs: Resolver<'_>,
    limits: &ProfileLimits,
) -> Result<PointCost> {
    // Compute: pull the sample, holding it for the write. The first
    // element carries the pipeline's start-up (threads, files opened,
    // buffers filled), which an epoch pays once, not per element: the
    // figure is over the elements after it ([`Steady`]).
    let meter = Meter::start();
    let mut steady = Steady::default();
    let mut iter = dataset.iter()?;
    let mut sample: Vec<Element> = Vec::new();
    let mut held = 0u64;
    while (sample.len() as u64) < limits.max_elements
        && (sample.is_empty()
            || (meter.wall.elapsed() < limits.max_time && held < limits.max_bytes))
    {
        match iter.next_element()? {
            Some(element) => {
                held += element.byte_size() as u64;
                sample.push(element);
                steady.element();
            }
            None => break,
        }
    }
    let compute = steady.seconds_per_element(&meter);
    drop(iter);
    let n = sample.len() as u64;
    if n == 0 {
        return Ok(PointCost {
            point: 0,
            compute_seconds_per_element: meter.seconds(),
            read_seconds_per_element: 0.0,
            bytes_per_element: 0.0,
            elements: 0,
        });
    }

    // Write the sample as a cache chunk, in the cache's storage.
    let path = join(scratch_dir, &scratch_name());
    let file_system = fs(&path)?;
    file_system.create_dir_all(scratch_dir)?;
    let written = (|| {
        let mut writer = ChunkWriter::create(&*file_system, &path, CACHE_COMPRESSION)?;
        for element in &sample {
            writer.write(element)?;
        }
        writer.finish()
    })();
    let dtypes: Vec<DType> = sample[0].components.iter().map(|t| t.dtype()).collect();
    drop(sample);

    // Read it back, timed, then delete it whatever happened.
    let read = written.and_then(|bytes| {
        // Reading back is fast (a sample reads in well under a
        // millisecond), so one preemption of the thread (a 4 ms tick on a
        // busy worker) would swamp it: read several times, keep the
        // fastest pass.
        let passes = Instant::now();
        let mut fastest = f64::INFINITY;
        for pass in 0..READ_PASSES {
            if pass > 0 && passes.elapsed() >= READ_PASSES_TIME {
                break;
            }
            let meter = Meter::start();
            let mut steady = Steady::default();
            let mut reader =
                ChunkReader::open(&*file_system, &path, CACHE_COMPRESSION, dtypes.clone())?;
            let mut read = 0u64;
            while reader.read_element()?.is_some() {
                read += 1;
                steady.element();
            }
            if read != n {
                return Err(Error::DataLoss {
                    location: path.clone(),
                    reason: format!("wrote {n} elements, read back {read}"),
                });
            }
            fastest = fastest.min(steady.seconds_per_element(&meter));
        }
        Ok((bytes, fastest))
    });
    let deleted = file_system.delete(&path);
    let (bytes, read_seconds) = read?;
    deleted?;
    Ok(PointCost {
        point: 0,
        compute_seconds_per_element: compute,
        read_seconds_per_element: read_seconds,
        bytes_per_element: bytes as f64 / n as f64,
        elements: n,
    })
}

/// `.profile-<pid>-<ns>-<count>`: unique among concurrent profiles of this
/// and other processes sharing the storage (a leading dot: not a cache).
fn scratch_name() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        ".profile-{}-{ns}-{}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The profile's CPU time from `/proc` (the workspace forbids `unsafe`,
/// so `getrusage` is out of reach): the calling thread's and that of
/// threads started since the first sample (a parallel map's workers, a
/// prefetch thread), per thread from `schedstat` (nanoseconds). Threads
/// that were already running are left out: in a worker they serve other
/// tasks, and counting them made a busy worker's cheap prefix look
/// expensive (a `from_tensor_slices` at 200 us per element, worth caching
/// on that noise alone). Threads that start and exit within the span are
/// missed, which reads low: it errs against caching.
pub mod cpu {
    use std::collections::HashMap;

    /// The most threads read per sample (a worker has tens).
    const MAX_THREADS: usize = 4096;

    /// The process's threads' CPU at one moment.
    #[derive(Debug, Clone)]
    pub struct Sample {
        /// The thread that took the sample.
        own: Option<u64>,
        /// Nanoseconds on CPU by thread id (`/proc/self/task/*/schedstat`).
        threads: HashMap<u64, u64>,
    }

    impl Sample {
        /// Now; `None` where `/proc` is not there.
        pub fn now() -> Option<Sample> {
            // `/proc/thread-self` links to `<pid>/task/<tid>`.
            let own = std::fs::read_link("/proc/thread-self")
                .ok()
                .and_then(|link| link.file_name()?.to_str()?.parse().ok());
            let tasks = std::fs::read_dir("/proc/self/task").ok()?;
            let mut threads = HashMap::new();
            for task in tasks.flatten().take(MAX_THREADS) {
                let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                    continue;
                };
                let ns = std::fs::read_to_string(task.path().join("schedstat"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
                if let Some(ns) = ns {
                    threads.insert(tid, ns);
                }
            }
            Some(Sample { own, threads })
        }

        /// A sample of made-up figures: `own` took it.
        #[cfg(test)]
        pub(crate) fn of(own: u64, threads: &[(u64, u64)]) -> Sample {
            Sample {
                own: Some(own),
                threads: threads.iter().copied().collect(),
            }
        }

        /// CPU seconds, between `earlier` and this sample, of the thread
        /// that took `earlier` and of threads that `earlier` did not see.
        pub fn seconds_since(&self, earlier: &Sample) -> f64 {
            let ns: u64 = self
                .threads
                .iter()
                .filter_map(|(tid, ns)| match earlier.threads.get(tid) {
                    Some(before) if Some(*tid) == earlier.own => Some(ns.saturating_sub(*before)),
                    Some(_) => None,
                    None => Some(*ns),
                })
                .sum();
            ns as f64 / 1e9
        }
    }
}
