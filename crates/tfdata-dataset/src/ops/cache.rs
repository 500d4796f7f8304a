//! `cache`: the first full pass of the input kept, in memory or in a file
//! (TFRecord of serialized elements, renamed into place when complete), and
//! later passes read from it.

use std::sync::{Arc, Mutex};

use tfdata_core::{Element, Error, Result};

use crate::attrs::Attrs;
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::iterators::{ElementIterator, VecIter};
use crate::spec::Structure;

/// Keeping a pass.
impl Dataset {
    /// `cache(filename)`: the first full pass is kept (in memory when
    /// `filename` is empty, else in that file) and later passes read it.
    pub fn cache(self, filename: &str) -> Dataset {
        Dataset::from_op(Cache::new(self, filename))
    }
}

/// `cache(filename)`. The first iterator to read the input to its end fills
/// the cache; later iterators read the cache. A pass that stops early caches
/// nothing (TensorFlow discards partial caches too). In-memory caches live as
/// long as the dataset; file caches persist in `<filename>` (a TFRecord file
/// of serialized elements, written to a temporary name and renamed when
/// complete).
#[derive(Debug)]
pub struct Cache {
    pub input: Dataset,
    pub filename: String,
    memory: Arc<Mutex<Option<Arc<Vec<Element>>>>>,
}

impl Cache {
    pub fn new(input: Dataset, filename: &str) -> Self {
        Cache {
            input,
            filename: filename.to_string(),
            memory: Default::default(),
        }
    }
}

impl DatasetOp for Cache {
    fn name(&self) -> &'static str {
        "cache"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new().with("filename", self.filename.as_str())
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        self.input.element_spec()
    }
    fn cardinality(&self) -> i64 {
        self.input.cardinality()
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        if self.filename.is_empty() {
            if let Some(cached) = self
                .memory
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                return Ok(Box::new(VecIter {
                    items: cached.as_ref().clone().into_iter(),
                }));
            }
            return Ok(Box::new(FillingIter {
                input: self.input.op.make_iterator(ctx)?,
                seen: Vec::new(),
                sink: Sink::Memory(Arc::clone(&self.memory)),
            }));
        }
        let path = std::path::PathBuf::from(&self.filename);
        if path.exists() {
            return read_cache_file(&path);
        }
        Ok(Box::new(FillingIter {
            input: self.input.op.make_iterator(ctx)?,
            seen: Vec::new(),
            sink: Sink::File(path),
        }))
    }
}

enum Sink {
    Memory(Arc<Mutex<Option<Arc<Vec<Element>>>>>),
    File(std::path::PathBuf),
}

struct FillingIter {
    input: Box<dyn ElementIterator>,
    seen: Vec<Element>,
    sink: Sink,
}

impl ElementIterator for FillingIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        match self.input.next_element()? {
            Some(e) => {
                // The cached copy is not delivered: only `e` holds its splits.
                self.seen.push(Element::new(e.components.clone()));
                Ok(Some(e))
            }
            None => {
                let elements = std::mem::take(&mut self.seen);
                match &self.sink {
                    Sink::Memory(slot) => {
                        slot.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(Arc::new(elements));
                    }
                    Sink::File(path) => write_cache_file(path, &elements)?,
                }
                Ok(None)
            }
        }
    }
}

fn write_cache_file(path: &std::path::Path, elements: &[Element]) -> Result<()> {
    use prost::Message;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut buf = Vec::new();
    for e in elements {
        let proto = tfdata_core::element::to_uncompressed(e);
        tfdata_core::tfrecord::write_record(&mut buf, &proto.encode_to_vec())
            .map_err(|err| Error::io("encoding cache record", err))?;
    }
    std::fs::write(&tmp, &buf)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| Error::io(format!("writing cache file {}", path.display()), e))
}

fn read_cache_file(path: &std::path::Path) -> Result<Box<dyn ElementIterator>> {
    use prost::Message;
    let records = tfdata_core::tfrecord::read_file(path)?;
    let mut items = Vec::with_capacity(records.len());
    for (i, r) in records.into_iter().enumerate() {
        let proto =
            tfdata_proto::data::UncompressedElement::decode(r).map_err(|e| Error::DataLoss {
                location: format!("{}, record {i}", path.display()),
                reason: format!("not a cached element: {e}"),
            })?;
        items.push(tfdata_core::element::from_uncompressed(&proto)?);
    }
    Ok(Box::new(VecIter {
        items: items.into_iter(),
    }))
}
