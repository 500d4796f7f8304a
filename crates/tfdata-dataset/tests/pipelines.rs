//! Whole pipelines of built-in ops, written in the JSON text form, over real
//! files: what a stock worker runs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use tfdata_core::{DType, Element, Tensor};
use tfdata_dataset::example::ExampleBuilder;
use tfdata_dataset::io::{CompressionType, TfRecordWriter};
use tfdata_dataset::json::from_json;
use tfdata_dataset::{Dataset, FunctionRef};

/// A `width`×`height` RGB PNG whose pixels encode their position.
fn png(width: u32, height: u32, seed: u8) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().unwrap();
        let data: Vec<u8> = (0..width * height * 3)
            .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
            .collect();
        writer.write_image_data(&data).unwrap();
    }
    out
}

fn write_shards(dir: &std::path::Path, shards: usize, per_shard: usize) {
    for s in 0..shards {
        let path = dir.join(format!("train-{s:02}.tfrecord"));
        let mut w = TfRecordWriter::create(path.to_str().unwrap(), CompressionType::Gzip).unwrap();
        for i in 0..per_shard {
            let label = (s * per_shard + i) as i64;
            let record = ExampleBuilder::new()
                .bytes("image", &[png(12 + i as u32, 10, label as u8)])
                .int64("label", &[label])
                .build();
            w.write(&record).unwrap();
        }
        w.finish().unwrap();
    }
}

fn collect(ds: &tfdata_dataset::Dataset) -> Vec<Element> {
    let mut it = ds.iter().unwrap();
    let mut out = Vec::new();
    while let Some(e) = it.next_element().unwrap() {
        out.push(e);
    }
    out
}

#[test]
fn image_classification_pipeline_from_json() {
    let dir = tempfile::tempdir().unwrap();
    write_shards(dir.path(), 3, 5);
    let pattern = dir.path().join("train-*.tfrecord");
    let text = format!(
        r#"{{
  "compress": false,
  "pipeline": {{
    "op": "batch", "batch_size": 4, "drop_remainder": false,
    "input": {{
      "op": "map", "function": {{"function": "select", "args": {{"components": ["image", "label"]}}}},
      "input": {{
        "op": "map", "num_parallel_calls": -1,
        "function": {{"function": "normalize", "args": {{"component": "image", "mean": [127.5, 127.5, 127.5], "std": [127.5, 127.5, 127.5]}}}},
        "input": {{
          "op": "map", "num_parallel_calls": 2,
          "function": {{"function": "resize", "args": {{"component": "image", "size": [8, 8]}}}},
          "input": {{
            "op": "map",
            "function": {{"function": "decode_png", "args": {{"component": "image", "channels": 3}}}},
            "input": {{
              "op": "map",
              "function": {{"function": "parse_example", "args": {{"features": {{
                "image": {{"dtype": "string"}}, "label": {{"dtype": "int64"}}}}}}}},
              "input": {{
                "op": "interleave", "cycle_length": 2, "num_parallel_calls": 2,
                "function": {{"function": "tfrecord_dataset", "args": {{"compression_type": "GZIP"}}}},
                "input": {{"op": "list_files", "file_pattern": {pattern:?}, "shuffle": false}}
              }}
            }}
          }}
        }}
      }}
    }}
  }}
}}"#
    );
    let parsed = from_json(&text).unwrap();
    assert!(!parsed.compress);
    let spec = parsed.dataset.element_spec().unwrap().unwrap();
    assert_eq!(
        spec.to_string(),
        "(TensorSpec(shape=(None, 8, 8, 3), dtype=float32), TensorSpec(shape=(None,), dtype=int64))"
    );
    let batches = collect(&parsed.dataset);
    assert_eq!(batches.len(), 4); // 15 examples in batches of 4
    let first = &batches[0];
    assert_eq!(first.components[0].shape(), &[4, 8, 8, 3]);
    assert_eq!(first.components[0].dtype(), DType::Float);
    let pixels = first.components[0].to_vec::<f32>().unwrap();
    assert!(pixels.iter().all(|p| (-1.0..=1.0).contains(p)));
    // cycle_length 2, block_length 1 over shards 0 and 1: labels 0, 5, 1, 6, ...
    assert_eq!(
        first.components[1].to_vec::<i64>().unwrap(),
        vec![0, 5, 1, 6]
    );
    let mut labels: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.components[1].to_vec::<i64>().unwrap())
        .collect();
    labels.sort();
    assert_eq!(labels, (0..15).collect::<Vec<_>>());
}

#[test]
fn corrupt_and_missing_inputs_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.tfrecord");
    let mut w = TfRecordWriter::create(path.to_str().unwrap(), CompressionType::None).unwrap();
    w.write(b"first record").unwrap();
    w.write(b"second record").unwrap();
    w.finish().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 6] ^= 0x20; // inside the second record's data
    std::fs::write(&path, &bytes).unwrap();
    let ds = tfdata_dataset::Dataset::tfrecord(&[path.to_str().unwrap()], "");
    let mut it = ds.iter().unwrap();
    assert!(it.next_element().unwrap().is_some());
    let err = it.next_element().unwrap_err().to_string();
    assert!(
        err.contains("bad.tfrecord") && err.contains("offset"),
        "{err}"
    );

    let none = tfdata_dataset::Dataset::list_files(
        &[dir.path().join("nothing-*").to_str().unwrap()],
        false,
        None,
    );
    let err = none.iter().err().unwrap().to_string();
    assert!(err.contains("no files matched"), "{err}");

    let text = r#"{"op": "map", "function": {"function": "resize", "args": {"size": [0, 3]}},
                   "input": {"op": "range", "stop": 3}}"#;
    let err = from_json(text).err().unwrap().to_string();
    assert!(err.contains("size"), "{err}");
}

/// Resolving a pipeline reads no files: a `lookup` over a vocabulary that
/// is not there validates (as the dispatcher does when it is registered) and
/// fails when the first element needs it, naming the file.
#[test]
fn lookup_reads_its_vocabulary_when_the_data_flows_not_when_validated() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("vocabulary.txt");
    let lookup = FunctionRef::with_args(
        "lookup",
        tfdata_dataset::Attrs::new().with("vocabulary_file", missing.to_str().unwrap()),
    );
    let ds = Dataset::from_tensor_slices(vec![
        Tensor::strings(vec!["a".into(), "b".into()], vec![2]).unwrap(),
    ])
    .map_with(lookup, None, true);
    ds.validate().unwrap();
    assert!(ds.element_spec().unwrap().is_some());
    let mut it = ds.iter().unwrap();
    let err = it.next().unwrap().unwrap_err();
    assert!(err.to_string().contains("vocabulary.txt"), "{err}");
    // Written now, it is read on first use.
    std::fs::write(&missing, "b\na\n").unwrap();
    let values: Vec<i64> = ds
        .iter()
        .unwrap()
        .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
        .collect();
    assert_eq!(values, vec![1, 0]);
}
