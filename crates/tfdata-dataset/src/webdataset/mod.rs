//! `webdataset`: the samples of WebDataset shards (tar files whose members
//! `key.field` are grouped by key), as dictionaries keyed by field, the way
//! the `webdataset` package (1.0) reads them.
//!
//! * **URLs** ([`urls`]): a list of shard URLs (local paths or object-store
//!   URLs), each a brace pattern as webdataset writes them
//!   (`shard-{000000..000099}.tar`, `{a,b}`, nested), a `::`-separated
//!   list, or a glob; expanded in order.
//! * **Samples** ([`samples`], over the tar reader [`members`]): adjacent
//!   members with the same key form a sample. The element is a dictionary
//!   of scalars: each field (the lowercased extension: `jpg`, `cls`,
//!   `seg.png`, ...) as the member's bytes (`string`), the integer fields
//!   (`cls`, `cls2`, `index`, `inx`, `id`) as `int64`, `__key__` and
//!   `__url__`. `fields` picks the fields (others are not read); without it
//!   the first sample of the first shard is read when the element spec is
//!   needed, and every sample must have exactly its fields.
//! * **Memory**: shards are read streaming through the io layer, a
//!   member's bytes only when its field is kept, at most
//!   [`samples::MAX_MEMBER_BYTES`] a member and [`samples::MAX_SAMPLE_BYTES`]
//!   a sample; two samples at a time are held (one read ahead).
//! * **Errors** ([`OnError`]): a damaged tar (truncated, garbage, a bad
//!   checksum) is [`Error::DataLoss`] naming the shard and the byte offset;
//!   a sample without a field asked for, with fields other than the first
//!   sample's, a field twice or a bad integer is an error naming them. With
//!   `on_error="skip"` bad samples are dropped and counted
//!   ([`skipped_samples`]); damage ends its shard (the sample being read
//!   counts as one).
//! * **Splits** (distributed_epoch): one per shard (its index in the
//!   expanded list). Sample `k` of a shard is at position `[k]` of its split
//!   (bad samples, skipped or not, take their position too, so the numbering
//!   is the same every time the shard is read), so reader checkpoints and a
//!   lost worker's splits account for it sample by sample.
//!
//! Module dependencies: `mod → {urls, samples → members}`.

pub mod members;
pub mod samples;
pub mod urls;

use std::collections::BTreeSet;
use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tfdata_core::{Element, Error, Lineage, Result};

use self::samples::{FieldSet, Limits, SampleSchema, ShardSamples};
use crate::attrs::Attrs;
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::io::CompressionType;
use crate::iterators::ElementIterator;
use crate::spec::Structure;
use crate::splits::{IndexSplitProvider, SplitProvider};

/// The op's name.
pub const OP_NAME: &str = "webdataset";

static SKIPPED_SAMPLES: AtomicU64 = AtomicU64::new(0);
static IGNORED_MEMBERS: AtomicU64 = AtomicU64::new(0);

/// Samples dropped by `on_error="skip"` in this process, all `webdataset`
/// ops together (a worker's metric).
pub fn skipped_samples() -> u64 {
    SKIPPED_SAMPLES.load(Ordering::Relaxed)
}

/// Members read past in this process because their name has no key
/// (`README`, `.hidden`: webdataset drops them silently too).
pub fn ignored_members() -> u64 {
    IGNORED_MEMBERS.load(Ordering::Relaxed)
}

/// What a bad sample does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// The error is returned (the default).
    Raise,
    /// The sample is dropped and counted.
    Skip,
}

impl OnError {
    pub fn parse(value: &str) -> Result<OnError> {
        match value {
            "raise" => Ok(OnError::Raise),
            "skip" => Ok(OnError::Skip),
            other => Err(Error::InvalidArgument(format!(
                "{OP_NAME}: on_error must be \"raise\" or \"skip\", got {other:?}"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OnError::Raise => "raise",
            OnError::Skip => "skip",
        }
    }
}

impl Dataset {
    /// `WebDataset(urls, fields, on_error)`: see [`crate::webdataset`].
    pub fn webdataset(urls: &[&str], fields: Option<&[&str]>, on_error: &str) -> Dataset {
        Dataset::from_op(WebDataset::new(
            urls.iter().map(|u| u.to_string()).collect(),
            fields.map(|f| f.iter().map(|f| f.to_string()).collect()),
            on_error.to_string(),
        ))
    }
}

/// What this op's iterators counted.
#[derive(Debug, Default)]
pub struct Counters {
    skipped: AtomicU64,
    ignored: AtomicU64,
}

impl Counters {
    /// Samples skipped (`on_error="skip"`).
    pub fn skipped_samples(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// Keyless members read past.
    pub fn ignored_members(&self) -> u64 {
        self.ignored.load(Ordering::Relaxed)
    }

    fn skip(&self) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
        SKIPPED_SAMPLES.fetch_add(1, Ordering::Relaxed);
    }

    fn ignore(&self, n: u64) {
        if n > 0 {
            self.ignored.fetch_add(n, Ordering::Relaxed);
            IGNORED_MEMBERS.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// The op.
#[derive(Debug)]
pub struct WebDataset {
    /// URLs and patterns, as given.
    pub urls: Vec<String>,
    pub fields: Option<Vec<String>>,
    pub on_error: String,
    /// What each member or sample may hold (tests lower them).
    pub limits: Limits,
    counters: Arc<Counters>,
    prepared: Mutex<Option<Arc<Prepared>>>,
}

/// The shards and the schema, found once.
#[derive(Debug)]
struct Prepared {
    urls: Vec<String>,
    schema: SampleSchema,
}

impl WebDataset {
    pub fn new(urls: Vec<String>, fields: Option<Vec<String>>, on_error: String) -> Self {
        WebDataset {
            urls,
            fields,
            on_error,
            limits: Limits::default(),
            counters: Arc::default(),
            prepared: Mutex::new(None),
        }
    }

    /// What this op's iterators counted.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }

    fn on_error(&self) -> Result<OnError> {
        OnError::parse(&self.on_error)
    }

    /// The requested fields, checked.
    fn requested(&self) -> Result<Option<BTreeSet<String>>> {
        let Some(fields) = &self.fields else {
            return Ok(None);
        };
        let mut set = BTreeSet::new();
        for f in fields {
            let problem = if f.is_empty() {
                Some("is empty")
            } else if f == samples::KEY || f == samples::URL {
                Some("is always in the element (not a field)")
            } else if f.contains('/') {
                Some("contains '/', which a field never does")
            } else if f.to_lowercase() != *f {
                Some("is not lowercase (fields are matched as lowercased extensions)")
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(Error::InvalidArgument(format!(
                    "{OP_NAME}: field {f:?} {problem}"
                )));
            }
            if !set.insert(f.clone()) {
                return Err(Error::InvalidArgument(format!(
                    "{OP_NAME}: field {f:?} is listed twice"
                )));
            }
        }
        Ok(Some(set))
    }

    /// Checks what can be checked without reading anything.
    fn check(&self) -> Result<Option<BTreeSet<String>>> {
        self.on_error()?;
        urls::expand_patterns(OP_NAME, &self.urls)?;
        self.requested()
    }

    fn prepare(&self) -> Result<Arc<Prepared>> {
        let mut slot = self.prepared.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = slot.as_ref() {
            return Ok(Arc::clone(p));
        }
        let requested = self.check()?;
        let urls = urls::expand_urls(OP_NAME, &self.urls)?;
        let fields = match requested {
            Some(set) => FieldSet::Requested(set),
            None => FieldSet::Exact(self.learn_fields(&urls)?),
        };
        let prepared = Arc::new(Prepared {
            urls,
            schema: SampleSchema { fields },
        });
        *slot = Some(Arc::clone(&prepared));
        Ok(prepared)
    }

    /// The first good sample's fields (with `on_error="raise"`, the first
    /// sample's; its error if it is bad).
    fn learn_fields(&self, urls: &[String]) -> Result<BTreeSet<String>> {
        let on_error = self.on_error()?;
        for url in urls {
            let (mut samples, _) = open_shard(url, None, self.limits)?;
            while let Some(sample) = samples.next_sample() {
                match sample {
                    Ok(sample) => return Ok(sample.fields.into_keys().collect()),
                    Err(e) if on_error == OnError::Raise => return Err(e.error),
                    Err(_) => {}
                }
            }
        }
        Err(Error::InvalidArgument(format!(
            "{OP_NAME}: no sample in {} shard(s) to learn the fields from; pass fields",
            urls.len()
        )))
    }
}

/// A shard's samples, reading the bytes of `keep` (all if `None`).
type Samples = ShardSamples<Box<dyn BufRead + Send>>;

fn open_shard(
    url: &str,
    keep: Option<BTreeSet<String>>,
    limits: Limits,
) -> Result<(Samples, CompressionType)> {
    let input = crate::io::file_system(url)?.open(url)?;
    let (input, compression) = members::tar_stream(url, input)?;
    Ok((
        ShardSamples::new(url, input, compression, keep, limits),
        compression,
    ))
}

impl DatasetOp for WebDataset {
    fn name(&self) -> &'static str {
        OP_NAME
    }

    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new().with("urls", self.urls.clone());
        if let Some(f) = &self.fields {
            a = a.with("fields", f.clone());
        }
        a.with("on_error", self.on_error.as_str())
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        let schema = match self.check()? {
            Some(fields) => SampleSchema {
                fields: FieldSet::Requested(fields),
            },
            None => self.prepare()?.schema.clone(),
        };
        Ok(Some(schema.structure()))
    }

    fn cardinality(&self) -> i64 {
        crate::UNKNOWN_CARDINALITY
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(WebDatasetIter {
            prepared: self.prepare()?,
            on_error: self.on_error()?,
            limits: self.limits,
            counters: self.counters(),
            splits: ctx.split_provider_for(self),
            next_shard: 0,
            shard: None,
        }))
    }

    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        Some(self.prepare().map(|p| {
            Box::new(IndexSplitProvider::new(p.urls.len() as u64)) as Box<dyn SplitProvider>
        }))
    }
}

/// The attributes' op.
pub(crate) fn from_attrs(op: &str, attrs: &Attrs) -> Result<Option<Dataset>> {
    if op != OP_NAME {
        return Ok(None);
    }
    attrs.check_known(op, &["urls", "fields", "on_error"])?;
    let fields = match attrs.get("fields") {
        None => None,
        Some(_) => Some(attrs.strings(op, "fields")?),
    };
    Ok(Some(Dataset::from_op(WebDataset::new(
        attrs.strings(op, "urls")?,
        fields,
        attrs.str_or(op, "on_error", "raise")?.to_string(),
    ))))
}

/// The shard being read.
struct Shard {
    url: String,
    compression: CompressionType,
    samples: Samples,
    /// The shard's split (distributed_epoch), let go of before its last
    /// element leaves.
    lineage: Lineage,
    /// The position of the next sample.
    next_position: i64,
    /// Distributed_epoch: the next element, read ahead (an error waits its
    /// turn).
    ahead: Option<Result<Option<Element>>>,
    /// Keyless members already counted.
    ignored: u64,
}

impl Shard {
    /// The shard's next element: bad samples skipped (or their error),
    /// samples readers already have (the split handed out again) dropped.
    fn read_next(
        &mut self,
        schema: &SampleSchema,
        on_error: OnError,
        counters: &Counters,
    ) -> Result<Option<Element>> {
        loop {
            let sample = self.samples.next_sample();
            counters.ignore(self.samples.ignored_members() - self.ignored);
            self.ignored = self.samples.ignored_members();
            let Some(sample) = sample else {
                return Ok(None);
            };
            let position = self.next_position;
            self.next_position += 1;
            let element = sample
                .map_err(|e| e.error)
                .and_then(|s| schema.element(&self.url, self.compression, s));
            match element {
                Ok(element) => {
                    if let Some(lineage) = self.lineage.child(position) {
                        return Ok(Some(element.with_lineage(lineage)));
                    }
                }
                Err(e) if on_error == OnError::Raise => return Err(e),
                Err(_) => counters.skip(),
            }
        }
    }
}

struct WebDatasetIter {
    prepared: Arc<Prepared>,
    on_error: OnError,
    limits: Limits,
    counters: Arc<Counters>,
    /// Distributed_epoch: shard indices come from here.
    splits: Option<Arc<dyn SplitProvider>>,
    next_shard: usize,
    shard: Option<Shard>,
}

impl WebDatasetIter {
    /// The next shard to read and its split's lineage.
    fn next_shard(&mut self) -> Result<Option<(usize, Lineage)>> {
        let urls = &self.prepared.urls;
        let Some(splits) = &self.splits else {
            if self.next_shard >= urls.len() {
                return Ok(None);
            }
            self.next_shard += 1;
            return Ok(Some((self.next_shard - 1, Lineage::default())));
        };
        let Some((split, lineage)) = splits.get_next_leased()? else {
            return Ok(None);
        };
        let i = split.to_scalar::<i64>()?;
        let index = usize::try_from(i)
            .ok()
            .filter(|&i| i < urls.len())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{OP_NAME}: split index {i} out of range for {} shards",
                    urls.len()
                ))
            })?;
        Ok(Some((index, lineage)))
    }
}

impl ElementIterator for WebDatasetIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        loop {
            let Some(shard) = self.shard.as_mut() else {
                let Some((index, lineage)) = self.next_shard()? else {
                    return Ok(None);
                };
                let url = &self.prepared.urls[index];
                let keep = Some(self.prepared.schema.keep());
                let (samples, compression) = open_shard(url, keep, self.limits)?;
                self.shard = Some(Shard {
                    url: url.clone(),
                    compression,
                    samples,
                    lineage,
                    next_position: 0,
                    ahead: None,
                    ignored: 0,
                });
                continue;
            };
            let schema = &self.prepared.schema;
            let next = match shard.ahead.take() {
                Some(ahead) => ahead,
                None => shard.read_next(schema, self.on_error, &self.counters),
            };
            match next? {
                Some(element) => {
                    if !shard.lineage.is_empty() {
                        // One element ahead: at the shard's end the split is
                        // let go of first, so its last element holds all that
                        // is left of it (`Lineage::whole_splits`).
                        let ahead = shard.read_next(schema, self.on_error, &self.counters);
                        if matches!(ahead, Ok(None)) {
                            shard.lineage = Lineage::default();
                        }
                        shard.ahead = Some(ahead);
                    }
                    return Ok(Some(element));
                }
                None => self.shard = None,
            }
        }
    }
}

#[cfg(test)]
mod tests;
