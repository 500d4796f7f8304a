//! Against the folders the real `datasets` library wrote
//! (`testdata/huggingface/make_fixtures.py`), and damaged or unusual ones
//! made here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray, StructArray};
use arrow_schema::{DataType, Field};
use serde_json::Value as Json;
use tfdata_core::{DType, Element, Tensor};

use super::layout::split_of_file;
use super::*;
use crate::IterContext;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/huggingface")
}

fn expected(split: &str) -> Vec<Json> {
    let text = std::fs::read_to_string(fixtures().join("expected.json")).unwrap();
    let all: Json = serde_json::from_str(&text).unwrap();
    all[split].as_array().unwrap().clone()
}

fn source(path: &Path, split: Option<&str>, batch: Option<i64>) -> HuggingFaceSource {
    HuggingFaceSource::new(
        path.to_str().unwrap().to_string(),
        split.map(str::to_string),
        None,
        batch,
        Declared::default(),
    )
}

fn all(ds: &Dataset) -> Vec<Element> {
    let mut it = ds.iter().unwrap();
    let mut out = Vec::new();
    while let Some(e) = it.next_element().unwrap() {
        out.push(e);
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Components, sorted by name: grid, image, label, scores, text.
fn check_rows(elements: &[Element], want: &[Json]) {
    assert_eq!(elements.len(), want.len());
    for (e, w) in elements.iter().zip(want) {
        let c = &e.components;
        let grid: Vec<i64> = w["grid"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_i64().unwrap()))
            .collect();
        assert_eq!(c[0].shape(), &[2, 3]);
        assert_eq!(
            c[0].to_vec::<i32>().unwrap(),
            grid.iter().map(|&v| v as i32).collect::<Vec<_>>()
        );
        assert_eq!(
            hex(&c[1].string_values().unwrap()[0]),
            w["image"].as_str().unwrap()
        );
        assert_eq!(
            c[2].to_scalar::<i64>().unwrap(),
            w["label"].as_i64().unwrap()
        );
        let scores: Vec<f32> = w["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(c[3].to_vec::<f32>().unwrap(), scores);
        assert_eq!(
            c[4].string_values().unwrap()[0],
            w["text"].as_str().unwrap()
        );
    }
}

#[test]
fn a_saved_dataset_reads_as_datasets_wrote_it() {
    let ds = Dataset::from_op(source(&fixtures().join("saved"), None, None));
    let spec = ds.element_spec().unwrap().unwrap().to_string();
    for part in [
        "'grid': TensorSpec(shape=(2, 3), dtype=int32)",
        "'image': TensorSpec(shape=(), dtype=string)",
        "'label': TensorSpec(shape=(), dtype=int64)",
        "'scores': TensorSpec(shape=(None,), dtype=float32)",
    ] {
        assert!(spec.contains(part), "{part} in {spec}");
    }
    let elements = all(&ds);
    check_rows(&elements, &expected("train"));
    // The image is a PNG the decode_png built-in reads.
    let png = Tensor::scalar_string(elements[4].components[1].string_values().unwrap()[0].clone());
    let pixels = crate::kernels::decode_png(&png, 0).unwrap();
    assert_eq!(pixels.dtype(), DType::UInt8);
    assert_eq!(
        pixels.shape(),
        &[2, 2, 1],
        "row 4: 1 + 4 % 3 wide, 2 high, grey"
    );
}

#[test]
fn a_dataset_dict_and_a_hub_snapshot_read_by_split() {
    for folder in ["dict", "hub"] {
        let root = fixtures().join(folder);
        for split in ["train", "test"] {
            let ds = Dataset::from_op(source(&root, Some(split), None));
            check_rows(&all(&ds), &expected(split));
        }
        let err = Dataset::from_op(source(&root, None, None))
            .iter()
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("train") && err.contains("test") && err.contains("split"),
            "{folder}: {err}"
        );
        let err = Dataset::from_op(source(&root, Some("validation"), None))
            .iter()
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("no split validation"), "{folder}: {err}");
    }
    // One split saved alone: its split may be named only if it is its own.
    let err = Dataset::from_op(source(&fixtures().join("saved"), Some("test"), None))
        .iter()
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not the split test"), "{err}");
}

#[test]
fn batches_and_columns() {
    let mut op = source(&fixtures().join("saved"), None, Some(4));
    op.columns = Some(vec!["image".into(), "label".into(), "grid".into()]);
    let ds = Dataset::from_op(op);
    let elements = all(&ds);
    // Two shards of 5 rows: batches never span files.
    let sizes: Vec<i64> = elements
        .iter()
        .map(|e| e.components[1].shape()[0])
        .collect();
    assert_eq!(sizes, vec![4, 1, 4, 1]);
    assert_eq!(elements[0].components[0].shape(), &[4, 2, 3]);
    let labels: Vec<i64> = elements
        .iter()
        .flat_map(|e| e.components[2].to_vec::<i64>().unwrap())
        .collect();
    let want: Vec<i64> = expected("train")
        .iter()
        .map(|r| r["label"].as_i64().unwrap())
        .collect();
    assert_eq!(labels, want);
    // scores vary in length: a batch needs a padding value.
    let err = Dataset::from_op(source(&fixtures().join("saved"), None, Some(4)))
        .iter()
        .and_then(|mut it| it.next_element())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("scores") && err.contains("padding"), "{err}");
}

#[test]
fn splits_reach_the_inner_source_and_every_row_is_read_once() {
    for (folder, split) in [("saved", None), ("hub", Some("train"))] {
        let ds = Dataset::from_op(source(&fixtures().join(folder), split, None));
        let provider: Arc<dyn SplitProvider> =
            Arc::from(ds.op().split_provider().unwrap().unwrap());
        assert_eq!(
            provider.cardinality(),
            if folder == "saved" { 2 } else { 1 },
            "{folder}: one split per shard (or row group)"
        );
        let mut ctx = IterContext::new();
        ctx.split_providers
            .insert(ds.op_key(), Arc::clone(&provider));
        let mut it = ds.iter_with(&ctx).unwrap();
        let mut texts = Vec::new();
        while let Some(e) = it.next_element().unwrap() {
            texts.push(e.components[4].string_values().unwrap()[0].clone());
        }
        assert_eq!(texts.len(), 10, "{folder}");
        assert!(
            provider.get_next().unwrap().is_none(),
            "{folder}: the splits were read from the provider"
        );
    }
}

#[test]
fn hub_cache_and_parquet_conversion_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let hub = fixtures().join("hub/data");
    // The cache: datasets--org--name/{refs/main, snapshots/<sha>/..., blobs}.
    let repo = dir.path().join("datasets--org--name");
    let snapshot = repo.join("snapshots/abc123/data");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "abc123").unwrap();
    for split in ["train", "test"] {
        let name = format!("{split}-00000-of-00001.parquet");
        let blob = repo.join(format!("blobs/{split}blob"));
        std::fs::copy(hub.join(&name), &blob).unwrap();
        std::os::unix::fs::symlink(&blob, snapshot.join(&name)).unwrap();
    }
    let ds = Dataset::from_op(source(&repo, Some("test"), None));
    check_rows(&all(&ds), &expected("test"));

    // refs/convert/parquet: {config}/{split}/0000.parquet; one config is
    // read from, two need choosing.
    let converted = dir.path().join("converted");
    for config in ["default"] {
        for split in ["train", "test"] {
            let d = converted.join(config).join(split);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::copy(
                hub.join(format!("{split}-00000-of-00001.parquet")),
                d.join("0000.parquet"),
            )
            .unwrap();
        }
    }
    let ds = Dataset::from_op(source(&converted, Some("train"), None));
    check_rows(&all(&ds), &expected("train"));
    let other = converted.join("other/train");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(
        hub.join("train-00000-of-00001.parquet"),
        other.join("0000.parquet"),
    )
    .unwrap();
    let err = Dataset::from_op(source(&converted, Some("train"), None))
        .iter()
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("default, other") && err.contains("<config>"),
        "{err}"
    );
    let ds = Dataset::from_op(source(&converted.join("other"), None, None));
    assert_eq!(all(&ds).len(), 10);
}

#[test]
fn missing_or_unknown_folders_say_how_to_make_a_local_copy() {
    let dir = tempfile::tempdir().unwrap();
    let stray = dir.path().join("stray");
    std::fs::create_dir_all(&stray).unwrap();
    std::fs::write(stray.join("notes.txt"), "hello").unwrap();
    for path in [
        dir.path().join("nowhere").to_str().unwrap().to_string(),
        stray.to_str().unwrap().to_string(),
        "hf://datasets/org/name".to_string(),
    ] {
        let err = Dataset::from_op(HuggingFaceSource::new(
            path.clone(),
            None,
            None,
            None,
            Declared::default(),
        ))
        .iter()
        .err()
        .unwrap()
        .to_string();
        assert!(
            err.contains(&path)
                && err.contains("save_to_disk")
                && err.contains("snapshot_download"),
            "{err}"
        );
    }
}

/// A `save_to_disk`-like folder of one stream with `batch`'s columns and
/// `features`.
fn saved_folder(dir: &Path, batch: &RecordBatch, features: Json) -> PathBuf {
    let folder = dir.join("saved");
    std::fs::create_dir_all(&folder).unwrap();
    let meta = serde_json::json!({"info": {"features": features}}).to_string();
    let schema = Arc::new(
        batch
            .schema()
            .as_ref()
            .clone()
            .with_metadata([("huggingface".to_string(), meta)].into()),
    );
    let batch = RecordBatch::try_new(Arc::clone(&schema), batch.columns().to_vec()).unwrap();
    let file = std::fs::File::create(folder.join("data-00000-of-00001.arrow")).unwrap();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &schema).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    std::fs::write(
        folder.join("state.json"),
        r#"{"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": null}"#,
    )
    .unwrap();
    folder
}

fn image_column(bytes: Vec<Option<&[u8]>>, paths: Vec<Option<&str>>) -> ArrayRef {
    Arc::new(StructArray::from(vec![
        (
            Arc::new(Field::new("bytes", DataType::Binary, true)),
            Arc::new(BinaryArray::from(bytes)) as ArrayRef,
        ),
        (
            Arc::new(Field::new("path", DataType::Utf8, true)),
            Arc::new(StringArray::from(paths)) as ArrayRef,
        ),
    ]))
}

#[test]
fn images_without_bytes_and_unsupported_features_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let batch = RecordBatch::try_from_iter_with_nullable(vec![
        (
            "image",
            image_column(
                vec![Some(b"\x89PNG".as_ref()), None],
                vec![None, Some("/elsewhere/cat.png")],
            ),
            true,
        ),
        (
            "mesh",
            Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
            true,
        ),
        (
            "id",
            Arc::new(Int64Array::from(vec![7, 8])) as ArrayRef,
            true,
        ),
    ])
    .unwrap();
    let folder = saved_folder(
        dir.path(),
        &batch,
        serde_json::json!({
            "image": {"_type": "Image"},
            "mesh": {"_type": "Mesh"},
            "id": {"dtype": "int64", "_type": "Value"},
        }),
    );
    let err = Dataset::from_op(source(&folder, None, None))
        .iter()
        .err()
        .unwrap();
    let err = err.to_string();
    assert!(
        err.contains("unimplemented: column mesh")
            && err.contains("Mesh")
            && err.contains("columns="),
        "{err}"
    );

    let mut op = source(&folder, None, None);
    op.columns = Some(vec!["image".into(), "id".into()]);
    let mut it = Dataset::from_op(op).iter().unwrap();
    let err = it.next_element().err().unwrap().to_string();
    assert!(
        err.contains("column image, row 1") && err.contains("/elsewhere/cat.png"),
        "{err}"
    );

    // A null image (the row has none) is a null: a declared value fills it.
    let batch = RecordBatch::try_new(
        batch.schema(),
        vec![
            Arc::new(
                StructArray::try_new(
                    match batch.schema().field(0).data_type() {
                        DataType::Struct(f) => f.clone(),
                        _ => unreachable!(),
                    },
                    image_column(vec![Some(b"\x89PNG".as_ref()), None], vec![None, None])
                        .as_struct()
                        .columns()
                        .to_vec(),
                    Some(vec![true, false].into()),
                )
                .unwrap(),
            ),
            batch.column(1).clone(),
            batch.column(2).clone(),
        ],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let folder = saved_folder(
        dir.path(),
        &batch,
        serde_json::json!({"image": {"_type": "Image"}, "id": {"dtype": "int64", "_type": "Value"}}),
    );
    let mut op = source(&folder, None, None);
    op.columns = Some(vec!["image".into(), "id".into()]);
    op.declared.null_values =
        [("image".to_string(), Tensor::scalar_string(b"none".to_vec()))].into();
    let elements = all(&Dataset::from_op(op));
    assert_eq!(
        &elements[1].components[1].string_values().unwrap()[0][..],
        b"none"
    );
}

#[test]
fn features_map_to_fixes() {
    let image = DataType::Struct(
        vec![
            Field::new("bytes", DataType::Binary, true),
            Field::new("path", DataType::Utf8, true),
        ]
        .into(),
    );
    let list_of = |t: DataType| DataType::List(Arc::new(Field::new("item", t, true)));
    let fix = Fix::of(&serde_json::json!({"_type": "Image"}), &image, "img").unwrap();
    assert_eq!(fix.data_type(&image, "img").unwrap(), DataType::Binary);
    // A list of images (datasets' List(Image())), and the old list form.
    for feature in [
        serde_json::json!({"_type": "List", "feature": {"_type": "Image"}}),
        serde_json::json!([{"_type": "Image"}]),
        serde_json::json!({"_type": "Sequence", "feature": {"_type": "Image"}}),
    ] {
        let fix = Fix::of(&feature, &list_of(image.clone()), "imgs").unwrap();
        assert_eq!(
            fix.data_type(&list_of(image.clone()), "imgs").unwrap(),
            list_of(DataType::Binary)
        );
    }
    // An Array3D with a dynamic first dimension.
    let nested = list_of(list_of(list_of(DataType::Float32)));
    let fix = Fix::of(
        &serde_json::json!({"_type": "Array3D", "shape": [null, 2, 3], "dtype": "float32"}),
        &nested,
        "a",
    )
    .unwrap();
    let fixed = fix.data_type(&nested, "a").unwrap();
    assert_eq!(
        super::super::convert::ColumnPlan::of(
            &Field::new("a", fixed, true),
            "a",
            &Declared::default()
        )
        .unwrap()
        .structure(false)
        .to_string(),
        "TensorSpec(shape=(None, 2, 3), dtype=float32)".to_string()
    );
    // Values and class labels stay; a mismatch or an unknown feature is
    // an error naming the column.
    assert_eq!(
        Fix::of(
            &serde_json::json!({"_type": "ClassLabel", "names": ["a"]}),
            &DataType::Int64,
            "l"
        )
        .unwrap(),
        Fix::Keep
    );
    let err = Fix::of(
        &serde_json::json!({"_type": "Image"}),
        &DataType::Utf8,
        "img",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("column img"), "{err}");
    let err = Fix::of(&serde_json::json!({"_type": "Nifti"}), &image, "scan")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("column scan") && err.contains("Nifti"),
        "{err}"
    );
}

#[test]
fn sharded_file_names_give_their_split() {
    assert_eq!(split_of_file("train-00000-of-00004.parquet"), "train");
    assert_eq!(
        split_of_file("train.clean.100-00003-of-00010-6a7d2e.parquet"),
        "train.clean.100"
    );
    assert_eq!(split_of_file("validation.parquet"), "validation");
    assert_eq!(split_of_file("-00000-of-00001.parquet"), "-00000-of-00001");
}

#[test]
fn the_attribute_form_reads_back_as_the_same_op() {
    let mut op = source(&fixtures().join("dict"), Some("train"), Some(16));
    op.columns = Some(vec!["image".into(), "label".into()]);
    let ds = Dataset::from_op(op);
    let def = crate::pipeline::to_pipeline_def(&ds, false).unwrap();
    let back = crate::pipeline::from_pipeline_def(&def).unwrap();
    assert_eq!(back, ds);
    let text = crate::json::to_json(&ds, false).unwrap();
    assert!(text.contains("huggingface_dataset"), "{text}");
    assert_eq!(crate::json::from_json(&text).unwrap().dataset, ds);
}
