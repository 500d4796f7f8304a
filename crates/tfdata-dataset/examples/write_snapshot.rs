//! Writes a finished distributed snapshot with tfdata's chunk writer, for
//! checking that TensorFlow's `tf.data.Dataset.load` reads it
//! (`interop/test_snapshot_interop.py`):
//!
//! ```sh
//! cargo run -p tfdata-dataset --example write_snapshot -- <path> <compression> <n>
//! ```
//!
//! `compression` is `NONE`, `GZIP`, `ZLIB` or `SNAPPY`. Element `x` of `n`
//! is `(x, str(x), [x / 2, x / 2] as float32, bytes)`, where `bytes` is a
//! uint8 vector of `x % 7 * 100` values `(i * x) % 251` — and 600 000 of them
//! for `x == 3`, so one record spans several 256 KiB Snappy blocks. Chunks
//! hold 8 elements each, spread over two streams.

use tfdata_core::{DType, Element, Tensor};
use tfdata_dataset::io::LocalFileSystem;
use tfdata_dataset::snapshot::layout::SnapshotCompression;
use tfdata_dataset::snapshot::testing::write_snapshot;
use tfdata_dataset::{Shape, Structure, TensorSpec};

fn element(x: i64) -> Element {
    let len = if x == 3 {
        600_000
    } else {
        (x % 7 * 100) as usize
    };
    let bytes: Vec<u8> = (0..len).map(|i| ((i as i64 * x) % 251) as u8).collect();
    Element::new(vec![
        Tensor::scalar(x),
        Tensor::scalar_string(x.to_string()),
        Tensor::from_slice(&[x as f32 / 2.0; 2], vec![2]).expect("2 values"),
        Tensor::from_slice(&bytes, vec![len as i64]).expect("len values"),
    ])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, compression, n] = args.as_slice() else {
        return Err("usage: write_snapshot <path> <NONE|GZIP|ZLIB|SNAPPY> <num_elements>".into());
    };
    let compression = SnapshotCompression::from_user(Some(compression))?;
    let n: i64 = n.parse()?;
    let spec = Structure::Tuple(vec![
        Structure::Tensor(TensorSpec::new(DType::Int64, Shape::scalar())),
        Structure::Tensor(TensorSpec::new(DType::String, Shape::scalar())),
        Structure::Tensor(TensorSpec::new(DType::Float, Shape::known(&[2]))),
        Structure::Tensor(TensorSpec::new(DType::UInt8, Shape(Some(vec![None])))),
    ]);
    let elements: Vec<Element> = (0..n).map(element).collect();
    write_snapshot(&LocalFileSystem, path, &spec, compression, &elements, 8, 2)?;
    Ok(())
}
