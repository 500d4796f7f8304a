//! What names a cache: SHA-256 of a candidate's prefix and of the files
//! it reads.
//!
//! * `prefix`: the prefix `OpDef`'s protobuf bytes (canonical: pipeline
//!   maps are `BTreeMap`s, so they encode sorted; seeds and function
//!   declarations are attributes, so they count), with
//!   [`FINGERPRINT_VERSION`] and the pipeline format version. Two jobs with
//!   the same prefix and different suffixes share it.
//! * `files`: (path, size, modification time in ns) of every file the
//!   prefix names: each string attribute, list element or string tensor
//!   element that names an existing file (a directory: every file under
//!   it) or is a glob pattern (every match), through the io layer, so
//!   local paths and object stores alike. A source file rewritten, grown,
//!   added to a named directory or to a pattern's matches changes it: the
//!   old cache is then stale ([`super::stale_caches`]).
//!
//! A string that looks like a path (it has a URL scheme, or a `/` or a
//! file extension, and no whitespace) and does not exist is an error: the
//! dispatcher could not tell when the file changes, so the pipeline is not
//! cached. Strings that do not look like paths are looked up too (a
//! relative file name), and simply skipped when nothing is there.
//! Attributes that never name files ([`NON_PATH_OP_ATTRIBUTES`],
//! [`NON_PATH_ARGUMENTS`]: dtypes, feature and component names) are skipped.
//!
//! Bounded: at most [`MAX_FINGERPRINT_FILES`] files and as many strings
//! looked up; more is an error (autocache refuses), never a truncated
//! fingerprint. All of it is I/O (a stat per string, a listing per
//! directory): callers run it off the RPC threads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use prost::Message;
use sha2::{Digest, Sha256};
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_proto::tfdata::pipeline::OpDef;

use super::{Analysis, Candidate, Resolver};
use crate::attrs::{Attr, attrs_from_wire};
use crate::io::fs::{FileStat, scheme};
use crate::io::pattern::first_wildcard;

/// Bumped whenever what the fingerprints cover changes, so caches made by
/// an older rule are not taken for this one's (they become unreachable
/// and are dropped as stale only under their own prefix; see
/// [`super::stale_caches`]).
pub const FINGERPRINT_VERSION: u32 = 1;

/// The most files (and strings looked up) one fingerprint covers. A
/// dataset of more files is refused rather than fingerprinted for minutes
/// at every job creation; 100,000 stats take about a second locally.
pub const MAX_FINGERPRINT_FILES: usize = 100_000;

/// Longer strings are data, not paths (Linux's `PATH_MAX`).
const MAX_PATH_BYTES: usize = 4096;

/// Op attributes whose strings are never file names (dictionary keys,
/// specs, codec names).
pub const NON_PATH_OP_ATTRIBUTES: &[&str] = &[
    "names",
    "fields",
    "on_error",
    "compression_type",
    "compression",
    "element_spec",
    "columns",
    "filter",
    "split",
    "null_values",
    "padding_values",
];

/// Arguments of built-in functions (and keys inside map attributes) whose
/// strings are never file names: looking them up could only mistake a
/// feature name like `image/encoded` (`select`'s `components`,
/// `parse_example`'s `features`) for a missing file.
pub const NON_PATH_ARGUMENTS: &[&str] = &[
    "components",
    "features",
    "dtype",
    "method",
    "dct_method",
    "sep",
    "default_value",
    "default",
    "shape",
];

/// A cache's name: `<prefix>/<files>` under the cache root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    /// SHA-256 (hex) of the prefix pipeline.
    pub prefix: String,
    /// SHA-256 (hex) of the named files' paths, sizes and times.
    pub files: String,
}

/// The fingerprints of `candidate` (see the module docs).
pub fn fingerprint(candidate: &Candidate, fs: Resolver<'_>) -> Result<Fingerprint> {
    let files = named_files(&candidate.prefix, fs)?;
    Ok(Fingerprint {
        prefix: prefix_fingerprint(&candidate.prefix),
        files: files_fingerprint(&files),
    })
}

/// SHA-256 (hex) of a prefix pipeline's canonical bytes.
pub fn prefix_fingerprint(prefix: &OpDef) -> String {
    let mut h = Sha256::new();
    h.update(b"tfdata autocache prefix\0");
    h.update(FINGERPRINT_VERSION.to_le_bytes());
    h.update(crate::pipeline::PIPELINE_FORMAT_VERSION.to_le_bytes());
    h.update(prefix.encode_to_vec());
    hex(&h.finalize())
}

/// SHA-256 (hex) of files' paths, sizes and modification times.
pub fn files_fingerprint(files: &BTreeMap<String, FileStat>) -> String {
    let mut h = Sha256::new();
    h.update(b"tfdata autocache files\0");
    h.update(FINGERPRINT_VERSION.to_le_bytes());
    h.update((files.len() as u64).to_le_bytes());
    for (path, stat) in files {
        // Length-prefixed, so no two lists hash the same bytes.
        h.update((path.len() as u64).to_le_bytes());
        h.update(path.as_bytes());
        h.update(stat.size.to_le_bytes());
        h.update(stat.modified_ns.to_le_bytes());
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every file `prefix` names, with its size and time, by path.
pub fn named_files(prefix: &OpDef, fs: Resolver<'_>) -> Result<BTreeMap<String, FileStat>> {
    let mut strings = Vec::new();
    collect_strings(prefix, &mut strings, 0)?;
    named_by_strings(strings, fs)
}

/// Every file `strings` name (the strings of a definition: paths, glob
/// patterns, directories, or data that names nothing), with its size and
/// time, by path: the files part of a fingerprint, for definitions this
/// crate cannot read itself (TensorFlow graphs' string constants). A
/// string that looks like a path but names nothing is an error.
pub fn named_by_strings(
    strings: Vec<String>,
    fs: Resolver<'_>,
) -> Result<BTreeMap<String, FileStat>> {
    named_by_strings_with(strings, fs, &mut NamedFiles::default())
}

/// The files each string named, by string: what [`named_by_strings_with`]
/// looked up already, so that candidates sharing their source's strings
/// (every candidate of a chain does) stat each file once, not once per
/// candidate (a HEAD request each on an object store).
pub type NamedFiles = BTreeMap<String, BTreeMap<String, FileStat>>;

/// [`named_by_strings`], looking each string up once across calls that
/// share `seen`.
pub fn named_by_strings_with(
    mut strings: Vec<String>,
    fs: Resolver<'_>,
    seen: &mut NamedFiles,
) -> Result<BTreeMap<String, FileStat>> {
    strings.sort();
    strings.dedup();
    if strings.len() > MAX_FINGERPRINT_FILES {
        return Err(too_many());
    }
    let mut files = BTreeMap::new();
    for s in strings {
        if !seen.contains_key(&s) {
            let mut named = BTreeMap::new();
            add_named(&s, fs, &mut named)?;
            seen.insert(s.clone(), named);
        }
        files.extend(seen[&s].iter().map(|(p, stat)| (p.clone(), *stat)));
        if files.len() > MAX_FINGERPRINT_FILES {
            return Err(too_many());
        }
    }
    Ok(files)
}

fn too_many() -> Error {
    Error::FailedPrecondition(format!(
        "the pipeline names more than {MAX_FINGERPRINT_FILES} files (autocache's limit on \
         the files it fingerprints)"
    ))
}

/// The strings of every attribute of `node` and its inputs, except
/// [`NON_PATH_OP_ATTRIBUTES`] and [`NON_PATH_ARGUMENTS`]; at most [`MAX_FINGERPRINT_FILES`] + 1 (enough
/// to tell the limit was passed).
fn collect_strings(node: &OpDef, out: &mut Vec<String>, depth: usize) -> Result<()> {
    if depth > crate::pipeline::MAX_DEPTH {
        return Err(Error::InvalidArgument(format!(
            "pipeline is deeper than {} ops",
            crate::pipeline::MAX_DEPTH
        )));
    }
    let attrs = attrs_from_wire(&node.attrs, 0)?;
    for (key, attr) in &attrs.0 {
        if node.op == "webdataset" && key == "urls" {
            // Shard lists are `::`-joined brace patterns
            // (`train-{000..099}.tar`): the files are their expansions.
            let urls = attrs.strings(&node.op, key)?;
            for url in crate::webdataset::urls::expand_patterns(&node.op, &urls)? {
                attr_strings(&Attr::Str(url), out)?;
            }
        } else if !NON_PATH_OP_ATTRIBUTES.contains(&key.as_str()) {
            attr_strings(attr, out)?;
        }
    }
    for input in &node.inputs {
        collect_strings(input, out, depth + 1)?;
    }
    Ok(())
}

/// The fingerprints of every candidate of `analysis`, in its order: the
/// same as [`fingerprint`] of each, but each string is looked up once
/// (a candidate's prefix is the previous one's plus one op, so its files
/// are the previous files plus what that op names). Once a candidate
/// fails, the deeper ones (which name the same files) fail with it.
pub fn fingerprints(analysis: &Analysis, fs: Resolver<'_>) -> Vec<Result<Fingerprint>> {
    let mut files = BTreeMap::new();
    let mut looked_up = BTreeSet::new();
    let mut failed: Option<Arc<Error>> = None;
    let mut previous: Option<&OpDef> = None;
    let mut out = Vec::with_capacity(analysis.candidates.len());
    for candidate in &analysis.candidates {
        if let Some(e) = &failed {
            out.push(Err(Error::Context {
                context: None,
                source: e.clone(),
            }));
            continue;
        }
        let prefix = &candidate.prefix;
        let extends = |p: &OpDef| prefix.inputs.len() == 1 && prefix.inputs[0] == *p;
        let step = match previous {
            // One op on top of what was looked up already.
            Some(p) if extends(p) => (|| {
                let mut strings = Vec::new();
                let own = OpDef {
                    inputs: Vec::new(),
                    ..prefix.clone()
                };
                collect_strings(&own, &mut strings, 0)?;
                for s in strings {
                    if looked_up.insert(s.clone()) {
                        if looked_up.len() > MAX_FINGERPRINT_FILES {
                            return Err(too_many());
                        }
                        add_named(&s, fs, &mut files)?;
                    }
                }
                Ok(())
            })(),
            // The first, or a list not made by `analyse`: the whole prefix.
            _ => named_files(prefix, fs).map(|all| {
                files = all;
                looked_up.clear();
                let mut strings = Vec::new();
                // Cannot fail: `named_files` collected the same strings.
                let _ = collect_strings(prefix, &mut strings, 0);
                looked_up.extend(strings);
            }),
        };
        match step {
            Ok(()) => out.push(Ok(Fingerprint {
                prefix: prefix_fingerprint(prefix),
                files: files_fingerprint(&files),
            })),
            Err(e) => {
                let e = Arc::new(e);
                failed = Some(e.clone());
                out.push(Err(Error::Context {
                    context: None,
                    source: e,
                }));
            }
        }
        previous = Some(prefix);
    }
    out
}

fn attr_strings(attr: &Attr, out: &mut Vec<String>) -> Result<()> {
    if out.len() > MAX_FINGERPRINT_FILES {
        return Err(too_many());
    }
    match attr {
        Attr::Str(s) => out.push(s.clone()),
        Attr::List(items) => {
            for item in items {
                attr_strings(item, out)?;
            }
        }
        Attr::Map(map) => {
            for (key, value) in map {
                if !NON_PATH_ARGUMENTS.contains(&key.as_str()) {
                    attr_strings(value, out)?;
                }
            }
        }
        Attr::Function(f) => {
            for (key, value) in &f.args.0 {
                if !NON_PATH_ARGUMENTS.contains(&key.as_str()) {
                    attr_strings(value, out)?;
                }
            }
        }
        Attr::Tensor(t) => tensor_strings(t, out)?,
        Attr::Int(_) | Attr::Float(_) | Attr::Bool(_) => {}
    }
    Ok(())
}

fn tensor_strings(t: &Tensor, out: &mut Vec<String>) -> Result<()> {
    if t.dtype() != DType::String {
        return Ok(());
    }
    for value in t.string_values()? {
        if out.len() > MAX_FINGERPRINT_FILES {
            return Err(too_many());
        }
        // Bytes that are not UTF-8 cannot be a path the io layer opens.
        if let Ok(s) = std::str::from_utf8(value) {
            out.push(s.to_string());
        }
    }
    Ok(())
}

/// Whether a missing `s` must be an error: it has a URL scheme, or a `/`
/// or a file extension, and no whitespace.
pub fn looks_like_path(s: &str) -> bool {
    if s.is_empty() || s.len() > MAX_PATH_BYTES || s.chars().any(char::is_whitespace) {
        return false;
    }
    if scheme(s).is_some() || s.contains('/') {
        return true;
    }
    // An extension: a dot followed by 1-8 alphanumerics with a letter
    // (`data.tfrecord`, `x.jpg`), not a number like `0.5`.
    s.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && (1..=8).contains(&ext.len())
            && ext.chars().all(|c| c.is_ascii_alphanumeric())
            && ext.chars().any(|c| c.is_ascii_alphabetic())
    })
}

/// Adds the files `s` names (if any) to `files`.
fn add_named(s: &str, fs: Resolver<'_>, files: &mut BTreeMap<String, FileStat>) -> Result<()> {
    let path_like = looks_like_path(s);
    if s.is_empty() || s.len() > MAX_PATH_BYTES || s.contains(['\n', '\r', '\0']) {
        return Ok(());
    }
    // A string that is no path of a file system this build knows is data,
    // unless it looks like a path: then autocache cannot watch it.
    let file_system = match fs(s) {
        Ok(file_system) => file_system,
        Err(e) if path_like => {
            return Err(Error::FailedPrecondition(format!(
                "autocache cannot watch {s:?} for changes: {e}"
            )));
        }
        Err(_) => return Ok(()),
    };
    let matches = if path_like && first_wildcard(s).is_some() {
        file_system.glob(s)?
    } else {
        vec![s.to_string()]
    };
    for path in matches {
        let stat = match file_system.stat(&path) {
            Ok(stat) => stat,
            Err(Error::NotFound { .. }) if !path_like => continue,
            Err(Error::NotFound { .. }) => {
                return Err(Error::FailedPrecondition(format!(
                    "the pipeline names {path:?}, which does not exist; autocache cannot \
                     tell when it changes"
                )));
            }
            Err(e) if path_like => return Err(e),
            // Not a path after all (a name the file system refuses).
            Err(_) => continue,
        };
        if stat.is_dir {
            let remaining = MAX_FINGERPRINT_FILES.saturating_sub(files.len());
            for (file, stat) in file_system.walk(&path, remaining)? {
                files.insert(file, stat);
            }
        } else {
            files.insert(path, stat);
        }
        if files.len() > MAX_FINGERPRINT_FILES {
            return Err(too_many());
        }
    }
    Ok(())
}
