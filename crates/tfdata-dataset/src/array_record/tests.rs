//! `array_record_dataset` against files Google's own writer made
//! (`testdata/array_record/make_fixtures.py`), damaged copies of them, and
//! distributed_epoch's splits and positions.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tfdata_core::lineage::{SplitLease, SplitName, SplitsNamed};
use tfdata_core::positions::PositionSet;
use tfdata_core::{Error, Lineage, Tensor};

use super::file::ArrayRecordFile;
use super::*;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/array_record")
}

fn fixture(name: &str) -> String {
    fixture_dir()
        .join(format!("{name}.array_record"))
        .to_str()
        .unwrap()
        .to_string()
}

fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(fixture_dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Whether `record` is what `expected.json` describes: its bytes in hex,
/// or the length and zlib CRC-32 of a long one.
fn matches(record: &[u8], want: &serde_json::Value) -> bool {
    match want {
        serde_json::Value::String(h) => record == hex(h).as_slice(),
        _ => {
            let mut crc = flate2::Crc::new();
            crc.update(record);
            Some(record.len() as u64) == want["len"].as_u64()
                && Some(u64::from(crc.sum())) == want["crc32"].as_u64()
        }
    }
}

fn records(ds: &Dataset) -> tfdata_core::Result<Vec<Bytes>> {
    let mut out = Vec::new();
    let mut it = ds.iter()?;
    while let Some(e) = it.next_element()? {
        let [t] = e.components.as_slice() else {
            panic!("one component, got {}", e.components.len());
        };
        assert!(t.shape().is_empty(), "scalar records");
        out.push(Bytes::copy_from_slice(&t.string_values()?[0]));
    }
    Ok(out)
}

fn read(paths: &[&str]) -> tfdata_core::Result<Vec<Bytes>> {
    records(&Dataset::array_record(paths))
}

#[test]
fn every_fixture_reads_back_what_googles_reader_returns() {
    let expected = expected();
    let fixtures = expected.as_object().unwrap();
    assert!(fixtures.len() >= 10, "the fixtures are all there");
    for (name, want) in fixtures {
        let got = read(&[&fixture(name)]);
        if want["unsupported"] == true {
            let err = got.unwrap_err();
            assert!(matches!(err, Error::Unimplemented(_)), "{name}: {err}");
            assert!(err.to_string().contains("transpose"), "{name}: {err}");
            continue;
        }
        let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = want["records"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(matches(g, w), "{name} record {i}: {g:?} is not {w}");
        }
    }
}

#[test]
fn files_and_patterns_are_read_in_order() {
    let dir = tempfile::tempdir().unwrap();
    for (name, copy) in [("group_size_10", "b"), ("snappy", "a"), ("empty", "c")] {
        std::fs::copy(
            fixture(name),
            dir.path().join(format!("{copy}.array_record")),
        )
        .unwrap();
    }
    let pattern = dir.path().join("*.array_record");
    let by_pattern = read(&[pattern.to_str().unwrap()]).unwrap();
    let by_name = read(&[&fixture("snappy"), &fixture("group_size_10")]).unwrap();
    assert_eq!(by_pattern.len(), 10 + 25);
    assert_eq!(by_pattern, by_name, "sorted: a (snappy), b, c (empty)");
    let none = dir.path().join("*.nothing");
    let err = read(&[none.to_str().unwrap()]).unwrap_err().to_string();
    assert!(err.contains("no files match"), "{err}");
    let err = Dataset::array_record(&[])
        .validate()
        .unwrap_err()
        .to_string();
    assert!(err.contains("no filenames"), "{err}");
    let missing = dir.path().join("missing.array_record");
    assert!(read(&[missing.to_str().unwrap()]).is_err());
}

/// Reads `bytes` as a file named `name` in `dir`: the records, or the error.
fn read_bytes(dir: &Path, name: &str, bytes: &[u8]) -> (String, tfdata_core::Result<Vec<Bytes>>) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let path = path.to_str().unwrap().to_string();
    let got = read(&[&path]);
    (path, got)
}

fn assert_data_loss(path: &str, got: tfdata_core::Result<Vec<Bytes>>, needles: &[&str]) {
    let err = got.expect_err("damage is an error");
    assert!(matches!(err, Error::DataLoss { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains(path), "{msg} names the file");
    for n in needles {
        assert!(msg.contains(n), "{msg:?} lacks {n:?}");
    }
}

#[test]
fn damaged_files_are_data_loss_naming_the_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(fixture("group_size_10")).unwrap();
    let file = ArrayRecordFile::open(&fixture("group_size_10")).unwrap();
    assert_eq!((file.num_chunks(), file.num_records()), (3, 25));
    let chunk1 = file.chunk_offset(1).unwrap();
    let size = good.len() as u64;

    // Cut anywhere: not whole blocks.
    let (path, got) = read_bytes(dir.path(), "cut.ar", &good[..good.len() - 1]);
    assert_data_loss(
        &path,
        got,
        &[&format!("at offset {}", size - 1), "truncated"],
    );
    // Cut at a block boundary: the last block is no postscript.
    let large = std::fs::read(fixture("large")).unwrap();
    let (path, got) = read_bytes(dir.path(), "cut_block.ar", &large[..large.len() - 65536]);
    assert_data_loss(&path, got, &["postscript", "at offset 131072"]);
    // Too short to be one.
    let (path, got) = read_bytes(dir.path(), "tiny.ar", b"not an array record file");
    assert_data_loss(&path, got, &["not an ArrayRecord file"]);
    // Whole blocks of something else.
    let (path, got) = read_bytes(dir.path(), "zeros.ar", &vec![0u8; 4 * 65536]);
    assert_data_loss(&path, got, &["postscript", "not an ArrayRecord file"]);

    // A byte of chunk 1's header, then of its data: the error names the
    // chunk and its offset, after chunk 0's records went out.
    for (name, at, needle) in [
        ("header.ar", chunk1 + 20, "header hash"),
        ("data.ar", chunk1 + 60, "data hash"),
    ] {
        let mut bad = good.clone();
        bad[at as usize] ^= 0x40;
        let path = dir.path().join(name);
        std::fs::write(&path, &bad).unwrap();
        let path = path.to_str().unwrap();
        let mut it = Dataset::array_record(&[path]).iter().unwrap();
        for _ in 0..10 {
            it.next_element().unwrap().unwrap();
        }
        let err = it.next_element().unwrap_err();
        assert_data_loss(
            path,
            Err(err),
            &[&format!("at offset {chunk1}"), "chunk 1", needle],
        );
        assert!(
            it.next_element().unwrap().is_none(),
            "then the file is done"
        );
    }
}

#[test]
fn any_flipped_byte_is_an_error_or_changes_nothing() {
    // Every byte up to the end of the footer's padding chunk header and the
    // postscript's block: a flip is caught by a hash or a check, or falls
    // where nothing is read (block headers, padding), never a panic or
    // wrong records.
    let dir = tempfile::tempdir().unwrap();
    for name in ["group_size_10", "default", "brotli"] {
        let good = std::fs::read(fixture(name)).unwrap();
        let want = read(&[&fixture(name)]).unwrap();
        let data_end = good[..65536].iter().rposition(|&b| b != 0).unwrap_or(0) + 1;
        let last_block = good.len() - 65536;
        let path = dir.path().join(format!("{name}.flipped"));
        let path = path.to_str().unwrap();
        let mut caught = 0;
        for at in (0..data_end).chain(last_block..last_block + 200) {
            let mut bad = good.clone();
            bad[at] ^= 0x08;
            std::fs::write(path, &bad).unwrap();
            match read(&[path]) {
                Ok(got) => assert_eq!(got, want, "{name}: a flip at {at} changed records"),
                Err(Error::DataLoss { .. }) => caught += 1,
                Err(e) => panic!("{name}: a flip at {at}: {e}"),
            }
        }
        assert!(
            caught > data_end / 2,
            "{name}: {caught} of {data_end} caught"
        );
    }
}

/// A split provider handing out `splits` with leases that skip `skip` and
/// record their release.
struct Leasing {
    splits: Mutex<std::collections::VecDeque<(Tensor, PositionSet)>>,
    handed_out: std::sync::atomic::AtomicI64,
}

impl crate::splits::SplitProvider for Leasing {
    fn get_next(&self) -> tfdata_core::Result<Option<Tensor>> {
        Ok(self.get_next_leased()?.map(|(t, _)| t))
    }
    fn get_next_leased(&self) -> tfdata_core::Result<Option<(Tensor, Lineage)>> {
        let Some((split, skip)) = self.splits.lock().unwrap().pop_front() else {
            return Ok(None);
        };
        let name = SplitName {
            provider: 0,
            repetition: 0,
            index: self
                .handed_out
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst),
        };
        let lease = SplitLease::named_skipping(name, skip, || {});
        Ok(Some((split, Lineage::of(lease))))
    }
    fn reset(&self) -> tfdata_core::Result<()> {
        Ok(())
    }
    fn cardinality(&self) -> i64 {
        -2
    }
}

/// A record read from a split: its bytes, its position in the split, and
/// the split's total if it ended the split.
type SplitRecord = (Bytes, Vec<i64>, Option<u64>);

/// Iterates `ds` with `splits` (each with the positions readers have):
/// each element's record, position in its split, and whether it ended
/// its split (with the split's total), in order.
fn read_splits(
    ds: &Dataset,
    splits: Vec<(Vec<i64>, Vec<i64>)>,
) -> tfdata_core::Result<Vec<SplitRecord>> {
    let splits = splits
        .into_iter()
        .map(|(split, skip)| {
            let mut set = PositionSet::default();
            for p in skip {
                set.insert(&[p]);
            }
            (Tensor::vector(&split), set)
        })
        .collect();
    let provider = Leasing {
        splits: Mutex::new(splits),
        handed_out: Default::default(),
    };
    let mut ctx = crate::IterContext::new();
    ctx.split_providers.insert(ds.op_key(), Arc::new(provider));
    let mut it = ds.iter_with(&ctx)?;
    let mut out = Vec::new();
    while let Some(e) = it.next_element()? {
        let mut named = SplitsNamed::default();
        assert!(e.lineage.whole_splits(&mut named), "every record accounted");
        let position = match (named.pieces.as_slice(), named.whole.as_slice()) {
            ([(_, p)], []) => p.clone(),
            ([], [_]) => vec![],
            other => panic!("one piece or one whole split, got {other:?}"),
        };
        let ends = named.ends.first().map(|(_, n)| *n);
        let t = &e.components[0];
        out.push((
            Bytes::copy_from_slice(&t.string_values()?[0]),
            position,
            ends,
        ));
    }
    drop(it);
    Ok(out)
}

#[test]
fn splits_are_runs_of_whole_chunks_by_decoded_size() {
    let files = vec![
        fixture("group_size_10"),
        fixture("empty"),
        fixture("default"),
    ];
    let op = ArrayRecordSource::new(files);
    let split_values = |bytes| -> Vec<Vec<i64>> {
        op.record_splits(bytes)
            .unwrap()
            .iter()
            .map(|t| t.to_vec::<i64>().unwrap())
            .collect()
    };
    assert_eq!(
        split_values(SPLIT_BYTES),
        vec![vec![0, 0, 25], vec![2, 0, 12]],
        "small files are one split each; an empty file none"
    );
    let per_chunk = split_values(1);
    assert_eq!(
        &per_chunk[..3],
        &[vec![0, 0, 10], vec![0, 10, 20], vec![0, 20, 25]]
    );
    assert_eq!(
        per_chunk[3..],
        std::iter::once(vec![2, 0, 2])
            .chain((2..12).map(|r| vec![2, r, r + 1]))
            .collect::<Vec<_>>(),
        "group_size 1: a split per record, the empty record 0 joining record 1's"
    );
    // group_size_10's chunks decode to 99, 225 and 150 bytes.
    assert_eq!(split_values(50)[..2], [vec![0, 0, 10], vec![0, 10, 20]]);
    assert_eq!(split_values(150)[..2], [vec![0, 0, 20], vec![0, 20, 25]]);
}

#[test]
fn small_chunks_are_read_in_runs() {
    // default: 12 chunks of one small record each, all in one read.
    let file = ArrayRecordFile::open(&fixture("default")).unwrap();
    assert_eq!(file.num_chunks(), 12);
    let run = file.read_run(0, 12).unwrap();
    assert!((0..12).all(|c| run.contains(c)));
    let run = file.read_run(3, 5).unwrap();
    assert!(run.contains(3) && run.contains(4) && !run.contains(5) && !run.contains(2));
    let records: Vec<Bytes> = file.decode_chunk(&run, 4).unwrap().iter().collect();
    assert_eq!(records, read(&[&fixture("default")]).unwrap()[4..5]);
    assert!(matches!(
        file.decode_chunk(&run, 5),
        Err(Error::Internal(_))
    ));
    assert!(file.read_run(12, 13).is_err(), "past the last chunk");
}

#[test]
fn split_records_carry_their_positions_and_the_last_ends_the_split() {
    let ds = Dataset::array_record(&[&fixture("group_size_10"), &fixture("default")]);
    let all = read(&[&fixture("group_size_10")]).unwrap();
    let got = read_splits(
        &ds,
        vec![(vec![0, 10, 25], vec![]), (vec![1, 3, 4], vec![])],
    )
    .unwrap();
    assert_eq!(got.len(), 15 + 1);
    for (k, (record, position, ends)) in got[..15].iter().enumerate() {
        assert_eq!(record, &all[10 + k]);
        assert_eq!(position, &vec![k as i64]);
        assert_eq!(*ends, (k == 14).then_some(15), "record {k}");
    }
    let default = read(&[&fixture("default")]).unwrap();
    assert_eq!(got[15].0, default[3]);
    assert_eq!(
        got[15].1,
        Vec::<i64>::new(),
        "a one-record split is sent whole"
    );
}

#[test]
fn a_split_produced_again_skips_what_readers_have_without_reading_it() {
    // Chunk 0 (records 0..10) damaged: readers have all of it, so it must
    // not be read; of chunk 1 they have records 12 and 19; of chunk 2 the
    // last two, so record 22 ends the split.
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(fixture("group_size_10")).unwrap();
    let file = ArrayRecordFile::open(&fixture("group_size_10")).unwrap();
    bytes[file.chunk_offset(0).unwrap() as usize + 50] ^= 1;
    let damaged = dir.path().join("damaged.array_record");
    std::fs::write(&damaged, &bytes).unwrap();
    let damaged = damaged.to_str().unwrap();
    let ds = Dataset::array_record(&[damaged]);
    let all = read(&[&fixture("group_size_10")]).unwrap();
    let have: Vec<i64> = (0..10).chain([12, 19, 23, 24]).collect();
    let got = read_splits(&ds, vec![(vec![0, 0, 25], have.clone())]).unwrap();
    let positions: Vec<i64> = got.iter().map(|(_, p, _)| p[0]).collect();
    let want: Vec<i64> = (0..25).filter(|p| !have.contains(p)).collect();
    assert_eq!(positions, want);
    for (record, position, _) in &got {
        assert_eq!(record, &all[position[0] as usize]);
    }
    assert_eq!(
        got.last().unwrap().2,
        Some(25),
        "record 22 ends the split: 11 sent, 14 skipped"
    );
    // Without the skips the damage is found.
    let err = read_splits(&ds, vec![(vec![0, 0, 25], vec![])]).unwrap_err();
    assert!(matches!(err, Error::DataLoss { .. }), "{err}");
    // Everything skipped: nothing read, nothing produced.
    let got = read_splits(&ds, vec![(vec![0, 0, 10], (0..10).collect())]).unwrap();
    assert!(got.is_empty());
}

#[test]
fn bad_splits_are_refused() {
    let ds = Dataset::array_record(&[&fixture("group_size_10")]);
    for split in [
        vec![0, 0],
        vec![1, 0, 1],
        vec![0, 5, 5],
        vec![0, 20, 26],
        vec![-1, 0, 1],
    ] {
        let err = read_splits(&ds, vec![(split.clone(), vec![])]).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{split:?}: {err}");
    }
}

#[test]
fn the_attribute_form_reads_back_as_the_same_op() {
    let ds = Dataset::array_record(&["/data/train-*.array_record", "gs://bucket/x.array_record"]);
    let def = crate::pipeline::to_pipeline_def(&ds, false).unwrap();
    let back = crate::pipeline::from_pipeline_def(&def).unwrap();
    assert_eq!(back, ds);
    let json = crate::json::to_json(&ds, false).unwrap();
    assert!(json.contains("array_record_dataset"), "{json}");
    let err = crate::ops::build(
        "array_record_dataset",
        vec![],
        &Attrs::new()
            .with("filenames", vec!["x".to_string()])
            .with("group_size", 3i64),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("group_size"), "{err}");
}

/// The file positions of `n` chunk bytes from the chunk at `begin`, block
/// headers left out (as `fuzz/fuzz_targets/array_record.rs` finds them).
fn content_positions(len: usize, begin: usize, n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = begin;
    while out.len() < n && pos < len {
        if pos.is_multiple_of(riegeli::BLOCK_SIZE as usize) {
            pos += riegeli::BLOCK_HEADER_SIZE as usize;
            continue;
        }
        out.push(pos);
        pos += 1;
    }
    out
}

/// Rewrites the hashes of the chunks from the file's start while their
/// headers fit (and are not zeros), and of the postscript: damage then
/// reaches the decoders behind the hashes.
fn rehash_all(file: &mut [u8]) {
    let mut begin = 0;
    let last_block = file.len() - riegeli::BLOCK_SIZE as usize;
    while begin < last_block {
        let header = content_positions(file.len(), begin, riegeli::CHUNK_HEADER_SIZE);
        if header.len() < riegeli::CHUNK_HEADER_SIZE || header.iter().all(|&p| file[p] == 0) {
            break;
        }
        let size = u64::from_le_bytes(std::array::from_fn(|i| file[header[8 + i]]));
        let Some(data) = usize::try_from(size)
            .ok()
            .map(|n| content_positions(file.len(), header[39] + 1, n))
            .filter(|d| d.len() as u64 == size)
        else {
            break;
        };
        // Simple chunks here hold fewer records than bytes: no padding.
        let next = data.last().map_or(header[39] + 1, |&p| p + 1);
        fix_hashes(file, &header, &data);
        begin = next;
    }
    let header = content_positions(file.len(), last_block, riegeli::CHUNK_HEADER_SIZE);
    let size = u64::from_le_bytes(std::array::from_fn(|i| file[header[8 + i]]));
    let data = content_positions(file.len(), header[39] + 1, size.min(1 << 16) as usize);
    fix_hashes(file, &header, &data);
}

fn fix_hashes(file: &mut [u8], header: &[usize], data: &[usize]) {
    let data: Vec<u8> = data.iter().map(|&p| file[p]).collect();
    let mut h: Vec<u8> = header.iter().map(|&p| file[p]).collect();
    h[16..24].copy_from_slice(&riegeli::hash(&data).to_le_bytes());
    let sum = riegeli::hash(&h[8..]);
    h[..8].copy_from_slice(&sum.to_le_bytes());
    for (&p, &b) in header.iter().zip(&h) {
        file[p] = b;
    }
}

#[test]
fn damage_behind_rewritten_hashes_is_an_error_and_splits_agree() {
    // What the fuzz target does, over every byte of the files' data: with
    // the hashes made to match, the decoders (varints, codecs, footer and
    // postscript messages, counts) meet the damage, and must refuse it or
    // read what the splits read too.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flipped.array_record");
    let path = path.to_str().unwrap();
    let ds = Dataset::array_record(&[path]);
    let mut decoder_errors = 0;
    for name in [
        "group_size_10",
        "snappy",
        "brotli",
        "uncompressed",
        "zstd_19",
    ] {
        let good = std::fs::read(fixture(name)).unwrap();
        let mut unchanged = good.clone();
        rehash_all(&mut unchanged);
        assert_eq!(
            unchanged, good,
            "{name}: rehashing a good file changes nothing"
        );
        let data_end = good[..65536].iter().rposition(|&b| b != 0).unwrap() + 1;
        for at in 64..data_end {
            let mut bad = good.clone();
            bad[at] ^= 0x21;
            rehash_all(&mut bad);
            std::fs::write(path, &bad).unwrap();
            match records(&ds) {
                Ok(whole) => {
                    let op = ds.op().split_provider().unwrap().unwrap();
                    let mut ctx = crate::IterContext::new();
                    ctx.split_providers.insert(ds.op_key(), Arc::from(op));
                    let mut by_splits = Vec::new();
                    let mut it = ds.iter_with(&ctx).unwrap();
                    while let Some(e) = it.next_element().unwrap() {
                        by_splits.push(e.components[0].string_values().unwrap()[0].clone());
                    }
                    assert_eq!(by_splits, whole, "{name}: a flip at {at}");
                }
                Err(e) => {
                    decoder_errors += usize::from(!e.to_string().contains("hash mismatch"));
                }
            }
        }
    }
    assert!(
        decoder_errors > 100,
        "{decoder_errors} errors past the hashes"
    );
}
