//! A snapshot stream's split files on disk, as the dispatcher writes them
//! before answering `GetSnapshotSplit`
//! (`streams/stream_<k>/splits/source_<s>/repetition_<r>/split_<local>_<global>`):
//! one source's files found by local index, and a file's split read.

use std::collections::BTreeMap;

use prost::Message;
use tfdata_core::tfrecord::{self, Tail};
use tfdata_core::{Error, Result, Tensor};
use tfdata_dataset::io::fs::FileSystem;
use tfdata_dataset::snapshot::layout;
use tfdata_proto::tensorflow::TensorProto;

/// Most split files one source of a stream may have (a `range(n)` source
/// has one split per element); past this the stream fails rather than hold
/// an unbounded listing.
pub const MAX_SPLIT_FILES: usize = 1 << 24;
/// Largest split file read (a split is a scalar or a file name).
pub const MAX_SPLIT_FILE_BYTES: u64 = 16 << 20;

/// A split file: its repetition and path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SplitFile {
    pub(super) repetition: i64,
    pub(super) path: String,
}

/// The split files of one source of a stream with local index `from` or
/// more, which must be contiguous from `from`.
pub(super) fn split_files(
    fs: &dyn FileSystem,
    base_path: &str,
    stream: i64,
    source: i64,
    from: i64,
) -> Result<BTreeMap<i64, SplitFile>> {
    let dir = layout::source_dir(base_path, stream, source);
    // A glob, not a listing of the repetition directories: object stores
    // have no directories to list.
    let paths = fs.glob(&format!("{}/repetition_*/split_*", escape_glob(&dir)))?;
    if paths.len() > MAX_SPLIT_FILES {
        return Err(Error::FailedPrecondition(format!(
            "{dir} holds {} split files, more than a stream writer replays ({MAX_SPLIT_FILES})",
            paths.len()
        )));
    }
    let mut files = BTreeMap::new();
    for path in paths {
        let mut parts = path.rsplit('/');
        let (Some(name), Some(repetition_dir)) = (parts.next(), parts.next()) else {
            continue;
        };
        if name.ends_with(layout::TEMP_SUFFIX) {
            continue;
        }
        let repetition = layout::parse_indexed_dir(repetition_dir, "repetition")?;
        let split = layout::parse_split_name(name)?;
        if split.local < from {
            continue;
        }
        let file = SplitFile {
            repetition,
            path: path.clone(),
        };
        if let Some(other) = files.insert(split.local, file) {
            return Err(Error::DataLoss {
                location: dir,
                reason: format!(
                    "two split files have local index {}: {} and {path}",
                    split.local, other.path
                ),
            });
        }
    }
    if let (Some((&first, _)), Some((&last, _))) = (files.first_key_value(), files.last_key_value())
        && (first != from || (last - first + 1) as usize != files.len())
    {
        return Err(Error::DataLoss {
            location: dir,
            reason: format!(
                "split files from local index {from} are not contiguous: {} files between {first} \
                 and {last}",
                files.len()
            ),
        });
    }
    Ok(files)
}

/// A split file: one TFRecord holding a `TensorProto`.
pub(super) fn read_split_file(fs: &dyn FileSystem, path: &str) -> Result<Tensor> {
    let size = fs.file_size(path)?;
    if size > MAX_SPLIT_FILE_BYTES {
        return Err(Error::DataLoss {
            location: path.to_string(),
            reason: format!("a split file of {size} bytes (at most {MAX_SPLIT_FILE_BYTES})"),
        });
    }
    let bytes = fs.read_all(path)?;
    let records = match tfrecord::read_records(path, &bytes)? {
        (records, Tail::Clean) => records,
        (_, Tail::Torn { offset }) => {
            return Err(Error::DataLoss {
                location: format!("{path} at offset {offset}"),
                reason: "split record truncated".into(),
            });
        }
    };
    let [record] = records.as_slice() else {
        return Err(Error::DataLoss {
            location: path.to_string(),
            reason: format!("a split file holds one record, this one {}", records.len()),
        });
    };
    let proto = TensorProto::decode(record.clone()).map_err(|e| Error::DataLoss {
        location: path.to_string(),
        reason: format!("not a TensorProto: {e}"),
    })?;
    tfdata_core::element::tensor_from_proto(&proto).map_err(|e| Error::DataLoss {
        location: path.to_string(),
        reason: e.to_string(),
    })
}

/// `text` with the glob metacharacters escaped.
pub(super) fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
