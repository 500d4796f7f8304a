//! Writing whole snapshot directories without a service, for tests and
//! interop checks: what a finished (or unfinished) `distributed_save`
//! leaves for readers — `snapshot.metadata`, `dataset_spec.pb`, committed
//! chunks and `DONE` or `ERROR` — written with [`ChunkWriter`] and
//! committed the way the service does (a `.tmp` file renamed into place).
//! No `streams/` or `dataset_def.proto`: readers do not look at them.

use std::io::Write as _;

use prost::Message;
use tfdata_core::{Element, Result};
use tfdata_proto::data::DistributedSnapshotMetadata;

use super::chunk::ChunkWriter;
use super::layout::{self, SnapshotCompression};
use super::metadata;
use crate::io::fs::FileSystem;
use crate::spec::Structure;
use crate::spec_coder;
use tfdata_proto::tensorflow::StatusProto as SnapshotStatus;

/// Writes `file` atomically: to `<file>__testing.tmp` first, then renamed.
pub fn write_atomically(fs: &dyn FileSystem, file: &str, bytes: &[u8]) -> Result<()> {
    let tmp = format!("{file}__testing{}", layout::TEMP_SUFFIX);
    let mut out = fs.create(&tmp)?;
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| tfdata_core::Error::io(format!("writing {tmp}"), e))?;
    drop(out);
    fs.rename(&tmp, file)
}

/// Starts a snapshot at `path`: its directories, `snapshot.metadata` and
/// `dataset_spec.pb`, as the dispatcher's `Snapshot` RPC writes them.
pub fn start_snapshot(
    fs: &dyn FileSystem,
    path: &str,
    element_spec: &Structure,
    compression: SnapshotCompression,
) -> Result<()> {
    fs.create_dir_all(&layout::chunks_dir(path))?;
    let spec = spec_coder::to_structured_value(element_spec).encode_to_vec();
    let meta = DistributedSnapshotMetadata {
        element_spec: spec.clone().into(),
        compression: compression.as_str().to_string(),
    };
    write_atomically(
        fs,
        &layout::metadata_file(path),
        metadata::to_text(&meta).as_bytes(),
    )?;
    write_atomically(fs, &layout::dataset_spec_file(path), &spec)
}

/// Writes `elements` as the committed chunk `chunk_<stream>_<chunk>_<n>`:
/// into a `.tmp` file in `chunks/`, then renamed (readers skip the former).
pub fn commit_chunk(
    fs: &dyn FileSystem,
    path: &str,
    compression: SnapshotCompression,
    stream: i64,
    chunk: i64,
    elements: &[Element],
) -> Result<String> {
    let dir = layout::chunks_dir(path);
    let name = layout::chunk_name(stream, chunk, elements.len() as i64);
    let tmp = layout::join(&dir, &format!("{name}__testing{}", layout::TEMP_SUFFIX));
    let mut w = ChunkWriter::create(fs, &tmp, compression)?;
    for e in elements {
        w.write(e)?;
    }
    w.finish()?;
    let committed = layout::join(&dir, &name);
    fs.rename(&tmp, &committed)?;
    Ok(committed)
}

/// Marks the snapshot finished (`DONE`, empty, as TensorFlow writes it).
pub fn finish_snapshot(fs: &dyn FileSystem, path: &str) -> Result<()> {
    write_atomically(fs, &layout::done_file(path), b"")
}

/// Marks the snapshot failed (`ERROR`, a text `StatusProto`).
pub fn fail_snapshot(fs: &dyn FileSystem, path: &str, status: &SnapshotStatus) -> Result<()> {
    write_atomically(
        fs,
        &layout::error_file(path),
        metadata::status_to_text(status).as_bytes(),
    )
}

/// A whole finished snapshot of `elements`, `per_chunk` elements per chunk
/// spread over `streams` streams (chunk `c` goes to stream `c % streams`).
pub fn write_snapshot(
    fs: &dyn FileSystem,
    path: &str,
    element_spec: &Structure,
    compression: SnapshotCompression,
    elements: &[Element],
    per_chunk: usize,
    streams: i64,
) -> Result<()> {
    start_snapshot(fs, path, element_spec, compression)?;
    let streams = streams.max(1);
    for (c, chunk) in elements.chunks(per_chunk.max(1)).enumerate() {
        let c = c as i64;
        commit_chunk(fs, path, compression, c % streams, c / streams, chunk)?;
    }
    finish_snapshot(fs, path)
}
