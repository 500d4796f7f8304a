//! The `pipeline`, `pipeline-stages` and `pipeline-crop` scenarios: an
//! image classification input pipeline over TFRecord files of JPEG
//! `tf.train.Example`s, run locally by tfdata and by TensorFlow.
//! `pipeline-crop` decodes an ImageNet-style random window of each image
//! (`sample_distorted_bounding_box` + `decode_and_crop_jpeg` in TensorFlow,
//! `decode_random_crop_jpeg` in tfdata) instead of the whole image.

use std::fmt;
use std::path::Path;

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use serde_json::{Map, Value, json};
use tfdata_dataset::Dataset;

use crate::data::{self, ImageData};
use crate::measure::{self, MeasureConfig, Measurement};

/// Where a truncated pipeline stops; each truncation is followed by
/// `batch(64, drop_remainder=True).prefetch(AUTOTUNE)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Stage {
    /// `list_files` → `repeat` → `interleave(tfrecord_dataset)`: serialized examples.
    Read,
    /// … → `parse_example`: `{image: JPEG bytes, label}`.
    Parse,
    /// … → `decode_jpeg(channels=3)`: `uint8 [375, 500, 3]`.
    Decode,
    /// … → `resize([224, 224])` (bilinear): `float32 [224, 224, 3]`.
    Resize,
    /// … → `normalize` (`(x - 127.5) / 127.5`): the whole pipeline.
    Normalize,
}

impl Stage {
    pub const ALL: [Stage; 5] = [
        Stage::Read,
        Stage::Parse,
        Stage::Decode,
        Stage::Resize,
        Stage::Normalize,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Read => "read",
            Stage::Parse => "parse",
            Stage::Decode => "decode",
            Stage::Resize => "resize",
            Stage::Normalize => "normalize",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The options of the pipeline scenarios.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    pub batch_size: i64,
    pub measure: MeasureConfig,
    /// Also run the pipeline with TensorFlow, through this Python.
    pub tensorflow_python: Option<std::path::PathBuf>,
    /// Runs per engine; the median is reported.
    pub repeats: usize,
    /// Decode a random window (area 8-100%, aspect 3/4-4/3) instead of the
    /// whole image (`pipeline-crop`).
    pub random_crop: bool,
}

/// The pipeline in tfdata's JSON text form (`docs/pipelines.md`),
/// truncated after `stage`, repeated forever.
pub fn pipeline_json(pattern: &str, stage: Stage, batch_size: i64, random_crop: bool) -> Value {
    let on_image = |function: &str, mut args: Value| {
        if let Some(obj) = args.as_object_mut() {
            obj.insert("component".into(), json!("image"));
        }
        json!({"function": function, "args": args})
    };
    let map = |input: Value, function: Value| json!({"op": "map", "num_parallel_calls": -1, "function": function, "input": input});
    let mut op = json!({
        "op": "interleave", "cycle_length": 4, "block_length": 1, "num_parallel_calls": -1,
        "function": {"function": "tfrecord_dataset"},
        "input": {
            "op": "repeat", "count": -1,
            "input": {"op": "list_files", "file_pattern": pattern, "shuffle": false},
        },
    });
    if stage >= Stage::Parse {
        op = map(
            op,
            json!({"function": "parse_example", "args": {"features": {
                "image": {"dtype": "string"},
                "label": {"dtype": "int64"},
            }}}),
        );
    }
    if stage >= Stage::Decode && random_crop {
        op = map(
            op,
            on_image("decode_random_crop_jpeg", json!({"channels": 3, "seed": 1})),
        );
    } else if stage >= Stage::Decode {
        op = map(op, on_image("decode_jpeg", json!({"channels": 3})));
    }
    if stage >= Stage::Resize {
        op = map(op, on_image("resize", json!({"size": [224, 224]})));
    }
    if stage >= Stage::Normalize {
        op = map(
            op,
            on_image(
                "normalize",
                json!({"mean": [127.5, 127.5, 127.5], "std": [127.5, 127.5, 127.5]}),
            ),
        );
    }
    if stage >= Stage::Parse {
        op = json!({
            "op": "map",
            "function": {"function": "select", "args": {"components": ["image", "label"]}},
            "input": op,
        });
    }
    json!({
        "op": "prefetch", "buffer_size": -1,
        "input": {"op": "batch", "batch_size": batch_size, "drop_remainder": true, "input": op},
    })
}

/// The pipeline as a tfdata dataset.
pub fn build(data: &ImageData, stage: Stage, options: &PipelineOptions) -> Result<Dataset> {
    let text = pipeline_json(
        &data.pattern(),
        stage,
        options.batch_size,
        options.random_crop,
    )
    .to_string();
    let pipeline = tfdata_dataset::json::from_json(&text)
        .map_err(|e| anyhow::anyhow!("the benchmark pipeline is invalid: {e}"))?;
    Ok(pipeline.dataset)
}

/// One side's result.
#[derive(Debug, Clone)]
pub struct SideResult {
    pub measurement: Measurement,
    pub peak_rss_bytes: Option<u64>,
    /// TensorFlow's version, for the TensorFlow side.
    pub version: Option<String>,
}

/// Runs the pipeline truncated after `stage` with tfdata, in this process.
pub fn run_ours(data: &ImageData, stage: Stage, options: &PipelineOptions) -> Result<SideResult> {
    let dataset = build(data, stage, options)?;
    measure::reset_peak_rss();
    let measurement = measure::measure(
        &options.measure,
        || {
            dataset
                .iter()
                .map_err(|e| anyhow::anyhow!("cannot start the pipeline: {e}"))
        },
        |it| match it.next_element() {
            Ok(Some(batch)) => {
                check_batch(stage, options.batch_size, &batch)?;
                measure::batch_examples(&batch).map(Some)
            }
            Ok(None) => Ok(None),
            Err(e) => bail!("the pipeline failed: {e}"),
        },
    )?;
    Ok(SideResult {
        measurement,
        peak_rss_bytes: measure::peak_rss_bytes(),
        version: None,
    })
}

/// Checks that a batch is what the (truncated) pipeline should produce, so
/// the benchmark measures the intended work.
pub(crate) fn check_batch(
    stage: Stage,
    batch_size: i64,
    batch: &tfdata_core::Element,
) -> Result<()> {
    use tfdata_core::DType;
    let expected: (usize, DType, Option<Vec<i64>>) = match stage {
        Stage::Read => (1, DType::String, Some(vec![batch_size])),
        Stage::Parse => (2, DType::String, Some(vec![batch_size])),
        Stage::Decode => (2, DType::UInt8, None),
        Stage::Resize | Stage::Normalize => (2, DType::Float, Some(vec![batch_size, 224, 224, 3])),
    };
    let (components, dtype, shape) = expected;
    let image = batch.components.first().context("an empty batch")?;
    let shape_ok = match &shape {
        Some(s) => image.shape() == s.as_slice(),
        None => image.shape().len() == 4 && image.shape()[0] == batch_size,
    };
    if batch.components.len() != components || image.dtype() != dtype || !shape_ok {
        bail!(
            "pipeline/{stage}: unexpected batch: {} components, the first {} {:?}",
            batch.components.len(),
            image.dtype(),
            image.shape()
        );
    }
    Ok(())
}

/// Runs the same pipeline with TensorFlow (`scripts/tf_pipeline.py`).
pub fn run_tensorflow(
    python: &Path,
    data: &ImageData,
    stage: Stage,
    options: &PipelineOptions,
) -> Result<SideResult> {
    let mut args = vec![
        "--data-dir".to_string(),
        data.dir.display().to_string(),
        "--stage".into(),
        stage.name().into(),
        "--examples".into(),
        data.examples.to_string(),
        "--batch-size".into(),
        options.batch_size.to_string(),
        "--min-seconds".into(),
        options.measure.min_seconds.to_string(),
        "--warmup-batches".into(),
        options.measure.warmup_batches.to_string(),
    ];
    if options.random_crop {
        args.push("--random-crop".into());
    }
    let line = data::run_python_script(python, "tf_pipeline.py", &args)?;
    parse_tensorflow_result(&line)
}

pub(crate) fn parse_tensorflow_result(line: &str) -> Result<SideResult> {
    let v: Value = serde_json::from_str(line).context("tf_pipeline.py printed bad JSON")?;
    let f = |key: &str| v.get(key).and_then(Value::as_f64);
    let u = |key: &str| v.get(key).and_then(Value::as_u64);
    Ok(SideResult {
        measurement: Measurement {
            examples: u("examples").context("tf_pipeline.py: no \"examples\"")?,
            seconds: f("seconds").context("tf_pipeline.py: no \"seconds\"")?,
            batches: u("batches").unwrap_or(0),
            startup_seconds: f("startup_seconds").unwrap_or(0.0),
            cpu_seconds: f("cpu_seconds"),
        },
        peak_rss_bytes: u("peak_rss_bytes"),
        version: v
            .get("tensorflow")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// The JSON report of one (possibly truncated) pipeline, ours and
/// optionally TensorFlow's.
pub fn report(
    scenario: &str,
    stage: Stage,
    data: &ImageData,
    options: &PipelineOptions,
    ours: &SideResult,
    tensorflow: Option<&SideResult>,
) -> Map<String, Value> {
    let mut r = Map::new();
    let ours_eps = ours.measurement.examples_per_sec();
    r.insert("scenario".into(), json!(scenario));
    r.insert("value".into(), json!(ours_eps));
    r.insert("unit".into(), json!("examples/s"));
    r.insert("stage".into(), json!(stage.name()));
    side_fields(&mut r, "", ours);
    r.insert("batch_size".into(), json!(options.batch_size));
    r.insert("dataset_examples".into(), json!(data.examples));
    r.insert("image_size".into(), json!([data.height, data.width]));
    r.insert(
        "mean_jpeg_bytes".into(),
        json!(data.mean_jpeg_bytes.round()),
    );
    r.insert(
        "cores".into(),
        json!(std::thread::available_parallelism().map_or(1, |n| n.get())),
    );
    if let Some(tf) = tensorflow {
        let tf_eps = tf.measurement.examples_per_sec();
        r.insert("tensorflow".into(), json!(tf_eps));
        r.insert(
            "ratio".into(),
            if tf_eps > 0.0 {
                json!(ours_eps / tf_eps)
            } else {
                Value::Null
            },
        );
        side_fields(&mut r, "tensorflow_", tf);
        if let Some(version) = &tf.version {
            r.insert("tensorflow_version".into(), json!(version));
        }
    }
    r
}

fn side_fields(r: &mut Map<String, Value>, prefix: &str, side: &SideResult) {
    let m = &side.measurement;
    let mut put = |key: &str, value: Value| {
        r.insert(format!("{prefix}{key}"), value);
    };
    put("examples", json!(m.examples));
    put("seconds", json!(m.seconds));
    put("startup_seconds", json!(m.startup_seconds));
    put("cpu_utilization", json!(m.cpu_utilization()));
    put("cpu_us_per_example", json!(m.cpu_us_per_example()));
    put("peak_rss_bytes", json!(side.peak_rss_bytes));
}

/// A one-line human summary of a report.
pub fn summary(scenario: &str, ours: &SideResult, tensorflow: Option<&SideResult>) -> String {
    let side = |s: &SideResult| {
        let m = &s.measurement;
        let mut text = format!("{:8.1} examples/s", m.examples_per_sec());
        if let (Some(util), Some(us)) = (m.cpu_utilization(), m.cpu_us_per_example()) {
            text.push_str(&format!(" ({util:.2} cores, {us:6.0} CPU µs/example"));
            if let Some(rss) = s.peak_rss_bytes {
                text.push_str(&format!(", peak RSS {:.0} MiB", rss as f64 / 1048576.0));
            }
            text.push(')');
        }
        text
    };
    let mut line = format!("{scenario:<20} tfdata {}", side(ours));
    if let Some(tf) = tensorflow {
        let tf_eps = tf.measurement.examples_per_sec();
        line.push_str(&format!("\n{:<20} TF     {}", "", side(tf)));
        if tf_eps > 0.0 {
            line.push_str(&format!(
                "\n{:<20} ratio  {:.3} (tfdata / TensorFlow)",
                "",
                ours.measurement.examples_per_sec() / tf_eps
            ));
        }
    }
    line
}

/// The run with the median throughput (the lower middle one for an even
/// count), and every run's throughput.
fn median(mut runs: Vec<SideResult>) -> Option<(SideResult, Vec<f64>)> {
    let values: Vec<f64> = runs
        .iter()
        .map(|r| r.measurement.examples_per_sec())
        .collect();
    runs.sort_by(|a, b| {
        a.measurement
            .examples_per_sec()
            .total_cmp(&b.measurement.examples_per_sec())
    });
    let middle = runs.len().checked_sub(1)? / 2;
    Some((runs.swap_remove(middle), values))
}

/// Runs the pipeline truncated after each of `stages` (`options.repeats`
/// times, alternating tfdata and TensorFlow if asked) and hands each
/// report, of the median runs, to `emit`.
pub fn run_stages(
    data: &ImageData,
    stages: &[Stage],
    options: &PipelineOptions,
    scenario_name: impl Fn(Stage) -> String,
    emit: &mut dyn FnMut(Map<String, Value>, String) -> Result<()>,
) -> Result<()> {
    for &stage in stages {
        let scenario = scenario_name(stage);
        let mut ours_runs = Vec::new();
        let mut tf_runs = Vec::new();
        for run in 1..=options.repeats.max(1) {
            eprintln!("tfdata-bench: {scenario}: tfdata (run {run}) ...");
            ours_runs.push(run_ours(data, stage, options)?);
            if let Some(python) = &options.tensorflow_python {
                eprintln!("tfdata-bench: {scenario}: TensorFlow (run {run}) ...");
                tf_runs.push(run_tensorflow(python, data, stage, options)?);
            }
        }
        let (ours, ours_values) = median(ours_runs).context("no runs")?;
        let tensorflow = median(tf_runs);
        let mut r = report(
            &scenario,
            stage,
            data,
            options,
            &ours,
            tensorflow.as_ref().map(|(tf, _)| tf),
        );
        if options.repeats > 1 {
            let best = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
            r.insert("values".into(), json!(ours_values));
            r.insert("best".into(), json!(best(&ours_values)));
            if let Some((_, values)) = &tensorflow {
                r.insert("tensorflow_values".into(), json!(values));
                r.insert("tensorflow_best".into(), json!(best(values)));
                if best(values) > 0.0 {
                    r.insert(
                        "best_ratio".into(),
                        json!(best(&ours_values) / best(values)),
                    );
                }
            }
        }
        let text = summary(&scenario, &ours, tensorflow.as_ref().map(|(tf, _)| tf));
        emit(r, text)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_truncation_is_a_valid_pipeline() {
        for stage in Stage::ALL {
            for crop in [false, true] {
                let text =
                    pipeline_json("/nonexistent/train-*.tfrecord", stage, 64, crop).to_string();
                let pipeline = tfdata_dataset::json::from_json(&text)
                    .unwrap_or_else(|e| panic!("{stage}: {e}"));
                assert!(pipeline.dataset.validate().is_ok());
            }
        }
    }

    #[test]
    fn the_full_pipeline_is_the_documented_one() {
        let v = pipeline_json("/d/train-*.tfrecord", Stage::Normalize, 64, false);
        let text = v.to_string();
        for op in [
            "decode_jpeg",
            "resize",
            "normalize",
            "parse_example",
            "select",
        ] {
            assert!(text.contains(op), "{op} missing");
        }
        assert_eq!(v["input"]["batch_size"], 64);
        assert_eq!(v["input"]["drop_remainder"], true);
    }

    #[test]
    fn reads_tensorflow_results() {
        let r = parse_tensorflow_result(
            r#"{"examples_per_sec": 10.0, "examples": 100, "seconds": 10.0, "batches": 2,
                "startup_seconds": 0.5, "cpu_seconds": 20.0, "peak_rss_bytes": 1024,
                "tensorflow": "2.21.0"}"#,
        )
        .unwrap();
        assert_eq!(r.measurement.examples, 100);
        assert_eq!(r.measurement.cpu_utilization(), Some(2.0));
        assert_eq!(r.peak_rss_bytes, Some(1024));
        assert_eq!(r.version.as_deref(), Some("2.21.0"));
        assert!(parse_tensorflow_result(r#"{"seconds": 1.0}"#).is_err());
    }

    #[test]
    fn the_median_run_is_reported() {
        let run = |examples| SideResult {
            measurement: Measurement {
                examples,
                seconds: 1.0,
                ..Measurement::default()
            },
            peak_rss_bytes: None,
            version: None,
        };
        let (m, values) = median(vec![run(30), run(10), run(20)]).unwrap();
        assert_eq!(m.measurement.examples, 20);
        assert_eq!(values, vec![30.0, 10.0, 20.0]);
        let (m, _) = median(vec![run(30), run(10)]).unwrap();
        assert_eq!(m.measurement.examples, 10);
        assert!(median(Vec::new()).is_none());
    }
}
