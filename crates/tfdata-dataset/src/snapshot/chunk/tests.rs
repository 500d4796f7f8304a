use super::snappy::{LARGE_WRITE_BLOCK_BYTES, SnappyBlockReader};
use super::*;

const ALL: [SnapshotCompression; 4] = [
    SnapshotCompression::None,
    SnapshotCompression::Gzip,
    SnapshotCompression::Zlib,
    SnapshotCompression::Snappy,
];

/// A `Write` into shared memory, so a test can see what a boxed writer wrote.
#[derive(Clone, Default)]
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }
}

fn element(i: i64) -> Element {
    Element::new(vec![
        Tensor::scalar(i),
        Tensor::strings(vec![Bytes::from(format!("s{i}")), Bytes::new()], vec![2]).unwrap(),
        Tensor::from_slice(&[i as f32, 0.5], vec![1, 2]).unwrap(),
    ])
}

fn dtypes() -> Vec<DType> {
    vec![DType::Int64, DType::String, DType::Float]
}

fn write(elements: &[Element], c: SnapshotCompression) -> Vec<u8> {
    let out = Shared::default();
    let mut w = ChunkWriter::new(Box::new(out.clone()), c);
    for e in elements {
        w.write(e).unwrap();
    }
    assert_eq!(w.num_elements(), elements.len() as u64);
    let size = w.finish().unwrap();
    assert_eq!(size, out.bytes().len() as u64);
    out.bytes()
}

fn read(bytes: Vec<u8>, c: SnapshotCompression) -> (Vec<Element>, Option<Error>) {
    let reader =
        ChunkReader::new("chunk_0_0_3", Box::new(io::Cursor::new(bytes)), c, dtypes()).unwrap();
    let mut ok = Vec::new();
    for r in reader {
        match r {
            Ok(e) => ok.push(e),
            Err(e) => return (ok, Some(e)),
        }
    }
    (ok, None)
}

/// Records that fill a Snappy block are slices of the block, and the
/// next block goes into a new buffer while they are held: every element
/// read is still what was written, in every compression.
#[test]
fn large_records_read_back_while_earlier_ones_are_held() {
    let values = SNAPPY_BLOCK_BYTES / 4 + 1000;
    let elements: Vec<Element> = (0..4)
        .map(|i| {
            let v: Vec<f32> = (0..values)
                .map(|j| ((j as i64 * (i + 3)) % 251) as f32)
                .collect();
            Element::new(vec![
                Tensor::scalar(i),
                Tensor::strings(vec![Bytes::from(format!("s{i}"))], vec![1]).unwrap(),
                Tensor::from_slice(&v, vec![values as i64]).unwrap(),
            ])
        })
        .collect();
    for c in ALL {
        let (read, err) = read(write(&elements, c), c);
        assert!(err.is_none(), "{c}: {err:?}");
        assert_eq!(read, elements, "{c}");
    }
}

fn expect_data_loss(err: Option<Error>, needles: &[&str]) {
    let err = err.expect("an error");
    assert!(matches!(err, Error::DataLoss { .. }), "{err}");
    let msg = err.to_string();
    for n in needles {
        assert!(msg.contains(n), "{msg:?} lacks {n:?}");
    }
}

#[test]
fn round_trips_every_compression() {
    let elements: Vec<Element> = (0..50).map(element).collect();
    for c in ALL {
        let (got, err) = read(write(&elements, c), c);
        assert!(err.is_none(), "{c}: {err:?}");
        assert_eq!(got, elements, "{c}");
        let (got, err) = read(write(&[], c), c);
        assert!(got.is_empty() && err.is_none(), "{c}: empty chunk");
    }
}

#[test]
fn records_are_tensorflows_tensor_protos() {
    // What TensorFlow 2.21 wrote for (1, "1") (the records of a
    // distributed_save of range(1000).map(lambda x: (x, as_string(x)))).
    let e = Element::new(vec![Tensor::scalar(1i64), Tensor::scalar_string("1")]);
    let bytes = write(&[e], SnapshotCompression::None);
    let mut expected = Vec::new();
    write_record(&mut expected, &hex("0809120022080100000000000000")).unwrap();
    write_record(&mut expected, &hex("0807120022020131")).unwrap();
    assert_eq!(bytes, expected);
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn snappy_blocks_are_tensorflows_framing() {
    // 1 MiB of barely compressible data in one component: the record's
    // header in a short block, its 1 MiB body in a block of its own (as
    // TensorFlow's writer makes a write larger than its buffer), the
    // CRC in a last one; each `u32` BE length + raw Snappy block.
    let mut state = 1u32;
    let data: Vec<u8> = (0..1 << 20)
        .map(|_| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (state >> 24) as u8
        })
        .collect();
    let e = Element::new(vec![
        Tensor::from_slice(&data, vec![data.len() as i64]).unwrap(),
    ]);
    let bytes = write(std::slice::from_ref(&e), SnapshotCompression::Snappy);
    let mut pos = 0;
    let mut uncompressed = Vec::new();
    let mut blocks = 0;
    while pos < bytes.len() {
        let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        let block = snap::raw::Decoder::new()
            .decompress_vec(&bytes[pos + 4..pos + 4 + len])
            .unwrap();
        assert!(block.len() <= LARGE_WRITE_BLOCK_BYTES);
        uncompressed.extend(block);
        pos += 4 + len;
        blocks += 1;
    }
    assert_eq!(blocks, 3);
    let mut plain = Vec::new();
    let mut record = Vec::new();
    encode_tensor(&e.components[0], &mut record);
    write_record(&mut plain, &record).unwrap();
    assert_eq!(uncompressed, plain);
    let reader = ChunkReader::new(
        "big",
        Box::new(io::Cursor::new(bytes)),
        SnapshotCompression::Snappy,
        vec![DType::UInt8],
    )
    .unwrap();
    let got: Vec<Element> = reader.map(|r| r.unwrap()).collect();
    assert_eq!(got, vec![e]);
}

/// `tests/fixtures/snapshots/<name>`, written by TensorFlow 2.21's
/// distributed_save (see `generate.py` there).
pub(crate) fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/snapshots/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The elements TensorFlow's `load` read from a fixture, from its
/// `expected.txt` (`<int> <string hex> <float>,<float>` per line).
pub(crate) fn fixture_elements(name: &str) -> Vec<Element> {
    let text = std::fs::read_to_string(format!("{}/expected.txt", fixture(name))).unwrap();
    text.lines()
        .map(|line| {
            let parts: Vec<&str> = line.split(' ').collect();
            let floats: Vec<f32> = parts[2].split(',').map(|f| f.parse().unwrap()).collect();
            Element::new(vec![
                Tensor::scalar(parts[0].parse::<i64>().unwrap()),
                Tensor::scalar_string(hex(parts[1])),
                Tensor::from_slice(&floats, vec![2]).unwrap(),
            ])
        })
        .collect()
}

pub(crate) fn sorted(mut elements: Vec<Element>) -> Vec<Element> {
    elements.sort_by_key(|e| e.components[0].to_scalar::<i64>().unwrap());
    elements
}

#[test]
fn reads_tensorflows_chunks() {
    let fs = crate::io::LocalFileSystem;
    let dtypes = vec![DType::Int64, DType::String, DType::Float];
    for (name, c) in [
        ("none", SnapshotCompression::None),
        ("gzip", SnapshotCompression::Gzip),
        ("zlib", SnapshotCompression::Zlib),
        ("snappy", SnapshotCompression::Snappy),
    ] {
        let mut all = Vec::new();
        for chunk in ["chunk_0_0_20", "chunk_0_1_20"] {
            let path = format!("{}/chunks/{chunk}", fixture(name));
            let elements: Vec<Element> = ChunkReader::open(&fs, &path, c, dtypes.clone())
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert_eq!(elements.len(), 20, "{path}");
            // Our records are TensorFlow's, byte for byte.
            let raw = std::fs::read(&path).unwrap();
            let plain = match c {
                SnapshotCompression::None => raw.clone(),
                SnapshotCompression::Gzip => {
                    let mut out = Vec::new();
                    flate2::read::GzDecoder::new(&raw[..])
                        .read_to_end(&mut out)
                        .unwrap();
                    out
                }
                SnapshotCompression::Zlib => {
                    let mut out = Vec::new();
                    flate2::read::ZlibDecoder::new(&raw[..])
                        .read_to_end(&mut out)
                        .unwrap();
                    out
                }
                SnapshotCompression::Snappy => {
                    let mut out = Vec::new();
                    SnappyBlockReader::new(&raw[..])
                        .read_to_end(&mut out)
                        .unwrap();
                    out
                }
            };
            assert_eq!(write(&elements, SnapshotCompression::None), plain, "{path}");
            all.extend(elements);
        }
        assert_eq!(sorted(all), sorted(fixture_elements(name)), "{name}");
    }
}

#[test]
fn bytes_written_counts_the_file() {
    for c in ALL {
        let out = Shared::default();
        let mut w = ChunkWriter::new(Box::new(out.clone()), c);
        let mut last = 0;
        let mut state = 7u32;
        for _ in 0..1000 {
            // 1 KiB of noise per element: compressors must emit output.
            let noise: Vec<u8> = (0..1024)
                .map(|_| {
                    state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    (state >> 24) as u8
                })
                .collect();
            let e = Element::new(vec![Tensor::from_slice(&noise, vec![1024]).unwrap()]);
            w.write(&e).unwrap();
            assert!(w.bytes_written() >= last);
            last = w.bytes_written();
        }
        // Well past the first 256 KiB block: the count has moved.
        assert!(last > 0, "{c}");
        let size = w.finish().unwrap();
        assert!(size >= last, "{c}");
        assert_eq!(size, out.bytes().len() as u64, "{c}");
    }
}

#[test]
fn damage_is_located() {
    let elements: Vec<Element> = (0..3).map(element).collect();
    let plain = write(&elements, SnapshotCompression::None);
    // The first record (an int64 scalar) is 12 + 14 + 4 bytes.
    let mut bad = plain.clone();
    bad[12 + 3] ^= 0x40;
    let (got, err) = read(bad, SnapshotCompression::None);
    assert!(got.is_empty());
    expect_data_loss(err, &["chunk_0_0_3 at offset 0", "CRC"]);

    let mut bad = plain.clone();
    bad[30 + 2] ^= 0x01;
    let (_, err) = read(bad, SnapshotCompression::None);
    expect_data_loss(err, &["chunk_0_0_3 at offset 30", "length fails its CRC"]);

    // Cut inside a record, and cut between the records of an element.
    let (got, err) = read(plain[..plain.len() - 2].to_vec(), SnapshotCompression::None);
    assert_eq!(got.len(), 2);
    expect_data_loss(err, &["truncated record"]);
    let (got, err) = read(plain[..30].to_vec(), SnapshotCompression::None);
    assert!(got.is_empty());
    expect_data_loss(
        err,
        &[
            "chunk_0_0_3 at offset 30",
            "after 1 records",
            "1 of its 3 components",
        ],
    );

    // A record that is not a TensorProto, and one of the wrong dtype.
    let mut wrong = Vec::new();
    write_record(&mut wrong, b"\xff\xff\xff").unwrap();
    let (_, err) = read(wrong, SnapshotCompression::None);
    expect_data_loss(err, &["at offset 0", "not a TensorProto"]);
    let mut wrong = Vec::new();
    let mut record = Vec::new();
    encode_tensor(&Tensor::scalar(1.5f64), &mut record);
    write_record(&mut wrong, &record).unwrap();
    let (_, err) = read(wrong, SnapshotCompression::None);
    expect_data_loss(err, &["component 0 of element 0", "float64", "int64"]);
}

#[test]
fn damaged_compressed_chunks_are_located() {
    let elements: Vec<Element> = (0..3).map(element).collect();
    for c in [
        SnapshotCompression::Gzip,
        SnapshotCompression::Zlib,
        SnapshotCompression::Snappy,
    ] {
        let full = write(&elements, c);
        for cut in [2, full.len() / 2, full.len() - 1] {
            let (_, err) = read(full[..cut].to_vec(), c);
            expect_data_loss(err, &["chunk_0_0_3", "uncompressed"]);
        }
    }
    // Snappy: a damaged block, a block length past any limit, and a
    // block claiming more output than its bytes can hold.
    let full = write(&elements, SnapshotCompression::Snappy);
    let mut bad = full.clone();
    bad[4] = 0xff; // the varint of the uncompressed length
    bad[5] = 0xff;
    bad[6] = 0xff;
    bad[7] = 0xff;
    bad[8] = 0x7f;
    let (_, err) = read(bad, SnapshotCompression::Snappy);
    expect_data_loss(err, &["Snappy block at file offset 0"]);
    let (_, err) = read(vec![0xff, 0xff, 0xff, 0xff, 0], SnapshotCompression::Snappy);
    expect_data_loss(err, &["claims 4294967295 compressed bytes"]);
    // Valid Snappy of 1000 zero bytes, with its length header raised.
    let mut block = snap::raw::Encoder::new().compress_vec(&[0; 1000]).unwrap();
    block.splice(0..2, [0x80, 0x80, 0x80, 0x80, 0x01]); // 2^28 bytes
    let mut framed = (block.len() as u32).to_be_bytes().to_vec();
    framed.extend(block);
    let (_, err) = read(framed, SnapshotCompression::Snappy);
    expect_data_loss(err, &["claims to decompress to 268435456 bytes"]);
}

#[test]
fn huge_record_length_is_refused_before_allocating() {
    let len = (1u64 << 40).to_le_bytes();
    let mut bytes = len.to_vec();
    bytes.extend(tfrecord::masked_crc32c(&len).to_le_bytes());
    bytes.extend(b"short");
    let (_, err) = read(bytes, SnapshotCompression::None);
    expect_data_loss(err, &["claims 1099511627776 bytes"]);
}

#[test]
fn no_components_is_refused() {
    let err = ChunkReader::new(
        "c",
        Box::new(io::empty()),
        SnapshotCompression::None,
        vec![],
    )
    .unwrap_err();
    assert!(err.to_string().contains("no components"), "{err}");
}
