//! The snapshot `tf.data.Dataset.save` writes (TensorFlow 2.21's
//! non-distributed format, file format version 2), read and written:
//!
//! ```text
//! <path>/snapshot.metadata                  binary SnapshotMetadataRecord
//! <path>/<run_id>/<shard:08>.shard/<checkpoint:08>.snapshot
//! ```
//!
//! Each `.snapshot` file is in the same record format as a distributed
//! snapshot's chunk (one TFRecord per component, compressed as the save
//! asked), so it is read and written with [`ChunkReader`] and
//! [`ChunkWriter`]. A shard's files are read checkpoint after checkpoint
//! until the next one does not exist, as TensorFlow's shard reader does.
//! (`dataset_spec.pb`, the element spec, is written by TensorFlow's Python,
//! not by its ops, and is not read by them either.)

use prost::Message;
use tfdata_core::{Element, Error, Result};

use super::chunk::{ChunkReader, ChunkWriter};
use super::layout::{SnapshotCompression, join};
use crate::attrs::Attrs;
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::io::fs::FileSystem;
use crate::io::registry::file_system;
use crate::iterators::ElementIterator;
use crate::spec::{Shape, Structure, TensorSpec};

/// The op's name on the wire and in JSON.
pub const SHARD_OP_NAME: &str = "saved_shard";
/// The name of [`SavedLoad`].
pub const LOAD_OP_NAME: &str = "saved_load";

/// The file format version `Dataset.save` writes (`kFileFormatVersion`):
/// TFRecord files, one record per component.
pub const FILE_FORMAT_VERSION: i64 = 2;

/// The most checkpoint files one shard directory is read through: a bound
/// on the loop (TensorFlow numbers them with 8 digits).
const MAX_CHECKPOINTS: i64 = 100_000_000;

/// `SnapshotMetadataRecord` (tensorflow/core/protobuf/snapshot.proto), the
/// binary `snapshot.metadata` of a saved dataset.
#[derive(Clone, PartialEq, Message)]
pub struct SnapshotMetadataRecord {
    #[prost(string, tag = "1")]
    pub graph_hash: String,
    #[prost(string, tag = "2")]
    pub run_id: String,
    #[prost(int64, tag = "3")]
    pub creation_timestamp: i64,
    #[prost(int64, tag = "4")]
    pub version: i64,
    #[prost(int32, repeated, tag = "5")]
    pub dtype: Vec<i32>,
    #[prost(int64, tag = "6")]
    pub num_elements: i64,
    #[prost(bool, tag = "1000")]
    pub finalized: bool,
}

/// `<path>/snapshot.metadata`.
pub fn metadata_file(path: &str) -> String {
    join(path, "snapshot.metadata")
}

/// `<path>/<run_id>`.
pub fn run_dir(path: &str, run_id: &str) -> String {
    join(path, run_id)
}

/// `<run_dir>/<shard:08>.shard`.
pub fn shard_dir(run_dir: &str, shard: i64) -> String {
    join(run_dir, &format!("{shard:08}.shard"))
}

/// `<shard_dir>/<checkpoint:08>.snapshot`.
pub fn checkpoint_file(shard_dir: &str, checkpoint: i64) -> String {
    join(shard_dir, &format!("{checkpoint:08}.snapshot"))
}

/// The metadata of the saved dataset at `path`; `Ok(None)` if it has none
/// (TensorFlow's `ReadMetadataFile` reporting the file missing).
pub fn read_metadata(fs: &dyn FileSystem, path: &str) -> Result<Option<SnapshotMetadataRecord>> {
    let file = metadata_file(path);
    if !fs.exists(&file)? {
        return Ok(None);
    }
    let bytes = fs.read_all(&file)?;
    SnapshotMetadataRecord::decode(bytes)
        .map(Some)
        .map_err(|e| Error::DataLoss {
            location: file,
            reason: format!("not a SnapshotMetadataRecord: {e}"),
        })
}

/// Writes `<path>/snapshot.metadata` (replacing any) whole or not at all:
/// to a temporary file renamed over it, as TensorFlow does, so a reader
/// never sees half a record.
pub fn write_metadata(
    fs: &dyn FileSystem,
    path: &str,
    metadata: &SnapshotMetadataRecord,
) -> Result<()> {
    fs.create_dir_all(path)?;
    let file = metadata_file(path);
    let tmp = format!("{file}.tmp");
    let mut out = fs.create(&tmp)?;
    out.write_all(&metadata.encode_to_vec())
        .and_then(|()| out.flush())
        .map_err(|e| Error::io(format!("writing {tmp}"), e))?;
    drop(out);
    fs.rename(&tmp, &file)
}

/// The shard directories of a saved run, sorted by name (the order
/// TensorFlow's `load` hands them to its reader function).
pub fn shard_dirs(fs: &dyn FileSystem, run_dir: &str) -> Result<Vec<String>> {
    let mut dirs = fs.glob(&join(run_dir, "*.shard"))?;
    dirs.sort();
    Ok(dirs)
}

impl Dataset {
    /// The elements of one shard directory of a saved dataset: its
    /// checkpoint files `00000000.snapshot`, `00000001.snapshot`, ... in
    /// order, until one is missing. Each component must have the dtype
    /// `spec` says.
    pub fn saved_shard(dir: &str, compression: SnapshotCompression, spec: Structure) -> Dataset {
        Dataset::saved_shard_from(dir, compression, spec, 0)
    }

    /// [`saved_shard`](Self::saved_shard) from element `start_index` of
    /// its first file on (`SnapshotDatasetReader`'s `start_index`).
    pub fn saved_shard_from(
        dir: &str,
        compression: SnapshotCompression,
        spec: Structure,
        start_index: i64,
    ) -> Dataset {
        Dataset::from_op(SavedShard {
            dir: dir.to_string(),
            compression,
            spec,
            start_index,
            one_file: false,
        })
    }

    /// The elements of one file in the chunk record format
    /// (`SnapshotChunkDataset`: a distributed snapshot's chunk, or one
    /// checkpoint file of a saved dataset), checked against `spec` as
    /// [`saved_shard`](Self::saved_shard) checks them.
    pub fn snapshot_chunk_file(
        file: &str,
        compression: SnapshotCompression,
        spec: Structure,
    ) -> Dataset {
        Dataset::from_op(SavedShard {
            dir: file.to_string(),
            compression,
            spec,
            start_index: 0,
            one_file: true,
        })
    }
}

impl Dataset {
    /// A saved dataset as `load` reads it: `shards`, the shard datasets as
    /// the load's reader function combined them, whose cardinality is the
    /// element count the save recorded (TensorFlow's `LoadDataset` reports
    /// the metadata's `num_elements`, without counting).
    pub fn saved_load(shards: Dataset, num_elements: i64) -> Dataset {
        Dataset::from_op(SavedLoad {
            input: shards,
            num_elements,
        })
    }
}

/// See [`Dataset::saved_load`].
#[derive(Debug)]
pub struct SavedLoad {
    pub input: Dataset,
    pub num_elements: i64,
}

impl DatasetOp for SavedLoad {
    fn name(&self) -> &'static str {
        LOAD_OP_NAME
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        Attrs::new().with("num_elements", self.num_elements)
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        self.input.element_spec()
    }

    fn cardinality(&self) -> i64 {
        self.num_elements
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        self.input.op.make_iterator(ctx)
    }
}

/// See [`Dataset::saved_shard`].
#[derive(Debug)]
pub struct SavedShard {
    pub dir: String,
    pub compression: SnapshotCompression,
    pub spec: Structure,
    /// Elements of the first file skipped.
    pub start_index: i64,
    /// `dir` is one file to read, not a shard directory.
    pub one_file: bool,
}

impl DatasetOp for SavedShard {
    fn name(&self) -> &'static str {
        SHARD_OP_NAME
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("dir", self.dir.as_str())
            .with("compression", self.compression.as_str())
            .with("element_spec", super::load::spec_to_attr(&self.spec))
            .with("start_index", self.start_index)
            .with("one_file", self.one_file)
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        Ok(Some(self.spec.clone()))
    }

    fn cardinality(&self) -> i64 {
        crate::UNKNOWN_CARDINALITY
    }

    fn make_iterator(&self, _ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(SavedShardIter {
            fs: file_system(&self.dir)?,
            dir: self.dir.clone(),
            compression: self.compression,
            specs: self.spec.flatten().into_iter().cloned().collect(),
            checkpoint: 0,
            current: None,
            done: false,
            skip: self.start_index.max(0),
            one_file: self.one_file,
        }))
    }
}

struct SavedShardIter {
    fs: std::sync::Arc<dyn FileSystem>,
    dir: String,
    compression: SnapshotCompression,
    specs: Vec<TensorSpec>,
    /// The checkpoint file to open next.
    checkpoint: i64,
    current: Option<ChunkReader>,
    done: bool,
    /// Elements of the first file still to skip.
    skip: i64,
    one_file: bool,
}

impl ElementIterator for SavedShardIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        while !self.done {
            if let Some(reader) = &mut self.current {
                match reader.read_element() {
                    Ok(Some(element)) => match check_element(&self.specs, &element) {
                        Ok(()) => return Ok(Some(element)),
                        Err(e) => {
                            self.done = true;
                            return Err(e);
                        }
                    },
                    Ok(None) => self.current = None,
                    Err(e) => {
                        self.done = true;
                        return Err(e);
                    }
                }
                continue;
            }
            if self.checkpoint >= MAX_CHECKPOINTS || (self.one_file && self.checkpoint > 0) {
                self.done = true;
                break;
            }
            let file = if self.one_file {
                self.dir.clone()
            } else {
                checkpoint_file(&self.dir, self.checkpoint)
            };
            let first = self.checkpoint == 0;
            self.checkpoint += 1;
            if !self.fs.exists(&file)? {
                self.done = true;
                if first {
                    // TensorFlow opens the first file unconditionally.
                    return Err(Error::NotFound {
                        what: "file",
                        id: format!("{file}; No such file or directory"),
                    });
                }
                break;
            }
            let dtypes = self.specs.iter().map(|s| s.dtype).collect();
            let mut reader = ChunkReader::open(&*self.fs, &file, self.compression, dtypes)?
                .without_dtype_check();
            // Skipped as TensorFlow does, element by element (bounded by
            // the file: a file ending first is an error).
            while self.skip > 0 {
                self.skip -= 1;
                if reader.read_element()?.is_none() {
                    self.done = true;
                    // TensorFlow: OutOfRange, which a function
                    // reports as InvalidArgument.
                    return Err(Error::InvalidArgument(format!(
                        "{file} ends before the start index: Read less bytes than requested"
                    )));
                }
            }
            self.current = Some(reader);
        }
        Ok(None)
    }
}

/// TensorFlow's check of what a saved dataset's reader yields against the
/// `element_spec` the load was given, with its messages.
fn check_element(specs: &[TensorSpec], element: &Element) -> Result<()> {
    for (i, (spec, t)) in specs.iter().zip(&element.components).enumerate() {
        if spec.dtype != t.dtype() {
            return Err(Error::InvalidArgument(format!(
                "Data type mismatch at component {i}: expected {} but got {}.",
                spec.dtype.name(),
                t.dtype().name()
            )));
        }
        if !spec.shape.is_compatible_with(t.shape()) {
            return Err(Error::InvalidArgument(format!(
                "Incompatible shapes at component {i}: expected {} but got {}.",
                tf_shape(&spec.shape),
                tf_dims(t.shape())
            )));
        }
    }
    Ok(())
}

/// A partial shape as TensorFlow's `PartialTensorShape::DebugString`:
/// `[2,?]`, `<unknown>`.
fn tf_shape(shape: &Shape) -> String {
    match &shape.0 {
        None => "<unknown>".into(),
        Some(dims) => {
            let dims: Vec<String> = dims
                .iter()
                .map(|d| d.map_or("?".into(), |d| d.to_string()))
                .collect();
            format!("[{}]", dims.join(","))
        }
    }
}

fn tf_dims(dims: &[i64]) -> String {
    let dims: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// Writes one shard's checkpoint file: a [`ChunkWriter`] on
/// `<shard_dir>/<checkpoint:08>.snapshot`, the directory made first.
pub fn create_shard_writer(
    fs: &dyn FileSystem,
    shard_dir: &str,
    checkpoint: i64,
    compression: SnapshotCompression,
) -> Result<ChunkWriter> {
    fs.create_dir_all(shard_dir)?;
    let file = checkpoint_file(shard_dir, checkpoint);
    let out = fs.create(&file)?;
    Ok(ChunkWriter::with_name(file, out, compression))
}

/// Writes a dataset in `Dataset.save`'s format, as TensorFlow's
/// `SaveDataset` and `SaveDatasetV2` do: a fresh random run directory and
/// unfinished metadata at the start, one file per shard index (checkpoint
/// 0) opened when the index is first seen, finished metadata at the end.
pub struct SavedWriter {
    fs: std::sync::Arc<dyn FileSystem>,
    path: String,
    run_id: String,
    run_dir: String,
    dtypes: Vec<i32>,
    compression: SnapshotCompression,
    /// Open writers by shard index; a map so that the order files are
    /// finished in does not depend on hashing.
    writers: std::collections::BTreeMap<i64, ChunkWriter>,
}

impl std::fmt::Debug for SavedWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SavedWriter")
            .field("run_dir", &self.run_dir)
            .field("shards", &self.writers.len())
            .finish_non_exhaustive()
    }
}

impl SavedWriter {
    /// Starts a save of elements of `spec` to `path`: makes the run
    /// directory and writes unfinished metadata.
    pub fn start(path: &str, spec: &Structure, compression: SnapshotCompression) -> Result<Self> {
        let fs = file_system(path)?;
        let run_id = rand::random::<u64>().to_string();
        let run_dir = run_dir(path, &run_id);
        fs.create_dir_all(&run_dir)?;
        let writer = SavedWriter {
            fs,
            path: path.to_string(),
            run_id,
            run_dir,
            dtypes: spec.flatten().iter().map(|s| s.dtype.code()).collect(),
            compression,
            writers: std::collections::BTreeMap::new(),
        };
        writer.write_metadata(0, false)?;
        Ok(writer)
    }

    /// Appends `element` to shard `shard` (TensorFlow names the shard's
    /// directory by the index as an unsigned number: −1 is
    /// `18446744073709551615.shard`).
    pub fn write(&mut self, shard: i64, element: &Element) -> Result<()> {
        if !self.writers.contains_key(&shard) {
            let dir = join(&self.run_dir, &format!("{:08}.shard", shard as u64));
            let writer = create_shard_writer(&*self.fs, &dir, 0, self.compression)?;
            self.writers.insert(shard, writer);
        }
        let writer = self.writers.get_mut(&shard).expect("inserted above");
        writer.write(element)
    }

    /// Closes every shard file, then writes finished metadata recording
    /// `num_elements`.
    pub fn finish(mut self, num_elements: i64) -> Result<()> {
        for (_, writer) in std::mem::take(&mut self.writers) {
            writer.finish()?;
        }
        self.write_metadata(num_elements, true)
    }

    fn write_metadata(&self, num_elements: i64, finalized: bool) -> Result<()> {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        let record = SnapshotMetadataRecord {
            graph_hash: String::new(),
            run_id: self.run_id.clone(),
            creation_timestamp: micros,
            version: FILE_FORMAT_VERSION,
            dtype: self.dtypes.clone(),
            num_elements,
            finalized,
        };
        write_metadata(&*self.fs, &self.path, &record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::registry::file_system;
    use tfdata_core::{DType, Tensor};

    fn spec() -> Structure {
        Structure::from_components(vec![TensorSpec::new(DType::Int64, Shape::scalar())])
    }

    #[test]
    fn written_shards_read_back_with_finished_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/saved", dir.path().display());
        let mut writer = SavedWriter::start(&path, &spec(), SnapshotCompression::Snappy).unwrap();
        let fs = file_system(&path).unwrap();
        let unfinished = read_metadata(&*fs, &path).unwrap().unwrap();
        assert!(!unfinished.finalized);
        for i in 0..7i64 {
            let shard = if i % 2 == 0 { -1 } else { 3 };
            writer
                .write(shard, &Element::new(vec![Tensor::scalar(i)]))
                .unwrap();
        }
        writer.finish(7).unwrap();
        let meta = read_metadata(&*fs, &path).unwrap().unwrap();
        assert!(meta.finalized);
        assert_eq!((meta.num_elements, meta.version), (7, FILE_FORMAT_VERSION));
        assert_eq!(meta.dtype, vec![DType::Int64.code()]);
        let shards = shard_dirs(&*fs, &run_dir(&path, &meta.run_id)).unwrap();
        // Sorted by name: shard 3, then shard −1 as an unsigned number.
        assert!(shards[0].ends_with("/00000003.shard"), "{shards:?}");
        assert!(
            shards[1].ends_with("/18446744073709551615.shard"),
            "{shards:?}"
        );
        let mut it = Dataset::saved_shard(&shards[1], SnapshotCompression::Snappy, spec())
            .iter()
            .unwrap();
        let mut read = Vec::new();
        while let Some(e) = it.next_element().unwrap() {
            read.push(e.components[0].to_scalar::<i64>().unwrap());
        }
        assert_eq!(read, vec![0, 2, 4, 6]);
    }

    #[test]
    fn hostile_metadata_and_missing_shards_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/bad", dir.path().display());
        let fs = file_system(&path).unwrap();
        assert!(read_metadata(&*fs, &path).unwrap().is_none());
        fs.create_dir_all(&path).unwrap();
        let mut out = fs.create(&metadata_file(&path)).unwrap();
        out.write_all(&[0xff, 0xff, 0xff]).unwrap();
        drop(out);
        assert!(read_metadata(&*fs, &path).is_err());
        let mut it = Dataset::saved_shard(&path, SnapshotCompression::None, spec())
            .iter()
            .unwrap();
        let err = it.next_element().unwrap_err();
        assert!(
            err.to_string().contains("No such file or directory"),
            "{err}"
        );
        // Skipping past the end of the first file is an error, not a hang.
        let good = format!("{}/good", dir.path().display());
        let mut writer = SavedWriter::start(&good, &spec(), SnapshotCompression::None).unwrap();
        writer
            .write(0, &Element::new(vec![Tensor::scalar(1i64)]))
            .unwrap();
        writer.finish(1).unwrap();
        let meta = read_metadata(&*fs, &good).unwrap().unwrap();
        let shard = shard_dir(&run_dir(&good, &meta.run_id), 0);
        let mut it = Dataset::saved_shard_from(&shard, SnapshotCompression::None, spec(), 5)
            .iter()
            .unwrap();
        assert!(it.next_element().is_err());
    }
}
