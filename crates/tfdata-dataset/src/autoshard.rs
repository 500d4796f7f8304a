//! Static sharding (`FILE`, `DATA`, `FILE_OR_DATA`, `HINT`): the rewrite a
//! worker applies to a task's pipeline so that worker `index` of
//! `num_workers` reads its share, as TensorFlow's AutoShard rewrite does.
//!
//! * `FILE`: file sources keep every `num_workers`-th file from `index`
//!   (`list_files` is sharded before its shuffle, so shards are disjoint); a
//!   pipeline without file sources, or with fewer files than workers, fails.
//! * `DATA`: the pipeline's output keeps every `num_workers`-th element.
//! * `FILE_OR_DATA`: `FILE` if the pipeline reads files, else `DATA`.
//! * `HINT`: `shard(SHARD_HINT, SHARD_HINT)` placeholders become
//!   `shard(num_workers, index)`.

use tfdata_core::{Error, Result};
use tfdata_proto::tfdata::pipeline::{self as wire, attr_value::Value};

/// TensorFlow's `tf.data.experimental.SHARD_HINT`.
pub const SHARD_HINT: i64 = -1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaticPolicy {
    File,
    Data,
    FileOrData,
    Hint,
}

fn int(v: i64) -> wire::AttrValue {
    wire::AttrValue {
        value: Some(Value::I(v)),
    }
}

fn boolean(v: bool) -> wire::AttrValue {
    wire::AttrValue {
        value: Some(Value::B(v)),
    }
}

fn op(name: &str, input: wire::OpDef, attrs: Vec<(&str, wire::AttrValue)>) -> wire::OpDef {
    wire::OpDef {
        op: name.to_string(),
        inputs: vec![input],
        attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

/// Rewrites `root` for worker `index` of `num_workers`.
pub fn auto_shard(
    root: &wire::OpDef,
    policy: StaticPolicy,
    num_workers: i64,
    index: i64,
) -> Result<wire::OpDef> {
    if num_workers <= 0 || index < 0 || index >= num_workers {
        return Err(Error::InvalidArgument(format!(
            "static sharding needs 0 <= worker_index < num_workers, got index {index} of {num_workers}"
        )));
    }
    let data = |root: &wire::OpDef| {
        op(
            "shard",
            root.clone(),
            vec![("num_shards", int(num_workers)), ("index", int(index))],
        )
    };
    match policy {
        StaticPolicy::Data => Ok(data(root)),
        StaticPolicy::Hint => {
            let mut out = root.clone();
            replace_hints(&mut out, num_workers, index);
            Ok(out)
        }
        StaticPolicy::File | StaticPolicy::FileOrData => {
            let mut out = root.clone();
            let mut found = 0;
            shard_files(&mut out, num_workers, index, &mut found)?;
            match (found, policy) {
                (0, StaticPolicy::FileOrData) => Ok(data(root)),
                (0, _) => Err(Error::FailedPrecondition(
                    "FILE sharding: the dataset reads no files (no list_files, tfrecord_dataset, \
                     text_line_dataset, fixed_length_record_dataset, parquet_dataset, \
                     arrow_dataset, array_record_dataset, webdataset or file-name source); use \
                     DATA or FILE_OR_DATA"
                        .into(),
                )),
                _ => Ok(out),
            }
        }
    }
}

fn is_files(def: &wire::OpDef) -> bool {
    matches!(
        def.attrs.get("is_files").and_then(|a| a.value.as_ref()),
        Some(Value::B(true))
    )
}

fn replace_hints(def: &mut wire::OpDef, num_workers: i64, index: i64) {
    if def.op == "shard" {
        let is_hint = |key: &str| {
            matches!(
                def.attrs.get(key).and_then(|a| a.value.as_ref()),
                Some(Value::I(SHARD_HINT))
            )
        };
        if is_hint("num_shards") && is_hint("index") {
            def.attrs.insert("num_shards".into(), int(num_workers));
            def.attrs.insert("index".into(), int(index));
        }
    }
    for input in &mut def.inputs {
        replace_hints(input, num_workers, index);
    }
}

fn shard_files(
    def: &mut wire::OpDef,
    num_workers: i64,
    index: i64,
    found: &mut usize,
) -> Result<()> {
    match def.op.as_str() {
        "list_files" => {
            *found += 1;
            // Shard the sorted list, then shuffle the shard, so workers' files are disjoint.
            let shuffle = match def.attrs.get("shuffle").and_then(|a| a.value.as_ref()) {
                Some(Value::B(b)) => *b,
                _ => true,
            };
            let seed = def.attrs.remove("seed");
            def.attrs.insert("shuffle".into(), boolean(false));
            let listed = std::mem::take(def);
            let mut sharded = op(
                "shard",
                listed,
                vec![("num_shards", int(num_workers)), ("index", int(index))],
            );
            if shuffle {
                let mut attrs = vec![
                    ("buffer_size", int(1 << 16)),
                    ("reshuffle_each_iteration", boolean(true)),
                ];
                if let Some(seed) = seed {
                    attrs.push(("seed", seed));
                }
                sharded = op("shuffle", sharded, attrs);
            }
            *def = sharded;
            Ok(())
        }
        // File names that later ops read (TensorFlow's `is_files`): each
        // worker keeps its rows, before anything reorders them.
        "from_tensor_slices" if is_files(def) => {
            *found += 1;
            let listed = std::mem::take(def);
            *def = op(
                "shard",
                listed,
                vec![("num_shards", int(num_workers)), ("index", int(index))],
            );
            Ok(())
        }
        "tfrecord_dataset"
        | "text_line_dataset"
        | "fixed_length_record_dataset"
        | "parquet_dataset"
        | "arrow_dataset"
        | "array_record_dataset"
        | "webdataset" => {
            *found += 1;
            // The file list as given: a pattern is one entry (expanded by
            // the source when it reads), so list the files to shard them.
            let key = if def.op == "webdataset" {
                "urls"
            } else {
                "filenames"
            };
            let files = match def.attrs.get(key).and_then(|a| a.value.as_ref()) {
                Some(Value::List(l)) => l.values.clone(),
                Some(Value::S(s)) => vec![wire::AttrValue {
                    value: Some(Value::S(s.clone())),
                }],
                _ => Vec::new(),
            };
            if (files.len() as i64) < num_workers {
                return Err(Error::FailedPrecondition(format!(
                    "FILE sharding: {} reads {} files, fewer than the {num_workers} workers (a \
                     pattern counts as one here: list its files to shard them); use DATA \
                     sharding",
                    def.op,
                    files.len()
                )));
            }
            let mine = files
                .into_iter()
                .enumerate()
                .filter(|(i, _)| *i as i64 % num_workers == index)
                .map(|(_, f)| f)
                .collect();
            def.attrs.insert(
                key.into(),
                wire::AttrValue {
                    value: Some(Value::List(wire::AttrList { values: mine })),
                },
            );
            Ok(())
        }
        _ => {
            for input in &mut def.inputs {
                shard_files(input, num_workers, index, found)?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dataset;
    use crate::pipeline::{from_pipeline_def, to_pipeline_def};

    fn run(ds: &Dataset, policy: StaticPolicy, n: i64, i: i64) -> Result<Vec<i64>> {
        let def = to_pipeline_def(ds, false)?;
        let root = auto_shard(def.root.as_ref().unwrap(), policy, n, i)?;
        let sharded = from_pipeline_def(&wire::PipelineDef {
            root: Some(root),
            ..def
        })?;
        let mut it = sharded.iter()?;
        let mut out = Vec::new();
        while let Some(e) = it.next_element()? {
            out.push(e.components[0].to_scalar::<i64>()?);
        }
        Ok(out)
    }

    /// The columnar, WebDataset and ArrayRecord sources shard their file
    /// lists as TFRecord files do; a pattern is one entry.
    #[test]
    fn the_new_sources_shard_their_files() {
        let files = |def: &wire::OpDef, key: &str| -> Vec<String> {
            match def.attrs.get(key).and_then(|a| a.value.as_ref()) {
                Some(Value::List(l)) => l
                    .values
                    .iter()
                    .filter_map(|v| match &v.value {
                        Some(Value::S(s)) => Some(s.clone()),
                        _ => None,
                    })
                    .collect(),
                other => panic!("{key}: {other:?}"),
            }
        };
        let names = ["a", "b", "c", "d", "e"];
        let listed = |values: &[&str]| wire::AttrValue {
            value: Some(Value::List(wire::AttrList {
                values: values
                    .iter()
                    .map(|v| wire::AttrValue {
                        value: Some(Value::S(v.to_string())),
                    })
                    .collect(),
            })),
        };
        // The sources as their pipeline defs name them (made by hand: the
        // files do not exist, and the sources look into them for their
        // element spec).
        let source = |name: &str, key: &str, values: &[&str]| wire::OpDef {
            op: name.to_string(),
            attrs: [(key.to_string(), listed(values))].into(),
            ..Default::default()
        };
        for (name, key) in [
            ("parquet_dataset", "filenames"),
            ("arrow_dataset", "filenames"),
            ("array_record_dataset", "filenames"),
            ("webdataset", "urls"),
        ] {
            let batched = op(
                "batch",
                source(name, key, &names),
                vec![("batch_size", int(4))],
            );
            let root = auto_shard(&batched, StaticPolicy::File, 2, 1).unwrap();
            assert_eq!(files(&root.inputs[0], key), ["b", "d"], "{name}");
        }
        let one_pattern = source("parquet_dataset", "filenames", &["data/*.parquet"]);
        let err = auto_shard(&one_pattern, StaticPolicy::File, 2, 0).unwrap_err();
        assert!(err.to_string().contains("list its files"), "{err}");
    }

    #[test]
    fn file_names_are_sharded_before_they_are_read() {
        use tfdata_core::Tensor;
        let names = Tensor::strings(
            ["a", "b", "c", "d", "e"]
                .iter()
                .map(|s| bytes::Bytes::from(*s))
                .collect(),
            vec![5],
        )
        .unwrap();
        let ds = Dataset::from_file_names(names);
        let def = to_pipeline_def(&ds, false).unwrap();
        let root = auto_shard(def.root.as_ref().unwrap(), StaticPolicy::File, 2, 1).unwrap();
        let sharded = from_pipeline_def(&wire::PipelineDef {
            root: Some(root),
            ..def
        })
        .unwrap();
        let got: Vec<_> = sharded
            .iter()
            .unwrap()
            .map(|e| e.unwrap().components[0].string_values().unwrap()[0].clone())
            .collect();
        assert_eq!(got, vec![bytes::Bytes::from("b"), bytes::Bytes::from("d")]);
    }

    #[test]
    fn data_and_hint_sharding() {
        let ds = Dataset::range(10);
        assert_eq!(run(&ds, StaticPolicy::Data, 3, 1).unwrap(), vec![1, 4, 7]);
        assert_eq!(
            run(&ds, StaticPolicy::FileOrData, 3, 2).unwrap(),
            vec![2, 5, 8]
        );
        let hinted = Dataset::range(10).shard(SHARD_HINT, SHARD_HINT);
        assert_eq!(
            run(&hinted, StaticPolicy::Hint, 2, 1).unwrap(),
            vec![1, 3, 5, 7, 9]
        );
        assert!(
            run(&ds, StaticPolicy::File, 2, 0)
                .unwrap_err()
                .to_string()
                .contains("reads no files")
        );
        assert!(run(&ds, StaticPolicy::Data, 2, 2).is_err());
    }

    #[test]
    fn file_sharding_splits_fixed_length_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut names = Vec::new();
        for f in 0..5 {
            let path = dir.path().join(format!("f{f}.bin"));
            // A 1-byte header, two 2-byte records, a 1-byte footer.
            std::fs::write(&path, format!("H{}{}F", f * 10 + 10, f * 10 + 11)).unwrap();
            names.push(path.display().to_string());
        }
        crate::register_function("autoshard_test_parse_fixed", |e: tfdata_core::Element| {
            let s = e.components[0].string_values()?[0].clone();
            let v: i64 = std::str::from_utf8(&s).unwrap_or("0").parse().unwrap_or(-1);
            Ok(tfdata_core::Element::single(tfdata_core::Tensor::scalar(v)))
        });
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let ds =
            Dataset::fixed_length_records(&refs, 1, 2, 1, "").map("autoshard_test_parse_fixed");
        assert_eq!(
            run(&ds, StaticPolicy::File, 2, 1).unwrap(),
            vec![20, 21, 40, 41]
        );
        assert_eq!(
            run(&ds, StaticPolicy::FileOrData, 3, 0).unwrap(),
            vec![10, 11, 40, 41]
        );
        assert!(
            run(&ds, StaticPolicy::File, 6, 0)
                .unwrap_err()
                .to_string()
                .contains("fixed_length_record_dataset reads 5 files, fewer")
        );
    }

    #[test]
    fn file_sharding_splits_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut names = Vec::new();
        for f in 0..4 {
            let path = dir.path().join(format!("f{f}.txt"));
            std::fs::write(&path, format!("{}\n{}\n", f * 10, f * 10 + 1)).unwrap();
            names.push(path.display().to_string());
        }
        let parse = |ds: Dataset| {
            crate::register_function("autoshard_test_parse", |e: tfdata_core::Element| {
                let s = e.components[0].string_values()?[0].clone();
                let v: i64 = std::str::from_utf8(&s).unwrap_or("0").parse().unwrap_or(-1);
                Ok(tfdata_core::Element::single(tfdata_core::Tensor::scalar(v)))
            });
            ds.map("autoshard_test_parse")
        };
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let lines = parse(Dataset::text_lines(&refs, ""));
        assert_eq!(
            run(&lines, StaticPolicy::File, 2, 1).unwrap(),
            vec![10, 11, 30, 31]
        );
        let pattern = dir.path().join("f*.txt");
        let listed = parse(
            Dataset::list_files(&[pattern.to_str().unwrap()], true, Some(5))
                .flat_map(crate::FunctionRef::named("text_line_dataset")),
        );
        let mut got = run(&listed, StaticPolicy::File, 2, 0).unwrap();
        got.sort();
        assert_eq!(got, vec![0, 1, 20, 21]);
        assert!(
            run(&lines, StaticPolicy::File, 5, 0)
                .unwrap_err()
                .to_string()
                .contains("fewer")
        );
    }
}
