//! Tests of the autocache engine: analysis rules per op kind, fingerprints
//! over real files, the cache layout, rewriting to `load` over a real
//! snapshot, profiling a real decode/resize pipeline, and choosing.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tfdata_core::{DType, Element, Error, Result, Tensor};
use tfdata_proto::tfdata::pipeline::{OpDef, PipelineDef};

use super::*;
use crate::attrs::{Attrs, FunctionRef, attrs_to_wire};
use crate::dataset::Dataset;
use crate::io::fs::FileSystem;
use crate::io::{CompressionType, LocalFileSystem, TfRecordWriter};
use crate::pipeline::{PIPELINE_FORMAT_VERSION, from_pipeline_def};

// ------------------------------------------------------------- helpers

fn op(name: &str, inputs: Vec<OpDef>, attrs: Attrs) -> OpDef {
    OpDef {
        op: name.to_string(),
        inputs,
        attrs: attrs_to_wire(&attrs),
    }
}

/// A chain of ops, bottom (the source) first.
fn chain(ops: Vec<(&str, Attrs)>) -> PipelineDef {
    let mut node: Option<OpDef> = None;
    for (name, attrs) in ops {
        node = Some(op(name, node.into_iter().collect(), attrs));
    }
    pipeline(node.expect("at least one op"))
}

fn pipeline(root: OpDef) -> PipelineDef {
    PipelineDef {
        format_version: PIPELINE_FORMAT_VERSION,
        root: Some(root),
        compress: true,
    }
}

fn range(n: i64) -> (&'static str, Attrs) {
    (
        "range",
        Attrs::new()
            .with("start", 0)
            .with("stop", n)
            .with("step", 1),
    )
}

fn map(f: FunctionRef) -> (&'static str, Attrs) {
    ("map", Attrs::new().with("function", f))
}

fn builtin(name: &str, args: Attrs) -> FunctionRef {
    FunctionRef::with_args(name, args)
}

fn resolver() -> impl Fn(&str) -> Result<Arc<dyn FileSystem>> {
    |_: &str| Ok(Arc::new(LocalFileSystem) as Arc<dyn FileSystem>)
}

fn labels(a: &Analysis) -> Vec<&str> {
    a.candidates.iter().map(|c| c.label.as_str()).collect()
}

fn stopped(a: &Analysis) -> &str {
    a.stopped.as_deref().unwrap_or("")
}

/// Elements as sortable text, to compare multisets.
fn multiset(elements: Vec<Element>) -> Vec<String> {
    let mut out: Vec<String> = elements
        .iter()
        .map(|e| format!("{:?}", e.components))
        .collect();
    out.sort();
    out
}

fn collect(ds: &Dataset) -> Vec<Element> {
    let mut it = ds.iter().expect("iterator");
    let mut out = Vec::new();
    while let Some(e) = it.next_element().expect("element") {
        out.push(e);
    }
    out
}

fn build(op: &OpDef) -> Result<Dataset> {
    from_pipeline_def(&PipelineDef {
        format_version: PIPELINE_FORMAT_VERSION,
        root: Some(op.clone()),
        compress: false,
    })
}

// ------------------------------------------------------------ analysis

#[test]
fn deterministic_element_wise_chain_is_all_candidates() {
    let def = chain(vec![
        range(10),
        map(builtin("cast", Attrs::new().with("dtype", "float32"))),
        ("prefetch", Attrs::new().with("buffer_size", 2)),
        map(builtin("scale", Attrs::new().with("factor", 2.0))),
    ]);
    let a = analyse(&def);
    assert_eq!(
        labels(&a),
        ["0: range", "1: map(cast)", "2: prefetch", "3: map(scale)"]
    );
    assert_eq!(a.stopped, None);
    // Each candidate's prefix is its subtree; the last is the whole root.
    assert_eq!(a.candidates[3].prefix, *def.root.as_ref().unwrap());
    assert_eq!(a.candidates[0].prefix.op, "range");
    assert!(a.candidates[0].prefix.inputs.is_empty());
    for (i, c) in a.candidates.iter().enumerate() {
        assert_eq!(c.index, i);
        // Only the range itself is in memory.
        assert_eq!(c.in_memory, i == 0, "{c:?}");
    }
}

#[test]
fn every_element_wise_op_continues_the_chain() {
    for name in ELEMENT_WISE {
        let attrs = match *name {
            "map" | "flat_map" | "interleave" => {
                Attrs::new().with("function", builtin("tfrecord_dataset", Attrs::new()))
            }
            "filter" => Attrs::new().with(
                "predicate",
                FunctionRef::named("is_even").declared_deterministic(),
            ),
            _ => Attrs::new(),
        };
        let a = analyse(&chain(vec![range(4), (name, attrs)]));
        assert_eq!(a.candidates.len(), 2, "{name}: {a:?}");
        assert_eq!(a.stopped, None, "{name}");
    }
}

#[test]
fn ops_across_elements_end_the_chain_naming_the_op() {
    for name in ACROSS_ELEMENTS {
        let def = chain(vec![
            range(8),
            map(builtin("cast", Attrs::new().with("dtype", "float32"))),
            (name, Attrs::new()),
            map(builtin("cast", Attrs::new().with("dtype", "float64"))),
        ]);
        let a = analyse(&def);
        assert_eq!(labels(&a), ["0: range", "1: map(cast)"], "{name}");
        let why = stopped(&a);
        assert!(why.contains(&format!("`{name}`")), "{why}");
        assert!(
            why.contains("groups or counts elements across splits"),
            "{why}"
        );
        assert!(why.contains(&format!("at 2: {name}")), "{why}");
    }
}

#[test]
fn multi_input_ops_end_the_chain() {
    for name in ["zip", "concatenate", "directed_interleave"] {
        let two = op(
            name,
            vec![op("range", vec![], Attrs::new().with("stop", 3)); 2],
            Attrs::new(),
        );
        let def = pipeline(op("prefetch", vec![two], Attrs::new()));
        let a = analyse(&def);
        assert!(a.candidates.is_empty(), "{name}");
        assert!(
            stopped(&a).contains(&format!("`{name}` combines 2 datasets")),
            "{a:?}"
        );
        assert!(stopped(&a).contains(&format!("at 0: {name}")), "{a:?}");
    }
}

#[test]
fn shuffles_cache_only_when_seeded_and_not_reshuffled() {
    let shuffle = |attrs: Attrs| chain(vec![range(8), ("shuffle", attrs.with("buffer_size", 4))]);
    let seeded = analyse(&shuffle(
        Attrs::new()
            .with("seed", 7)
            .with("reshuffle_each_iteration", false),
    ));
    assert_eq!(labels(&seeded), ["0: range", "1: shuffle"]);

    let reshuffled = analyse(&shuffle(Attrs::new().with("seed", 7)));
    assert_eq!(labels(&reshuffled), ["0: range"]);
    assert!(
        stopped(&reshuffled).contains("`shuffle` with reshuffle_each_iteration"),
        "{reshuffled:?}"
    );
    assert!(
        stopped(&reshuffled).contains("at 1: shuffle"),
        "{reshuffled:?}"
    );

    for unseeded in [
        Attrs::new().with("reshuffle_each_iteration", false),
        // TensorFlow's (0, 0) seeds mean "no seed".
        Attrs::new()
            .with("graph_seed", 0)
            .with("seed", 0)
            .with("reshuffle_each_iteration", false),
    ] {
        let a = analyse(&shuffle(unseeded));
        assert!(
            stopped(&a).contains("unseeded random op `shuffle`"),
            "{a:?}"
        );
    }
    let graph_seeded = analyse(&shuffle(
        Attrs::new()
            .with("graph_seed", 3)
            .with("seed", 0)
            .with("reshuffle_each_iteration", false),
    ));
    assert_eq!(graph_seeded.candidates.len(), 2);
}

#[test]
fn random_builtins_need_a_seed() {
    let crop = |args: Attrs| {
        chain(vec![
            range(4),
            map(builtin("decode_jpeg", Attrs::new())),
            map(builtin("random_crop", args.with("size", vec![2i64, 2]))),
            map(builtin("resize", Attrs::new().with("size", vec![4i64, 4]))),
        ])
    };
    let a = analyse(&crop(Attrs::new()));
    assert_eq!(labels(&a), ["0: range", "1: map(decode_jpeg)"]);
    assert_eq!(
        stopped(&a),
        "unseeded random op `random_crop` at 2: map(random_crop); nothing from there on is cached"
    );
    let a = analyse(&crop(Attrs::new().with("seed", 5)));
    assert_eq!(a.candidates.len(), 4, "{a:?}");
    for name in SEEDED_RANDOM_BUILTINS {
        let a = analyse(&chain(vec![range(2), map(builtin(name, Attrs::new()))]));
        assert!(
            stopped(&a).contains(&format!("unseeded random op `{name}`")),
            "{a:?}"
        );
    }
}

#[test]
fn user_functions_need_a_declaration() {
    let a = analyse(&chain(vec![range(4), map(FunctionRef::named("augment"))]));
    assert_eq!(labels(&a), ["0: range"]);
    assert!(
        stopped(&a).contains("user function `augment` not declared deterministic"),
        "{a:?}"
    );
    let declared = analyse(&chain(vec![
        range(4),
        map(FunctionRef::named("augment").declared_deterministic()),
    ]));
    assert_eq!(labels(&declared), ["0: range", "1: map(augment)"]);

    // A function inside another's arguments counts too.
    let nested = builtin(
        "select",
        Attrs::new().with("inner", FunctionRef::named("hidden")),
    );
    let a = analyse(&chain(vec![range(4), map(nested)]));
    assert!(stopped(&a).contains("`hidden`"), "{a:?}");
}

#[test]
fn sources_and_their_randomness() {
    let files = |shuffle: Option<bool>| {
        let mut attrs = Attrs::new().with("file_pattern", vec!["/d/*.rec".to_string()]);
        if let Some(s) = shuffle {
            attrs = attrs.with("shuffle", s);
        }
        chain(vec![("list_files", attrs)])
    };
    // TensorFlow's default: shuffled anew each epoch.
    assert!(stopped(&analyse(&files(None))).contains("`list_files` with shuffle=True"));
    assert_eq!(analyse(&files(Some(false))).candidates.len(), 1);

    let random = |seed: i64| chain(vec![("random", Attrs::new().with("seed", seed))]);
    assert!(stopped(&analyse(&random(0))).contains("unseeded random op `random`"));
    assert!(stopped(&analyse(&random(3))).contains("infinite"));

    let load = analyse(&chain(vec![("load", Attrs::new().with("path", "/c"))]));
    assert!(stopped(&load).contains("`load` reads a snapshot already"));
    let unknown = analyse(&chain(vec![range(2), ("frobnicate", Attrs::new())]));
    assert!(stopped(&unknown).contains("`frobnicate` is not an op autocache knows"));

    let empty = analyse(&PipelineDef::default());
    assert!(empty.candidates.is_empty());
    assert!(stopped(&empty).contains("no root"));
}

#[test]
fn chains_deeper_than_decoding_allows_are_refused() {
    let mut ops = vec![range(2)];
    for _ in 0..=crate::pipeline::MAX_DEPTH + 1 {
        ops.push(("prefetch", Attrs::new()));
    }
    let a = analyse(&chain(ops));
    assert!(a.candidates.is_empty());
    assert!(stopped(&a).contains("deeper than"), "{a:?}");
}

#[test]
fn builtin_tables_name_real_builtins() {
    // Each name the tables vouch for is a built-in this build resolves
    // (arguments may be missing: `Some(Err(..))` still means "built-in").
    for name in DETERMINISTIC_BUILTINS.iter().chain(SEEDED_RANDOM_BUILTINS) {
        let f = FunctionRef::named(name);
        let known = crate::builtins::map(&f, None).is_some()
            || crate::ops::files::builtin_dataset_fn(&f, None).is_some();
        assert!(known, "{name} is not a built-in");
    }
    assert!(crate::builtins::map(&FunctionRef::named("augment"), None).is_none());
}

// --------------------------------------------------------- fingerprints

fn write_file(path: &std::path::Path, bytes: &[u8]) {
    std::fs::write(path, bytes).expect("write");
}

fn set_mtime(path: &std::path::Path, t: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(t))
        .expect("set mtime");
}

fn files_pipeline(files: &[&str]) -> PipelineDef {
    chain(vec![
        (
            "tfrecord_dataset",
            Attrs::new().with(
                "filenames",
                files.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
            ),
        ),
        map(builtin("decode_jpeg", Attrs::new().with("channels", 3))),
    ])
}

fn fp_of(def: &PipelineDef, index: usize) -> Result<Fingerprint> {
    let a = analyse(def);
    fingerprint(&a.candidates[index], &resolver())
}

#[test]
fn fingerprint_changes_with_size_or_mtime_not_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.tfrecord");
    let b = dir.path().join("b.tfrecord");
    let unrelated = dir.path().join("unrelated.tfrecord");
    write_file(&a, b"aaaa");
    write_file(&b, b"bbbb");
    write_file(&unrelated, b"x");
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    set_mtime(&a, t0);
    set_mtime(&b, t0);
    let def = files_pipeline(&[a.to_str().unwrap(), b.to_str().unwrap()]);
    let first = fp_of(&def, 1).unwrap();
    assert_eq!(first.prefix.len(), 64);
    assert_eq!(first.files.len(), 64);
    assert_eq!(fp_of(&def, 1).unwrap(), first, "stable");

    // Other files, and the same bytes rewritten with the same time: same.
    write_file(&unrelated, b"changed");
    write_file(&a, b"AAAA");
    set_mtime(&a, t0);
    assert_eq!(fp_of(&def, 1).unwrap(), first);

    // Modification time only.
    set_mtime(&a, t0 + Duration::from_nanos(1_000));
    let touched = fp_of(&def, 1).unwrap();
    assert_eq!(touched.prefix, first.prefix);
    assert_ne!(touched.files, first.files);
    set_mtime(&a, t0);
    assert_eq!(fp_of(&def, 1).unwrap(), first);

    // Size only (time put back).
    write_file(&b, b"bbbbb");
    set_mtime(&b, t0);
    let grown = fp_of(&def, 1).unwrap();
    assert_eq!(grown.prefix, first.prefix);
    assert_ne!(grown.files, first.files);
}

#[test]
fn prefix_fingerprint_covers_the_prefix_only() {
    let with_suffix = |suffix: (&'static str, Attrs)| {
        chain(vec![
            range(10),
            map(builtin("cast", Attrs::new().with("dtype", "float32"))),
            suffix,
        ])
    };
    let a = fp_of(
        &with_suffix(("batch", Attrs::new().with("batch_size", 2))),
        1,
    )
    .unwrap();
    let b = fp_of(&with_suffix(("take", Attrs::new().with("count", 3))), 1).unwrap();
    assert_eq!(a, b, "same prefix, other suffix");
    let seeded = |seed: i64| {
        chain(vec![
            range(10),
            (
                "shuffle",
                Attrs::new()
                    .with("buffer_size", 4)
                    .with("seed", seed)
                    .with("reshuffle_each_iteration", false),
            ),
        ])
    };
    assert_ne!(
        fp_of(&seeded(1), 1).unwrap().prefix,
        fp_of(&seeded(2), 1).unwrap().prefix,
        "seeds are part of the prefix"
    );
    // Other files: the same prefix bytes would differ in `filenames`.
    assert_ne!(
        fp_of(&seeded(1), 0).unwrap().prefix,
        fp_of(&seeded(1), 1).unwrap().prefix
    );
}

#[test]
fn directories_and_patterns_are_walked() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("sub")).unwrap();
    write_file(&data.join("x.rec"), b"1");
    write_file(&data.join("sub/y.rec"), b"2");
    let root = dir.path().to_str().unwrap();

    let pattern = format!("{root}/data/*.rec");
    let listed = chain(vec![(
        "list_files",
        Attrs::new()
            .with("file_pattern", vec![pattern])
            .with("shuffle", false),
    )]);
    let before = fp_of(&listed, 0).unwrap();
    write_file(&data.join("other.txt"), b"not matched");
    assert_eq!(fp_of(&listed, 0).unwrap(), before, "a non-matching file");
    write_file(&data.join("z.rec"), b"3");
    assert_ne!(fp_of(&listed, 0).unwrap(), before, "a new match");

    let whole = files_pipeline(&[data.to_str().unwrap()]);
    let a = analyse(&whole);
    let files = fingerprint::named_files(&a.candidates[0].prefix, &resolver()).unwrap();
    let names: Vec<&str> = files.keys().map(|k| &k[root.len()..]).collect();
    assert_eq!(
        names,
        [
            "/data/other.txt",
            "/data/sub/y.rec",
            "/data/x.rec",
            "/data/z.rec"
        ]
    );
    let before = fp_of(&whole, 0).unwrap();
    write_file(&data.join("sub/new.rec"), b"4");
    assert_ne!(fp_of(&whole, 0).unwrap(), before, "a file added below");
}

#[test]
fn named_files_are_looked_up_once_across_calls_that_share_them() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.tfrecord"), dir.path().join("b.tfrecord"));
    write_file(&a, b"aaaa");
    write_file(&b, b"bb");
    let (a, b) = (
        a.to_str().unwrap().to_string(),
        b.to_str().unwrap().to_string(),
    );
    let lookups = std::sync::atomic::AtomicUsize::new(0);
    let counting = |path: &str| {
        lookups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        crate::io::file_system(path)
    };
    let mut seen = fingerprint::NamedFiles::default();
    // Two candidates of one chain: both name `a`, the second `b` too.
    let first = fingerprint::named_by_strings_with(vec![a.clone()], &counting, &mut seen).unwrap();
    let second =
        fingerprint::named_by_strings_with(vec![b.clone(), a.clone()], &counting, &mut seen)
            .unwrap();
    assert_eq!(lookups.load(std::sync::atomic::Ordering::Relaxed), 2);
    assert_eq!(first.len(), 1);
    assert_eq!(second.len(), 2);
    // The same files as without the memo.
    assert_eq!(
        second,
        fingerprint::named_by_strings(vec![a, b], &crate::io::file_system).unwrap()
    );
}

#[test]
fn all_fingerprints_at_once_match_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("a.tfrecord");
    let vocabulary = dir.path().join("vocab.txt");
    write_file(&data, b"records");
    write_file(&vocabulary, b"a\nb\n");
    let def = chain(vec![
        (
            "text_line_dataset",
            Attrs::new().with("filenames", vec![data.to_str().unwrap().to_string()]),
        ),
        map(builtin("lower", Attrs::new())),
        map(builtin(
            "lookup",
            Attrs::new().with("vocabulary_file", vocabulary.to_str().unwrap()),
        )),
        ("prefetch", Attrs::new()),
    ]);
    let a = analyse(&def);
    assert_eq!(a.candidates.len(), 4);
    let fs = resolver();
    let all = fingerprints(&a, &fs);
    for (c, fp) in a.candidates.iter().zip(&all) {
        assert_eq!(
            *fp.as_ref().unwrap(),
            fingerprint(c, &fs).unwrap(),
            "{}",
            c.label
        );
    }
    // The vocabulary counts from the lookup on.
    let files: Vec<&str> = all
        .iter()
        .map(|f| f.as_ref().unwrap().files.as_str())
        .collect();
    assert_eq!(files[0], files[1]);
    assert_ne!(files[1], files[2]);
    assert_eq!(files[2], files[3]);

    // A missing vocabulary fails the lookup's point and the ones above it.
    std::fs::remove_file(&vocabulary).unwrap();
    let all = fingerprints(&a, &fs);
    assert!(all[0].is_ok() && all[1].is_ok());
    for fp in &all[2..] {
        let err = fp.as_ref().unwrap_err();
        assert!(err.to_string().contains("vocab.txt"), "{err}");
    }
}

#[test]
fn webdataset_shard_patterns_are_expanded() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..3 {
        write_file(&dir.path().join(format!("train-{i:03}.tar")), b"tar");
    }
    let root = dir.path().to_str().unwrap();
    let def = chain(vec![(
        "webdataset",
        Attrs::new().with("urls", vec![format!("{root}/train-{{000..002}}.tar")]),
    )]);
    let a = analyse(&def);
    assert_eq!(a.candidates.len(), 1, "{a:?}");
    let files = fingerprint::named_files(&a.candidates[0].prefix, &resolver()).unwrap();
    assert_eq!(files.len(), 3, "{files:?}");
    let before = fp_of(&def, 0).unwrap();
    write_file(&dir.path().join("train-001.tar"), b"longer tar");
    assert_ne!(fp_of(&def, 0).unwrap(), before);
    let missing = chain(vec![(
        "webdataset",
        Attrs::new().with("urls", vec![format!("{root}/train-{{000..003}}.tar")]),
    )]);
    assert!(fp_of(&missing, 0).is_err());
}

#[test]
fn missing_paths_are_refused_other_strings_are_data() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("gone.tfrecord");
    let err = fp_of(&files_pipeline(&[missing.to_str().unwrap()]), 0).unwrap_err();
    assert!(matches!(err, Error::FailedPrecondition(_)), "{err}");
    assert!(err.to_string().contains("gone.tfrecord"), "{err}");
    assert!(err.to_string().contains("does not exist"), "{err}");
    let unknown_scheme = fp_of(&files_pipeline(&["hdfs://n/x.rec"]), 0).unwrap_err();
    assert!(
        unknown_scheme.to_string().contains("hdfs://n/x.rec"),
        "{unknown_scheme}"
    );

    // Plain words and feature names are data, not files.
    let words = Tensor::strings(
        vec!["hello".into(), "a sentence, with spaces/slashes.".into()],
        vec![2],
    )
    .unwrap();
    let def = chain(vec![
        (
            "from_tensor_slices",
            Attrs::new().with("components", vec![words.clone()]),
        ),
        map(builtin(
            "select",
            Attrs::new().with("components", vec!["image/encoded".to_string()]),
        )),
    ]);
    assert!(fp_of(&def, 1).is_ok());
    let def = chain(vec![(
        "from_tensors",
        Attrs::new().with("components", vec![words]),
    )]);
    assert!(fp_of(&def, 0).is_ok());
    for (s, path) in [
        ("x.tfrecord", true),
        ("dir/x", true),
        ("s3://b/k", true),
        ("0.5", false),
        ("float32", false),
        ("two words.txt", false),
    ] {
        assert_eq!(fingerprint::looks_like_path(s), path, "{s}");
    }
}

#[test]
fn too_many_strings_or_files_are_refused() {
    let many: Vec<bytes::Bytes> = (0..=MAX_FINGERPRINT_FILES)
        .map(|i| format!("w{i}").into())
        .collect();
    let n = many.len() as i64;
    let names = Tensor::strings(many, vec![n]).unwrap();
    let def = chain(vec![(
        "from_tensor_slices",
        Attrs::new().with("components", vec![names]),
    )]);
    let err = fp_of(&def, 0).unwrap_err();
    assert!(err.to_string().contains("more than 100000 files"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    for i in 0..3 {
        write_file(&dir.path().join(format!("{i}")), b"x");
    }
    let root = dir.path().to_str().unwrap();
    assert_eq!(LocalFileSystem.walk(root, 3).unwrap().len(), 3);
    let err = LocalFileSystem.walk(root, 2).unwrap_err();
    assert!(err.to_string().contains("more than 2 files"), "{err}");
}

// --------------------------------------------------------------- layout

#[test]
fn cache_layout_stale_caches_and_dropping() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let fs = resolver();
    let fp = Fingerprint {
        prefix: "p".repeat(64),
        files: "f".repeat(64),
    };
    let path = cache_path(root, &fp);
    assert_eq!(path, format!("{root}/{}/{}", fp.prefix, fp.files));
    assert_eq!(
        cache_path("s3://b/c/", &fp),
        format!("s3://b/c/{}/{}", fp.prefix, fp.files)
    );
    assert!(stale_caches(root, &fp, &fs).unwrap().is_empty());
    assert!(!is_complete(&path, &fs).unwrap());

    let spec = crate::spec::Structure::Tensor(crate::spec::TensorSpec::new(
        DType::Int64,
        crate::spec::Shape(Some(vec![])),
    ));
    let elements: Vec<Element> = (0..5)
        .map(|i| Element::new(vec![Tensor::scalar(i as i64)]))
        .collect();
    let old = Fingerprint {
        prefix: fp.prefix.clone(),
        files: "0".repeat(64),
    };
    let local = LocalFileSystem;
    for f in [&fp, &old] {
        crate::snapshot::testing::write_snapshot(
            &local,
            &cache_path(root, f),
            &spec,
            CACHE_COMPRESSION,
            &elements,
            2,
            2,
        )
        .unwrap();
    }
    // Another prefix's cache is not this one's stale cache.
    let other = Fingerprint {
        prefix: "q".repeat(64),
        files: "1".repeat(64),
    };
    std::fs::create_dir_all(cache_path(root, &other)).unwrap();
    assert!(is_complete(&path, &fs).unwrap());
    let stale = stale_caches(root, &fp, &fs).unwrap();
    assert_eq!(stale, [cache_path(root, &old)]);

    drop_cache(&stale[0], &fs).unwrap();
    assert!(!std::path::Path::new(&stale[0]).exists());
    assert!(stale_caches(root, &fp, &fs).unwrap().is_empty());
    assert!(is_complete(&path, &fs).unwrap(), "the current cache stays");
    drop_cache(&stale[0], &fs).unwrap();
    assert!(drop_cache("/", &fs).is_err());
}

#[test]
fn fingerprints_and_caches_on_an_object_store() {
    let (store_fs, _) = crate::io::object_store::test_support::memory_fs();
    let store: Arc<dyn FileSystem> = Arc::new(store_fs);
    let fs = {
        let store = store.clone();
        move |_: &str| Ok(store.clone())
    };
    let write = |url: &str, bytes: &[u8]| {
        crate::io::object_store::test_support::write_dyn(&*store, url, bytes)
    };
    write("s3://bucket/data/a.rec", b"one");
    write("s3://bucket/data/b.rec", b"two");
    let def = files_pipeline(&["s3://bucket/data"]);
    let a = analyse(&def);
    let first = fingerprint(&a.candidates[1], &fs).unwrap();
    assert_eq!(fingerprint(&a.candidates[1], &fs).unwrap(), first);
    std::thread::sleep(Duration::from_millis(2));
    write("s3://bucket/data/b.rec", b"TWO");
    let changed = fingerprint(&a.candidates[1], &fs).unwrap();
    assert_eq!(changed.prefix, first.prefix);
    assert_ne!(changed.files, first.files, "a rewritten object");
    let missing = files_pipeline(&["s3://bucket/data/none.rec"]);
    assert!(fingerprint(&analyse(&missing).candidates[0], &fs).is_err());

    let root = "s3://bucket/autocache";
    for fp in [&first, &changed] {
        write(&format!("{}/DONE", cache_path(root, fp)), b"");
        write(
            &format!("{}/chunks/chunk_0_0_1", cache_path(root, fp)),
            b"x",
        );
    }
    assert!(is_complete(&cache_path(root, &first), &fs).unwrap());
    let stale = stale_caches(root, &changed, &fs).unwrap();
    assert_eq!(stale, [cache_path(root, &first)]);
    drop_cache(&stale[0], &fs).unwrap();
    assert!(!is_complete(&stale[0], &fs).unwrap());
    assert!(stale_caches(root, &changed, &fs).unwrap().is_empty());
    assert!(is_complete(&cache_path(root, &changed), &fs).unwrap());
}

// -------------------------------------------------------------- rewrite

#[test]
fn rewrite_reads_the_cache_back_as_the_prefix() {
    let values = Tensor::vector(&(0..20i64).collect::<Vec<_>>());
    let def = chain(vec![
        (
            "from_tensor_slices",
            Attrs::new().with("components", vec![values]),
        ),
        map(builtin("cast", Attrs::new().with("dtype", "float32"))),
        map(builtin(
            "scale",
            Attrs::new().with("factor", 3.0).with("offset", 1.0),
        )),
        ("batch", Attrs::new().with("batch_size", 4)),
    ]);
    let a = analyse(&def);
    assert_eq!(a.candidates.len(), 3);
    let point = &a.candidates[2];

    // Write the prefix's output as a snapshot, with the snapshot chunk
    // writer, several streams, as the service writes a cache.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let fs = resolver();
    let fp = fingerprint(point, &fs).unwrap();
    let path = cache_path(root, &fp);
    let prefix = build(&point.prefix).unwrap();
    let elements = collect(&prefix);
    crate::snapshot::testing::write_snapshot(
        &LocalFileSystem,
        &path,
        &prefix.element_spec().unwrap().unwrap(),
        CACHE_COMPRESSION,
        &elements,
        3,
        3,
    )
    .unwrap();

    let cached = rewrite(&def, point, &path).unwrap();
    assert!(cached.compress, "the compress flag is kept");
    let root_op = cached.root.as_ref().unwrap();
    assert_eq!(root_op.op, "batch");
    assert_eq!(root_op.inputs[0].op, "load");
    assert!(root_op.inputs[0].inputs.is_empty());

    // The load alone gives the prefix's elements (as a multiset: chunks
    // come in the snapshot's order).
    let load = from_pipeline_def(&pipeline(root_op.inputs[0].clone())).unwrap();
    assert_eq!(multiset(collect(&load)), multiset(elements.clone()));

    // The whole rewritten pipeline: the same values, batched.
    let unbatched = |ds: &Dataset| -> Vec<String> {
        let mut out: Vec<String> = collect(ds)
            .iter()
            .flat_map(|e| e.components[0].to_vec::<f32>().unwrap())
            .map(|v| format!("{v}"))
            .collect();
        out.sort();
        out
    };
    let original = from_pipeline_def(&def).unwrap();
    let served = from_pipeline_def(&cached).unwrap();
    assert_eq!(unbatched(&served), unbatched(&original));
    assert_eq!(unbatched(&served).len(), 20);

    // Rewriting the root: the pipeline is the load itself.
    let all = chain(vec![
        (
            "from_tensor_slices",
            Attrs::new().with("components", vec![Tensor::vector(&[1i64, 2])]),
        ),
        map(builtin("cast", Attrs::new().with("dtype", "float32"))),
    ]);
    let whole = analyse(&all);
    let just_load = rewrite(&all, &whole.candidates[1], "/c").unwrap();
    assert_eq!(just_load.root.unwrap().op, "load");

    // A candidate of another pipeline is refused.
    let err = rewrite(&all, point, &path).unwrap_err();
    assert!(
        err.to_string().contains("not a point of this pipeline"),
        "{err}"
    );
    let mut shifted = point.clone();
    shifted.index = 7;
    assert!(rewrite(&def, &shifted, &path).is_err());
}

// -------------------------------------------------------------- profile

/// A 96x128 RGB JPEG, different for every `seed` (noise over a gradient,
/// so it neither compresses to nothing nor repeats across elements).
fn jpeg(seed: u64) -> Vec<u8> {
    let (w, h) = (128usize, 96usize);
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut pixels = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let noise = (state % 32) as usize;
                pixels.push(((x + y * c + noise) % 256) as u8);
            }
        }
    }
    let mut c = mozjpeg::Compress::new(mozjpeg::ColorSpace::JCS_RGB);
    c.set_size(w, h);
    c.set_quality(90.0);
    let mut started = c.start_compress(Vec::new()).expect("start");
    started.write_scanlines(&pixels).expect("pixels");
    started.finish().expect("jpeg")
}

fn jpeg_pipeline(file: &str) -> PipelineDef {
    chain(vec![
        (
            "tfrecord_dataset",
            Attrs::new().with("filenames", vec![file.to_string()]),
        ),
        map(builtin("decode_jpeg", Attrs::new().with("channels", 3))),
        map(builtin(
            "resize",
            Attrs::new().with("size", vec![224i64, 224]),
        )),
    ])
}

/// Writes `n` different JPEGs as a TFRecord file; their mean size.
fn write_jpegs(path: &std::path::Path, n: usize) -> f64 {
    let mut w = TfRecordWriter::create(path.to_str().unwrap(), CompressionType::None).unwrap();
    let mut bytes = 0;
    for i in 0..n {
        let image = jpeg(i as u64);
        bytes += image.len();
        w.write(&image).unwrap();
    }
    w.finish().unwrap();
    bytes as f64 / n as f64
}

#[test]
fn profile_of_a_decode_resize_pipeline_is_sensible() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("images.tfrecord");
    let jpeg_bytes = write_jpegs(&file, 40);
    let def = jpeg_pipeline(file.to_str().unwrap());
    let a = analyse(&def);
    assert_eq!(a.candidates.len(), 3);
    let scratch = dir.path().join("cache");
    let scratch = scratch.to_str().unwrap();
    let points = profile(
        &def,
        &a,
        &build,
        scratch,
        &resolver(),
        &ProfileLimits::default(),
    )
    .unwrap();
    for p in &points {
        eprintln!("{p:?}");
    }
    let [src, decoded, resized] = points.as_slice() else {
        panic!("three points: {points:?}");
    };
    assert_eq!((src.point, decoded.point, resized.point), (0, 1, 2));
    assert!(points.iter().all(|p| p.elements == 40), "{points:?}");
    // Bytes: a JPEG record (Snappy cannot squeeze JPEG); 96x128x3 noisy
    // pixels; 224x224x3 floats.
    assert!(
        src.bytes_per_element > 0.9 * jpeg_bytes,
        "{src:?} {jpeg_bytes}"
    );
    assert!(
        src.bytes_per_element < 1.1 * jpeg_bytes + 64.0,
        "{src:?} {jpeg_bytes}"
    );
    assert!(
        decoded.bytes_per_element > src.bytes_per_element,
        "{decoded:?}"
    );
    assert!(
        decoded.bytes_per_element < 96.0 * 128.0 * 3.0 + 1024.0,
        "{decoded:?}"
    );
    assert!(resized.bytes_per_element > 100_000.0, "{resized:?}");
    assert!(
        resized.bytes_per_element < 224.0 * 224.0 * 3.0 * 4.0 + 1024.0,
        "{resized:?}"
    );
    // Costs: positive; resizing to 224x224 costs more than reading records.
    assert!(
        points
            .iter()
            .all(|p| p.compute_seconds_per_element > 0.0 && p.read_seconds_per_element > 0.0)
    );
    assert!(
        resized.compute_seconds_per_element > src.compute_seconds_per_element,
        "{points:?}"
    );
    // The scratch chunks are gone.
    let left: Vec<_> = std::fs::read_dir(scratch).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn profile_respects_its_limits() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("images.tfrecord");
    write_jpegs(&file, 10);
    let def = jpeg_pipeline(file.to_str().unwrap());
    let a = analyse(&def);
    let scratch = dir.path().to_str().unwrap();
    let fs = resolver();
    let five = ProfileLimits {
        max_elements: 5,
        ..ProfileLimits::default()
    };
    let points = profile(&def, &a, &build, scratch, &fs, &five).unwrap();
    assert!(points.iter().all(|p| p.elements == 5), "{points:?}");
    // A time bound of zero still measures one element.
    let instant = ProfileLimits {
        max_time: Duration::ZERO,
        ..ProfileLimits::default()
    };
    let points = profile(&def, &a, &build, scratch, &fs, &instant).unwrap();
    assert!(points.iter().all(|p| p.elements == 1), "{points:?}");
    let zero = ProfileLimits {
        max_elements: 0,
        ..ProfileLimits::default()
    };
    assert!(profile(&def, &a, &build, scratch, &fs, &zero).is_err());

    // An empty prefix: no elements, no figures.
    let empty = chain(vec![range(0)]);
    let points = profile(&empty, &analyse(&empty), &build, scratch, &fs, &five).unwrap();
    assert_eq!(points[0].elements, 0);

    // Another pipeline's analysis is refused; a failing build is reported.
    assert!(profile(&empty, &a, &build, scratch, &fs, &five).is_err());
    let failing = |_: &OpDef| -> Result<Dataset> { Err(Error::Internal("no".into())) };
    let err = profile(&def, &a, &failing, scratch, &fs, &five).unwrap_err();
    assert!(
        err.to_string()
            .contains("building autocache point 0: tfrecord_dataset"),
        "{err}"
    );
}

#[test]
fn profile_cpu_counts_threads_it_starts_and_not_others() {
    // This thread's CPU (s) from its own schedstat.
    fn thread_cpu() -> f64 {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
        s.split_whitespace().next().unwrap().parse::<f64>().unwrap() / 1e9
    }
    fn spin(seconds: f64) -> f64 {
        let begin = thread_cpu();
        let mut x = 0u64;
        while thread_cpu() - begin < seconds {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        thread_cpu() - begin
    }
    // Live: the profile's own thread and a thread it starts, which is
    // still alive at the end, are counted (no upper bound here: the test
    // binary's other tests start threads of their own meanwhile).
    let start = profile::cpu::Sample::now().expect("/proc");
    let finished = std::sync::Arc::new(std::sync::Barrier::new(2));
    let helper = {
        let finished = finished.clone();
        std::thread::spawn(move || {
            let spun = spin(0.1);
            finished.wait();
            spun
        })
    };
    let own = spin(0.05);
    // Wait (bounded) for the helper to have spun its 0.1 s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while profile::cpu::Sample::now().unwrap().seconds_since(&start) < own + 0.1
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let used = profile::cpu::Sample::now().unwrap().seconds_since(&start);
    finished.wait();
    let spun = helper.join().unwrap() + own;
    assert!(
        used >= spun - 0.01,
        "profile {used} s, its threads {spun} s"
    );

    // Which threads count: the sampling thread (7) by its difference, a
    // thread born since (9) in full, one running before (8) not at all; one
    // that exited (6) is gone from the later sample.
    let before = profile::cpu::Sample::of(7, &[(6, 1_000), (7, 2_000_000), (8, 5_000_000)]);
    let after = profile::cpu::Sample::of(7, &[(7, 3_000_000), (8, 900_000_000), (9, 4_000_000)]);
    let used = after.seconds_since(&before);
    assert!((used - 0.005).abs() < 1e-12, "{used}");
}

// --------------------------------------------------------------- choose

fn point(point: usize, compute: f64, read: f64) -> PointCost {
    PointCost {
        point,
        compute_seconds_per_element: compute,
        read_seconds_per_element: read,
        bytes_per_element: 100.0,
        elements: 64,
    }
}

#[test]
fn choose_takes_the_largest_saving_that_pays() {
    assert_eq!(
        choose(
            &[
                point(0, 1e-5, 1e-5),
                point(1, 2e-3, 1e-4),
                point(2, 3e-3, 1e-3)
            ],
            &[]
        ),
        Choice::Cache { index: 2 }
    );
    // Reading the deeper point back costs 0.6 x the chain; the shallower
    // one saves only 9% of it: neither pays.
    assert!(matches!(
        choose(&[point(0, 1e-3, 1e-4), point(1, 1e-2, 6e-3)], &[]),
        Choice::None { .. }
    ));
    // Fused ops: the deeper prefix (decode and resize in one kernel)
    // computes faster than decode alone and reads back smaller elements.
    // Caching the decoded images would save more compute per element of
    // their own, but leave every later epoch reading 20x the bytes and
    // resizing unfused: the deeper point wins.
    assert_eq!(
        choose(
            &[
                point(0, 7e-6, 5e-6),
                point(1, 100e-6, 30e-6),
                point(2, 80e-6, 10e-6)
            ],
            &[]
        ),
        Choice::Cache { index: 2 }
    );
    // Exactly the ratio pays; a tie goes to the deeper point.
    assert_eq!(
        choose(&[point(0, 2e-3, 1e-3), point(1, 2e-3, 1e-3)], &[]),
        Choice::Cache { index: 1 }
    );
    // Empty and broken measurements are left out.
    let mut empty = point(3, 1.0, 0.0);
    empty.elements = 0;
    assert_eq!(
        choose(&[point(0, 1e-3, 1e-4), empty, point(4, f64::NAN, 0.0)], &[]),
        Choice::Cache { index: 0 }
    );
}

#[test]
fn choose_says_why_nothing_is_cached() {
    let Choice::None { reason } = choose(&[point(0, 1e-4, 9e-5), point(1, 2e-3, 1.5e-3)], &[])
    else {
        panic!("nothing pays");
    };
    assert!(reason.contains("point 1"), "{reason}");
    assert!(
        reason.contains("2.00 ms") && reason.contains("1.50 ms"),
        "{reason}"
    );
    assert!(reason.contains("0.5 x compute"), "{reason}");
    assert!(matches!(choose(&[], &[]), Choice::None { reason } if reason.contains("no candidate")));
    let mut empty = point(0, 1.0, 0.0);
    empty.elements = 0;
    assert!(
        matches!(choose(&[empty], &[]), Choice::None { reason } if reason.contains("no candidate point produced"))
    );
    // Free reads of free elements save nothing.
    assert!(matches!(
        choose(&[point(0, 0.0, 0.0)], &[]),
        Choice::None { .. }
    ));
    // A cheap source read back cheaper still (a range ahead of a function
    // that cannot be cached): the saving is within start-up noise.
    let Choice::None { reason } = choose(&[point(0, 9.3e-6, 2e-6)], &[]) else {
        panic!("7 us saved per element is noise");
    };
    assert!(
        reason.contains("7.3 us") && reason.contains("50.0 us"),
        "{reason}"
    );
    // An in-memory source is never cached, though it is the reference.
    let Choice::None { reason } = choose(&[point(0, 300e-6, 3e-6)], &[0]) else {
        panic!("a range is never cached");
    };
    assert!(reason.contains("in-memory source"), "{reason}");
    assert_eq!(
        choose(&[point(0, 1e-5, 1e-6), point(1, 2e-3, 1e-4)], &[0]),
        Choice::Cache { index: 1 }
    );
    // Above the floor, the same ratio pays.
    assert_eq!(
        choose(&[point(0, 130e-6, 30e-6)], &[]),
        Choice::Cache { index: 0 }
    );
}

#[test]
fn attrs_helper_round_trips() {
    // The helpers build what the pipeline module decodes.
    let def = chain(vec![range(3)]);
    assert_eq!(collect(&from_pipeline_def(&def).unwrap()).len(), 3);
}
