use std::path::Path;
use std::sync::{Arc, Mutex};

use arrow_array::builder::{Int64Builder, ListBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, RecordBatch};
use arrow_ipc::writer::{FileWriter, IpcWriteOptions, StreamWriter};
use rand::{Rng, SeedableRng};
use tfdata_core::positions::PositionSet;
use tfdata_core::{Lineage, SplitLease, SplitName, SplitsNamed, Tensor};

use super::*;
use crate::IterContext;

/// Rows `start..start + n`: id, name (dictionary-encoded "even"/"odd",
/// the same dictionary in every batch), score (id / 2, null every 5th id),
/// tags (`id % 3` copies of id).
fn rows(start: i64, n: usize) -> RecordBatch {
    let ids: Vec<i64> = (start..start + n as i64).collect();
    let keys: Int32Array = ids.iter().map(|i| (i % 2) as i32).collect();
    let names = DictionaryArray::<Int32Type>::try_new(
        keys,
        Arc::new(arrow_array::StringArray::from(vec!["even", "odd"])),
    )
    .unwrap();
    let scores: Float64Array = ids
        .iter()
        .map(|&i| (i % 5 != 0).then_some(i as f64 / 2.0))
        .collect();
    let mut tags = ListBuilder::new(Int64Builder::new());
    for &i in &ids {
        for _ in 0..i % 3 {
            tags.values().append_value(i);
        }
        tags.append(true);
    }
    RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
        ("name", Arc::new(names)),
        ("score", Arc::new(scores)),
        ("tags", Arc::new(tags.finish())),
    ])
    .unwrap()
}

#[derive(Clone, Copy)]
enum Fmt {
    File,
    Stream,
}

fn write_with(path: &Path, fmt: Fmt, batches: &[RecordBatch], options: IpcWriteOptions) {
    let file = std::fs::File::create(path).unwrap();
    let schema = batches[0].schema();
    match fmt {
        Fmt::File => {
            let mut w = FileWriter::try_new_with_options(file, &schema, options).unwrap();
            for b in batches {
                w.write(b).unwrap();
            }
            w.finish().unwrap();
        }
        Fmt::Stream => {
            let mut w = StreamWriter::try_new_with_options(file, &schema, options).unwrap();
            for b in batches {
                w.write(b).unwrap();
            }
            w.finish().unwrap();
        }
    }
}

fn write(path: &Path, fmt: Fmt, batches: &[RecordBatch]) {
    write_with(path, fmt, batches, IpcWriteOptions::default());
}

fn declared() -> Declared {
    Declared {
        null_values: [("score".to_string(), Tensor::scalar(-1.0f64))].into(),
        padding_values: [("tags".to_string(), Tensor::scalar(0i64))].into(),
    }
}

/// A source of `files`; the declared values of the columns it reads.
fn source(files: &[&Path], columns: Option<&[&str]>, batch: Option<i64>) -> ArrowSource {
    let mut declared = declared();
    if let Some(c) = columns {
        declared.null_values.retain(|k, _| c.contains(&k.as_str()));
        declared
            .padding_values
            .retain(|k, _| c.contains(&k.as_str()));
    }
    ArrowSource::new(
        files
            .iter()
            .map(|p| p.to_str().unwrap().to_string())
            .collect(),
        columns.map(|c| c.iter().map(|c| c.to_string()).collect()),
        batch,
        declared,
    )
}

/// The elements of `ds`, read without splits.
fn all(ds: &crate::Dataset) -> Vec<Element> {
    let mut it = ds.iter().unwrap();
    let mut out = Vec::new();
    while let Some(e) = it.next_element().unwrap() {
        out.push(e);
    }
    out
}

/// Component `i` of every element, as i64s.
fn ints(elements: &[Element], i: usize) -> Vec<i64> {
    elements
        .iter()
        .flat_map(|e| e.components[i].to_vec::<i64>().unwrap())
        .collect()
}

#[test]
fn rows_and_batches_of_files_and_streams_with_dictionaries_nulls_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.arrow"), dir.path().join("b.arrows"));
    write(&a, Fmt::File, &[rows(0, 5), rows(5, 5)]);
    write(&b, Fmt::Stream, &[rows(10, 3), rows(13, 4)]);
    assert_eq!(&std::fs::read(&a).unwrap()[..6], b"ARROW1");
    assert_eq!(&std::fs::read(&b).unwrap()[..4], &[0xff; 4]);

    // Rows: id, name, score, tags (sorted), in file order.
    let ds = crate::Dataset::from_op(source(&[&a, &b], None, None));
    let elements = all(&ds);
    assert_eq!(ints(&elements, 0), (0..17).collect::<Vec<_>>());
    let e = &elements[13].components;
    assert_eq!(e[1].string_values().unwrap()[0], "odd");
    assert_eq!(e[2].to_scalar::<f64>().unwrap(), 6.5);
    assert_eq!(e[3].to_vec::<i64>().unwrap(), vec![13]);
    assert_eq!(elements[10].components[2].to_scalar::<f64>().unwrap(), -1.0);
    assert_eq!(
        elements[5].components[3].to_vec::<i64>().unwrap(),
        vec![5, 5]
    );

    // Batches of 4 rows: across the file's record batches (rows 4..8), cut
    // at its end.
    let batched = all(&crate::Dataset::from_op(source(&[&a, &b], None, Some(4))));
    let sizes: Vec<i64> = batched.iter().map(|e| e.components[0].shape()[0]).collect();
    assert_eq!(sizes, vec![4, 4, 2, 4, 3]);
    assert_eq!(ints(&batched, 0), (0..17).collect::<Vec<_>>());
    assert_eq!(batched[1].components[3].shape(), &[4, 2], "tags padded");
    assert_eq!(
        batched[1].components[3].to_vec::<i64>().unwrap(),
        vec![4, 0, 5, 5, 0, 0, 7, 0],
        "ids 4..8: [4], [5, 5], [], [7] padded with 0"
    );

    // Projection: only id (and the structure says so).
    let projected = crate::Dataset::from_op(source(&[&a, &b], Some(&["id"]), None));
    assert_eq!(
        projected.element_spec().unwrap().unwrap().num_components(),
        1
    );
    assert_eq!(ints(&all(&projected), 0), (0..17).collect::<Vec<_>>());

    // Without a declared null value, score's nulls are an error naming
    // the file.
    let plain = crate::Dataset::from_op(ArrowSource::new(
        vec![a.to_str().unwrap().to_string()],
        Some(vec!["score".into()]),
        None,
        Declared::default(),
    ));
    let mut it = plain.iter().unwrap();
    let err = loop {
        match it.next_element() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("nulls read without a declared value"),
            Err(e) => break e.to_string(),
        }
    };
    assert!(
        err.contains("a.arrow") && err.contains("score has nulls"),
        "{err}"
    );
}

/// 1000 rows (one split each) whose `word` column's dictionary is `words`.
fn words(start: i64, words: &[&str]) -> RecordBatch {
    let keys: Int32Array = (0..1000).map(|i| i % words.len() as i32).collect();
    let dict = DictionaryArray::<Int32Type>::try_new(
        keys,
        Arc::new(arrow_array::StringArray::from(words.to_vec())),
    )
    .unwrap();
    RecordBatch::try_from_iter(vec![
        (
            "id",
            Arc::new(Int64Array::from_iter_values(start..start + 1000)) as ArrayRef,
        ),
        ("word", Arc::new(dict)),
    ])
    .unwrap()
}

#[test]
fn a_split_of_a_stream_applies_the_dictionaries_sent_before_it() {
    use arrow_ipc::writer::DictionaryHandling;
    let dir = tempfile::tempdir().unwrap();
    for handling in [DictionaryHandling::Resend, DictionaryHandling::Delta] {
        let path = dir.path().join("words.arrows");
        let options = IpcWriteOptions::default().with_dictionary_handling(handling);
        // Replaced (Resend), or extended (Delta: the second dictionary
        // extends the first).
        write_with(
            &path,
            Fmt::Stream,
            &[
                words(0, &["a", "b"]),
                words(1000, &["a", "b", "c"]),
                words(2000, &["x"]),
            ],
            options,
        );
        let op = source(&[&path], Some(&["word"]), None);
        assert_eq!(op.group_splits().unwrap().len(), 3);
        let ds = crate::Dataset::from_op(op);
        // Read the splits last first: each must see its own dictionary.
        let provider = crate::splits::ListSplitProvider::new(
            [2i64, 1, 0]
                .iter()
                .map(|&g| Tensor::vector(&[0, g, g + 1]))
                .collect(),
        );
        let mut ctx = IterContext::new();
        ctx.split_providers.insert(ds.op_key(), Arc::new(provider));
        let mut it = ds.iter_with(&ctx).unwrap();
        let mut firsts = Vec::new();
        let mut n = 0;
        while let Some(e) = it.next_element().unwrap() {
            if n % 1000 == 2 {
                firsts.push(e.components[0].string_values().unwrap()[0].clone());
            }
            n += 1;
        }
        assert_eq!(firsts, vec!["x", "c", "a"], "row 2 of splits 2, 1, 0");
    }
}

#[test]
fn bodies_compressed_with_lz4_and_zstd_are_read() {
    use arrow_ipc::CompressionType;
    let dir = tempfile::tempdir().unwrap();
    for (name, codec) in [
        ("lz4.arrow", CompressionType::LZ4_FRAME),
        ("zstd.arrow", CompressionType::ZSTD),
    ] {
        let path = dir.path().join(name);
        let options = IpcWriteOptions::default()
            .try_with_compression(Some(codec))
            .unwrap();
        write_with(&path, Fmt::File, &[rows(0, 100), rows(100, 50)], options);
        let ds = crate::Dataset::from_op(source(&[&path], Some(&["id", "name"]), Some(64)));
        let elements = all(&ds);
        assert_eq!(ints(&elements, 0), (0..150).collect::<Vec<_>>(), "{name}");
    }
}

/// An LZ4 buffer whose blocks hold far more than its declared length (a
/// decompression bomb: arrow-ipc decompresses LZ4 to whatever the frame
/// holds before comparing lengths) is refused from its block headers,
/// before anything is decompressed; the honest file reads.
#[test]
fn lz4_blocks_holding_more_than_declared_are_refused_before_decompressing() {
    use arrow_ipc::CompressionType;
    let dir = tempfile::tempdir().unwrap();
    let honest = dir.path().join("zeros.arrow");
    // 16 Mi zero int64s: 128 MiB decompressed, well under a MiB as LZ4.
    const N: usize = 16 << 20;
    let batch = RecordBatch::try_from_iter(vec![(
        "id",
        Arc::new(Int64Array::from(vec![0i64; N])) as ArrayRef,
    )])
    .unwrap();
    let options = IpcWriteOptions::default()
        .try_with_compression(Some(CompressionType::LZ4_FRAME))
        .unwrap();
    write_with(&honest, Fmt::File, &[batch], options);
    let mut data = std::fs::read(&honest).unwrap();
    assert!(data.len() < 4 << 20, "{} bytes", data.len());
    let ds = crate::Dataset::from_op(source(&[&honest], Some(&["id"]), Some(N as i64)));
    assert_eq!(all(&ds).len(), 1);

    // The data buffer's length prefix (its declared decompressed length)
    // set to 1 KiB.
    let prefix = ((N * 8) as i64).to_le_bytes();
    let at = data
        .windows(8)
        .position(|w| w == prefix)
        .expect("the data buffer's length prefix");
    data[at..at + 8].copy_from_slice(&1024i64.to_le_bytes());
    let bomb = dir.path().join("bomb.arrow");
    std::fs::write(&bomb, &data).unwrap();
    let ds = crate::Dataset::from_op(source(&[&bomb], Some(&["id"]), Some(N as i64)));
    let err = match ds.iter() {
        Err(e) => e,
        Ok(mut it) => it.next_element().expect_err("the bomb refused"),
    }
    .to_string();
    assert!(
        err.contains("bomb.arrow")
            && err.contains("declares 1024 bytes but its LZ4 blocks may hold"),
        "{err}"
    );

    // The walk itself: a bound at least what the frames hold, refusals for
    // what the decoder would refuse too.
    assert_eq!(check::lz4_bound(&[]).unwrap(), 0);
    let frame = |bd: u8, blocks: &[(u32, usize)]| {
        let mut f = vec![0x04, 0x22, 0x4d, 0x18, 0x60, bd, 0];
        for &(header, len) in blocks {
            f.extend_from_slice(&header.to_le_bytes());
            f.extend(std::iter::repeat_n(0u8, len));
        }
        f.extend_from_slice(&[0; 4]);
        f
    };
    // Two compressed 64 KiB blocks and one stored block of 10 bytes.
    let two = frame(0x40, &[(5, 5), (7, 7), (0x8000_000a, 10)]);
    assert_eq!(check::lz4_bound(&two).unwrap(), 2 * 65536 + 10);
    for (bad, want) in [
        (frame(0x30, &[]), "block size code"),
        (
            frame(0x40, &[(70_000, 70_000)]),
            "in a frame of 65536-byte blocks",
        ),
        (frame(0x40, &[(100, 10)]), "longer than its buffer"),
        (two[..9].to_vec(), "cut"),
        (b"not lz4 at all".to_vec(), "no LZ4 frame"),
        (two.repeat(17), "more than 16 LZ4 frames"),
    ] {
        let err = check::lz4_bound(&bad).unwrap_err();
        assert!(err.contains(want), "{want}: {err}");
    }
}

#[test]
fn a_split_is_a_group_of_record_batches_and_positions_are_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.arrow"), dir.path().join("b.arrow"));
    // a: 600-row batches grouped two by two (1000 rows at least); b: one
    // batch.
    write(
        &a,
        Fmt::Stream,
        &[
            rows(0, 600),
            rows(600, 600),
            rows(1200, 600),
            rows(1800, 600),
            rows(2400, 10),
        ],
    );
    write(&b, Fmt::File, &[rows(3000, 7)]);
    let op = source(&[&a, &b], Some(&["id"]), None);
    let splits: Vec<Vec<i64>> = op
        .group_splits()
        .unwrap()
        .iter()
        .map(|t| t.to_vec::<i64>().unwrap())
        .collect();
    assert_eq!(
        splits,
        vec![vec![0, 0, 2], vec![0, 2, 4], vec![0, 4, 5], vec![1, 0, 1]]
    );
    let ds = crate::Dataset::from_op(op);
    let local: Vec<i64> = ints(&all(&ds), 0);

    // Splits leased as a worker's are: split 1 handed out again after
    // readers received its rows 0 and 1100..1200; each element is sent
    // (named) as it comes, then dropped.
    let mut skip = PositionSet::default();
    skip.insert(&[0]);
    for p in 1100..1200 {
        skip.insert(&[p]);
    }
    let released = Arc::new(Mutex::new(Vec::new()));
    let provider = Arc::new(Leasing {
        inner: ds.op().split_provider().unwrap().unwrap(),
        next: Mutex::new(0),
        skip: [(1, skip)].into(),
        released: Arc::clone(&released),
    });
    let mut ctx = IterContext::new();
    ctx.split_providers.insert(ds.op_key(), provider);
    let mut it = ds.iter_with(&ctx).unwrap();
    let mut read = Vec::new();
    let mut ends = Vec::new();
    let mut pieces = Vec::new();
    while let Some(e) = it.next_element().unwrap() {
        read.push(e.components[0].to_scalar::<i64>().unwrap());
        let mut named = SplitsNamed::default();
        assert!(e.lineage.whole_splits(&mut named), "every row is accounted");
        pieces.extend(named.pieces.iter().map(|(n, p)| (n.index, p.clone())));
        ends.extend(named.ends.iter().map(|(n, total)| (n.index, *total)));
    }
    let skipped: Vec<i64> = std::iter::once(1200).chain(2300..2400).collect();
    let want: Vec<i64> = local
        .iter()
        .copied()
        .filter(|i| !skipped.contains(i))
        .collect();
    assert_eq!(read, want, "the same rows, less those readers had");
    assert_eq!(
        pieces.iter().find(|(s, _)| *s == 1).map(|(_, p)| p.clone()),
        Some(vec![1]),
        "split 1's first row read is its row 1"
    );
    assert_eq!(
        ends,
        vec![(0, 1200), (1, 1200), (2, 10), (3, 7)],
        "each split's last element ends it: rows sent and skipped (split 1's last 100 rows \
         were skipped: the row before them ends it)"
    );
    assert_eq!(*released.lock().unwrap(), vec![0, 1, 2, 3]);
}

/// The splits of `inner`, leased with names (and positions to skip) as a
/// worker's provider leases them.
struct Leasing {
    inner: Box<dyn SplitProvider>,
    next: Mutex<i64>,
    skip: HashMap<i64, PositionSet>,
    released: Arc<Mutex<Vec<i64>>>,
}

impl SplitProvider for Leasing {
    fn get_next(&self) -> Result<Option<Tensor>> {
        self.inner.get_next()
    }
    fn get_next_leased(&self) -> Result<Option<(Tensor, Lineage)>> {
        let Some(split) = self.inner.get_next()? else {
            return Ok(None);
        };
        let mut next = self.next.lock().unwrap();
        let index = *next;
        *next += 1;
        let released = Arc::clone(&self.released);
        let name = SplitName {
            provider: 0,
            repetition: 0,
            index,
        };
        let skip = self.skip.get(&index).cloned().unwrap_or_default();
        let lease =
            SplitLease::named_skipping(name, skip, move || released.lock().unwrap().push(index));
        Ok(Some((split, Lineage::of(lease))))
    }
    fn reset(&self) -> Result<()> {
        self.inner.reset()
    }
    fn cardinality(&self) -> i64 {
        self.inner.cardinality()
    }
}

#[test]
fn two_workers_sharing_the_splits_read_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.arrow"), dir.path().join("b.arrow"));
    write(
        &a,
        Fmt::Stream,
        &[rows(0, 700), rows(700, 700), rows(1400, 700)],
    );
    write(&b, Fmt::File, &[rows(5000, 1500), rows(6500, 3)]);
    let ds = crate::Dataset::from_op(source(&[&a, &b], Some(&["id"]), Some(256)));
    let provider: Arc<dyn SplitProvider> = Arc::from(ds.op().split_provider().unwrap().unwrap());
    let mut ctx = IterContext::new();
    ctx.split_providers.insert(ds.op_key(), provider);
    let mut workers = [ds.iter_with(&ctx).unwrap(), ds.iter_with(&ctx).unwrap()];
    let mut got = Vec::new();
    let mut live = [true, true];
    while live.iter().any(|l| *l) {
        for (w, it) in workers.iter_mut().enumerate() {
            if !live[w] {
                continue;
            }
            match it.next_element().unwrap() {
                Some(e) => got.extend(e.components[0].to_vec::<i64>().unwrap()),
                None => live[w] = false,
            }
        }
    }
    got.sort_unstable();
    let want: Vec<i64> = (0..2100).chain(5000..6503).collect();
    assert_eq!(got, want);
}

#[test]
fn damaged_files_and_changed_schemas_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let good_file = dir.path().join("good.arrow");
    let good_stream = dir.path().join("good.arrows");
    write(&good_file, Fmt::File, &[rows(0, 5), rows(5, 5)]);
    write(&good_stream, Fmt::Stream, &[rows(0, 5), rows(5, 5)]);
    let file = std::fs::read(&good_file).unwrap();
    let stream = std::fs::read(&good_stream).unwrap();
    let case = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    // The stream's last record batch message starts past half the file.
    let cases = vec![
        (
            case("mid-message.arrows", &stream[..stream.len() - 40]),
            "truncated",
        ),
        // Cut right before the end-of-stream marker.
        (
            case("no-eos.arrows", &stream[..stream.len() - 8]),
            "end-of-stream",
        ),
        (
            case("bad-magic.arrow", b"PAR1 this is not arrow at all"),
            "not an Arrow IPC",
        ),
        (
            case("cut-file.arrow", &file[..file.len() - 3]),
            "does not end as one",
        ),
        (case("empty.arrow", b""), "too few"),
        (
            case("garbage-header.arrows", &{
                let mut s = stream.clone();
                for b in &mut s[8..40] {
                    *b ^= 0x5a;
                }
                s
            }),
            "message header",
        ),
    ];
    for (path, want) in cases {
        let name = path.to_str().unwrap().to_string();
        let ds = crate::Dataset::from_op(source(&[&path], None, None));
        let err = match ds.iter() {
            Err(e) => e,
            Ok(mut it) => loop {
                match it.next_element() {
                    Ok(Some(_)) => continue,
                    Ok(None) => panic!("{name}: read whole"),
                    Err(e) => break e,
                }
            },
        };
        let err = err.to_string();
        assert!(err.contains(&name) && err.contains(want), "{name}: {err}");
    }

    // A second file whose id column is int32: refused naming it, before
    // any of its rows.
    let changed = dir.path().join("changed.arrow");
    let other = RecordBatch::try_from_iter(vec![(
        "id",
        Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef,
    )])
    .unwrap();
    write(&changed, Fmt::File, &[other]);
    let ds = crate::Dataset::from_op(source(&[&good_file, &changed], Some(&["id"]), None));
    let mut it = ds.iter().unwrap();
    let mut n = 0;
    let err = loop {
        match it.next_element() {
            Ok(Some(_)) => n += 1,
            Ok(None) => panic!("read a file of another schema"),
            Err(e) => break e.to_string(),
        }
    };
    assert_eq!(n, 10);
    assert!(
        err.contains("changed.arrow") && err.contains("Int32") && err.contains("same schema"),
        "{err}"
    );
    let err = crate::Dataset::from_op(source(&[&good_file], None, Some(0)))
        .iter()
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("batch_size"), "{err}");
}

/// The files pyarrow wrote for the fuzz target's seed corpus (stream, file,
/// feather with LZ4, zstd; a dictionary, a list, a struct, a fixed-size
/// list, string views), after its mode byte: their rows read back.
#[test]
fn files_pyarrow_wrote_read_back() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/arrow_ipc");
    let mut seen = 0;
    for entry in std::fs::read_dir(&corpus).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !name.starts_with("pyarrow_") {
            continue;
        }
        seen += 1;
        let data = Bytes::from(std::fs::read(&path).unwrap()).slice(1..);
        let mut columns = vec!["image".to_string(), "name".into(), "xy".into()];
        if !name.contains("feather") {
            columns.push("view".into());
        }
        let (_, rows) = read_in_memory(data, Some(&columns), None, 100).unwrap();
        assert_eq!(rows.len(), 4, "{name}");
        // image.bytes, image.path, name, view, xy (sorted).
        let names: Vec<String> = rows
            .iter()
            .map(|e| {
                String::from_utf8(e.components[2].string_values().unwrap()[0].to_vec()).unwrap()
            })
            .collect();
        assert_eq!(names, ["a", "b", "a", "c"], "{name}");
        let r = &rows[1].components;
        assert_eq!(&r[0].string_values().unwrap()[0][..], b"\x89PNG", "{name}");
        assert_eq!(
            r.last().unwrap().to_vec::<f32>().unwrap(),
            vec![1.0, 2.0],
            "{name}"
        );
        if !name.contains("feather") {
            assert_eq!(
                r[3].string_values().unwrap()[0],
                "a longer string than twelve",
                "{name}"
            );
        }
    }
    assert_eq!(seen, 6);
}

/// Files with a struct, a list, a dictionary, views and nulls, in both
/// formats, compressed and not: the seeds of the mutation test and of
/// `fuzz/corpus/arrow_ipc`.
fn seeds() -> Vec<Vec<u8>> {
    use arrow_array::{StringViewArray, StructArray};
    use arrow_schema::{DataType, Field};
    let base = rows(0, 6);
    let s = StructArray::from(vec![
        (
            Arc::new(Field::new("bytes", DataType::Binary, true)),
            Arc::new(arrow_array::BinaryArray::from(vec![
                b"\x89PNG".as_ref(),
                b"",
                b"",
                b"x",
                b"yz",
                b"\xff\xd8\xff",
            ])) as ArrayRef,
        ),
        (
            Arc::new(Field::new("path", DataType::Utf8, true)),
            Arc::new(arrow_array::StringArray::from(vec![
                "a", "b", "c", "", "e", "f",
            ])) as ArrayRef,
        ),
    ]);
    // Only score has nulls (ids 0 and 5).
    let views = StringViewArray::from(vec![
        "short",
        "a string longer than twelve bytes",
        "",
        "",
        "x",
        "another long string for the data buffer",
    ]);
    let base_schema = base.schema();
    let mut columns: Vec<(&str, ArrayRef)> = base_schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .zip(base.columns().iter().cloned())
        .collect();
    columns.push(("image", Arc::new(s)));
    columns.push(("view", Arc::new(views)));
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let mut out = Vec::new();
    for fmt in [Fmt::File, Fmt::Stream] {
        for codec in [None, Some(arrow_ipc::CompressionType::LZ4_FRAME)] {
            let options = IpcWriteOptions::default()
                .try_with_compression(codec)
                .unwrap();
            let mut bytes = Vec::new();
            match fmt {
                Fmt::File => {
                    let mut w =
                        FileWriter::try_new_with_options(&mut bytes, &batch.schema(), options)
                            .unwrap();
                    w.write(&batch.slice(0, 4)).unwrap();
                    w.write(&batch.slice(4, 2)).unwrap();
                    w.finish().unwrap();
                }
                Fmt::Stream => {
                    let mut w =
                        StreamWriter::try_new_with_options(&mut bytes, &batch.schema(), options)
                            .unwrap();
                    w.write(&batch.slice(0, 4)).unwrap();
                    w.write(&batch.slice(4, 2)).unwrap();
                    w.finish().unwrap();
                }
            }
            out.push(bytes);
        }
    }
    out
}

/// What the fuzz target does with one input: every column, then a few
/// (skipping the others' buffers), as rows and as batches.
fn read_every_way(data: &[u8]) {
    let bytes = Bytes::copy_from_slice(data);
    for (columns, batch) in [
        (None, None),
        (Some(vec!["tags".to_string(), "image".to_string()]), Some(3)),
        (
            Some(vec![
                "name".to_string(),
                "view".to_string(),
                "id".to_string(),
            ]),
            None,
        ),
    ] {
        if let Ok((structure, elements)) =
            read_in_memory(bytes.clone(), columns.as_deref(), batch, 64)
        {
            for e in &elements {
                structure.check(e).unwrap();
            }
        }
    }
}

#[test]
fn the_seeds_read_back_every_way() {
    for seed in seeds() {
        let columns = ["id", "image", "name", "view", "tags"].map(String::from);
        let (structure, elements) =
            read_in_memory(Bytes::from(seed.clone()), Some(&columns), None, 100).unwrap();
        assert_eq!(elements.len(), 6);
        assert_eq!(structure.num_components(), 6, "image: bytes and path");
        let (_, batches) =
            read_in_memory(Bytes::from(seed.clone()), Some(&columns[..3]), Some(3), 100).unwrap();
        assert_eq!(
            batches.len(),
            3,
            "4 + 2 rows in batches of 3, cut at record batches"
        );
        read_every_way(&seed);
    }
}

/// Damaged copies of the seeds (bytes flipped, set, cut, repeated), as a
/// fuzzer makes them: each decodes or fails, never panics. Set
/// TFDATA_ARROW_MUTATIONS (and TFDATA_ARROW_SEED) for a longer run.
#[test]
fn damaged_copies_of_valid_files_never_panic() {
    let runs: usize = std::env::var("TFDATA_ARROW_MUTATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let seeds = seeds();
    let seed = std::env::var("TFDATA_ARROW_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(32);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for run in 0..runs {
        let mut data = seeds[run % seeds.len()].clone();
        for _ in 0..rng.random_range(1..4) {
            let at = rng.random_range(0..data.len());
            match rng.random_range(0..5) {
                0 => data[at] ^= 1 << rng.random_range(0..8),
                1 => data[at] = [0, 0xff, 0x7f, 0x80, 1][rng.random_range(0..5)],
                2 => data.truncate(at.max(1)),
                3 => {
                    // An i32/i64 field set to an extreme.
                    let v: i64 = [i64::MAX, -1, 1 << 31, 0x7fff_ffff][rng.random_range(0..4)];
                    let end = (at + 8).min(data.len());
                    let n = end - at;
                    data[at..end].copy_from_slice(&v.to_le_bytes()[..n]);
                }
                _ => {
                    let len = rng.random_range(1..64).min(data.len() - at);
                    let piece = data[at..at + len].to_vec();
                    let to = rng.random_range(0..data.len());
                    data.splice(to..to, piece);
                }
            }
        }
        read_every_way(&data);
    }
}

#[test]
fn the_attribute_form_reads_back_as_the_same_op() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("a.arrow"), Fmt::File, &[rows(0, 3)]);
    let pattern = format!("{}/*.arrow", dir.path().to_str().unwrap());
    let ds = crate::Dataset::from_op(ArrowSource::new(
        vec![pattern],
        Some(vec!["id".into(), "score".into(), "tags".into()]),
        Some(32),
        declared(),
    ));
    let def = crate::pipeline::to_pipeline_def(&ds, false).unwrap();
    let back = crate::pipeline::from_pipeline_def(&def).unwrap();
    assert_eq!(back, ds);
    let text = crate::json::to_json(&ds, false).unwrap();
    assert!(text.contains("arrow_dataset"), "{text}");
    assert_eq!(crate::json::from_json(&text).unwrap().dataset, ds);
}
