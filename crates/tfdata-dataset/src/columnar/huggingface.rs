//! `huggingface_dataset`: a Hugging Face dataset kept on disk (or in an
//! object store), read from its own files and metadata, never from the
//! Hub.
//!
//! * **Layouts** ([`resolve`]): a folder `datasets`' `save_to_disk` wrote
//!   (`state.json` lists its `.arrow` shards, IPC streams), a `DatasetDict`
//!   folder of those (`dataset_dict.json` lists the splits, one folder
//!   each), or a local copy of a Hub dataset's Parquet files: a snapshot
//!   (`huggingface_hub.snapshot_download`), or the cache folder
//!   `datasets--org--name` holding snapshots (`refs/main` names the one
//!   read). In a snapshot the splits are `data/{split}-00000-of-00003.parquet`
//!   or `data/{split}.parquet` (what `push_to_hub` writes), the same at the
//!   top, or `{split}/*.parquet` (the `refs/convert/parquet` branch, one
//!   folder per config: a snapshot with one config is read from it, one
//!   with several needs `path` to name it). Anything else, or a path that
//!   does not exist, is an error that says how to make a local copy.
//! * **Splits**: `split` picks one; without it the folder must hold one.
//! * **Features** (from `dataset_info.json`, else the `huggingface` schema
//!   metadata the files carry; see [`Fix`]): `Image`, `Audio` (and `Video`,
//!   `Pdf`: the same storage) become their encoded file's bytes, a scalar
//!   string, so `decode_jpeg`/`decode_png` apply; `ClassLabel` is its
//!   `int64`; `Value`s, `Translation` and `Json` are their Arrow types
//!   ([`super::convert`]); `List`/`Sequence`/`LargeList` are lists of their
//!   feature; `Array2D`...`Array5D` become tensors of their shape (a
//!   dynamic first dimension varies per row). Other features are refused
//!   naming the column (leave it out with `columns`). An image stored as a
//!   path only (its bytes not embedded) is an error naming the column and
//!   row: tfdata does not follow paths out of the dataset.
//! * **Reading** is `arrow_dataset`'s for `.arrow` shards and
//!   `parquet_dataset`'s for Parquet files, with the features applied to
//!   each batch ([`super::transform`]): the same elements, batches, splits
//!   and positions. The op's attributes stay its own (`path`, `split`,
//!   `columns`, `batch_size`, `null_values`, `padding_values`); the inner
//!   source is rebuilt from them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeListArray, LargeListArray, ListArray, RecordBatch,
    StructArray,
};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};
use serde_json::Value as Json;
use tfdata_core::{Error, Result};

use super::arrow_ipc::ArrowSource;
use super::convert::Declared;
use super::parquet::ParquetSource;
use super::transform::BatchTransform;
use crate::Dataset;
use crate::attrs::Attrs;
use crate::dataset::{DatasetOp, IterContext};
use crate::iterators::ElementIterator;
use crate::spec::Structure;
use crate::splits::SplitProvider;

const OP: &str = "huggingface_dataset";
/// `state.json`, `dataset_info.json`, `dataset_dict.json`, `refs/main` at
/// most: they describe a dataset, they do not hold it.
const MAX_METADATA_FILE_BYTES: u64 = 16 << 20;
/// Array features have 2 to 5 dimensions.
const MAX_ARRAY_DIMS: usize = 5;
/// Feature nesting at most (lists of dicts of lists...).
const MAX_FEATURE_DEPTH: usize = 32;

/// How to make what this op reads, for errors.
const HOW_TO_COPY: &str = "huggingface_dataset reads local copies only (no network): make one \
     with `datasets.load_dataset(name, split=...).save_to_disk(path)`, or download the Parquet \
     files with `huggingface_hub.snapshot_download(repo_id, repo_type=\"dataset\", \
     local_dir=path)`";

/// The op.
#[derive(Debug)]
pub struct HuggingFaceSource {
    pub path: String,
    pub split: Option<String>,
    pub columns: Option<Vec<String>>,
    pub batch_size: Option<i64>,
    pub declared: Declared,
    /// The source reading the files, once the layout is known.
    inner: Mutex<Option<Dataset>>,
}

impl HuggingFaceSource {
    pub fn new(
        path: String,
        split: Option<String>,
        columns: Option<Vec<String>>,
        batch_size: Option<i64>,
        declared: Declared,
    ) -> Self {
        HuggingFaceSource {
            path,
            split,
            columns,
            batch_size,
            declared,
            inner: Mutex::new(None),
        }
    }

    fn inner(&self) -> Result<Dataset> {
        let mut slot = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = slot.as_ref() {
            return Ok(d.clone());
        }
        let layout = resolve(&self.path, self.split.as_deref())?;
        let transform = Arc::new(FeatureTransform {
            info_features: layout.features,
            columns: self.columns.clone(),
            fixes: Mutex::new(None),
        });
        let files = layout.files.iter().map(|f| escape(f)).collect();
        let inner = match layout.kind {
            Kind::Arrow => Dataset::from_op(
                ArrowSource::new(
                    files,
                    self.columns.clone(),
                    self.batch_size,
                    self.declared.clone(),
                )
                .with_transform(transform),
            ),
            Kind::Parquet => Dataset::from_op(
                ParquetSource::new(
                    files,
                    self.columns.clone(),
                    self.batch_size,
                    None,
                    self.declared.clone(),
                )
                .with_transform(transform),
            ),
        };
        *slot = Some(inner.clone());
        Ok(inner)
    }

    fn context(&self, e: Error) -> Error {
        Error::Context {
            context: Some(format!("{OP}: {}", self.path)),
            source: Arc::new(e),
        }
    }
}

impl DatasetOp for HuggingFaceSource {
    fn name(&self) -> &'static str {
        OP
    }

    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new().with("path", self.path.clone());
        if let Some(s) = &self.split {
            a = a.with("split", s.clone());
        }
        if let Some(c) = &self.columns {
            a = a.with("columns", c.clone());
        }
        if let Some(b) = self.batch_size {
            a = a.with("batch_size", b);
        }
        super::arrow_ipc::declared_attrs(a, &self.declared)
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        let inner = self.inner()?;
        inner.op().element_spec().map_err(|e| self.context(e))
    }

    fn cardinality(&self) -> i64 {
        crate::UNKNOWN_CARDINALITY
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let inner = self.inner()?;
        // The splits handed to this op are the inner source's.
        let mut ctx = ctx.clone();
        if let Some(splits) = ctx.split_provider_for(self) {
            ctx.split_providers.insert(inner.op_key(), splits);
        }
        inner.op().make_iterator(&ctx).map_err(|e| self.context(e))
    }

    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        match self.inner() {
            Ok(inner) => inner.op().split_provider(),
            Err(e) => Some(Err(e)),
        }
    }
}

/// The attributes' op.
pub(crate) fn from_attrs(op: &str, attrs: &Attrs) -> Result<HuggingFaceSource> {
    attrs.check_known(
        op,
        &[
            "path",
            "split",
            "columns",
            "batch_size",
            "null_values",
            "padding_values",
        ],
    )?;
    let columns = match attrs.get("columns") {
        None => None,
        Some(_) => Some(attrs.strings(op, "columns")?),
    };
    let split = match attrs.get("split") {
        None => None,
        Some(_) => Some(attrs.str(op, "split")?.to_string()),
    };
    Ok(HuggingFaceSource::new(
        attrs.str(op, "path")?.to_string(),
        split,
        columns,
        attrs.opt_int(op, "batch_size")?,
        super::declared_values(op, attrs)?,
    ))
}

/// What the files are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `save_to_disk`'s `.arrow` shards (IPC streams).
    Arrow,
    Parquet,
}

/// The files of one split, and the features if the folder describes them.
#[derive(Debug)]
pub struct Layout {
    pub kind: Kind,
    pub files: Vec<String>,
    pub features: Option<Json>,
}

/// The files of `split` (the only one when `None`) of the dataset at
/// `path`.
pub fn resolve(path: &str, split: Option<&str>) -> Result<Layout> {
    let root = path.trim_end_matches('/');
    if root.is_empty() {
        return Err(Error::InvalidArgument(format!("{OP}: path is empty")));
    }
    if ["hf://", "http://", "https://"]
        .iter()
        .any(|p| root.starts_with(p))
    {
        return Err(Error::InvalidArgument(format!(
            "{OP}: {path} is on the Hub; {HOW_TO_COPY}"
        )));
    }
    if let Some(dict) = read_json(&format!("{root}/dataset_dict.json"))? {
        let splits = dict
            .get("splits")
            .and_then(Json::as_array)
            .map(|s| s.iter().filter_map(Json::as_str).collect::<Vec<_>>())
            .unwrap_or_default();
        let split = pick_split(root, split, splits.iter().copied())?;
        let folder = format!("{root}/{}", plain_name(root, "split", split)?);
        return saved_dataset(&folder, None)?.ok_or_else(|| Error::DataLoss {
            location: format!("{root}/dataset_dict.json"),
            reason: format!(
                "it lists the split {split}, but {folder} has no state.json (was the \
                     folder copied whole?)"
            ),
        });
    }
    if let Some(layout) = saved_dataset(root, split)? {
        return Ok(layout);
    }
    // A cache folder `datasets--org--name`: `refs/main` names the snapshot.
    let refs_main = format!("{root}/refs/main");
    if crate::io::exists(&refs_main)? {
        let sha = read_small(&refs_main)?;
        let sha = String::from_utf8_lossy(&sha).trim().to_string();
        let snapshot = format!(
            "{root}/snapshots/{}",
            plain_name(&refs_main, "revision", &sha)?
        );
        return hub_snapshot(&snapshot, split, 0);
    }
    hub_snapshot(root, split, 0)
}

/// A `save_to_disk` folder at `folder`, if it is one; `split` must be its
/// own when it names one.
fn saved_dataset(folder: &str, split: Option<&str>) -> Result<Option<Layout>> {
    let state_path = format!("{folder}/state.json");
    let Some(state) = read_json(&state_path)? else {
        return Ok(None);
    };
    let damaged = |reason: String| Error::DataLoss {
        location: state_path.clone(),
        reason,
    };
    let listed = state
        .get("_data_files")
        .and_then(Json::as_array)
        .ok_or_else(|| damaged("no _data_files list".into()))?;
    let mut files = Vec::with_capacity(listed.len());
    for f in listed {
        let name = f
            .get("filename")
            .and_then(Json::as_str)
            .ok_or_else(|| damaged(format!("a data file without a filename: {f}")))?;
        files.push(format!(
            "{folder}/{}",
            plain_name(&state_path, "filename", name)?
        ));
    }
    if files.is_empty() {
        return Err(damaged("it lists no data files".into()));
    }
    if let (Some(want), Some(own)) = (split, state.get("_split")) {
        let own = own.as_str();
        if own != Some(want) {
            return Err(Error::InvalidArgument(format!(
                "{OP}: {folder} is one split ({}) saved with save_to_disk, not the split {want}: \
                 leave split out, or save the DatasetDict",
                own.unwrap_or("unnamed")
            )));
        }
    }
    let features = read_json(&format!("{folder}/dataset_info.json"))?
        .and_then(|info| info.get("features").cloned())
        .filter(|f| f.is_object());
    Ok(Some(Layout {
        kind: Kind::Arrow,
        files,
        features,
    }))
}

/// The Parquet files of a split in a Hub snapshot at `root`.
fn hub_snapshot(root: &str, split: Option<&str>, depth: usize) -> Result<Layout> {
    let pattern = escape(root);
    let mut splits: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // data/{split}-00000-of-00001.parquet (push_to_hub), then the same at
    // the top.
    for dir in ["data/", ""] {
        for file in crate::io::glob(&format!("{pattern}/{dir}*.parquet"))? {
            splits
                .entry(split_of_file(base_name(&file)))
                .or_default()
                .push(file);
        }
        if !splits.is_empty() {
            break;
        }
    }
    // {folder}/*.parquet: splits (refs/convert/parquet within a config),
    // or configs holding push_to_hub's sharded split files.
    let mut configs: BTreeMap<String, ()> = BTreeMap::new();
    if splits.is_empty() {
        let mut by_dir: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for file in crate::io::glob(&format!("{pattern}/*/*.parquet"))? {
            let dir = parent_name(&file).to_string();
            by_dir.entry(dir).or_default().push(file);
        }
        for (dir, files) in by_dir {
            if files.iter().all(|f| sharded_split(base_name(f)).is_some()) {
                configs.insert(dir, ());
            } else {
                splits.insert(dir, files);
            }
        }
    }
    // {config}/{split}/*.parquet: refs/convert/parquet at its top.
    if splits.is_empty() && configs.is_empty() {
        for file in crate::io::glob(&format!("{pattern}/*/*/*.parquet"))? {
            let config = file
                .rsplitn(3, '/')
                .nth(2)
                .map(base_name)
                .unwrap_or_default();
            configs.insert(config.to_string(), ());
        }
    }
    if splits.is_empty() && !configs.is_empty() {
        if configs.len() == 1 && depth == 0 {
            let config = configs.keys().next().cloned().unwrap_or_default();
            return hub_snapshot(&format!("{root}/{config}"), split, depth + 1);
        }
        return Err(Error::InvalidArgument(format!(
            "{OP}: {root} holds the configs {}: set path to {root}/<config>",
            configs.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    if splits.is_empty() {
        return Err(if crate::io::exists(root)? {
            Error::InvalidArgument(format!(
                "{OP}: {root} is not a dataset folder: no state.json (save_to_disk), \
                 dataset_dict.json (a saved DatasetDict) or Parquet files in the Hub's layout \
                 (data/<split>-*.parquet, <split>/*.parquet); {HOW_TO_COPY}"
            ))
        } else {
            Error::NotFound {
                what: "dataset folder",
                id: format!("{root} ({HOW_TO_COPY})"),
            }
        });
    }
    let name = pick_split(root, split, splits.keys().map(String::as_str))?.to_string();
    Ok(Layout {
        kind: Kind::Parquet,
        files: splits.remove(&name).unwrap_or_default(),
        features: None,
    })
}

/// The split of a Parquet file name: `train` of `train-00000-of-00004.parquet`
/// (and of push_to_hub's older `train-00000-of-00004-<hash>.parquet`), else
/// the name without `.parquet`.
fn split_of_file(name: &str) -> String {
    sharded_split(name)
        .unwrap_or_else(|| name.strip_suffix(".parquet").unwrap_or(name))
        .to_string()
}

/// `{split}` of `{split}-NNNNN-of-NNNNN[-anything].parquet`.
fn sharded_split(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(".parquet")?;
    // The last "-NNNNN-of-NNNNN" in the name.
    let bytes = stem.as_bytes();
    let pattern_len = "-00000-of-00000".len();
    (0..=stem.len().checked_sub(pattern_len)?)
        .rev()
        .find(|&at| {
            let p = &bytes[at..at + pattern_len];
            p[0] == b'-'
                && p[1..6].iter().all(u8::is_ascii_digit)
                && &p[6..10] == b"-of-"
                && p[10..].iter().all(u8::is_ascii_digit)
                && (at + pattern_len == stem.len() || bytes[at + pattern_len] == b'-')
        })
        .filter(|&at| at > 0)
        .map(|at| &stem[..at])
}

/// The split to read: `wanted`, which must be one of `splits`, or the only
/// one.
fn pick_split<'a>(
    root: &str,
    wanted: Option<&'a str>,
    splits: impl Iterator<Item = &'a str>,
) -> Result<&'a str> {
    let splits: Vec<&str> = splits.collect();
    match wanted {
        Some(w) if splits.contains(&w) => Ok(w),
        Some(w) => Err(Error::InvalidArgument(format!(
            "{OP}: {root} has no split {w} (its splits: {})",
            splits.join(", ")
        ))),
        None => match splits[..] {
            [only] => Ok(only),
            [] => Err(Error::InvalidArgument(format!(
                "{OP}: {root} lists no splits"
            ))),
            _ => Err(Error::InvalidArgument(format!(
                "{OP}: {root} has the splits {}: choose one with split",
                splits.join(", ")
            ))),
        },
    }
}

/// `name` (from a metadata file), refused unless it names a file or folder
/// in the folder itself.
fn plain_name<'a>(file: &str, what: &str, name: &'a str) -> Result<&'a str> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\']) {
        return Err(Error::DataLoss {
            location: file.to_string(),
            reason: format!("the {what} {name:?} is not a plain file name"),
        });
    }
    Ok(name)
}

/// The last component of a path.
fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The name of a file's folder.
fn parent_name(path: &str) -> &str {
    path.rsplit_once('/')
        .map_or("", |(folder, _)| base_name(folder))
}

/// `path` with glob wildcards escaped, so it matches only itself.
fn escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A small file's bytes, refused past [`MAX_METADATA_FILE_BYTES`].
fn read_small(path: &str) -> Result<bytes::Bytes> {
    let fs = crate::io::file_system(path)?;
    let size = fs.file_size(path)?;
    if size > MAX_METADATA_FILE_BYTES {
        return Err(Error::DataLoss {
            location: path.to_string(),
            reason: format!(
                "{size} bytes, more than a dataset's metadata file may have \
                 ({MAX_METADATA_FILE_BYTES})"
            ),
        });
    }
    fs.read_all(path)
}

/// A JSON metadata file, `None` if it does not exist.
fn read_json(path: &str) -> Result<Option<Json>> {
    if !crate::io::exists(path)? {
        return Ok(None);
    }
    let bytes = read_small(path)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::DataLoss {
            location: path.to_string(),
            reason: format!("not valid JSON: {e}"),
        })
}

/// What a column's Hugging Face feature does to its Arrow values before
/// they become tensors.
#[derive(Debug, Clone, PartialEq)]
pub enum Fix {
    /// Its Arrow type is the tensor's (`Value`, `ClassLabel`, ...).
    Keep,
    /// `Image`, `Audio`, `Video`, `Pdf`: a `struct<bytes, path>`, of which
    /// the bytes are kept.
    Encoded { feature: String },
    /// A list of a feature that needs fixing.
    Items(Box<Fix>),
    /// A dictionary of features (a struct), some needing fixing.
    Fields(BTreeMap<String, Fix>),
    /// `Array2D`...`Array5D`: nested lists of these lengths (a dynamic
    /// first one: `None`), which become fixed-size lists.
    Shape(Vec<Option<usize>>),
}

impl Fix {
    /// The fix `feature` (its JSON form) needs for a column of Arrow type
    /// `t` at `path`.
    pub fn of(feature: &Json, t: &DataType, path: &str) -> Result<Fix> {
        Self::of_depth(feature, t, path, 0)
    }

    fn of_depth(feature: &Json, t: &DataType, path: &str, depth: usize) -> Result<Fix> {
        if depth > MAX_FEATURE_DEPTH {
            return Err(unsupported(path, "nested too deeply"));
        }
        let mismatch = |what: &str| {
            Error::InvalidArgument(format!(
                "column {path}: its feature is {what}, but its Arrow type is {t}"
            ))
        };
        // A list shorthand: [feature].
        if let Some(items) = feature.as_array() {
            let [item] = &items[..] else {
                return Err(unsupported(path, "a list feature of several types"));
            };
            return Self::list(item, t, path, depth, &mismatch);
        }
        let Some(obj) = feature.as_object() else {
            return Err(unsupported(path, &format!("a feature {feature}")));
        };
        let Some(kind) = obj.get("_type").and_then(Json::as_str) else {
            // A dictionary of features.
            return Self::fields(obj, t, path, depth, &mismatch);
        };
        Ok(match kind {
            "Value" | "ClassLabel" | "Translation" | "TranslationVariableLanguages" | "Json" => {
                Fix::Keep
            }
            "Image" | "Audio" | "Video" | "Pdf" => {
                let DataType::Struct(fields) = t else {
                    return Err(mismatch(kind));
                };
                match fields
                    .iter()
                    .find(|f| f.name() == "bytes")
                    .map(|f| f.data_type())
                {
                    Some(DataType::Binary | DataType::LargeBinary | DataType::BinaryView) => {}
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "column {path}: its {kind}s are stored without their bytes ({t}): \
                             tfdata reads no files a dataset points to; save the dataset with \
                             the files embedded (datasets' save_to_disk and push_to_hub embed \
                             local files)"
                        )));
                    }
                }
                Fix::Encoded {
                    feature: kind.to_string(),
                }
            }
            "List" | "LargeList" | "Sequence" => {
                let item = obj
                    .get("feature")
                    .ok_or_else(|| unsupported(path, &format!("a {kind} without its feature")))?;
                Self::list(item, t, path, depth, &mismatch)?
            }
            "Array2D" | "Array3D" | "Array4D" | "Array5D" => {
                let dims: Vec<Option<usize>> = obj
                    .get("shape")
                    .and_then(Json::as_array)
                    .map(|s| {
                        s.iter()
                            .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                            .collect()
                    })
                    .unwrap_or_default();
                let fixed_after_first = dims.iter().skip(1).all(Option::is_some);
                if !(2..=MAX_ARRAY_DIMS).contains(&dims.len()) || !fixed_after_first {
                    return Err(unsupported(
                        path,
                        &format!("an {kind} of shape {:?}", obj.get("shape")),
                    ));
                }
                Fix::Shape(dims)
            }
            other => {
                return Err(unsupported(path, &format!("the feature type {other}")));
            }
        })
    }

    /// A list of `item`s (`t` a list type; for `Sequence` of a dictionary,
    /// `datasets` stores a struct of lists instead).
    fn list(
        item: &Json,
        t: &DataType,
        path: &str,
        depth: usize,
        mismatch: &dyn Fn(&str) -> Error,
    ) -> Result<Fix> {
        match t {
            DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
                match Self::of_depth(item, f.data_type(), path, depth + 1)? {
                    Fix::Keep => Ok(Fix::Keep),
                    fix => Ok(Fix::Items(Box::new(fix))),
                }
            }
            DataType::Struct(fields) if item.is_object() && item.get("_type").is_none() => {
                let mut fixes = BTreeMap::new();
                for f in fields {
                    let sub = item.get(f.name()).ok_or_else(|| mismatch("a Sequence"))?;
                    let fix = Self::list(
                        sub,
                        f.data_type(),
                        &format!("{path}.{}", f.name()),
                        depth + 1,
                        mismatch,
                    )?;
                    if fix != Fix::Keep {
                        fixes.insert(f.name().clone(), fix);
                    }
                }
                Ok(if fixes.is_empty() {
                    Fix::Keep
                } else {
                    Fix::Fields(fixes)
                })
            }
            _ => Err(mismatch("a list")),
        }
    }

    fn fields(
        obj: &serde_json::Map<String, Json>,
        t: &DataType,
        path: &str,
        depth: usize,
        mismatch: &dyn Fn(&str) -> Error,
    ) -> Result<Fix> {
        let DataType::Struct(fields) = t else {
            return Err(mismatch("a dictionary of features"));
        };
        let mut fixes = BTreeMap::new();
        for f in fields {
            let Some(sub) = obj.get(f.name()) else {
                continue;
            };
            let fix = Self::of_depth(
                sub,
                f.data_type(),
                &format!("{path}.{}", f.name()),
                depth + 1,
            )?;
            if fix != Fix::Keep {
                fixes.insert(f.name().clone(), fix);
            }
        }
        Ok(if fixes.is_empty() {
            Fix::Keep
        } else {
            Fix::Fields(fixes)
        })
    }

    /// The Arrow type a column of type `t` has once fixed.
    pub fn data_type(&self, t: &DataType, path: &str) -> Result<DataType> {
        let mismatch = || {
            Error::InvalidArgument(format!(
                "column {path}: its Arrow type {t} does not match its feature"
            ))
        };
        Ok(match (self, t) {
            (Fix::Keep, _) => t.clone(),
            (Fix::Encoded { .. }, DataType::Struct(fields)) => fields
                .iter()
                .find(|f| f.name() == "bytes")
                .map(|f| f.data_type().clone())
                .ok_or_else(mismatch)?,
            (Fix::Items(item), DataType::List(f)) => {
                DataType::List(item_field(f, item.data_type(f.data_type(), path)?))
            }
            (Fix::Items(item), DataType::LargeList(f)) => {
                DataType::LargeList(item_field(f, item.data_type(f.data_type(), path)?))
            }
            (Fix::Items(item), DataType::FixedSizeList(f, n)) => {
                DataType::FixedSizeList(item_field(f, item.data_type(f.data_type(), path)?), *n)
            }
            (Fix::Fields(fixes), DataType::Struct(fields)) => {
                DataType::Struct(fixed_fields(fixes, fields, path)?)
            }
            (Fix::Shape(dims), _) => shape_type(dims, t, true).ok_or_else(mismatch)?,
            _ => return Err(mismatch()),
        })
    }

    /// `array` fixed. `what` names where its batch came from, for errors.
    pub fn apply(&self, array: &ArrayRef, path: &str, what: &str) -> Result<ArrayRef> {
        let mismatch = || Error::DataLoss {
            location: what.to_string(),
            reason: format!(
                "column {path}: its Arrow type {} does not match its feature (the schema changed \
                 between files?)",
                array.data_type()
            ),
        };
        let invalid = |e: arrow_schema::ArrowError| Error::DataLoss {
            location: what.to_string(),
            reason: format!("column {path}: {e}"),
        };
        Ok(match self {
            Fix::Keep => Arc::clone(array),
            Fix::Encoded { feature } => {
                let s = array.as_struct_opt().ok_or_else(mismatch)?;
                encoded_bytes(s, feature, path, what)?
            }
            Fix::Items(item) => {
                if let Some(l) = array.as_list_opt::<i32>() {
                    let values = item.apply(l.values(), path, what)?;
                    let field = item_field(field_of(l.data_type()), values.data_type().clone());
                    Arc::new(
                        ListArray::try_new(field, l.offsets().clone(), values, l.nulls().cloned())
                            .map_err(invalid)?,
                    )
                } else if let Some(l) = array.as_list_opt::<i64>() {
                    let values = item.apply(l.values(), path, what)?;
                    let field = item_field(field_of(l.data_type()), values.data_type().clone());
                    Arc::new(
                        LargeListArray::try_new(
                            field,
                            l.offsets().clone(),
                            values,
                            l.nulls().cloned(),
                        )
                        .map_err(invalid)?,
                    )
                } else if let Some(l) = array.as_fixed_size_list_opt() {
                    let values = item.apply(l.values(), path, what)?;
                    let field = item_field(field_of(l.data_type()), values.data_type().clone());
                    Arc::new(
                        FixedSizeListArray::try_new(
                            field,
                            l.value_length(),
                            values,
                            l.nulls().cloned(),
                        )
                        .map_err(invalid)?,
                    )
                } else {
                    return Err(mismatch());
                }
            }
            Fix::Fields(fixes) => {
                let s = array.as_struct_opt().ok_or_else(mismatch)?;
                let mut fields = Vec::with_capacity(s.num_columns());
                let mut columns = Vec::with_capacity(s.num_columns());
                for (f, c) in s.fields().iter().zip(s.columns()) {
                    let sub = format!("{path}.{}", f.name());
                    let fixed = match fixes.get(f.name()) {
                        Some(fix) => fix.apply(c, &sub, what)?,
                        None => Arc::clone(c),
                    };
                    fields.push(Arc::new(
                        f.as_ref()
                            .clone()
                            .with_data_type(fixed.data_type().clone())
                            .with_nullable(true),
                    ));
                    columns.push(fixed);
                }
                Arc::new(
                    StructArray::try_new(Fields::from(fields), columns, s.nulls().cloned())
                        .map_err(invalid)?,
                )
            }
            Fix::Shape(dims) => fixed_shape(array, dims, true, path, what)?,
        })
    }
}

fn unsupported(path: &str, what: &str) -> Error {
    Error::Unimplemented(format!(
        "column {path}: {what} is not read (supported Hugging Face features: Value, ClassLabel, \
         Image, Audio, Video, Pdf, List/Sequence/LargeList, Array2D to Array5D, Translation, \
         Json, and dictionaries of these); leave the column out with columns=[...]"
    ))
}

/// A list's item field with the fixed item type.
fn item_field(f: &FieldRef, t: DataType) -> FieldRef {
    Arc::new(f.as_ref().clone().with_data_type(t).with_nullable(true))
}

/// The item field of a list type (a placeholder for other types, which
/// never get here).
fn field_of(t: &DataType) -> &FieldRef {
    static ITEM: std::sync::OnceLock<FieldRef> = std::sync::OnceLock::new();
    match t {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => f,
        _ => ITEM.get_or_init(|| Arc::new(Field::new("item", DataType::Null, true))),
    }
}

fn fixed_fields(fixes: &BTreeMap<String, Fix>, fields: &Fields, path: &str) -> Result<Fields> {
    fields
        .iter()
        .map(|f| {
            let sub = format!("{path}.{}", f.name());
            Ok(match fixes.get(f.name()) {
                Some(fix) => Arc::new(
                    f.as_ref()
                        .clone()
                        .with_data_type(fix.data_type(f.data_type(), &sub)?),
                ),
                None => Arc::clone(f),
            })
        })
        .collect()
}

/// The type of nested lists `t` as fixed-size lists of `dims` (a `None`
/// first: a list).
fn shape_type(dims: &[Option<usize>], t: &DataType, first: bool) -> Option<DataType> {
    let Some((&dim, rest)) = dims.split_first() else {
        return Some(t.clone());
    };
    let (DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _)) = t else {
        return None;
    };
    let inner = Arc::new(Field::new(
        f.name(),
        shape_type(rest, f.data_type(), false)?,
        true,
    ));
    match dim {
        Some(n) => Some(DataType::FixedSizeList(inner, i32::try_from(n).ok()?)),
        None if first => Some(DataType::List(inner)),
        None => None,
    }
}

/// Nested lists as fixed-size lists of `dims`; every row must have them.
fn fixed_shape(
    array: &ArrayRef,
    dims: &[Option<usize>],
    first: bool,
    path: &str,
    what: &str,
) -> Result<ArrayRef> {
    let Some((&dim, rest)) = dims.split_first() else {
        return Ok(Arc::clone(array));
    };
    let damaged = |reason: String| Error::DataLoss {
        location: what.to_string(),
        reason: format!("column {path}: {reason}"),
    };
    // Offsets (rebased to the first) and the items they cover.
    let (offsets, items): (Vec<usize>, ArrayRef) = if let Some(l) = array.as_list_opt::<i32>() {
        let o: Vec<usize> = l.offsets().iter().map(|&o| o.max(0) as usize).collect();
        let (start, end) = (
            o.first().copied().unwrap_or(0),
            o.last().copied().unwrap_or(0),
        );
        (
            o.iter().map(|x| x - start).collect(),
            l.values().slice(start, end - start),
        )
    } else if let Some(l) = array.as_list_opt::<i64>() {
        let o: Vec<usize> = l.offsets().iter().map(|&o| o.max(0) as usize).collect();
        let (start, end) = (
            o.first().copied().unwrap_or(0),
            o.last().copied().unwrap_or(0),
        );
        (
            o.iter().map(|x| x - start).collect(),
            l.values().slice(start, end - start),
        )
    } else if let Some(l) = array.as_fixed_size_list_opt() {
        let n = l.value_length().max(0) as usize;
        (
            (0..=l.len()).map(|r| r * n).collect(),
            l.values().slice(l.offset() * n, l.len() * n),
        )
    } else {
        return Err(damaged(format!(
            "an array feature stored as {}, not as lists",
            array.data_type()
        )));
    };
    if array.null_count() > 0 {
        return Err(damaged(
            "an array feature with null rows (declare none: fill them before saving)".into(),
        ));
    }
    let fixed_items = fixed_shape(&items, rest, false, path, what)?;
    let item = Arc::new(Field::new("item", fixed_items.data_type().clone(), true));
    match dim {
        Some(n) => {
            if let Some(r) = offsets.windows(2).position(|w| w[1] - w[0] != n) {
                return Err(damaged(format!(
                    "row {r} has {} items where its shape says {n}",
                    offsets[r + 1] - offsets[r]
                )));
            }
            let n = i32::try_from(n).map_err(|_| damaged(format!("a dimension of {n}")))?;
            FixedSizeListArray::try_new(item, n, fixed_items, None)
                .map(|a| Arc::new(a) as ArrayRef)
                .map_err(|e| damaged(e.to_string()))
        }
        None if first => {
            let offsets = offsets
                .iter()
                .map(|&o| i32::try_from(o))
                .collect::<std::result::Result<Vec<i32>, _>>()
                .map_err(|_| damaged("more items than a list holds".into()))?;
            ListArray::try_new(
                item,
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                fixed_items,
                None,
            )
            .map(|a| Arc::new(a) as ArrayRef)
            .map_err(|e| damaged(e.to_string()))
        }
        None => Err(damaged("a dynamic dimension after the first".into())),
    }
}

/// An `Image`/`Audio` column's bytes: null where the struct is null; a row
/// with a path but no bytes is refused.
fn encoded_bytes(s: &StructArray, feature: &str, path: &str, what: &str) -> Result<ArrayRef> {
    let bytes = s.column_by_name("bytes").ok_or_else(|| Error::DataLoss {
        location: what.to_string(),
        reason: format!("column {path}: the {feature} struct has no bytes field"),
    })?;
    let paths = s.column_by_name("path");
    for row in 0..s.len() {
        if s.is_valid(row) && bytes.is_null(row) {
            let file = paths
                .and_then(|p| p.as_string_opt::<i32>())
                .filter(|p| p.is_valid(row))
                .map(|p| p.value(row).to_string());
            return Err(Error::InvalidArgument(format!(
                "{what}: column {path}, row {row}: the {feature} has no bytes in the dataset, \
                 only {}: tfdata reads no files a dataset points to; save the dataset with the \
                 files embedded (save_to_disk and push_to_hub embed local files), or declare a \
                 null value for the column if the row has none",
                file.map_or("no path".to_string(), |f| format!("the path {f}"))
            )));
        }
    }
    match s.nulls() {
        Some(nulls) if nulls.null_count() > 0 => {
            let struct_null =
                BooleanArray::from((0..s.len()).map(|r| s.is_null(r)).collect::<Vec<bool>>());
            arrow_select::nullif::nullif(bytes.as_ref(), &struct_null)
                .map_err(|e| Error::Internal(format!("{what}: column {path}: nulling rows: {e}")))
        }
        _ => Ok(Arc::clone(bytes)),
    }
}

/// The features applied to each batch.
#[derive(Debug)]
struct FeatureTransform {
    /// The features `dataset_info.json` lists, if the folder has one.
    info_features: Option<Json>,
    /// The columns read (all when `None`): only their features are checked.
    columns: Option<Vec<String>>,
    /// Each read column's fix, once the first file's schema is known.
    fixes: Mutex<Option<Arc<BTreeMap<String, Fix>>>>,
}

impl FeatureTransform {
    fn fixes(&self) -> Result<Arc<BTreeMap<String, Fix>>> {
        self.fixes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| Error::Internal(format!("{OP}: a batch before the schema")))
    }
}

/// The features in a schema's `huggingface` metadata.
fn schema_features(schema: &Schema) -> Option<Json> {
    let meta: Json = serde_json::from_str(schema.metadata().get("huggingface")?).ok()?;
    meta.get("info")?.get("features").cloned()
}

impl BatchTransform for FeatureTransform {
    fn schema(&self, file_schema: &Schema) -> Result<SchemaRef> {
        let features = self
            .info_features
            .clone()
            .or_else(|| schema_features(file_schema));
        let mut fixes = BTreeMap::new();
        let mut fields = Vec::with_capacity(file_schema.fields().len());
        for field in file_schema.fields() {
            let name = field.name();
            let read = self.columns.as_ref().is_none_or(|c| c.contains(name));
            let feature = features.as_ref().and_then(|f| f.get(name));
            let (true, Some(feature)) = (read, feature) else {
                fields.push(Arc::clone(field));
                continue;
            };
            let fix = Fix::of(feature, field.data_type(), name)?;
            let t = fix.data_type(field.data_type(), name)?;
            fields.push(Arc::new(field.as_ref().clone().with_data_type(t)));
            if fix != Fix::Keep {
                fixes.insert(name.clone(), fix);
            }
        }
        *self.fixes.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(fixes));
        Ok(Arc::new(Schema::new_with_metadata(
            fields,
            file_schema.metadata().clone(),
        )))
    }

    fn batch(&self, batch: RecordBatch, what: &str) -> Result<RecordBatch> {
        let fixes = self.fixes()?;
        if fixes.is_empty() {
            return Ok(batch);
        }
        let schema = batch.schema();
        let mut fields = Vec::with_capacity(batch.num_columns());
        let mut columns = Vec::with_capacity(batch.num_columns());
        for (field, column) in schema.fields().iter().zip(batch.columns()) {
            let fixed = match fixes.get(field.name()) {
                Some(fix) => fix.apply(column, field.name(), what)?,
                None => Arc::clone(column),
            };
            fields.push(Arc::new(
                field
                    .as_ref()
                    .clone()
                    .with_data_type(fixed.data_type().clone())
                    .with_nullable(true),
            ));
            columns.push(fixed);
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| {
            Error::Internal(format!("{what}: rebuilding a batch with its features: {e}"))
        })
    }
}

impl Dataset {
    /// `HuggingFaceDataset(path, split, columns, batch_size)`: see
    /// [`self`](mod@self).
    pub fn hugging_face(
        path: &str,
        split: Option<&str>,
        columns: Option<&[&str]>,
        batch_size: Option<i64>,
    ) -> Dataset {
        Dataset::from_op(HuggingFaceSource::new(
            path.to_string(),
            split.map(str::to_string),
            columns.map(|c| c.iter().map(|c| c.to_string()).collect()),
            batch_size,
            Declared::default(),
        ))
    }
}

#[cfg(test)]
mod tests;
