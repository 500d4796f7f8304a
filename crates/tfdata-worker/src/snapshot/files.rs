//! A stream writer's files (spec §8.2): what its committed chunks say about
//! its position, cleaning up uncommitted chunks, `dataset_def.proto`, and
//! the small marker files (`DONE`, `ERROR`) written atomically.

use prost::Message;
use tfdata_core::error::code_name;
use tfdata_core::{Error, Result};
use tfdata_dataset::io::fs::FileSystem;
use tfdata_dataset::snapshot::layout;
use tfdata_proto::data as wire;

/// Most files a listing of `chunks/` or `uncommitted_chunks/` may hold.
pub const MAX_LISTED_FILES: usize = 1 << 24;
/// Largest `dataset_def.proto` read (protobuf's own limit).
pub const MAX_DATASET_DEF_BYTES: u64 = 2 << 30;
/// What separates an uncommitted chunk's index from its unique suffix
/// (TensorFlow's name: `chunk_<index>_CHUNK_SHARDS_<unique>`).
pub const CHUNK_SHARDS: &str = "_CHUNK_SHARDS_";

/// What a stream has committed: how many elements, and the next chunk index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Committed {
    pub num_elements: u64,
    pub next_chunk: i64,
}

/// This stream's committed chunks in `<base>/chunks/`, which must be
/// numbered `0..n` without gaps (a stream commits them in order).
pub fn committed(fs: &dyn FileSystem, base_path: &str, stream: i64) -> Result<Committed> {
    let dir = layout::chunks_dir(base_path);
    let names = bounded(fs.list(&dir)?, &dir)?;
    let mut chunks: Vec<(i64, i64)> = Vec::new();
    for name in &names {
        if name.ends_with(layout::TEMP_SUFFIX) {
            continue;
        }
        let chunk = layout::parse_chunk_name(name).map_err(|e| Error::DataLoss {
            location: layout::join(&dir, name),
            reason: e.to_string(),
        })?;
        if chunk.stream == stream {
            chunks.push((chunk.chunk, chunk.num_elements));
        }
    }
    chunks.sort_unstable();
    let mut total: u64 = 0;
    for (expected, &(chunk, num_elements)) in chunks.iter().enumerate() {
        if chunk != expected as i64 {
            return Err(Error::DataLoss {
                location: dir,
                reason: format!(
                    "stream {stream}'s committed chunks are not numbered 0 to {}: chunk {expected} \
                     is {}",
                    chunks.len() - 1,
                    if chunk > expected as i64 {
                        "missing"
                    } else {
                        "there twice"
                    }
                ),
            });
        }
        total = total.saturating_add(num_elements as u64);
    }
    Ok(Committed {
        num_elements: total,
        next_chunk: chunks.len() as i64,
    })
}

/// Deletes every uncommitted chunk of the stream: their elements were not
/// committed (or, where a commit copied the file but died before deleting
/// it, are committed already), so they are written again or not at all.
/// Returns how many files were deleted.
pub fn discard_uncommitted(fs: &dyn FileSystem, base_path: &str, stream: i64) -> Result<usize> {
    let dir = layout::uncommitted_chunks_dir(base_path, stream);
    let names = bounded(fs.list(&dir)?, &dir)?;
    for name in &names {
        fs.delete(&layout::join(&dir, name))?;
    }
    Ok(names.len())
}

/// `uncommitted_chunks/chunk_<index>_CHUNK_SHARDS_<unique>`.
pub fn uncommitted_chunk_file(base_path: &str, stream: i64, chunk: i64, unique: &str) -> String {
    layout::join(
        &layout::uncommitted_chunks_dir(base_path, stream),
        &format!("chunk_{chunk}{CHUNK_SHARDS}{unique}"),
    )
}

/// `<base>/dataset_def.proto`: a binary `DatasetDef`.
pub fn read_dataset_def(fs: &dyn FileSystem, base_path: &str) -> Result<wire::DatasetDef> {
    let path = layout::dataset_def_file(base_path);
    let size = fs.file_size(&path)?;
    if size > MAX_DATASET_DEF_BYTES {
        return Err(Error::DataLoss {
            location: path,
            reason: format!("{size} bytes is more than a DatasetDef may hold"),
        });
    }
    let bytes = fs.read_all(&path)?;
    wire::DatasetDef::decode(bytes).map_err(|e| Error::DataLoss {
        location: path,
        reason: format!("not a DatasetDef: {e}"),
    })
}

/// Writes `contents` to `path` under a temporary name, then renames it, so
/// readers see all of it or nothing.
pub fn write_atomically(fs: &dyn FileSystem, path: &str, contents: &[u8]) -> Result<()> {
    use std::io::Write;
    let temp = format!("{path}__{}{}", unique_suffix(), layout::TEMP_SUFFIX);
    let mut out = fs.create(&temp)?;
    out.write_all(contents)
        .and_then(|()| out.flush())
        .map_err(|e| Error::io(format!("writing {temp}"), e))?;
    drop(out);
    fs.rename(&temp, path)
}

/// Writes the stream's `ERROR` file: the cause, as TensorFlow's writer does.
pub fn write_error(fs: &dyn FileSystem, base_path: &str, stream: i64, err: &Error) -> Result<()> {
    fs.create_dir_all(&layout::stream_dir(base_path, stream))?;
    write_atomically(
        fs,
        &layout::stream_error_file(base_path, stream),
        status_text(err).as_bytes(),
    )
}

/// A name part no other writer (process, thread, attempt) uses.
pub fn unique_suffix() -> String {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let h = std::collections::hash_map::RandomState::new().hash_one((
        std::process::id(),
        std::time::SystemTime::now(),
        n,
    ));
    format!("{h:016x}")
}

/// What TensorFlow writes in a stream's `ERROR` file: the status as
/// `absl::Status::ToString` prints it, `CODE_NAME: message`.
pub fn status_text(err: &Error) -> String {
    format!("{}: {}", code_name(err.code()), err)
}

fn bounded(names: Vec<String>, dir: &str) -> Result<Vec<String>> {
    if names.len() > MAX_LISTED_FILES {
        return Err(Error::FailedPrecondition(format!(
            "{dir} holds {} files, more than a stream writer lists ({MAX_LISTED_FILES})",
            names.len()
        )));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn local_fs() -> Arc<dyn FileSystem> {
        tfdata_dataset::io::registry::file_system("/").unwrap()
    }

    fn touch(path: &str) {
        std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
        std::fs::write(path, b"x").unwrap();
    }

    #[test]
    fn committed_chunks_give_the_position() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        let fs = local_fs();
        // No chunks directory yet.
        assert_eq!(committed(&*fs, base, 0).unwrap(), Committed::default());
        let chunks = layout::chunks_dir(base);
        for name in [
            "chunk_0_0_10",
            "chunk_0_1_7",
            "chunk_0_2_1",
            "chunk_1_0_99",
            "chunk_0_3_5__abc.tmp",
        ] {
            touch(&layout::join(&chunks, name));
        }
        assert_eq!(
            committed(&*fs, base, 0).unwrap(),
            Committed {
                num_elements: 18,
                next_chunk: 3
            }
        );
        assert_eq!(
            committed(&*fs, base, 1).unwrap(),
            Committed {
                num_elements: 99,
                next_chunk: 1
            }
        );
        // A gap: the position cannot be derived.
        touch(&layout::join(&chunks, "chunk_1_2_4"));
        let err = committed(&*fs, base, 1).unwrap_err();
        assert!(err.to_string().contains("chunk 1 is missing"), "{err}");
        // A stranger in chunks/.
        touch(&layout::join(&chunks, "notes.txt"));
        let err = committed(&*fs, base, 0).unwrap_err();
        assert!(err.to_string().contains("notes.txt"), "{err}");
    }

    /// Restart reconciliation: uncommitted files go, whether or not their
    /// commit got as far as the copy (object stores); committed ones stay.
    #[test]
    fn uncommitted_chunks_are_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        let fs = local_fs();
        assert_eq!(discard_uncommitted(&*fs, base, 2).unwrap(), 0);
        let twin = uncommitted_chunk_file(base, 2, 0, "aa");
        let orphan = uncommitted_chunk_file(base, 2, 1, "bb");
        touch(&twin);
        touch(&orphan);
        touch(&layout::join(&layout::chunks_dir(base), "chunk_2_0_3"));
        assert_eq!(discard_uncommitted(&*fs, base, 2).unwrap(), 2);
        assert!(!std::path::Path::new(&twin).exists());
        assert!(!std::path::Path::new(&orphan).exists());
        assert_eq!(committed(&*fs, base, 2).unwrap().num_elements, 3);
        assert!(twin.ends_with("/streams/stream_2/uncommitted_chunks/chunk_0_CHUNK_SHARDS_aa"));
    }

    #[test]
    fn marker_files_and_dataset_defs() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        let fs = local_fs();
        let done = layout::stream_done_file(base, 0);
        std::fs::create_dir_all(layout::stream_dir(base, 0)).unwrap();
        write_atomically(&*fs, &done, b"").unwrap();
        assert_eq!(std::fs::read(&done).unwrap(), b"");
        assert_eq!(
            std::fs::read_dir(layout::stream_dir(base, 0))
                .unwrap()
                .count(),
            1,
            "no temporary file left"
        );

        let err = read_dataset_def(&*fs, base).unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{err}");
        std::fs::write(layout::dataset_def_file(base), b"\xff\xff\xff").unwrap();
        let err = read_dataset_def(&*fs, base).unwrap_err();
        assert!(matches!(err, Error::DataLoss { .. }), "{err}");
        assert!(err.to_string().contains("dataset_def.proto"), "{err}");

        let text = status_text(&Error::DataLoss {
            location: "x".into(),
            reason: "y".into(),
        });
        assert!(text.starts_with("DATA_LOSS: "), "{text}");
    }
}
