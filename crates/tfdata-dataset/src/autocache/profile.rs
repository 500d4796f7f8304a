//! What each candidate point costs, measured on a worker before its task
//! runs: computing the prefix's elements, and reading such elements back
//! from a cache chunk in the cache's storage.
//!
//! Per candidate: build the prefix (with the caller's `build`, which links
//! the user functions), pull a bounded sample ([`ProfileLimits`]: up to 64
//! elements, 2 s and 256 MiB per point, at least one element), timing the
//! pull in process CPU (user + system, all threads: [`cpu`]) and wall time;
//! compute cost = max(CPU, wall) / n, the resource the elements hold
//! (wall for I/O-bound prefixes, CPU for parallel maps that burn several
//! cores). Then write the sample with the snapshot chunk writer
//! ([`CACHE_COMPRESSION`], as caches are written) to a scratch file
//! `<scratch_dir>/.profile-<unique>` through the io layer, read it back
//! with the chunk reader (timed the same way: read cost per element),
//! delete it; bytes per element = the chunk's bytes / n.
//!
//! Process CPU includes other threads of the worker (other tasks), so a
//! busy worker overstates compute; the max with wall time keeps an idle
//! one honest. Pulling starts the pipeline afresh per point, so start-up
//! (opening files, spawning threads) is in the sample, spread over n.

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
pub fn profile(
    def: &PipelineDef,
    analysis: &Analysis,
    build: &dyn Fn(&OpDef) -> Result<Dataset>,
    scratch_dir: &str,
    fs: Resolver<'_>,
    limits: &ProfileLimits,
) -> Result<Vec<PointCost>> {
    if limits.max_elements == 0 {
        return Err(Error::InvalidArgument(
            "autocache profile: max_elements must be at least 1".into(),
        ));
    }
    let chain = def.root.as_ref().map(super::analyse::main_chain);
    let mut out = Vec::with_capacity(analysis.candidates.len());
    for (position, candidate) in analysis.candidates.iter().enumerate() {
        // The analysis must be of `def`: the same prefix at the same place.
        let matches = chain.as_ref().is_some_and(|chain| {
            chain.len() > candidate.index
                && *chain[chain.len() - 1 - candidate.index] == candidate.prefix
        });
        if position != candidate.index || !matches {
            return Err(Error::InvalidArgument(format!(
                "autocache profile: candidate {} is not a point of this pipeline",
                candidate.label
            )));
        }
        let dataset = build(&candidate.prefix)
            .map_err(|e| in_context(format!("building autocache point {}", candidate.label), e))?;
        let cost = profile_point(&dataset, scratch_dir, fs, limits)
            .map_err(|e| in_context(format!("profiling autocache point {}", candidate.label), e))?;
        out.push(PointCost {
            point: candidate.index,
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

/// Resource time of a span: the larger of process CPU and wall time.
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

fn profile_point(
    dataset: &Dataset,
    scratch_dir: &str,
    fs: Resolver<'_>,
    limits: &ProfileLimits,
) -> Result<PointCost> {
    // Compute: pull the sample, holding it for the write.
    let meter = Meter::start();
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
            }
            None => break,
        }
    }
    let compute = meter.seconds();
    drop(iter);
    let n = sample.len() as u64;
    if n == 0 {
        return Ok(PointCost {
            point: 0,
            compute_seconds_per_element: compute,
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
        let meter = Meter::start();
        let mut reader = ChunkReader::open(&*file_system, &path, CACHE_COMPRESSION, dtypes)?;
        let mut read = 0u64;
        while reader.read_element()?.is_some() {
            read += 1;
        }
        let seconds = meter.seconds();
        if read != n {
            return Err(Error::DataLoss {
                location: path.clone(),
                reason: format!("wrote {n} elements, read back {read}"),
            });
        }
        Ok((bytes, seconds))
    });
    let deleted = file_system.delete(&path);
    let (bytes, read_seconds) = read?;
    deleted?;
    let n_f = n as f64;
    Ok(PointCost {
        point: 0,
        compute_seconds_per_element: compute / n_f,
        read_seconds_per_element: read_seconds / n_f,
        bytes_per_element: bytes as f64 / n_f,
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

/// Process CPU time from `/proc` (the workspace forbids `unsafe`, so
/// `getrusage` is out of reach; `/proc/self/stat` is what it reads):
/// coarse (clock ticks of 10 ms) but counting threads that exited, and
/// fine (per-thread `schedstat`, nanoseconds) for threads alive at the
/// end ([`cpu::Sample::seconds_since`] combines them).
pub mod cpu {
    use std::collections::HashMap;

    /// Linux's `USER_HZ` for `/proc` times: 100 on every architecture
    /// tfdata builds for.
    const TICKS_PER_SECOND: f64 = 100.0;

    /// The most threads read per sample (a worker has tens).
    const MAX_THREADS: usize = 4096;

    /// Process CPU at one moment.
    #[derive(Debug, Clone)]
    pub struct Sample {
        /// User + system ticks of the whole process (`/proc/self/stat`).
        ticks: u64,
        /// Nanoseconds on CPU by thread id (`/proc/self/task/*/schedstat`).
        threads: HashMap<u64, u64>,
    }

    impl Sample {
        /// Now; `None` where `/proc` is not there.
        pub fn now() -> Option<Sample> {
            let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
            // Fields after the `(comm)`, which may hold spaces: utime and
            // stime are the 12th and 13th of them.
            let after = stat.rsplit_once(')')?.1;
            let fields: Vec<&str> = after.split_whitespace().collect();
            let utime: u64 = fields.get(11)?.parse().ok()?;
            let stime: u64 = fields.get(12)?.parse().ok()?;
            let mut threads = HashMap::new();
            if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
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
            }
            Some(Sample {
                ticks: utime + stime,
                threads,
            })
        }

        /// CPU seconds the process used between `earlier` and this sample.
        ///
        /// Both counts are lower bounds once their errors are taken off:
        /// the per-thread sum misses threads that exited in between; the
        /// tick count is truncated at both ends (user and system each), so
        /// it may read up to two ticks high. The larger bound wins: the
        /// fine count for short spans (a 10 ms tick would otherwise
        /// swamp a sample of 64 fast elements), the ticks when threads that
        /// did the work are gone.
        pub fn seconds_since(&self, earlier: &Sample) -> f64 {
            let coarse = self.ticks.saturating_sub(earlier.ticks) as f64 / TICKS_PER_SECOND;
            let fine_ns: u64 = self
                .threads
                .iter()
                .map(|(tid, ns)| ns.saturating_sub(earlier.threads.get(tid).copied().unwrap_or(0)))
                .sum();
            let coarse_floor = (coarse - 2.0 / TICKS_PER_SECOND).max(0.0);
            coarse_floor.max(fine_ns as f64 / 1e9)
        }
    }
}
