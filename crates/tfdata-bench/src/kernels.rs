//! The `kernels` scenario: the pipeline's per-example operations timed one
//! at a time on one thread, by tfdata's kernels and by TensorFlow's ops
//! (`scripts/tf_kernels.py`, eager, one intra-op and one inter-op thread),
//! on the benchmark's own images. It separates the cost of the kernels from
//! that of the pipeline machinery (threads, queues, batching buffers).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value, json};
use tfdata_core::{DType, Tensor};
use tfdata_dataset::Dataset;
use tfdata_dataset::example::{FeatureSpec, parse_single_example};
use tfdata_dataset::kernels::{self, ResizeMethod};
use tfdata_dataset::ops::tensor_util;

use crate::data::{self, ImageData};
use crate::measure::process_cpu_seconds;

/// The kernels, in pipeline order, with the names both sides report.
pub const KERNELS: [&str; 5] = [
    "parse_example",
    "decode_jpeg",
    "resize",
    "normalize",
    "batch",
];

/// tfdata's fused kernel (what map fusion runs for decode → resize →
/// normalise) and the separate kernels it replaces, whose times on
/// TensorFlow's side add up to its counterpart.
pub const FUSED: (&str, [&str; 3]) = ("decode_jpeg_resize", ["decode_jpeg", "resize", "normalize"]);

/// Options of the `kernels` scenario.
#[derive(Debug, Clone)]
pub struct KernelOptions {
    /// Images to run each kernel over (taken from the first shard).
    pub images: usize,
    /// Run each kernel over the images for at least this long.
    pub seconds_per_kernel: f64,
    pub batch_size: usize,
    pub tensorflow_python: Option<std::path::PathBuf>,
}

/// One kernel's time per example: elapsed, and CPU time of the process
/// (on a machine shared with other work, elapsed time includes the time
/// the scheduler gave to others; CPU time does not).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    pub us: f64,
    pub cpu_us: Option<f64>,
}

impl std::ops::Add for Timing {
    type Output = Timing;

    fn add(self, other: Timing) -> Timing {
        Timing {
            us: self.us + other.us,
            cpu_us: self.cpu_us.zip(other.cpu_us).map(|(a, b)| a + b),
        }
    }
}

impl std::ops::Div<f64> for Timing {
    type Output = Timing;

    fn div(self, n: f64) -> Timing {
        Timing {
            us: self.us / n,
            cpu_us: self.cpu_us.map(|c| c / n),
        }
    }
}

/// The time per example of each kernel.
pub type KernelTimes = BTreeMap<String, Timing>;

/// Calls `f` on every input, in passes, until `seconds` have passed; the
/// time per call.
fn time_per_call<T, O>(
    inputs: &[T],
    seconds: f64,
    mut f: impl FnMut(&T) -> Result<O>,
) -> Result<Timing> {
    if inputs.is_empty() {
        bail!("no inputs to time");
    }
    // One untimed pass: first-touch page faults, caches, lazy tables.
    for x in inputs {
        black_box(f(x)?);
    }
    let start = Instant::now();
    let cpu_start = process_cpu_seconds();
    let mut calls = 0u64;
    loop {
        for x in inputs {
            black_box(f(x)?);
        }
        calls += inputs.len() as u64;
        let elapsed = start.elapsed().as_secs_f64();
        if elapsed >= seconds {
            let cpu = cpu_start.zip(process_cpu_seconds()).map(|(a, b)| b - a);
            return Ok(Timing {
                us: elapsed * 1e6 / calls as f64,
                cpu_us: cpu.map(|c| c * 1e6 / calls as f64),
            });
        }
    }
}

fn kernel_err(kernel: &str) -> impl Fn(tfdata_core::Error) -> anyhow::Error + '_ {
    move |e| anyhow!("{kernel}: {e}")
}

/// Times tfdata's kernels on the first `options.images` examples.
pub fn run_ours(data: &ImageData, options: &KernelOptions) -> Result<KernelTimes> {
    let first = data.files.first().context("the data set has no files")?;
    let path = first.display().to_string();
    let mut records = Vec::new();
    let mut iter = Dataset::tfrecord(&[path.as_str()], "")
        .iter()
        .map_err(kernel_err("tfrecord_dataset"))?;
    while records.len() < options.images {
        let Some(e) = iter
            .next_element()
            .map_err(kernel_err("tfrecord_dataset"))?
        else {
            break;
        };
        let t = e.components.into_iter().next().context("an empty record")?;
        let values = t.string_values().map_err(kernel_err("tfrecord_dataset"))?;
        records.push(values.first().context("an empty record")?.to_vec());
    }
    let features: BTreeMap<String, FeatureSpec> = [
        ("image".to_string(), FeatureSpec::fixed(DType::String, [])),
        ("label".to_string(), FeatureSpec::fixed(DType::Int64, [])),
    ]
    .into_iter()
    .collect();
    let parse =
        |r: &Vec<u8>| parse_single_example(r, &features).map_err(kernel_err("parse_example"));
    let s = options.seconds_per_kernel;
    let mut times = KernelTimes::new();
    times.insert("parse_example".into(), time_per_call(&records, s, parse)?);

    let jpegs: Vec<Tensor> = records
        .iter()
        .map(|r| {
            let mut parsed = parse(r)?;
            parsed.remove("image").context("no image feature")
        })
        .collect::<Result<_>>()?;
    let decode = |t: &Tensor| kernels::decode_jpeg(t, 3).map_err(kernel_err("decode_jpeg"));
    times.insert("decode_jpeg".into(), time_per_call(&jpegs, s, decode)?);

    let decoded: Vec<Tensor> = jpegs.iter().map(decode).collect::<Result<_>>()?;
    let resize = |t: &Tensor| {
        kernels::resize(t, 224, 224, ResizeMethod::Bilinear).map_err(kernel_err("resize"))
    };
    times.insert("resize".into(), time_per_call(&decoded, s, resize)?);

    let (mean, std) = ([127.5f32; 3], [127.5f32; 3]);
    let fused = |t: &Tensor| {
        let normalize = Some((&mean[..], &std[..]));
        kernels::decode_jpeg_resize(t, 3, kernels::DctMethod::default(), 224, 224, normalize)
            .map_err(kernel_err(FUSED.0))
    };
    times.insert(FUSED.0.into(), time_per_call(&jpegs, s, fused)?);

    let resized: Vec<Tensor> = decoded.iter().map(resize).collect::<Result<_>>()?;
    let normalize =
        |t: &Tensor| kernels::normalize(t, &mean, &std).map_err(kernel_err("normalize"));
    times.insert("normalize".into(), time_per_call(&resized, s, normalize)?);

    let normalized: Vec<Tensor> = resized.iter().map(normalize).collect::<Result<_>>()?;
    let batches: Vec<Vec<&Tensor>> = normalized
        .chunks_exact(options.batch_size)
        .map(|c| c.iter().collect())
        .collect();
    if batches.is_empty() {
        bail!("--kernel-images must be at least --batch-size");
    }
    let stack = |b: &Vec<&Tensor>| tensor_util::stack(b).map_err(kernel_err("batch"));
    let per_batch = time_per_call(&batches, s, stack)?;
    times.insert("batch".into(), per_batch / options.batch_size as f64);
    Ok(times)
}

/// Times TensorFlow's ops (`scripts/tf_kernels.py`).
pub fn run_tensorflow(
    python: &Path,
    data: &ImageData,
    options: &KernelOptions,
) -> Result<(KernelTimes, Option<String>)> {
    let first = data.files.first().context("the data set has no files")?;
    let args = [
        "--file".to_string(),
        first.display().to_string(),
        "--images".into(),
        options.images.to_string(),
        "--seconds".into(),
        options.seconds_per_kernel.to_string(),
        "--batch-size".into(),
        options.batch_size.to_string(),
    ];
    let line = data::run_python_script(python, "tf_kernels.py", &args)?;
    parse_tensorflow_times(&line)
}

fn parse_tensorflow_times(line: &str) -> Result<(KernelTimes, Option<String>)> {
    let v: Value = serde_json::from_str(line).context("tf_kernels.py printed bad JSON")?;
    let us = v
        .get("us_per_example")
        .and_then(Value::as_object)
        .context("tf_kernels.py: no \"us_per_example\"")?;
    // CPU time per example, from scripts that report it.
    let cpu = v.get("cpu_us_per_example").and_then(Value::as_object);
    let times = us
        .iter()
        .map(|(k, t)| {
            let us = t
                .as_f64()
                .with_context(|| format!("tf_kernels.py: {k} is not a number"))?;
            let cpu_us = cpu.and_then(|c| c.get(k)).and_then(Value::as_f64);
            Ok((k.clone(), Timing { us, cpu_us }))
        })
        .collect::<Result<_>>()?;
    let version = v
        .get("tensorflow")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok((times, version))
}

/// The sum of the times of `names`, if all were timed.
fn sum_of(times: &KernelTimes, names: &[&str]) -> Option<Timing> {
    names
        .iter()
        .map(|k| times.get(*k).copied())
        .reduce(|a, b| Some(a? + b?))
        .flatten()
}

/// `µs/example` with the CPU time after it, when known.
fn describe(t: Timing) -> String {
    match t.cpu_us {
        Some(cpu) => format!("{:8.1} µs/example ({cpu:8.1} CPU)", t.us),
        None => format!("{:8.1} µs/example", t.us),
    }
}

/// Runs the scenario: one report per kernel (`kernels/<name>`), plus
/// `kernels/total`, the sum, and `kernels/decode_jpeg_resize`, the fused
/// kernel (TensorFlow's side: its three ops).
pub fn run(
    data: &ImageData,
    options: &KernelOptions,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    eprintln!("tfdata-bench: kernels: tfdata ...");
    let ours = run_ours(data, options)?;
    let tensorflow = match &options.tensorflow_python {
        Some(python) => {
            eprintln!("tfdata-bench: kernels: TensorFlow ...");
            Some(run_tensorflow(python, data, options)?)
        }
        None => None,
    };
    let timing = |t: &KernelTimes, name: &str| match name {
        "total" => sum_of(t, &KERNELS),
        n if n == FUSED.0 && !t.contains_key(n) => sum_of(t, &FUSED.1),
        n => t.get(n).copied(),
    };
    let mut names: Vec<&str> = KERNELS.to_vec();
    names.push("total");
    names.push(FUSED.0);
    for name in names {
        let ours = timing(&ours, name).with_context(|| format!("{name} not timed"))?;
        let mut r = Map::new();
        r.insert("scenario".into(), json!(format!("kernels/{name}")));
        r.insert("value".into(), json!(1e6 / ours.us));
        r.insert("unit".into(), json!("examples/s"));
        r.insert("us_per_example".into(), json!(ours.us));
        if let Some(cpu) = ours.cpu_us {
            r.insert("cpu_us_per_example".into(), json!(cpu));
        }
        r.insert("threads".into(), json!(1));
        r.insert("images".into(), json!(options.images));
        let mut line = format!("kernels/{name:<18} tfdata {}", describe(ours));
        if let Some((tf, version)) = &tensorflow {
            if let Some(theirs) = timing(tf, name) {
                r.insert("tensorflow".into(), json!(1e6 / theirs.us));
                r.insert("tensorflow_us_per_example".into(), json!(theirs.us));
                if let Some(cpu) = theirs.cpu_us {
                    r.insert("tensorflow_cpu_us_per_example".into(), json!(cpu));
                }
                r.insert("ratio".into(), json!(theirs.us / ours.us));
                line.push_str(&format!(
                    " | TF {} | ratio {:.3}",
                    describe(theirs),
                    theirs.us / ours.us
                ));
            }
            if let Some(version) = version {
                r.insert("tensorflow_version".into(), json!(version));
            }
        }
        emit(r, line)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_calls() {
        let t = time_per_call(&[1, 2, 3], 0.01, |x| Ok(x * 2)).unwrap();
        assert!(t.us > 0.0);
        assert!(t.cpu_us.is_some_and(|c| c >= 0.0));
        assert!(time_per_call::<u8, u8>(&[], 0.01, |x| Ok(*x)).is_err());
    }

    #[test]
    fn reads_tensorflow_times() {
        let (t, v) = parse_tensorflow_times(
            r#"{"us_per_example": {"decode_jpeg": 700.5, "resize": 200, "normalize": 50},
                "cpu_us_per_example": {"decode_jpeg": 690, "resize": 198, "normalize": 49},
                "tensorflow": "2.21.0"}"#,
        )
        .unwrap();
        assert_eq!(t["decode_jpeg"].us, 700.5);
        assert_eq!(t["resize"].us, 200.0);
        assert_eq!(t["resize"].cpu_us, Some(198.0));
        // The fused kernel's counterpart: TensorFlow's three ops.
        let fused = sum_of(&t, &FUSED.1).unwrap();
        assert_eq!((fused.us, fused.cpu_us), (950.5, Some(937.0)));
        assert!(sum_of(&t, &KERNELS).is_none());
        assert_eq!(v.as_deref(), Some("2.21.0"));
        assert!(parse_tensorflow_times(r#"{"us_per_example": {"x": "y"}}"#).is_err());
    }
}
