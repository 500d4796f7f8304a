//! The `load` source: the elements of a distributed snapshot, as
//! TensorFlow 2.21's `tf.data.Dataset.load(path, wait=...)` reads one that
//! `distributed_save` wrote.
//!
//! * The element spec and compression come from `snapshot.metadata` (the
//!   spec from `dataset_spec.pb` if the metadata's is empty), unless the
//!   op carries them (then they must agree with the metadata). A missing
//!   snapshot is `NotFound` naming the path; with `wait`, iteration waits for
//!   it instead, as TensorFlow's `load(wait=True)` retries.
//! * Elements come chunk by chunk from `<path>/chunks/` (names ending `.tmp`
//!   skipped; any other name that is not `chunk_<stream>_<chunk>_<n>` is an
//!   error naming it), in TensorFlow's `SnapshotChunkProvider` order: by
//!   chunk index, then stream index. Each chunk must hold the number of
//!   elements its name says.
//! * A snapshot still being written is read as it grows, whether or not
//!   `wait` is set (TensorFlow 2.21 does the same: `wait` only decides
//!   whether a missing snapshot is waited for): the state files are checked
//!   before each listing, and reading ends once `DONE` was seen and every
//!   chunk listed after it is read. `ERROR` (a text `StatusProto`) fails the
//!   read with its status. Waiting polls with a capped back-off; the engine
//!   has no cancellation, so a reader waits until the snapshot progresses
//!   or its iterator is dropped between polls.
//! * Cardinality: the sum of the chunks' element counts once `DONE`,
//!   unknown before (TensorFlow reports unknown even then, its reader being
//!   an `interleave`).
//! * Dynamic sharding: one split per chunk file, a scalar string tensor of
//!   the chunk's path (TensorFlow's `SnapshotChunkProvider`). The provider
//!   never blocks (the dispatcher calls it under its state lock): while
//!   the snapshot is unfinished and no chunk is left it answers
//!   `Unavailable`, which the reader retries.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use prost::Message;
use tfdata_core::{DType, Element, Error, Lineage, Result, Tensor};
use tfdata_proto::tensorflow::StructuredValue;

use super::chunk::{ChunkReader, component_dtypes};
use super::layout::{self, ChunkName, SnapshotCompression};
use super::metadata;
use crate::attrs::{Attr, Attrs};
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::io::fs::FileSystem;
use crate::io::registry::file_system;
use crate::iterators::ElementIterator;
use crate::spec::{Shape, Structure, TensorSpec};
use crate::spec_coder;
use crate::splits::SplitProvider;

/// The op's name on the wire and in JSON.
pub const OP_NAME: &str = "load";

/// The first wait between polls of an unfinished or missing snapshot.
const FIRST_POLL: Duration = Duration::from_millis(10);
/// The longest wait between polls: TensorFlow's `load(wait=True)` retries
/// every 5 s; a shorter cap notices new chunks sooner at the cost of one
/// listing a second.
const MAX_POLL: Duration = Duration::from_secs(1);

/// `tf.data.Dataset.load`, for snapshots written by `distributed_save`.
impl Dataset {
    /// `tf.data.Dataset.load(path, wait=wait)`: the snapshot's element spec
    /// and compression are read from its metadata when first needed.
    pub fn load(path: &str, wait: bool) -> Dataset {
        Dataset::load_with(path, wait, None, None)
    }

    /// `load` with the element spec and compression given, as
    /// `tf.data.Dataset.load(path, element_spec, compression, wait=wait)`:
    /// no file is read to answer the element spec (what a dispatcher
    /// validating the pipeline needs), and reading fails if the snapshot's
    /// metadata disagrees.
    pub fn load_with(
        path: &str,
        wait: bool,
        element_spec: Option<Structure>,
        compression: Option<SnapshotCompression>,
    ) -> Dataset {
        Dataset::from_op(Load {
            path: path.to_string(),
            wait,
            element_spec,
            compression,
            resolved: OnceLock::new(),
        })
    }
}

/// What a snapshot's metadata says.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotInfo {
    pub element_spec: Structure,
    pub compression: SnapshotCompression,
}

/// Reads `<path>/snapshot.metadata` (and `dataset_spec.pb` if the
/// metadata has no element spec); `Ok(None)` if the snapshot does not exist
/// (yet).
pub fn read_info(fs: &dyn FileSystem, path: &str) -> Result<Option<SnapshotInfo>> {
    let file = layout::metadata_file(path);
    let text = match fs.read_all(&file) {
        Ok(text) => text,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let m = metadata::from_text(&file, &text)?;
    let compression = SnapshotCompression::parse(&m.compression)?;
    let (spec_file, spec_bytes) = if m.element_spec.is_empty() {
        let spec_file = layout::dataset_spec_file(path);
        let bytes = fs.read_all(&spec_file)?;
        (spec_file, bytes)
    } else {
        (file, m.element_spec)
    };
    let bad = |reason: String| Error::DataLoss {
        location: spec_file.clone(),
        reason,
    };
    let value = StructuredValue::decode(&spec_bytes[..])
        .map_err(|e| bad(format!("the element spec is not a StructuredValue: {e}")))?;
    let element_spec = spec_coder::from_structured_value(&value)
        .map_err(|e| bad(format!("bad element spec: {e}")))?;
    Ok(Some(SnapshotInfo {
        element_spec,
        compression,
    }))
}

/// The error a snapshot's `ERROR` file stands for, if it has one.
fn snapshot_error(fs: &dyn FileSystem, path: &str) -> Result<Option<Error>> {
    let file = layout::error_file(path);
    let text = match fs.read_all(&file) {
        Ok(text) => text,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let failed =
        |detail: String| format!("tf.data snapshot at {path} failed to be written: {detail}");
    let status = match metadata::status_from_text(&file, &text) {
        Ok(status) => status,
        // Still a failed snapshot: say what the file holds.
        Err(_) => {
            return Ok(Some(Error::FailedPrecondition(failed(
                String::from_utf8_lossy(&text).into_owned(),
            ))));
        }
    };
    let code = tfdata_core::error::code_name_of(status.code).unwrap_or("UNKNOWN");
    let message = failed(format!("{code}: {}", status.message));
    // The code survives where tfdata has a matching error.
    Ok(Some(match status.code {
        1 => Error::Cancelled(message),
        3 => Error::InvalidArgument(message),
        9 => Error::FailedPrecondition(message),
        12 => Error::Unimplemented(message),
        14 => Error::Unavailable(message),
        15 => Error::DataLoss {
            location: path.to_string(),
            reason: message,
        },
        0 => Error::Internal(format!(
            "unexpected snapshot ERROR file with an OK status at {file}"
        )),
        _ => Error::Internal(message),
    }))
}

/// `load(path, wait)`.
#[derive(Debug)]
pub struct Load {
    pub path: String,
    pub wait: bool,
    /// Given by the user (or Python's eager `load`); else read from disk.
    pub element_spec: Option<Structure>,
    pub compression: Option<SnapshotCompression>,
    /// The metadata, once read.
    resolved: OnceLock<SnapshotInfo>,
}

impl Load {
    /// The snapshot's metadata, read once; `Ok(None)` if it does not exist.
    fn info(&self) -> Result<Option<SnapshotInfo>> {
        if let Some(info) = self.resolved.get() {
            return Ok(Some(info.clone()));
        }
        let fs = file_system(&self.path)?;
        let Some(info) = read_info(&*fs, &self.path)? else {
            return Ok(None);
        };
        self.check_agrees(&info)?;
        Ok(Some(self.resolved.get_or_init(|| info).clone()))
    }

    /// What the user said must be what the snapshot holds (TensorFlow's
    /// `_validate_snapshot`).
    fn check_agrees(&self, info: &SnapshotInfo) -> Result<()> {
        if let Some(spec) = &self.element_spec
            && *spec != info.element_spec
        {
            return Err(Error::InvalidArgument(format!(
                "failed to load tf.data snapshot at {}: the element_spec given is {spec:?}, but \
                 the snapshot's is {:?}",
                self.path, info.element_spec
            )));
        }
        if let Some(c) = self.compression
            && c != info.compression
        {
            return Err(Error::InvalidArgument(format!(
                "failed to load tf.data snapshot at {}: the compression given is {c:?}, but the \
                 snapshot's is {:?}",
                self.path, info.compression
            )));
        }
        Ok(())
    }

    fn not_found(&self) -> Error {
        Error::NotFound {
            what: "tf.data snapshot",
            id: format!("{} (no {})", self.path, layout::metadata_file(&self.path)),
        }
    }
}

impl DatasetOp for Load {
    fn name(&self) -> &'static str {
        OP_NAME
    }

    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new()
            .with("path", self.path.as_str())
            .with("wait", self.wait);
        if let Some(spec) = &self.element_spec {
            a = a.with("element_spec", spec_to_attr(spec));
        }
        if let Some(c) = self.compression {
            a = a.with("compression", compression_to_attr(c));
        }
        a
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.path.is_empty() {
            return Err(Error::InvalidArgument(
                "load: path must not be empty".into(),
            ));
        }
        if let Some(spec) = &self.element_spec {
            return Ok(Some(spec.clone()));
        }
        match self.info()? {
            Some(info) => Ok(Some(info.element_spec)),
            // Not there yet: the spec is unknown until it is.
            None if self.wait => Ok(None),
            None => Err(self.not_found()),
        }
    }

    fn cardinality(&self) -> i64 {
        let Ok(fs) = file_system(&self.path) else {
            return crate::UNKNOWN_CARDINALITY;
        };
        finished_cardinality(&*fs, &self.path)
            .ok()
            .flatten()
            .unwrap_or(crate::UNKNOWN_CARDINALITY)
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let fs = file_system(&self.path)?;
        let splits = ctx.split_provider_for(self);
        // A missing snapshot fails here unless we wait for it; a present one
        // is read now, so a spec disagreement surfaces at once.
        let info = match self.info()? {
            Some(info) => Some(info),
            None if self.wait => None,
            None => return Err(self.not_found()),
        };
        Ok(Box::new(LoadIter {
            path: self.path.clone(),
            fs: fs.clone(),
            info,
            op_spec: self.element_spec.clone(),
            op_compression: self.compression,
            source: match splits {
                Some(splits) => ChunkSource::Splits(splits),
                None => ChunkSource::Local(Chunks::new(fs, &self.path)),
            },
            current: None,
            poll: FIRST_POLL,
        }))
    }

    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        Some(file_system(&self.path).map(|fs| {
            Box::new(SnapshotChunkProvider {
                path: self.path.clone(),
                chunks: Mutex::new(Chunks::new(fs, &self.path)),
            }) as Box<dyn SplitProvider>
        }))
    }
}

/// The number of elements of a finished snapshot; `Ok(None)` while it is
/// unfinished.
pub fn finished_cardinality(fs: &dyn FileSystem, path: &str) -> Result<Option<i64>> {
    if !fs.exists(&layout::done_file(path))? {
        return Ok(None);
    }
    let mut total: i64 = 0;
    for name in fs.list(&layout::chunks_dir(path))? {
        if name.ends_with(layout::TEMP_SUFFIX) {
            continue;
        }
        let chunk = parse_chunk(path, &name)?;
        total = total.saturating_add(chunk.num_elements);
    }
    Ok(Some(total))
}

fn parse_chunk(path: &str, name: &str) -> Result<ChunkName> {
    layout::parse_chunk_name(name).map_err(|e| Error::DataLoss {
        location: layout::chunks_dir(path),
        reason: format!("{e} in a tf.data snapshot's committed chunks"),
    })
}

/// What [`Chunks::next`] found.
enum Next {
    Chunk(String),
    /// The snapshot is done and every chunk was handed out.
    End,
    /// Nothing to hand out until more chunks are committed.
    NotYet,
}

/// The committed chunks of a snapshot, each handed out once, in
/// TensorFlow's order (chunk index, then stream index).
struct Chunks {
    fs: Arc<dyn FileSystem>,
    path: String,
    handed_out: HashSet<String>,
    unread: BTreeSet<(i64, i64, String)>,
    /// `DONE` was seen before the last listing.
    done: bool,
}

impl Chunks {
    fn new(fs: Arc<dyn FileSystem>, path: &str) -> Self {
        Chunks {
            fs,
            path: path.to_string(),
            handed_out: HashSet::new(),
            unread: BTreeSet::new(),
            done: false,
        }
    }

    fn next(&mut self) -> Result<Next> {
        if let Some(next) = self.pop() {
            return Ok(next);
        }
        if self.done {
            return Ok(Next::End);
        }
        self.update()?;
        Ok(self
            .pop()
            .unwrap_or(if self.done { Next::End } else { Next::NotYet }))
    }

    fn pop(&mut self) -> Option<Next> {
        let (_, _, name) = self.unread.pop_first()?;
        self.handed_out.insert(name.clone());
        Some(Next::Chunk(layout::join(
            &layout::chunks_dir(&self.path),
            &name,
        )))
    }

    fn update(&mut self) -> Result<()> {
        if let Some(err) = snapshot_error(&*self.fs, &self.path)? {
            return Err(err);
        }
        // The state file before the listing: chunks committed after a
        // listing that saw no DONE are found by the next one, and a DONE
        // seen here means this listing is complete.
        let done = self.fs.exists(&layout::done_file(&self.path))?;
        for name in self.fs.list(&layout::chunks_dir(&self.path))? {
            if name.ends_with(layout::TEMP_SUFFIX) || self.handed_out.contains(&name) {
                continue;
            }
            let chunk = parse_chunk(&self.path, &name)?;
            self.unread.insert((chunk.chunk, chunk.stream, name));
        }
        self.done = done;
        Ok(())
    }

    fn reset(&mut self) {
        self.handed_out.clear();
        self.unread.clear();
        self.done = false;
    }
}

/// One split per committed chunk: its path as a scalar string.
struct SnapshotChunkProvider {
    path: String,
    chunks: Mutex<Chunks>,
}

impl SplitProvider for SnapshotChunkProvider {
    fn get_next(&self) -> Result<Option<Tensor>> {
        let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        match chunks.next()? {
            Next::Chunk(path) => Ok(Some(Tensor::scalar_string(path))),
            Next::End => Ok(None),
            Next::NotYet => Err(Error::Unavailable(format!(
                "tf.data snapshot at {} is still being written and has no committed chunk left \
                 to hand out; retry later",
                self.path
            ))),
        }
    }

    fn reset(&self) -> Result<()> {
        self.chunks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .reset();
        Ok(())
    }

    fn cardinality(&self) -> i64 {
        // Splits are chunks: their number once the snapshot is done.
        let chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        match chunks.fs.exists(&layout::done_file(&self.path)) {
            Ok(true) => chunks
                .fs
                .list(&layout::chunks_dir(&self.path))
                .map(|names| {
                    names
                        .iter()
                        .filter(|n| !n.ends_with(layout::TEMP_SUFFIX))
                        .count() as i64
                })
                .unwrap_or(crate::UNKNOWN_CARDINALITY),
            _ => crate::UNKNOWN_CARDINALITY,
        }
    }
}

enum ChunkSource {
    Local(Chunks),
    /// Dynamic sharding: chunk paths come from the split provider.
    Splits(Arc<dyn SplitProvider>),
}

struct CurrentChunk {
    reader: ChunkReader,
    /// The element count its name says.
    expected: i64,
    lineage: Lineage,
}

struct LoadIter {
    path: String,
    fs: Arc<dyn FileSystem>,
    info: Option<SnapshotInfo>,
    op_spec: Option<Structure>,
    op_compression: Option<SnapshotCompression>,
    source: ChunkSource,
    current: Option<CurrentChunk>,
    /// The next wait between polls; back to the first after progress.
    poll: Duration,
}

impl LoadIter {
    fn wait(&mut self) {
        std::thread::sleep(self.poll);
        self.poll = (self.poll * 2).min(MAX_POLL);
    }

    /// The snapshot's metadata, waiting for it to appear (only made without
    /// it when waiting was asked for).
    fn info(&mut self) -> Result<SnapshotInfo> {
        // Bounded by the snapshot appearing or an error: each round is one
        // read of the metadata file.
        loop {
            if let Some(info) = &self.info {
                return Ok(info.clone());
            }
            if let Some(info) = read_info(&*self.fs, &self.path)? {
                let op = Load {
                    path: self.path.clone(),
                    wait: true,
                    element_spec: self.op_spec.clone(),
                    compression: self.op_compression,
                    resolved: OnceLock::new(),
                };
                op.check_agrees(&info)?;
                self.info = Some(info);
                continue;
            }
            self.wait();
        }
    }

    /// The next chunk to read, waiting while the snapshot is unfinished;
    /// `None` at the end.
    fn next_chunk(&mut self) -> Result<Option<(String, Lineage)>> {
        // Each round lists the snapshot once or asks for one split; it ends
        // when a chunk appears, the snapshot is done, or fails.
        loop {
            let next = match &mut self.source {
                ChunkSource::Local(chunks) => match chunks.next()? {
                    Next::Chunk(path) => Some(Some((path, Lineage::default()))),
                    Next::End => Some(None),
                    Next::NotYet => None,
                },
                ChunkSource::Splits(splits) => match splits.get_next_leased() {
                    Ok(Some((split, lineage))) => {
                        let path = split
                            .string_values()?
                            .first()
                            .map(|b| String::from_utf8_lossy(b).into_owned())
                            .ok_or_else(|| {
                                Error::InvalidArgument(
                                    "load: a split is not a chunk path (an empty string tensor)"
                                        .into(),
                                )
                            })?;
                        Some(Some((path, lineage)))
                    }
                    Ok(None) => Some(None),
                    // The provider's "not yet": the snapshot is unfinished.
                    Err(Error::Unavailable(_)) => None,
                    Err(e) => return Err(e),
                },
            };
            match next {
                Some(found) => {
                    self.poll = FIRST_POLL;
                    return Ok(found);
                }
                None => self.wait(),
            }
        }
    }

    fn open(&self, info: &SnapshotInfo, path: &str, lineage: Lineage) -> Result<CurrentChunk> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let parsed = layout::parse_chunk_name(name).map_err(|e| Error::DataLoss {
            location: path.to_string(),
            reason: format!("{e} in a tf.data snapshot's committed chunks"),
        })?;
        let dtypes: Vec<DType> = component_dtypes(&info.element_spec);
        Ok(CurrentChunk {
            reader: ChunkReader::open(&*self.fs, path, info.compression, dtypes)?,
            expected: parsed.num_elements,
            lineage,
        })
    }
}

impl ElementIterator for LoadIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let info = self.info()?;
        // Each round finishes a chunk or returns an element; chunks are
        // finitely many once the snapshot is done.
        loop {
            if let Some(current) = &mut self.current {
                if let Some(element) = current.reader.read_element()? {
                    // Element i of the chunk is at [i] in its split; those
                    // readers already received are dropped.
                    let index = current.reader.elements_read().saturating_sub(1) as i64;
                    match current.lineage.child(index) {
                        Some(lineage) => return Ok(Some(element.with_lineage(lineage))),
                        None => continue,
                    }
                }
                let read = current.reader.elements_read();
                if read != current.expected as u64 {
                    return Err(Error::DataLoss {
                        location: current.reader.name().to_string(),
                        reason: format!(
                            "the chunk holds {read} elements, but its name says {}",
                            current.expected
                        ),
                    });
                }
                self.current = None;
            }
            let Some((path, lineage)) = self.next_chunk()? else {
                return Ok(None);
            };
            self.current = Some(self.open(&info, &path, lineage)?);
        }
    }
}

// ------------------------------------------------ attributes (wire and JSON)

/// An element spec as an attribute: a tensor spec is
/// `{"dtype": "int64", "shape": [2, -1]}` (`-1` an unknown dimension,
/// `"shape": "unknown"` an unknown rank), a tuple `{"tuple": [...]}`, a
/// dictionary `{"dict": {"key": ...}}`.
pub fn spec_to_attr(spec: &Structure) -> Attr {
    let map = |pairs: Vec<(&str, Attr)>| {
        Attr::Map(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    };
    match spec {
        Structure::Tensor(t) => map(vec![
            ("dtype", Attr::Str(t.dtype.name().to_string())),
            (
                "shape",
                match &t.shape.0 {
                    None => Attr::Str("unknown".into()),
                    Some(dims) => {
                        Attr::List(dims.iter().map(|d| Attr::Int(d.unwrap_or(-1))).collect())
                    }
                },
            ),
        ]),
        Structure::Tuple(items) => map(vec![(
            "tuple",
            Attr::List(items.iter().map(spec_to_attr).collect()),
        )]),
        Structure::Dict(items) => map(vec![(
            "dict",
            Attr::Map(
                items
                    .iter()
                    .map(|(k, v)| (k.clone(), spec_to_attr(v)))
                    .collect(),
            ),
        )]),
    }
}

/// The inverse of [`spec_to_attr`].
pub fn spec_from_attr(attr: &Attr) -> Result<Structure> {
    let bad = |what: &str| {
        Error::InvalidArgument(format!(
            "load: element_spec: {what} (expected {{\"dtype\": .., \"shape\": [..]}}, \
             {{\"tuple\": [..]}} or {{\"dict\": {{..}}}})"
        ))
    };
    let Attr::Map(map) = attr else {
        return Err(bad("not an object"));
    };
    let keys: Vec<&str> = map.keys().map(String::as_str).collect();
    match keys.as_slice() {
        ["dtype", "shape"] => {
            let Some(Attr::Str(dtype)) = map.get("dtype") else {
                return Err(bad("dtype must be a string"));
            };
            let dtype =
                DType::from_name(dtype).ok_or_else(|| bad(&format!("unknown dtype {dtype:?}")))?;
            let shape = match map.get("shape") {
                Some(Attr::Str(s)) if s == "unknown" => Shape::unknown_rank(),
                Some(Attr::List(dims)) => Shape(Some(
                    dims.iter()
                        .map(|d| match d {
                            Attr::Int(-1) => Ok(None),
                            Attr::Int(n) if *n >= 0 => Ok(Some(*n)),
                            _ => Err(bad("a dimension must be a size or -1")),
                        })
                        .collect::<Result<_>>()?,
                )),
                _ => return Err(bad("shape must be a list of sizes or \"unknown\"")),
            };
            Ok(Structure::Tensor(TensorSpec::new(dtype, shape)))
        }
        ["tuple"] => match map.get("tuple") {
            Some(Attr::List(items)) => Ok(Structure::Tuple(
                items.iter().map(spec_from_attr).collect::<Result<_>>()?,
            )),
            _ => Err(bad("tuple must be a list")),
        },
        ["dict"] => match map.get("dict") {
            Some(Attr::Map(items)) => Ok(Structure::Dict(
                items
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), spec_from_attr(v)?)))
                    .collect::<Result<_>>()?,
            )),
            _ => Err(bad("dict must be an object")),
        },
        _ => Err(bad(&format!("unexpected keys {keys:?}"))),
    }
}

/// Compression as an attribute: the metadata's spelling, `"NONE"` for none
/// (an empty string would read as "not given").
fn compression_to_attr(c: SnapshotCompression) -> Attr {
    Attr::Str(match c {
        SnapshotCompression::None => "NONE".into(),
        c => c.as_str().to_string(),
    })
}

/// Rebuilds `load` from its attributes.
pub(crate) fn from_attrs(op: &str, attrs: &Attrs) -> Result<Option<Dataset>> {
    if op != OP_NAME {
        return Ok(None);
    }
    attrs.check_known(op, &["path", "wait", "element_spec", "compression"])?;
    let element_spec = attrs.get("element_spec").map(spec_from_attr).transpose()?;
    let compression = match attrs.get("compression") {
        None => None,
        Some(_) => Some(
            SnapshotCompression::from_user(Some(attrs.str(op, "compression")?))
                .map_err(|e| Error::InvalidArgument(format!("{op}: {e}")))?,
        ),
    };
    Ok(Some(Dataset::load_with(
        attrs.str(op, "path")?,
        attrs.bool_or(op, "wait", false)?,
        element_spec,
        compression,
    )))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::mpsc;

    use super::*;
    use crate::io::LocalFileSystem;
    use crate::snapshot::chunk::tests::{fixture, fixture_elements, sorted};
    use crate::snapshot::testing;

    const FIXTURES: [(&str, SnapshotCompression); 4] = [
        ("none", SnapshotCompression::None),
        ("gzip", SnapshotCompression::Gzip),
        ("zlib", SnapshotCompression::Zlib),
        ("snappy", SnapshotCompression::Snappy),
    ];

    /// The fixtures' spec: (int64 scalar, string scalar, float32 [2]).
    fn fixture_spec() -> Structure {
        Structure::Tuple(vec![
            Structure::Tensor(TensorSpec::new(DType::Int64, Shape::scalar())),
            Structure::Tensor(TensorSpec::new(DType::String, Shape::scalar())),
            Structure::Tensor(TensorSpec::new(DType::Float, Shape::known(&[2]))),
        ])
    }

    fn element(i: i64) -> Element {
        Element::new(vec![
            Tensor::scalar(i),
            Tensor::scalar_string(format!("{i}")),
            Tensor::from_slice(&[i as f32 / 2.0; 2], vec![2]).unwrap(),
        ])
    }

    fn collect(ds: &Dataset) -> Result<Vec<Element>> {
        ds.iter()?.collect()
    }

    fn chunk_elements(path: &str, c: SnapshotCompression) -> Vec<Element> {
        ChunkReader::open(&LocalFileSystem, path, c, component_dtypes(&fixture_spec()))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    }

    #[test]
    fn reads_tensorflows_snapshots() {
        for (name, c) in FIXTURES {
            let path = fixture(name);
            let ds = Dataset::load(&path, false);
            assert_eq!(ds.element_spec().unwrap(), Some(fixture_spec()), "{name}");
            assert_eq!(ds.cardinality(), 40, "{name}");
            let got = collect(&ds).unwrap();
            // Every element once, the multiset TensorFlow's load read ...
            assert_eq!(
                sorted(got.clone()),
                sorted(fixture_elements(name)),
                "{name}"
            );
            assert_eq!(
                sorted(got.clone()),
                (0..40).map(element).collect::<Vec<_>>()
            );
            // ... chunk after chunk, each in its file's order.
            let mut expected = chunk_elements(&format!("{path}/chunks/chunk_0_0_20"), c);
            expected.extend(chunk_elements(&format!("{path}/chunks/chunk_0_1_20"), c));
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn missing_snapshot_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/nothing", dir.path().display());
        let ds = Dataset::load(&path, false);
        for err in [ds.element_spec().unwrap_err(), ds.iter().err().unwrap()] {
            assert!(matches!(err, Error::NotFound { .. }), "{err}");
            assert!(err.to_string().contains(&path), "{err}");
        }
        assert_eq!(ds.cardinality(), crate::UNKNOWN_CARDINALITY);
        // Waiting: the spec is unknown until the snapshot appears.
        assert_eq!(Dataset::load(&path, true).element_spec().unwrap(), None);
    }

    #[test]
    fn a_failed_save_fails_with_its_status() {
        // TensorFlow's ERROR file of a save whose map failed.
        let err = collect(&Dataset::load(&fixture("error"), false)).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        let msg = err.to_string();
        for needle in [
            "failed to be written",
            "INVALID_ARGUMENT",
            "assertion failed",
        ] {
            assert!(msg.contains(needle), "{msg}");
        }
        // An ERROR appearing mid-read fails the read once the written chunks
        // are read.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().display().to_string();
        let fs = LocalFileSystem;
        let c = SnapshotCompression::Snappy;
        testing::start_snapshot(&fs, &path, &fixture_spec(), c).unwrap();
        testing::commit_chunk(&fs, &path, c, 0, 0, &[element(0)]).unwrap();
        let status = tfdata_proto::tensorflow::StatusProto {
            code: 14,
            message: "worker lost".into(),
            ..Default::default()
        };
        testing::fail_snapshot(&fs, &path, &status).unwrap();
        let mut it = Dataset::load(&path, false).iter().unwrap();
        let err = it.next_element().unwrap_err();
        assert!(matches!(err, Error::Unavailable(_)), "{err}");
        assert!(err.to_string().contains("worker lost"), "{err}");
    }

    /// Reads `ds` on a thread, sending each element as it comes and the
    /// outcome at the end.
    fn read_on_thread(ds: Dataset) -> mpsc::Receiver<Result<Option<Element>>> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut it = match ds.iter() {
                Ok(it) => it,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            loop {
                let next = it.next_element();
                let end = !matches!(next, Ok(Some(_)));
                if tx.send(next).is_err() || end {
                    return;
                }
            }
        });
        rx
    }

    fn receive(rx: &mpsc::Receiver<Result<Option<Element>>>, n: usize) -> Vec<Element> {
        (0..n)
            .map(|_| {
                rx.recv_timeout(Duration::from_secs(60))
                    .expect("the reader made progress")
                    .unwrap()
                    .expect("an element")
            })
            .collect()
    }

    #[test]
    fn wait_reads_a_snapshot_while_it_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/snap", dir.path().display());
        let fs = LocalFileSystem;
        let c = SnapshotCompression::Gzip;
        // The reader starts before the snapshot exists.
        let rx = read_on_thread(Dataset::load(&path, true));
        testing::start_snapshot(&fs, &path, &fixture_spec(), c).unwrap();
        let first: Vec<Element> = (0..3).map(element).collect();
        testing::commit_chunk(&fs, &path, c, 0, 0, &first).unwrap();
        // Read before the snapshot is done.
        assert_eq!(receive(&rx, 3), first);
        // A chunk still being written is not read.
        std::fs::write(format!("{path}/chunks/chunk_1_0_5__x.tmp"), b"half").unwrap();
        let second: Vec<Element> = (3..5).map(element).collect();
        testing::commit_chunk(&fs, &path, c, 1, 0, &second).unwrap();
        assert_eq!(receive(&rx, 2), second);
        let third: Vec<Element> = (5..6).map(element).collect();
        testing::commit_chunk(&fs, &path, c, 0, 1, &third).unwrap();
        testing::finish_snapshot(&fs, &path).unwrap();
        assert_eq!(receive(&rx, 1), third);
        let end = rx.recv_timeout(Duration::from_secs(60)).unwrap().unwrap();
        assert!(end.is_none());
        assert_eq!(Dataset::load(&path, false).cardinality(), 6);
    }

    #[test]
    fn without_wait_an_unfinished_snapshot_is_still_read_to_its_end() {
        // TensorFlow 2.21's load(wait=False) on a snapshot without DONE
        // lists chunks until DONE appears, like wait=True.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().display().to_string();
        let fs = LocalFileSystem;
        let c = SnapshotCompression::None;
        testing::start_snapshot(&fs, &path, &fixture_spec(), c).unwrap();
        testing::commit_chunk(&fs, &path, c, 0, 0, &[element(0)]).unwrap();
        let ds = Dataset::load(&path, false);
        assert_eq!(ds.cardinality(), crate::UNKNOWN_CARDINALITY);
        let rx = read_on_thread(ds);
        assert_eq!(receive(&rx, 1), vec![element(0)]);
        testing::commit_chunk(&fs, &path, c, 0, 1, &[element(1)]).unwrap();
        testing::finish_snapshot(&fs, &path).unwrap();
        assert_eq!(receive(&rx, 1), vec![element(1)]);
        assert!(
            rx.recv_timeout(Duration::from_secs(60))
                .unwrap()
                .unwrap()
                .is_none()
        );
    }

    /// A copy of fixture `name` to damage.
    fn copy_fixture(name: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/{name}", dir.path().display());
        std::fs::create_dir_all(format!("{path}/chunks")).unwrap();
        for file in [layout::METADATA, layout::DATASET_SPEC, layout::DONE] {
            std::fs::copy(
                format!("{}/{file}", fixture(name)),
                format!("{path}/{file}"),
            )
            .unwrap();
        }
        for chunk in ["chunk_0_0_20", "chunk_0_1_20"] {
            std::fs::copy(
                format!("{}/chunks/{chunk}", fixture(name)),
                format!("{path}/chunks/{chunk}"),
            )
            .unwrap();
        }
        (dir, path)
    }

    #[test]
    fn damage_is_an_error_naming_the_chunk() {
        let (_dir, path) = copy_fixture("snappy");
        let chunk = format!("{path}/chunks/chunk_0_1_20");
        let mut bytes = std::fs::read(&chunk).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x55;
        std::fs::write(&chunk, &bytes).unwrap();
        let err = collect(&Dataset::load(&path, false)).unwrap_err();
        assert!(matches!(err, Error::DataLoss { .. }), "{err}");
        assert!(err.to_string().contains(&chunk), "{err}");

        // A chunk holding fewer elements than its name says.
        let (_dir, path) = copy_fixture("none");
        let chunks = format!("{path}/chunks");
        std::fs::rename(
            format!("{chunks}/chunk_0_0_20"),
            format!("{chunks}/chunk_0_0_21"),
        )
        .unwrap();
        let err = collect(&Dataset::load(&path, false)).unwrap_err();
        assert!(
            err.to_string()
                .contains("holds 20 elements, but its name says 21"),
            "{err}"
        );
        assert_eq!(Dataset::load(&path, false).cardinality(), 41);

        // A file that is no chunk.
        std::fs::write(format!("{chunks}/notes.txt"), b"").unwrap();
        let err = collect(&Dataset::load(&path, false)).unwrap_err();
        assert!(err.to_string().contains("notes.txt"), "{err}");
    }

    #[test]
    fn given_spec_and_compression_must_agree() {
        let path = fixture("zlib");
        let ds = Dataset::load_with(
            &path,
            false,
            Some(fixture_spec()),
            Some(SnapshotCompression::Zlib),
        );
        assert_eq!(collect(&ds).unwrap().len(), 40);
        let wrong = Structure::Tensor(TensorSpec::new(DType::Int64, Shape::scalar()));
        let ds = Dataset::load_with(&path, false, Some(wrong.clone()), None);
        // The given spec answers without reading; reading checks it.
        assert_eq!(ds.element_spec().unwrap(), Some(wrong));
        let err = collect(&ds).unwrap_err();
        assert!(err.to_string().contains("element_spec"), "{err}");
        let ds = Dataset::load_with(&path, false, None, Some(SnapshotCompression::Gzip));
        let err = collect(&ds).unwrap_err();
        assert!(err.to_string().contains("compression"), "{err}");
    }

    #[test]
    fn json_and_wire_round_trip() {
        let path = fixture("snappy");
        let text = format!(r#"{{"op": "load", "path": {path:?}}}"#);
        let ds = crate::json::from_json(&text).unwrap().dataset;
        assert_eq!(collect(&ds).unwrap().len(), 40);
        let dict = Structure::Dict(
            [
                ("a".to_string(), fixture_spec()),
                (
                    "b".to_string(),
                    Structure::Tensor(TensorSpec::new(DType::UInt8, Shape::unknown_rank())),
                ),
                (
                    "c".to_string(),
                    Structure::Tensor(TensorSpec::new(
                        DType::Float,
                        Shape(Some(vec![None, Some(3)])),
                    )),
                ),
            ]
            .into_iter()
            .collect(),
        );
        for ds in [
            Dataset::load(&path, true),
            Dataset::load_with(&path, false, Some(dict), Some(SnapshotCompression::None)),
        ] {
            let json = crate::json::to_json(&ds, true).unwrap();
            let back = crate::json::from_json(&json).unwrap().dataset;
            assert_eq!(back.op().attrs(), ds.op().attrs(), "{json}");
            let wire = crate::pipeline::to_pipeline_def(&ds, true).unwrap();
            let back = crate::pipeline::from_pipeline_def(&wire).unwrap();
            assert_eq!(back.op().attrs(), ds.op().attrs());
        }
        let err = crate::json::from_json(r#"{"op": "load", "path": "/x", "colour": 1}"#)
            .err()
            .unwrap();
        assert!(err.to_string().contains("colour"), "{err}");
    }

    #[test]
    fn splits_are_chunks() {
        let path = fixture("gzip");
        let ds = Dataset::load(&path, false);
        let provider = ds.op().split_provider().unwrap().unwrap();
        assert_eq!(provider.cardinality(), 2);
        let mut splits = Vec::new();
        while let Some(split) = provider.get_next().unwrap() {
            splits.push(String::from_utf8(split.string_values().unwrap()[0].to_vec()).unwrap());
        }
        assert_eq!(
            splits,
            vec![
                format!("{path}/chunks/chunk_0_0_20"),
                format!("{path}/chunks/chunk_0_1_20")
            ]
        );
        provider.reset().unwrap();
        // Reading through the provider: every element once.
        let provider: Arc<dyn SplitProvider> = Arc::from(provider);
        let ctx = IterContext {
            split_providers: HashMap::from([(ds.op_key(), provider)]),
            ..Default::default()
        };
        let got: Vec<Element> = ds.iter_with(&ctx).unwrap().collect::<Result<_>>().unwrap();
        assert_eq!(sorted(got), (0..40).map(element).collect::<Vec<_>>());

        // Unfinished and drained: "not yet", never a premature end.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().display().to_string();
        let fs = LocalFileSystem;
        testing::start_snapshot(&fs, &path, &fixture_spec(), SnapshotCompression::None).unwrap();
        testing::commit_chunk(&fs, &path, SnapshotCompression::None, 0, 0, &[element(0)]).unwrap();
        let provider = Dataset::load(&path, false)
            .op()
            .split_provider()
            .unwrap()
            .unwrap();
        assert_eq!(provider.cardinality(), crate::UNKNOWN_CARDINALITY);
        assert!(provider.get_next().unwrap().is_some());
        let err = provider.get_next().unwrap_err();
        assert!(
            err.is_retryable() && err.to_string().contains("still being written"),
            "{err}"
        );
        testing::finish_snapshot(&fs, &path).unwrap();
        assert!(provider.get_next().unwrap().is_none());
    }
}
