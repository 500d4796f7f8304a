//! A shard's members grouped into samples as webdataset's
//! `tar_file_iterator` + `group_by_keys` do, and samples made elements.
//!
//! * A member's key and field come from its name as webdataset's
//!   `base_plus_ext` regex `^((?:.*/|)[^.]+)[.]([^/]*)$` splits it
//!   ([`base_plus_ext`]): the field is what follows the first dot of the
//!   last path component (`a.b/c.d.jpg` is key `a.b/c`, field `d.jpg`),
//!   lowercased.
//! * Adjacent members with the same key are one sample; a sample never
//!   spans shards.
//! * Skipped without a word, as webdataset does: directories and other
//!   non-regular members, members whose first path component is `__…__`
//!   (webdataset's metadata), and members whose name has no key (no dot
//!   in the last component, or nothing before it: `README`, `.hidden`).
//!   Skipped members do not end the sample around them. Keyless ones are
//!   counted ([`ShardSamples::ignored_members`]).
//! * A bad sample (a field twice, `__key__` or `__url__` as a field, a
//!   field name that is not UTF-8, a member over [`Limits::member_bytes`]
//!   or a sample over [`Limits::sample_bytes`] or [`Limits::fields`]) is an
//!   error in its place ([`SampleError`]), its members read past without
//!   holding their bytes; the samples after it are read as usual.
//! * Damage to the tar itself ([`super::members`]) ends the shard with one
//!   fatal error standing for the sample being read.
//!
//! [`SampleSchema`] turns a sample into an element: the fields asked for
//! (or exactly the first sample's), `__key__` and `__url__`; integer fields
//! (`cls`, `cls2`, `index`, `inx`, `id` as the field's last dotted part,
//! webdataset's `autodecode` list) parsed as Python's `int()` parses them.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use bytes::Bytes;
use tfdata_core::{DType, Element, Error, Result, Tensor};

use super::members::{Member, TarMembers, show};
use crate::io::CompressionType;
use crate::spec::{Shape, Structure, TensorSpec};

/// Largest member whose bytes are held (a field of a sample).
pub const MAX_MEMBER_BYTES: u64 = 1 << 30;
/// Most bytes of fields one sample may hold.
pub const MAX_SAMPLE_BYTES: u64 = 2 << 30;
/// Most fields one sample may have.
pub const MAX_FIELDS: usize = 1024;

/// The element keys every sample has besides its fields.
pub const KEY: &str = "__key__";
pub const URL: &str = "__url__";

/// Field names whose last dotted part makes them integers (webdataset's
/// `autodecode.decoders` that decode with `int()`).
pub const INTEGER_EXTENSIONS: &[&str] = &["cls", "cls2", "index", "inx", "id"];

/// What one sample may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub member_bytes: u64,
    pub sample_bytes: u64,
    pub fields: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            member_bytes: MAX_MEMBER_BYTES,
            sample_bytes: MAX_SAMPLE_BYTES,
            fields: MAX_FIELDS,
        }
    }
}

/// One sample as read: the fields read, and those present but not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSample {
    pub key: Bytes,
    /// Offset of its first member's header.
    pub offset: u64,
    pub fields: BTreeMap<String, Bytes>,
    /// Fields present that were not asked to be read.
    pub others: BTreeSet<String>,
}

/// A sample that could not be read.
#[derive(Debug)]
pub struct SampleError {
    pub error: Error,
    /// The shard is damaged here: nothing after it can be read.
    pub fatal: bool,
}

/// `base_plus_ext`: a member name's key and field (not lowercased), or
/// `None` when the regex `^((?:.*/|)[^.]+)[.]([^/]*)$` does not match.
///
/// The dot is the first one after the last `/`; what precedes it must end
/// in a non-empty run without dots that starts the name or follows a `/`
/// (Python's `.*` stops at a newline, so that `/` must have none before it).
pub fn base_plus_ext(name: &[u8]) -> Option<(&[u8], &[u8])> {
    let base = name.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    let dot = base + name[base..].iter().position(|&b| b == b'.')?;
    let key = &name[..dot];
    if key.is_empty() {
        return None;
    }
    if let Some(last_dot) = key.iter().rposition(|&b| b == b'.') {
        // `.*/` must end after that dot, and leave a character before the dot.
        let slash = key[last_dot + 1..dot.saturating_sub(1).max(last_dot + 1)]
            .iter()
            .position(|&b| b == b'/')
            .map(|i| last_dot + 1 + i)?;
        if key[..slash].contains(&b'\n') {
            return None;
        }
    }
    Some((key, &name[dot + 1..]))
}

/// webdataset's metadata members, skipped: a name without `/` that starts
/// and ends with `__`, or one matching `__[^/]*__($|/)` at its start.
pub fn is_meta(name: &[u8]) -> bool {
    if !name.starts_with(b"__") {
        return false;
    }
    if !name.contains(&b'/') && name.ends_with(b"__") {
        return true;
    }
    let first = name.iter().position(|&b| b == b'/').unwrap_or(name.len());
    let closes = |end: usize| end >= 4 && name[..end].ends_with(b"__");
    // `$` also matches before a final newline.
    closes(first) || (first == name.len() && name.last() == Some(&b'\n') && closes(first - 1))
}

/// The samples of one shard, read streaming.
pub struct ShardSamples<R> {
    members: TarMembers<R>,
    /// Fields whose bytes are read; `None`: all.
    keep: Option<BTreeSet<String>>,
    limits: Limits,
    /// The first member of the next sample: header read, data not.
    pending: Option<Keyed>,
    done: bool,
    ignored: u64,
}

/// A member with its key and (lowercased) field.
struct Keyed {
    member: Member,
    key: Vec<u8>,
    /// `Err`: the field name is not UTF-8 (the sample is bad).
    field: std::result::Result<String, ()>,
}

/// A sample being gathered.
struct Gathering {
    sample: RawSample,
    bytes: u64,
    /// The first thing wrong with it.
    bad: Option<Error>,
}

impl<R: Read> ShardSamples<R> {
    /// The samples of the tar stream `input` (uncompressed from
    /// `compression`) of the shard `url`, reading the bytes of the fields
    /// in `keep` (all if `None`).
    pub fn new(
        url: impl Into<String>,
        input: R,
        compression: CompressionType,
        keep: Option<BTreeSet<String>>,
        limits: Limits,
    ) -> Self {
        ShardSamples {
            members: TarMembers::new(url, input, compression),
            keep,
            limits,
            pending: None,
            done: false,
            ignored: 0,
        }
    }

    /// Members skipped because their name has no key, so far.
    pub fn ignored_members(&self) -> u64 {
        self.ignored
    }

    /// The next sample, a bad one's error, or `None` at the shard's end
    /// (always `None` after a fatal error).
    pub fn next_sample(&mut self) -> Option<std::result::Result<RawSample, SampleError>> {
        if self.done {
            return None;
        }
        let mut gathering: Option<Gathering> = None;
        loop {
            let keyed = match self.pending.take() {
                Some(k) => k,
                None => match self.next_keyed() {
                    Ok(Some(k)) => k,
                    Ok(None) => {
                        self.done = true;
                        return gathering.map(Gathering::finish);
                    }
                    Err(error) => {
                        self.done = true;
                        return Some(Err(fatal(gathering, error)));
                    }
                },
            };
            let same = gathering
                .as_ref()
                .map(|g| g.sample.key == keyed.key.as_slice());
            match same {
                Some(false) => {
                    self.pending = Some(keyed);
                    return gathering.map(Gathering::finish);
                }
                Some(true) => {}
                None => {
                    gathering = Some(Gathering {
                        sample: RawSample {
                            key: Bytes::from(keyed.key.clone()),
                            offset: keyed.member.offset,
                            fields: BTreeMap::new(),
                            others: BTreeSet::new(),
                        },
                        bytes: 0,
                        bad: None,
                    });
                }
            }
            if let Some(g) = gathering.as_mut()
                && let Err(error) = self.add(g, keyed)
            {
                self.done = true;
                return Some(Err(fatal(gathering, error)));
            }
        }
    }

    /// Adds a member to the sample being gathered (or notes what is wrong
    /// with it); an error is the shard's (fatal).
    fn add(&mut self, g: &mut Gathering, keyed: Keyed) -> Result<()> {
        if g.bad.is_some() {
            // Its members are read past (their bytes would be dropped).
            return Ok(());
        }
        let member = &keyed.member;
        let limits = self.limits;
        let problem = match &keyed.field {
            Err(()) => Some(format!(
                "member {} has a field name that is not UTF-8",
                show(&member.name)
            )),
            Ok(field) if field == KEY || field == URL => Some(format!(
                "member {} names the field {field}, which webdataset reserves",
                show(&member.name)
            )),
            Ok(field) if g.sample.fields.contains_key(field) || g.sample.others.contains(field) => {
                Some(format!(
                    "member {} repeats the field {field:?} of sample {}",
                    show(&member.name),
                    show(&g.sample.key)
                ))
            }
            Ok(_) if g.sample.fields.len() + g.sample.others.len() >= limits.fields => {
                Some(format!(
                    "sample {} has more than {} fields",
                    show(&g.sample.key),
                    limits.fields
                ))
            }
            Ok(_) => None,
        };
        let field = match (problem, keyed.field) {
            (None, Ok(field)) => field,
            (problem, _) => {
                let problem = problem.unwrap_or_default();
                g.bad = Some(self.invalid(member.offset, problem));
                return Ok(());
            }
        };
        if self.keep.as_ref().is_some_and(|k| !k.contains(&field)) {
            g.sample.others.insert(field);
            return Ok(());
        }
        let too_big = if member.size > limits.member_bytes {
            Some(format!(
                "member {} is {} bytes, over the limit of {} for one member",
                show(&member.name),
                member.size,
                limits.member_bytes
            ))
        } else if g.bytes.saturating_add(member.size) > limits.sample_bytes {
            Some(format!(
                "sample {} holds more than {} bytes",
                show(&g.sample.key),
                limits.sample_bytes
            ))
        } else {
            None
        };
        if let Some(reason) = too_big {
            g.bad = Some(Error::DataLoss {
                location: self.location(member.offset),
                reason,
            });
            return Ok(());
        }
        let data = self.members.read_data()?;
        g.bytes += member.size;
        g.sample.fields.insert(field, data);
        Ok(())
    }

    /// The next regular member with a key.
    fn next_keyed(&mut self) -> Result<Option<Keyed>> {
        loop {
            let Some(member) = self.members.next_member()? else {
                return Ok(None);
            };
            if !member.regular || is_meta(&member.name) {
                continue;
            }
            let Some((key, field)) = base_plus_ext(&member.name) else {
                self.ignored += 1;
                continue;
            };
            let key = key.to_vec();
            let field = std::str::from_utf8(field)
                .map(str::to_lowercase)
                .map_err(|_| ());
            return Ok(Some(Keyed { member, key, field }));
        }
    }

    fn location(&self, offset: u64) -> String {
        self.members.location(offset)
    }

    fn invalid(&self, offset: u64, problem: String) -> Error {
        Error::InvalidArgument(format!("{}: {problem}", self.location(offset)))
    }
}

/// The error standing for the sample being read when the shard's damage
/// ends it: what was wrong with the sample already (the cause, such as a
/// size that made the reader skip past the end), else the damage.
fn fatal(gathering: Option<Gathering>, damage: Error) -> SampleError {
    SampleError {
        error: gathering.and_then(|g| g.bad).unwrap_or(damage),
        fatal: true,
    }
}

impl Gathering {
    fn finish(self) -> std::result::Result<RawSample, SampleError> {
        match self.bad {
            Some(error) => Err(SampleError {
                error,
                fatal: false,
            }),
            None => Ok(self.sample),
        }
    }
}

/// Whether a field holds an integer (its last dotted part is one of
/// [`INTEGER_EXTENSIONS`]).
pub fn is_integer_field(field: &str) -> bool {
    let last = field.rsplit('.').next().unwrap_or(field);
    INTEGER_EXTENSIONS.contains(&last)
}

/// Python's `int(data)` for bytes, in 64 bits: ASCII whitespace around, a
/// sign, decimal digits (leading zeros allowed) with single `_` between
/// them.
pub fn parse_int(data: &[u8]) -> Option<i64> {
    let space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let start = data.iter().position(|b| !space(b))?;
    let end = data.iter().rposition(|b| !space(b))? + 1;
    let text = &data[start..end];
    let (negative, digits) = match text.split_first()? {
        (b'-', rest) => (true, rest),
        (b'+', rest) => (false, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.first() == Some(&b'_') || digits.last() == Some(&b'_') {
        return None;
    }
    // Accumulated negative, so i64::MIN fits.
    let mut value: i64 = 0;
    let mut underscore = false;
    for &b in digits {
        if b == b'_' {
            if underscore {
                return None;
            }
            underscore = true;
            continue;
        }
        underscore = false;
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(b - b'0'))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

/// Which fields an element has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldSet {
    /// These (a sample without one is bad; others are ignored).
    Requested(BTreeSet<String>),
    /// Exactly these: the first sample's (a sample with others is bad).
    Exact(BTreeSet<String>),
}

/// How samples become elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleSchema {
    pub fields: FieldSet,
}

impl SampleSchema {
    fn set(&self) -> &BTreeSet<String> {
        match &self.fields {
            FieldSet::Requested(s) | FieldSet::Exact(s) => s,
        }
    }

    /// The fields whose bytes are read.
    pub fn keep(&self) -> BTreeSet<String> {
        self.set().clone()
    }

    /// The element structure: a dictionary of scalars, strings except the
    /// integer fields (int64), with `__key__` and `__url__`.
    pub fn structure(&self) -> Structure {
        let mut items: BTreeMap<String, Structure> = self
            .set()
            .iter()
            .map(|f| {
                let dtype = if is_integer_field(f) {
                    DType::Int64
                } else {
                    DType::String
                };
                (
                    f.clone(),
                    Structure::Tensor(TensorSpec::new(dtype, Shape::scalar())),
                )
            })
            .collect();
        for k in [KEY, URL] {
            items.insert(
                k.to_string(),
                Structure::Tensor(TensorSpec::new(DType::String, Shape::scalar())),
            );
        }
        Structure::Dict(items)
    }

    /// The element of `sample`, read from the shard `url` (uncompressed
    /// from `compression`); an error (naming the shard and the sample's
    /// offset) if its fields are not the schema's or an integer field does
    /// not parse.
    pub fn element(
        &self,
        url: &str,
        compression: CompressionType,
        mut sample: RawSample,
    ) -> Result<Element> {
        let offset = sample.offset;
        let at = || {
            format!(
                "webdataset shard {}",
                crate::io::compression::location(url, compression, offset)
            )
        };
        let have = || {
            let mut all: Vec<&str> = sample.fields.keys().map(String::as_str).collect();
            all.extend(sample.others.iter().map(String::as_str));
            all.sort_unstable();
            all.join(", ")
        };
        let missing: Vec<&str> = self
            .set()
            .iter()
            .filter(|f| !sample.fields.contains_key(*f))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            let which = match self.fields {
                FieldSet::Requested(_) => "asked for",
                FieldSet::Exact(_) => {
                    "the first sample's (pass fields to read samples with \
                                       other fields)"
                }
            };
            return Err(Error::InvalidArgument(format!(
                "{}: sample {} lacks field(s) {} ({which}); it has: {}",
                at(),
                show(&sample.key),
                missing.join(", "),
                have()
            )));
        }
        if matches!(self.fields, FieldSet::Exact(_)) && !sample.others.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{}: sample {} has field(s) {} besides the first sample's {} (pass fields to \
                 read samples with differing fields)",
                at(),
                show(&sample.key),
                sample.others.iter().cloned().collect::<Vec<_>>().join(", "),
                self.set().iter().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        let key = sample.key.clone();
        let mut components: BTreeMap<&str, Tensor> = BTreeMap::new();
        for field in self.set() {
            let data = sample.fields.remove(field).unwrap_or_default();
            let tensor = if is_integer_field(field) {
                let value = parse_int(&data).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "{}: field {field} of sample {} is not an integer: {:?}",
                        at(),
                        show(&key),
                        String::from_utf8_lossy(&data[..data.len().min(64)])
                    ))
                })?;
                Tensor::scalar(value)
            } else {
                Tensor::scalar_string(data)
            };
            components.insert(field, tensor);
        }
        components.insert(KEY, Tensor::scalar_string(key));
        components.insert(URL, Tensor::scalar_string(url.as_bytes().to_vec()));
        Ok(Element::new(components.into_values().collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(name: &str) -> Option<(String, String)> {
        base_plus_ext(name.as_bytes()).map(|(k, e)| {
            (
                String::from_utf8(k.to_vec()).unwrap(),
                String::from_utf8(e.to_vec()).unwrap(),
            )
        })
    }

    #[test]
    fn names_split_as_base_plus_ext() {
        let s = |k: &str, e: &str| Some((k.to_string(), e.to_string()));
        assert_eq!(split("a.jpg"), s("a", "jpg"));
        assert_eq!(split("a.b/c.d.jpg"), s("a.b/c", "d.jpg"));
        assert_eq!(split("dir/sample.seg.json"), s("dir/sample", "seg.json"));
        assert_eq!(split("dir/.hidden"), s("dir/", "hidden"));
        assert_eq!(split("x/y/.z"), s("x/y/", "z"));
        assert_eq!(split("a.jpg."), s("a", "jpg."));
        assert_eq!(split("a."), s("a", ""));
        assert_eq!(split("README"), None);
        assert_eq!(split(".hidden"), None);
        assert_eq!(split("a.b/c"), None);
        assert_eq!(split("a/b.c/.d"), None);
        assert_eq!(split("a.b/"), None);
        assert_eq!(split("a\nb.c/d.e"), None);
        assert_eq!(split("ab.c/d\n.e"), s("ab.c/d\n", "e"));
    }

    #[test]
    fn metadata_names() {
        for meta in ["__meta__", "__", "___", "__x__/y.json", "__x__\n"] {
            assert!(is_meta(meta.as_bytes()), "{meta}");
        }
        for not in ["_x_", "a/__x__", "__x_", "__x__y/z", "x__", "__a/b__"] {
            assert!(!is_meta(not.as_bytes()), "{not}");
        }
    }

    #[test]
    fn integers_parse_as_python_int() {
        for (text, want) in [
            ("7", Some(7)),
            (" 42\n", Some(42)),
            ("-3", Some(-3)),
            ("+5", Some(5)),
            ("007", Some(7)),
            ("1_000", Some(1000)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("", None),
            ("  ", None),
            ("1__0", None),
            ("_1", None),
            ("1_", None),
            ("1.0", None),
            ("0x10", None),
            ("- 1", None),
            ("١", None),
        ] {
            assert_eq!(parse_int(text.as_bytes()), want, "{text:?}");
        }
        assert!(is_integer_field("cls"));
        assert!(is_integer_field("label.cls"));
        assert!(is_integer_field("id"));
        assert!(!is_integer_field("cls.txt"));
        assert!(!is_integer_field("json"));
    }
}
