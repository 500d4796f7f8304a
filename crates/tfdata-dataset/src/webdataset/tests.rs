//! Shards written as webdataset's `TarWriter` writes them (USTAR headers,
//! members `key.field` in sorted order, mode 0o444, user `bigdata`), the
//! fixtures the real `TarWriter` wrote (`testdata/webdataset`, made by its
//! `make_fixtures.py`) with what webdataset reads from them, and damage.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tfdata_core::positions::PositionSet;
use tfdata_core::{DType, Element, Error, Lineage, SplitLease, SplitName, SplitsNamed, Tensor};

use super::samples::{self, Limits, RawSample, ShardSamples};
use super::*;
use crate::io::CompressionType;
use crate::splits::SplitProvider;

fn fixture(name: &str) -> String {
    format!("{}/testdata/webdataset/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A tar as `TarWriter` writes it: one USTAR member per `(name, data)`.
fn tar(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in members {
        let mut h = tar::Header::new_ustar();
        h.set_path(name).unwrap();
        h.set_size(data.len() as u64);
        h.set_mode(0o444);
        h.set_mtime(1_700_000_000);
        h.set_username("bigdata").unwrap();
        h.set_groupname("bigdata").unwrap();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap()
}

/// Samples `key` with fields jpg (`key` as bytes), cls (`i`), txt.
fn samples_tar(keys: &[&str]) -> Vec<u8> {
    let owned: Vec<(String, Vec<u8>)> = keys
        .iter()
        .enumerate()
        .flat_map(|(i, k)| {
            [
                (format!("{k}.cls"), i.to_string().into_bytes()),
                (format!("{k}.jpg"), k.as_bytes().to_vec()),
                (format!("{k}.txt"), format!("text {i}").into_bytes()),
            ]
        })
        .collect();
    let members: Vec<(&str, &[u8])> = owned
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_slice()))
        .collect();
    tar(&members)
}

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_string()
}

fn op(urls: &[&str], fields: Option<&[&str]>, on_error: &str) -> WebDataset {
    WebDataset::new(
        urls.iter().map(|u| u.to_string()).collect(),
        fields.map(|f| f.iter().map(|f| f.to_string()).collect()),
        on_error.to_string(),
    )
}

/// The elements as maps keyed like the element spec.
fn maps(ds: &Dataset) -> tfdata_core::Result<Vec<BTreeMap<String, Tensor>>> {
    let Some(Structure::Dict(spec)) = ds.element_spec()? else {
        panic!("a dictionary");
    };
    let mut out = Vec::new();
    let mut it = ds.iter()?;
    while let Some(e) = it.next_element()? {
        out.push(spec.keys().cloned().zip(e.components).collect());
    }
    Ok(out)
}

fn bytes(t: &Tensor) -> Vec<u8> {
    t.string_values().unwrap()[0].to_vec()
}

fn text(t: &Tensor) -> String {
    String::from_utf8(bytes(t)).unwrap()
}

fn keys(ds: &Dataset) -> Vec<String> {
    maps(ds)
        .unwrap()
        .iter()
        .map(|m| text(&m["__key__"]))
        .collect()
}

/// All the samples of a shard's bytes, raw.
fn raw_samples(
    bytes: &[u8],
    keep: Option<&[&str]>,
    limits: Limits,
) -> Vec<std::result::Result<RawSample, samples::SampleError>> {
    let keep = keep.map(|k| k.iter().map(|f| f.to_string()).collect());
    let mut s = ShardSamples::new(
        "mem.tar",
        std::io::Cursor::new(bytes.to_vec()),
        CompressionType::None,
        keep,
        limits,
    );
    std::iter::from_fn(|| s.next_sample()).collect()
}

fn expect_error(err: &Error, needles: &[&str]) {
    let msg = err.to_string();
    for n in needles {
        assert!(msg.contains(n), "{msg:?} lacks {n:?}");
    }
}

#[test]
fn reads_the_samples_webdataset_reads_from_tarwriter_shards() {
    let expected = json("expected.json");
    for (name, want) in expected.as_object().unwrap() {
        let url = fixture(name);
        let input = crate::io::file_system(&url).unwrap().open(&url).unwrap();
        let (input, compression) = members::tar_stream(&url, input).unwrap();
        let mut s = ShardSamples::new(&url, input, compression, None, Limits::default());
        let got: Vec<RawSample> = std::iter::from_fn(|| s.next_sample())
            .map(|r| r.unwrap())
            .collect();
        let want = want.as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{name}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g.key, w["__key__"].as_str().unwrap().as_bytes(), "{name}");
            let fields: BTreeMap<String, Vec<u8>> = w["fields"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), hex(v.as_str().unwrap())))
                .collect();
            let have: BTreeMap<String, Vec<u8>> = g
                .fields
                .iter()
                .map(|(k, v)| (k.clone(), v.to_vec()))
                .collect();
            assert_eq!(have, fields, "{name} {:?}", w["__key__"]);
        }
        // README and NOTES have no key.
        let ignored = if name == "odd.tar.gz" { 2 } else { 0 };
        assert_eq!(s.ignored_members(), ignored, "{name}");
    }
}

#[test]
fn a_brace_pattern_of_tarwriter_shards_reads_as_dictionaries() {
    let pattern = fixture("shard-{000000..000001}.tar");
    let wds = op(&[&pattern], None, "raise");
    let ds = Dataset::from_op(wds);
    let Some(Structure::Dict(spec)) = ds.element_spec().unwrap() else {
        panic!("a dictionary");
    };
    let dtypes: Vec<(&str, DType)> = spec
        .iter()
        .map(|(k, s)| {
            let Structure::Tensor(t) = s else { panic!() };
            assert_eq!(t.shape, crate::spec::Shape::scalar());
            (k.as_str(), t.dtype)
        })
        .collect();
    assert_eq!(
        dtypes,
        [
            ("__key__", DType::String),
            ("__url__", DType::String),
            ("cls", DType::Int64),
            ("jpg", DType::String),
            ("txt", DType::String)
        ]
    );
    let got = maps(&ds).unwrap();
    let keys: Vec<String> = got.iter().map(|m| text(&m["__key__"])).collect();
    let long = format!("long/{}", "k".repeat(120));
    assert_eq!(
        keys,
        [
            "dir.v1/s000",
            "dir.v1/s001",
            "dir.v1/s002",
            "déjà/été",
            long.as_str()
        ]
    );
    let cls: Vec<i64> = got
        .iter()
        .map(|m| m["cls"].to_scalar::<i64>().unwrap())
        .collect();
    assert_eq!(cls, [3, 4, 12, -1, 1000], "Python's int() of each cls");
    assert_eq!(text(&got[3]["txt"]), "é");
    assert_eq!(text(&got[0]["__url__"]), fixture("shard-000000.tar"));
    assert_eq!(text(&got[4]["__url__"]), fixture("shard-000001.tar"));
    assert_eq!(
        bytes(&got[1]["jpg"]),
        [0xFF, 0xD8, 0xFF, 1, 0, 255, 10, 13, 0]
    );
}

#[test]
fn brace_expansion_matches_braceexpand() {
    for case in json("braceexpand.json").as_array().unwrap() {
        let pattern = case["pattern"].as_str().unwrap();
        let got = urls::braceexpand(pattern);
        if case.get("error").is_some() {
            assert!(got.is_err(), "{pattern:?}: {got:?}");
            continue;
        }
        let want: Vec<&str> = case["expanded"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(got.unwrap(), want, "{pattern:?}");
    }
}

#[test]
fn names_split_and_metadata_skip_as_webdataset() {
    for case in json("names.json").as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        assert_eq!(
            samples::is_meta(name.as_bytes()),
            case["meta"].as_bool().unwrap(),
            "{name:?}"
        );
        let got = samples::base_plus_ext(name.as_bytes()).map(|(k, e)| (k.to_vec(), e.to_vec()));
        let want = case["split"].as_array().map(|kv| {
            (
                kv[0].as_str().unwrap().as_bytes().to_vec(),
                kv[1].as_str().unwrap().as_bytes().to_vec(),
            )
        });
        assert_eq!(got, want, "{name:?}");
    }
}

#[test]
fn integers_parse_as_pythons_int() {
    for case in json("ints.json").as_array().unwrap() {
        let t = case["text"].as_str().unwrap();
        assert_eq!(
            samples::parse_int(t.as_bytes()),
            case["value"].as_i64(),
            "{t:?}"
        );
    }
}

#[test]
fn grouping_keys_fields_and_skipped_members() {
    let dir_header = {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_ustar();
        h.set_path("a.b/").unwrap();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_size(0);
        h.set_cksum();
        b.append(&h, &[][..]).unwrap();
        let mut l = tar::Header::new_ustar();
        l.set_path("a.b/link.jpg").unwrap();
        l.set_entry_type(tar::EntryType::Symlink);
        l.set_link_name("c.d.jpg").unwrap();
        l.set_size(0);
        l.set_cksum();
        b.append(&l, &[][..]).unwrap();
        b.into_inner().unwrap()
    };
    let members = tar(&[
        ("a.b/c.d.JPG", b"image"),
        ("README", b"not a sample"),
        ("__meta__/x.json", b"{}"),
        ("a.b/c.cls", b"7"),
        ("a.b/c.seg.png", b"mask"),
        ("e.cls", b"8"),
        ("e.d.jpg", b"other"),
        ("e.seg.png", b"m2"),
    ]);
    // The directory and the link first: skipped, as the end blocks of the
    // first part are cut off.
    let mut shard = dir_header[..dir_header.len() - 1024].to_vec();
    shard.extend_from_slice(&members);
    let got: Vec<RawSample> = raw_samples(&shard, None, Limits::default())
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].key, "a.b/c".as_bytes());
    assert_eq!(
        got[0].fields.keys().collect::<Vec<_>>(),
        ["cls", "d.jpg", "seg.png"],
        "fields after the first dot, lowercased; README and __meta__ skipped"
    );
    assert_eq!(got[0].offset, 1024, "the first regular member's header");
    assert_eq!(got[1].key, "e".as_bytes());
    // Only `keep` is read; the rest is named.
    let got = raw_samples(&shard, Some(&["cls"]), Limits::default());
    let first = got[0].as_ref().unwrap();
    assert_eq!(first.fields.keys().collect::<Vec<_>>(), ["cls"]);
    assert_eq!(
        first.others.iter().collect::<Vec<_>>(),
        ["d.jpg", "seg.png"]
    );
    // A repeated field or a reserved name makes the sample bad; the next
    // one still reads.
    let shard = tar(&[
        ("a.jpg", b"1"),
        ("a.JPG", b"2"),
        ("b.__key__", b"x"),
        ("c.jpg", b"3"),
    ]);
    let got = raw_samples(&shard, None, Limits::default());
    assert_eq!(got.len(), 3);
    let err = got[0].as_ref().unwrap_err();
    assert!(!err.fatal);
    expect_error(
        &err.error,
        &[
            "mem.tar at offset 1024",
            "a.JPG",
            "repeats the field \"jpg\"",
        ],
    );
    expect_error(
        &got[1].as_ref().unwrap_err().error,
        &["__key__", "reserves"],
    );
    assert_eq!(got[2].as_ref().unwrap().key, "c".as_bytes());
}

#[test]
fn fields_filter_missing_fields_and_integers() {
    let dir = tempfile::tempdir().unwrap();
    let shard = tar(&[
        ("a.cls", b"1"),
        ("a.jpg", b"A"),
        ("b.jpg", b"B"),
        ("c.cls", b"x"),
        ("c.jpg", b"C"),
        ("d.cls", b"4"),
        ("d.jpg", b"D"),
        ("d.txt", b"extra"),
    ]);
    let url = write(&dir, "s.tar", &shard);
    // jpg alone: every sample has it.
    let ds = Dataset::from_op(op(&[&url], Some(&["jpg"]), "raise"));
    assert_eq!(keys(&ds), ["a", "b", "c", "d"]);
    // jpg and cls: b lacks cls, c's is not a number.
    let ds = Dataset::from_op(op(&[&url], Some(&["jpg", "cls"]), "raise"));
    let mut it = ds.iter().unwrap();
    assert!(it.next_element().unwrap().is_some());
    let err = it.next_element().unwrap_err();
    expect_error(
        &err,
        &[
            &url,
            "at offset 2048",
            "sample \"b\" lacks field(s) cls",
            "it has: jpg",
        ],
    );
    let err = it.next_element().unwrap_err();
    expect_error(
        &err,
        &[
            &url,
            "at offset 3072",
            "field cls",
            "not an integer",
            "\"x\"",
        ],
    );
    let d = it.next_element().unwrap().unwrap();
    assert_eq!(
        d.components.len(),
        4,
        "__key__, __url__, cls, jpg: txt ignored"
    );
    assert!(it.next_element().unwrap().is_none());
    // Skipped and counted instead.
    let wds = op(&[&url], Some(&["jpg", "cls"]), "skip");
    let counters = wds.counters();
    let before = skipped_samples();
    let ds = Dataset::from_op(wds);
    assert_eq!(keys(&ds), ["a", "d"]);
    assert_eq!(counters.skipped_samples(), 2);
    assert!(skipped_samples() >= before + 2);
}

#[test]
fn samples_with_other_fields_than_the_first_are_errors_or_skipped() {
    let mixed = fixture("mixed.tar.gz");
    let ds = Dataset::from_op(op(&[&mixed], None, "raise"));
    let mut it = ds.iter().unwrap();
    assert!(it.next_element().unwrap().is_some());
    let err = it.next_element().unwrap_err();
    expect_error(
        &err,
        &[
            &mixed,
            "of the uncompressed GZIP stream",
            "sample \"m1\" has field(s) seg.png besides the first sample's cls, jpg",
        ],
    );
    let err = it.next_element().unwrap_err();
    expect_error(&err, &["sample \"m2\" lacks field(s) cls"]);
    let wds = op(&[&mixed], None, "skip");
    let counters = wds.counters();
    let ds = Dataset::from_op(wds);
    assert_eq!(keys(&ds), ["m0", "m3"]);
    assert_eq!(counters.skipped_samples(), 2);
    // With fields, extra ones are ignored.
    let ds = Dataset::from_op(op(&[&mixed], Some(&["jpg"]), "raise"));
    assert_eq!(keys(&ds), ["m0", "m1", "m2", "m3"]);
    // The webdataset-made oddities: keyless members counted.
    let wds = op(&[&fixture("odd.tar.gz")], Some(&["jpg"]), "skip");
    let counters = wds.counters();
    let ds = Dataset::from_op(wds);
    assert_eq!(keys(&ds).len(), 3, "d/a, d/b and g/x... have a jpg");
    assert_eq!(
        counters.skipped_samples(),
        2,
        "d/ and the second d/a have none"
    );
    assert_eq!(counters.ignored_members(), 2);
}

#[test]
fn damaged_shards_name_the_shard_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let good = samples_tar(&["a", "b", "c"]);
    // Members are 1024 bytes each (header + one block): b's jpg header is
    // at 4 * 512 * 2 = 4096, its data at 4608.
    let cases: Vec<(&str, Vec<u8>, Vec<&str>)> = vec![
        (
            "mid-data",
            good[..4608].to_vec(),
            vec![
                "offset 4608",
                "inside the data of member \"b.jpg\" (0 of its 1 bytes)",
            ],
        ),
        (
            "mid-header",
            good[..4096 + 100].to_vec(),
            vec![
                "offset 4096",
                "ends inside a member header (100 of 512 bytes)",
            ],
        ),
        (
            "at-boundary",
            good[..6144].to_vec(),
            vec!["offset 6144", "without tar's end-of-archive block"],
        ),
        (
            "mid-padding",
            good[..4608 + 100].to_vec(),
            vec!["offset 4708", "ends inside member \"b.jpg\""],
        ),
        ("empty", Vec::new(), vec!["offset 0", "empty"]),
        (
            "garbage",
            b"this is not a tar file at all, just some text".repeat(20),
            vec!["offset 0", "not a tar header"],
        ),
        (
            "bad-checksum",
            {
                let mut b = good.clone();
                b[4096 + 3] ^= 0x20; // the name of b.jpg's header
                b
            },
            vec!["offset 4096", "checksum"],
        ),
        (
            "garbage-after",
            {
                let mut b = good[..9216].to_vec();
                b.extend_from_slice(&[0xAB; 2048]);
                b
            },
            vec!["offset 9216", "not a tar header"],
        ),
    ];
    for (name, bytes, needles) in cases {
        let url = write(&dir, &format!("{name}.tar"), &bytes);
        let ds = Dataset::from_op(op(&[&url], Some(&["jpg"]), "raise"));
        let mut it = ds.iter().unwrap();
        let err = loop {
            match it.next_element() {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("{name}: no error"),
                Err(e) => break e,
            }
        };
        assert!(matches!(err, Error::DataLoss { .. }), "{name}: {err}");
        let mut needles = needles;
        needles.push(&url);
        expect_error(&err, &needles);
        // The reader ends after the damage.
        assert!(it.next_element().unwrap().is_none(), "{name}");
    }
    // Skipping: the samples before the damage, one counted, the next shard.
    let cut = write(&dir, "cut.tar", &good[..4608 + 1]);
    let next = write(&dir, "next.tar", &samples_tar(&["x"]));
    let wds = op(&[&cut, &next], None, "skip");
    let counters = wds.counters();
    let ds = Dataset::from_op(wds);
    assert_eq!(keys(&ds), ["a", "x"]);
    assert_eq!(counters.skipped_samples(), 1, "b, which was being read");
    // A cut gzip shard.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &good).unwrap();
    let gz = gz.finish().unwrap();
    let url = write(&dir, "cut.tar.gz", &gz[..gz.len() / 2]);
    let err = Dataset::from_op(op(&[&url], Some(&["jpg"]), "raise"))
        .iter()
        .unwrap()
        .find_map(|r| r.err())
        .unwrap();
    assert!(matches!(err, Error::DataLoss { .. }), "{err}");
    expect_error(&err, &[&url, "GZIP"]);
    // Another compression is refused by name.
    let url = write(&dir, "s.tar.xz", b"\xfd7zXZ\x00rest");
    let err = Dataset::from_op(op(&[&url], Some(&["jpg"]), "raise"))
        .iter()
        .unwrap()
        .find_map(|r| r.err())
        .unwrap();
    expect_error(&err, &[&url, "xz-compressed"]);
}

/// A shard whose one member claims `size` bytes and streams zeros for
/// them (never held anywhere), then a sample `z`.
struct Virtual {
    head: std::io::Cursor<Vec<u8>>,
    zeros: u64,
    tail: std::io::Cursor<Vec<u8>>,
}

impl Virtual {
    fn new(size: u64) -> Virtual {
        let mut h = tar::Header::new_ustar();
        h.set_path("big.jpg").unwrap();
        h.set_size(size);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        let padding = (512 - size % 512) % 512;
        Virtual {
            head: std::io::Cursor::new(h.as_bytes().to_vec()),
            zeros: size + padding,
            tail: std::io::Cursor::new(tar(&[("z.jpg", b"Z")])),
        }
    }
}

impl Read for Virtual {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.head.read(buf)?;
        if n > 0 {
            return Ok(n);
        }
        if self.zeros > 0 {
            let n = (buf.len() as u64).min(self.zeros) as usize;
            buf[..n].fill(0);
            self.zeros -= n as u64;
            return Ok(n);
        }
        self.tail.read(buf)
    }
}

#[test]
fn members_over_the_limit_are_refused_without_being_read() {
    // A header claiming 3 GiB and no data: refused on its size, not
    // reported as truncated (which reading would find).
    let dir = tempfile::tempdir().unwrap();
    let mut h = tar::Header::new_ustar();
    h.set_path("huge.jpg").unwrap();
    h.set_size(3 << 30);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    let url = write(&dir, "huge.tar", h.as_bytes());
    let err = Dataset::from_op(op(&[&url], Some(&["jpg"]), "raise"))
        .iter()
        .unwrap()
        .next_element()
        .unwrap_err();
    assert!(matches!(err, Error::DataLoss { .. }), "{err}");
    expect_error(
        &err,
        &[
            &url,
            "offset 0",
            "3221225472 bytes, over the limit of 1073741824",
        ],
    );
    // 64 MiB over a 1 MiB limit, streamed past: the sample is bad, the
    // next one reads, and nothing held the big member.
    let limits = Limits {
        member_bytes: 1 << 20,
        ..Limits::default()
    };
    let input = Virtual::new(64 << 20);
    let mut s = ShardSamples::new("virtual.tar", input, CompressionType::None, None, limits);
    let bad = s.next_sample().unwrap().unwrap_err();
    assert!(!bad.fatal);
    expect_error(&bad.error, &["virtual.tar at offset 0", "67108864 bytes"]);
    let z = s.next_sample().unwrap().unwrap();
    assert_eq!(z.key, "z".as_bytes());
    assert!(s.next_sample().is_none());
    // A member over the limit whose field is not kept is no problem.
    let input = Virtual::new(64 << 20);
    let mut s = ShardSamples::new(
        "virtual.tar",
        input,
        CompressionType::None,
        Some(BTreeSet::from(["cls".to_string()])),
        limits,
    );
    assert!(s.next_sample().unwrap().is_ok());
    // The op's limits, on a real shard, with skipping.
    let url = write(
        &dir,
        "s.tar",
        &samples_tar(&["a", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "c"]),
    );
    let mut wds = op(&[&url], None, "skip");
    wds.limits.member_bytes = 16;
    let counters = wds.counters();
    let ds = Dataset::from_op(wds);
    assert_eq!(keys(&ds), ["a", "c"]);
    assert_eq!(counters.skipped_samples(), 1);
}

/// Splits 0..n, each leased under its name, with the positions in `skip`
/// already received; releases are recorded.
struct Leasing {
    next: Mutex<i64>,
    count: i64,
    skip: BTreeMap<i64, PositionSet>,
    released: Arc<Mutex<Vec<i64>>>,
}

impl SplitProvider for Leasing {
    fn get_next(&self) -> tfdata_core::Result<Option<Tensor>> {
        Ok(self.get_next_leased()?.map(|(t, _)| t))
    }
    fn get_next_leased(&self) -> tfdata_core::Result<Option<(Tensor, Lineage)>> {
        let mut next = self.next.lock().unwrap();
        if *next >= self.count {
            return Ok(None);
        }
        let i = *next;
        *next += 1;
        let released = Arc::clone(&self.released);
        let name = SplitName {
            provider: 0,
            repetition: 0,
            index: i,
        };
        let skip = self.skip.get(&i).cloned().unwrap_or_default();
        let lease =
            SplitLease::named_skipping(name, skip, move || released.lock().unwrap().push(i));
        Ok(Some((Tensor::scalar(i), Lineage::of(lease))))
    }
    fn reset(&self) -> tfdata_core::Result<()> {
        *self.next.lock().unwrap() = 0;
        Ok(())
    }
    fn cardinality(&self) -> i64 {
        self.count
    }
}

#[test]
fn one_split_per_shard_with_positions() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(&dir, "a.tar", &samples_tar(&["a0", "a1", "a2", "a3"]));
    // b's sample 1 is bad (no jpg): it takes its position all the same.
    let b = write(
        &dir,
        "b.tar",
        &tar(&[
            ("b0.cls", b"0"),
            ("b0.jpg", b"x"),
            ("b1.cls", b"1"),
            ("b2.cls", b"2"),
            ("b2.jpg", b"y"),
        ]),
    );
    let wds = op(&[&a, &b], Some(&["cls", "jpg"]), "skip");
    let provider = wds.split_provider().unwrap().unwrap();
    assert_eq!(provider.cardinality(), 2);
    // Readers already have a1 and a3 of split 0 (handed out again).
    let mut received = PositionSet::default();
    received.insert(&[1]);
    received.insert(&[3]);
    let released = Arc::new(Mutex::new(Vec::new()));
    let splits = Leasing {
        next: Mutex::new(0),
        count: 2,
        skip: BTreeMap::from([(0, received)]),
        released: Arc::clone(&released),
    };
    let ds = Dataset::from_op(wds);
    let mut ctx = IterContext::new();
    ctx.split_providers.insert(ds.op_key(), Arc::new(splits));
    let mut it = ds.iter_with(&ctx).unwrap();
    // Each element's key and the (split, position) pieces it names.
    type Named = (String, Vec<(i64, Vec<i64>)>);
    let mut got: Vec<Named> = Vec::new();
    let mut held: Vec<Element> = Vec::new();
    while let Some(e) = it.next_element().unwrap() {
        let key = text(&e.components[0]);
        let mut named = SplitsNamed::default();
        e.lineage.whole_splits(&mut named);
        got.push((
            key,
            named
                .pieces
                .iter()
                .map(|(n, p)| (n.index, p.clone()))
                .collect(),
        ));
        if got.len() == 1 {
            assert!(released.lock().unwrap().is_empty());
        }
        held.push(e);
    }
    assert_eq!(
        got,
        [
            ("a0".to_string(), vec![(0, vec![0])]),
            ("a2".to_string(), vec![(0, vec![2])]),
            ("b0".to_string(), vec![(1, vec![0])]),
            ("b2".to_string(), vec![(1, vec![2])]),
        ],
        "a1 and a3 dropped; b1 skipped at position 1"
    );
    assert!(
        released.lock().unwrap().is_empty(),
        "the elements still hold their splits"
    );
    drop(it);
    drop(held);
    let mut r = released.lock().unwrap().clone();
    r.sort_unstable();
    assert_eq!(r, [0, 1]);
}

#[test]
fn the_last_element_of_a_shard_holds_what_is_left_of_its_split() {
    let dir = tempfile::tempdir().unwrap();
    // The shard ends with a bad sample: skipped while reading ahead.
    let a = write(
        &dir,
        "a.tar",
        &tar(&[("a0.jpg", b"x"), ("a1.jpg", b"y"), ("a2.txt", b"no jpg")]),
    );
    let released = Arc::new(Mutex::new(Vec::new()));
    let splits = Leasing {
        next: Mutex::new(0),
        count: 1,
        skip: BTreeMap::new(),
        released: Arc::clone(&released),
    };
    let ds = Dataset::from_op(op(&[&a], Some(&["jpg"]), "skip"));
    let mut ctx = IterContext::new();
    ctx.split_providers.insert(ds.op_key(), Arc::new(splits));
    let mut it = ds.iter_with(&ctx).unwrap();
    let first = it.next_element().unwrap().unwrap();
    let last = it.next_element().unwrap().unwrap();
    // Named as one message would name them.
    let mut named = SplitsNamed::default();
    first.lineage.whole_splits(&mut named);
    assert!(named.ends.is_empty());
    named.clear();
    last.lineage.whole_splits(&mut named);
    assert_eq!(
        named
            .ends
            .iter()
            .map(|(n, t)| (n.index, *t))
            .collect::<Vec<_>>(),
        [(0, 2)],
        "the last element ends the split: the source let go of it first"
    );
    drop((first, last));
    assert_eq!(*released.lock().unwrap(), [0]);
    assert!(it.next_element().unwrap().is_none());
}

#[test]
fn json_round_trip_and_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir, "s-7.tar", &samples_tar(&["a", "b"]));
    let pattern = format!("{}/s-{{7..7}}.tar", dir.path().to_str().unwrap());
    for fields in [None, Some(&["jpg", "cls"][..])] {
        let ds = Dataset::webdataset(&[&pattern], fields, "skip");
        let def = crate::pipeline::to_pipeline_def(&ds, false).unwrap();
        let back = crate::pipeline::from_pipeline_def(&def).unwrap();
        assert_eq!(back, ds);
        assert_eq!(keys(&back), ["a", "b"]);
        let text = crate::json::to_json(&ds, false).unwrap();
        let back = crate::json::from_json(&text).unwrap();
        assert_eq!(back.dataset, ds, "{text}");
    }
    let text = format!(r#"{{"op": "webdataset", "urls": "{pattern}", "fields": ["txt"]}}"#);
    let ds = crate::json::from_json(&text).unwrap().dataset;
    assert_eq!(keys(&ds), ["a", "b"]);
    assert_eq!(ds.cardinality(), crate::UNKNOWN_CARDINALITY);
    // Checked without reading anything.
    let bad: Vec<(Dataset, &str)> = vec![
        (
            Dataset::webdataset(&["x-{0..1.tar"], Some(&["jpg"]), "raise"),
            "unbalanced",
        ),
        (Dataset::webdataset(&[], Some(&["jpg"]), "raise"), "no urls"),
        (
            Dataset::webdataset(&["x.tar"], Some(&["JPG"]), "raise"),
            "lowercase",
        ),
        (
            Dataset::webdataset(&["x.tar"], Some(&["jpg", "jpg"]), "raise"),
            "twice",
        ),
        (
            Dataset::webdataset(&["x.tar"], Some(&["__key__"]), "raise"),
            "always",
        ),
        (
            Dataset::webdataset(&["x.tar"], Some(&["jpg"]), "ignore"),
            "on_error",
        ),
        (
            Dataset::webdataset(&["x-{0..9999999}.tar"], Some(&["jpg"]), "raise"),
            "10000000 strings",
        ),
    ];
    for (ds, needle) in bad {
        let err = ds.validate().unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        expect_error(&err, &[needle]);
    }
    let err = crate::json::from_json(r#"{"op": "webdataset", "urls": ["x.tar"], "shuffle": 1}"#)
        .err()
        .unwrap();
    expect_error(&err, &["unknown attribute `shuffle`"]);
    // A missing shard names itself when read; no sample to learn from is
    // said so.
    let missing = dir.path().join("none.tar").to_str().unwrap().to_string();
    let err = Dataset::webdataset(&[&missing], None, "raise")
        .validate()
        .unwrap_err();
    expect_error(&err, &[&missing]);
    let empty = write(&dir, "empty.tar", &tar(&[]));
    let err = Dataset::webdataset(&[&empty], None, "raise")
        .validate()
        .unwrap_err();
    expect_error(&err, &["no sample", "pass fields"]);
}
