//! The files of a distributed snapshot, as TensorFlow 2.21 names them:
//!
//! ```text
//! <path>/snapshot.metadata | dataset_def.proto | dataset_spec.pb | DONE | ERROR
//! <path>/chunks/chunk_<stream>_<chunk>_<num_elements>
//! <path>/streams/stream_<k>/{DONE,ERROR,owner_worker}
//! <path>/streams/stream_<k>/splits/source_<s>/repetition_<r>/split_<local>_<global>
//! <path>/streams/stream_<k>/uncommitted_chunks/chunk_<c>...
//! <path>/streams/stream_<k>/checkpoints/checkpoint_<chunk>_<num_elements>
//! ```
//!
//! Paths are strings joined with `/`, so the same functions serve local
//! directories and object-store URLs. Parsers refuse any name that is not
//! exactly what TensorFlow writes, naming it, so a stray file in a snapshot
//! directory is an error rather than a guess.

use std::fmt;

use tfdata_core::{Error, Result};

/// How a snapshot's chunk files are compressed: `DistributedSnapshotMetadata.compression`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SnapshotCompression {
    /// `""`: plain TFRecord.
    None,
    /// `"SNAPPY"`: TensorFlow's block-framed Snappy stream; what `"AUTO"` becomes.
    #[default]
    Snappy,
    /// `"GZIP"`.
    Gzip,
    /// `"ZLIB"`.
    Zlib,
}

impl SnapshotCompression {
    /// The metadata's spelling (`""`, `"SNAPPY"`, `"GZIP"`, `"ZLIB"`).
    pub fn parse(value: &str) -> Result<Self> {
        match value {
            "" => Ok(Self::None),
            "SNAPPY" => Ok(Self::Snappy),
            "GZIP" => Ok(Self::Gzip),
            "ZLIB" => Ok(Self::Zlib),
            other => Err(Error::InvalidArgument(format!(
                "snapshot compression {other:?} is not supported; valid values are \"\" (none), \
                 \"SNAPPY\", \"GZIP\" and \"ZLIB\""
            ))),
        }
    }

    /// What the user may pass to `distributed_save`: the metadata's values,
    /// `"AUTO"` (Snappy, as TensorFlow's op rewrites it) and `"NONE"`.
    pub fn from_user(value: Option<&str>) -> Result<Self> {
        match value {
            None | Some("NONE") => Ok(Self::None),
            Some("AUTO") => Ok(Self::Snappy),
            Some(other) => Self::parse(other),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "",
            Self::Snappy => "SNAPPY",
            Self::Gzip => "GZIP",
            Self::Zlib => "ZLIB",
        }
    }
}

impl fmt::Display for SnapshotCompression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub const DONE: &str = "DONE";
pub const ERROR: &str = "ERROR";
pub const METADATA: &str = "snapshot.metadata";
pub const DATASET_DEF: &str = "dataset_def.proto";
pub const DATASET_SPEC: &str = "dataset_spec.pb";
pub const OWNER_WORKER: &str = "owner_worker";
/// Files being written atomically end in this; listings skip them.
pub const TEMP_SUFFIX: &str = ".tmp";

/// `base` joined with `name` by one `/`.
pub fn join(base: &str, name: &str) -> String {
    if base.ends_with('/') {
        format!("{base}{name}")
    } else {
        format!("{base}/{name}")
    }
}

pub fn metadata_file(snapshot: &str) -> String {
    join(snapshot, METADATA)
}

pub fn dataset_def_file(snapshot: &str) -> String {
    join(snapshot, DATASET_DEF)
}

pub fn dataset_spec_file(snapshot: &str) -> String {
    join(snapshot, DATASET_SPEC)
}

pub fn done_file(snapshot: &str) -> String {
    join(snapshot, DONE)
}

pub fn error_file(snapshot: &str) -> String {
    join(snapshot, ERROR)
}

/// Where committed chunks are: what readers list.
pub fn chunks_dir(snapshot: &str) -> String {
    join(snapshot, "chunks")
}

/// The dispatcher's scratch space for prefetched splits.
pub fn prefetched_splits_dir(snapshot: &str) -> String {
    join(snapshot, "prefetched_splits")
}

pub fn streams_dir(snapshot: &str) -> String {
    join(snapshot, "streams")
}

pub fn stream_dir(snapshot: &str, stream: i64) -> String {
    join(&streams_dir(snapshot), &format!("stream_{stream}"))
}

pub fn stream_done_file(snapshot: &str, stream: i64) -> String {
    join(&stream_dir(snapshot, stream), DONE)
}

pub fn stream_error_file(snapshot: &str, stream: i64) -> String {
    join(&stream_dir(snapshot, stream), ERROR)
}

pub fn owner_worker_file(snapshot: &str, stream: i64) -> String {
    join(&stream_dir(snapshot, stream), OWNER_WORKER)
}

pub fn splits_dir(snapshot: &str, stream: i64) -> String {
    join(&stream_dir(snapshot, stream), "splits")
}

pub fn source_dir(snapshot: &str, stream: i64, source: i64) -> String {
    join(&splits_dir(snapshot, stream), &format!("source_{source}"))
}

pub fn repetition_dir(snapshot: &str, stream: i64, source: i64, repetition: i64) -> String {
    join(
        &source_dir(snapshot, stream, source),
        &format!("repetition_{repetition}"),
    )
}

pub fn split_file(
    snapshot: &str,
    stream: i64,
    source: i64,
    repetition: i64,
    local: i64,
    global: i64,
) -> String {
    join(
        &repetition_dir(snapshot, stream, source, repetition),
        &format!("split_{local}_{global}"),
    )
}

pub fn uncommitted_chunks_dir(snapshot: &str, stream: i64) -> String {
    join(&stream_dir(snapshot, stream), "uncommitted_chunks")
}

pub fn checkpoints_dir(snapshot: &str, stream: i64) -> String {
    join(&stream_dir(snapshot, stream), "checkpoints")
}

/// A committed chunk's name: `chunk_<stream>_<chunk>_<num_elements>`.
pub fn chunk_name(stream: i64, chunk: i64, num_elements: i64) -> String {
    format!("chunk_{stream}_{chunk}_{num_elements}")
}

/// A checkpoint's name: `checkpoint_<chunk>_<num_elements>`.
pub fn checkpoint_name(chunk: i64, num_elements: i64) -> String {
    format!("checkpoint_{chunk}_{num_elements}")
}

/// A committed chunk, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChunkName {
    pub stream: i64,
    pub chunk: i64,
    pub num_elements: i64,
}

/// A split file, from its name: its index among the splits its stream got
/// from this source (`local`) and among the whole snapshot's (`global`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SplitName {
    pub local: i64,
    pub global: i64,
}

/// `chunk_<stream>_<chunk>_<num_elements>`.
pub fn parse_chunk_name(name: &str) -> Result<ChunkName> {
    match numbers(name, "chunk_", 3).as_deref() {
        Some(&[stream, chunk, num_elements]) => Ok(ChunkName {
            stream,
            chunk,
            num_elements,
        }),
        _ => Err(Error::InvalidArgument(format!(
            "invalid chunk file name {name:?}: expected chunk_<stream_index>_<stream_chunk_index>_<num_elements>"
        ))),
    }
}

/// `split_<local>_<global>`, with `local <= global`.
pub fn parse_split_name(name: &str) -> Result<SplitName> {
    match numbers(name, "split_", 2).as_deref() {
        Some(&[local, global]) if local <= global => Ok(SplitName { local, global }),
        Some(&[local, global]) => Err(Error::InvalidArgument(format!(
            "invalid split file name {name:?}: the local split index {local} exceeds the global \
             split index {global}"
        ))),
        _ => Err(Error::InvalidArgument(format!(
            "invalid split file name {name:?}: expected split_<local_split_index>_<global_split_index>"
        ))),
    }
}

/// `checkpoint_<chunk>_<num_elements>`: (chunk, num_elements).
pub fn parse_checkpoint_name(name: &str) -> Result<(i64, i64)> {
    match numbers(name, "checkpoint_", 2).as_deref() {
        Some(&[chunk, num_elements]) => Ok((chunk, num_elements)),
        _ => Err(Error::InvalidArgument(format!(
            "invalid checkpoint file name {name:?}: expected checkpoint_<chunk_index>_<num_elements>"
        ))),
    }
}

/// `<prefix><kind>_<n>` directory names (`stream_3`, `source_0`,
/// `repetition_2`): the number.
pub fn parse_indexed_dir(name: &str, kind: &str) -> Result<i64> {
    let prefix = format!("{kind}_");
    match numbers(name, &prefix, 1).as_deref() {
        Some(&[n]) => Ok(n),
        _ => Err(Error::InvalidArgument(format!(
            "invalid directory name {name:?}: expected {kind}_<index>"
        ))),
    }
}

/// The `count` non-negative decimal numbers after `prefix`, separated by `_`.
fn numbers(name: &str, prefix: &str, count: usize) -> Option<Vec<i64>> {
    let rest = name.strip_prefix(prefix)?;
    let parts: Vec<&str> = rest.split('_').collect();
    if parts.len() != count {
        return None;
    }
    parts
        .iter()
        .map(|p| {
            // Digits only: no sign, no spaces, no empty parts.
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse::<i64>().ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_tensorflows() {
        assert_eq!(
            split_file("/s", 2, 0, 1, 3, 7),
            "/s/streams/stream_2/splits/source_0/repetition_1/split_3_7"
        );
        assert_eq!(
            join(&chunks_dir("s3://b/p/"), &chunk_name(0, 1, 499)),
            "s3://b/p/chunks/chunk_0_1_499"
        );
        assert_eq!(
            owner_worker_file("/s", 0),
            "/s/streams/stream_0/owner_worker"
        );
        assert_eq!(
            join(&checkpoints_dir("/s", 1), &checkpoint_name(4, 100)),
            "/s/streams/stream_1/checkpoints/checkpoint_4_100"
        );
    }

    #[test]
    fn names_parse_exactly() {
        assert_eq!(
            parse_chunk_name("chunk_0_1_499").unwrap(),
            ChunkName {
                stream: 0,
                chunk: 1,
                num_elements: 499
            }
        );
        assert_eq!(
            parse_split_name("split_3_7").unwrap(),
            SplitName {
                local: 3,
                global: 7
            }
        );
        assert_eq!(parse_checkpoint_name("checkpoint_4_100").unwrap(), (4, 100));
        assert_eq!(parse_indexed_dir("stream_12", "stream").unwrap(), 12);
        for bad in [
            "chunk_0_1",
            "chunk_0_1_2_3",
            "chunk_-1_0_0",
            "chunk_0_x_1",
            "chunk_0__1",
            "chunk_0_1_499.tmp",
            "chunk_0_1_99999999999999999999",
        ] {
            let err = parse_chunk_name(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
        assert!(
            parse_split_name("split_8_7")
                .unwrap_err()
                .to_string()
                .contains("exceeds")
        );
        assert!(parse_indexed_dir("stream_", "stream").is_err());
        assert!(parse_indexed_dir("source_1", "stream").is_err());
    }

    #[test]
    fn compression_names() {
        for c in [
            SnapshotCompression::None,
            SnapshotCompression::Snappy,
            SnapshotCompression::Gzip,
            SnapshotCompression::Zlib,
        ] {
            assert_eq!(SnapshotCompression::parse(c.as_str()).unwrap(), c);
        }
        assert_eq!(
            SnapshotCompression::from_user(Some("AUTO")).unwrap(),
            SnapshotCompression::Snappy
        );
        assert_eq!(
            SnapshotCompression::from_user(None).unwrap(),
            SnapshotCompression::None
        );
        assert!(SnapshotCompression::parse("snappy").is_err());
    }
}
