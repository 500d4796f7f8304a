//! Where a Hugging Face dataset's files are: the layouts
//! `huggingface_dataset` reads (see [`super`]), from the folder's own
//! metadata files and file names, never from the Hub.

use std::collections::BTreeMap;

use serde_json::Value as Json;
use tfdata_core::{Error, Result};

use super::OP;

/// `state.json`, `dataset_info.json`, `dataset_dict.json`, `refs/main` at
/// most: they describe a dataset, they do not hold it.
const MAX_METADATA_FILE_BYTES: u64 = 16 << 20;

/// How to make what this op reads, for errors.
const HOW_TO_COPY: &str = "huggingface_dataset reads local copies only (no network): make one \
     with `datasets.load_dataset(name, split=...).save_to_disk(path)`, or download the Parquet \
     files with `huggingface_hub.snapshot_download(repo_id, repo_type=\"dataset\", \
     local_dir=path)`";

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
pub(super) fn split_of_file(name: &str) -> String {
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
pub(super) fn escape(path: &str) -> String {
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
