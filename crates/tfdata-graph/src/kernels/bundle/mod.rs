//! V2 checkpoints (`tf.raw_ops.SaveV2`, `RestoreV2`, `MergeV2Checkpoints`):
//! tensors saved to and restored from TensorFlow's tensor bundle files
//! ([`format`], [`table`]), which TensorFlow reads and writes too.
//!
//! What is left out, refused rather than done wrong: partitioned-variable
//! slices (a non-empty `shape_and_slices`, or a checkpoint entry made of
//! slices), `DT_VARIANT` tensors, and big-endian bundles.

mod format;
mod table;
mod v1;

use std::collections::BTreeMap;
use std::io::Read;

use prost::Message;
use tfdata_core::{DType, Error, Result, Tensor};

use super::file_write::{create_file, dirname};
use super::layout::{shape_str, take};
use super::lookup::tf_name;
use super::{Compute, KernelDef, check_size};
use crate::attrs::NodeAttrs;
use format::{Entry, Header};

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "SaveV2",
        outputs: |_| Ok(vec![]),
        build: save_v2,
    },
    KernelDef {
        op: "RestoreV2",
        outputs: |a| Ok(vec![("tensors", a.dtypes("dtypes")?.len())]),
        build: restore_v2,
    },
    KernelDef {
        op: "MergeV2Checkpoints",
        outputs: |_| Ok(vec![]),
        build: merge_v2,
    },
    KernelDef {
        op: "Save",
        outputs: |_| Ok(vec![]),
        build: |a| save_v1(a, false),
    },
    KernelDef {
        op: "SaveSlices",
        outputs: |_| Ok(vec![]),
        build: |a| save_v1(a, true),
    },
    KernelDef {
        op: "Restore",
        outputs: |_| Ok(vec![("tensor", 1)]),
        build: restore_v1,
    },
    KernelDef {
        op: "RestoreSlice",
        outputs: |_| Ok(vec![("tensor", 1)]),
        build: restore_slice_v1,
    },
];

fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

/// The one string of `t` (TensorFlow takes the prefix from any one-element
/// tensor).
fn one_string(what: &str, t: &Tensor) -> Result<String> {
    match t.string_values()? {
        [s] => Ok(String::from_utf8_lossy(s).into_owned()),
        _ => Err(invalid(format!(
            "Input {what} should have a single element, got {} in shape {}",
            t.num_elements(),
            shape_str(t.shape())
        ))),
    }
}

fn strings(t: &Tensor) -> Result<Vec<String>> {
    Ok(t.string_values()?
        .iter()
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect())
}

/// Refuses partitioned-variable slices, which tfdata does not implement.
fn no_slices(slices: &[String]) -> Result<()> {
    if let Some(s) = slices.iter().find(|s| !s.is_empty()) {
        return Err(Error::Unimplemented(format!(
            "checkpoint slices (shape_and_slices {s:?}): tfdata saves and restores whole tensors \
             only"
        )));
    }
    Ok(())
}

/// Reads the file at `path` whole, refusing one larger than the tensor
/// limit.
fn read_limited(path: &str) -> Result<Vec<u8>> {
    let limit = crate::MAX_TENSOR_BYTES as u64;
    let mut out = Vec::new();
    tfdata_dataset::io::open(path)?
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::io(format!("reading {path}"), e))?;
    if out.len() as u64 > limit {
        check_size(path, DType::UInt8, limit + 1)?;
    }
    Ok(out)
}

/// A bundle's index: its header and its entries by key.
struct Index {
    header: Header,
    entries: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Index {
    fn read(prefix: &str) -> Result<Index> {
        let path = format::index_name(prefix);
        let file = read_limited(&path)?;
        let mut entries: BTreeMap<Vec<u8>, Vec<u8>> =
            table::read_table(&path, &file)?.into_iter().collect();
        let header_bytes = entries.remove(&b""[..]).ok_or_else(|| Error::DataLoss {
            location: path.clone(),
            reason: "Unable to read file. Perhaps the file is corrupt or was produced by a newer \
                     version of TensorFlow with format changes (failed to seek to header entry)"
                .into(),
        })?;
        let header: Header = format::parse(b"", &header_bytes)?;
        if header.endianness != 0 {
            return Err(Error::Unimplemented(format!(
                "{path}: a big-endian checkpoint"
            )));
        }
        let producer = header.version.as_ref().map_or(0, |v| v.producer);
        let min_consumer = header.version.as_ref().map_or(0, |v| v.min_consumer);
        if min_consumer > format::VERSION {
            return Err(invalid(format!(
                "Checkpoint min consumer version {min_consumer} above current version {} for \
                 TensorFlow",
                format::VERSION
            )));
        }
        if producer < 0 || header.num_shards < 0 {
            return Err(Error::DataLoss {
                location: path,
                reason: "bad bundle header".into(),
            });
        }
        Ok(Index { header, entries })
    }

    fn entry(&self, key: &str) -> Result<Entry> {
        let value = self
            .entries
            .get(key.as_bytes())
            .ok_or_else(|| Error::NotFound {
                what: "Key",
                id: format!("{key} not found in checkpoint;"),
            })?;
        format::parse(key.as_bytes(), value)
    }
}

/// Writes a bundle of `tensors` under `prefix`, as one shard, entries by
/// key: the data file first, then the index that makes it visible, each
/// under a temporary name moved into place.
fn write_bundle(prefix: &str, tensors: &BTreeMap<String, &Tensor>) -> Result<()> {
    let mut data = Vec::new();
    let mut index = table::TableWriter::new();
    index.add(b"", &format::header(1).encode_to_vec());
    let mut entries = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        entries.push((name, format::encode(t, &mut data)));
    }
    for (name, entry) in entries {
        index.add(name.as_bytes(), &entry.encode_to_vec());
    }
    make_dir(dirname(prefix))?;
    commit(&format::data_name(prefix, 0, 1), &data)?;
    commit(&format::index_name(prefix), &index.finish())
}

/// Makes the directory `dir` (not its parents: TensorFlow's `CreateDir`,
/// which a checkpoint's writer calls on its prefix's directory). Object
/// stores have no directories.
fn make_dir(dir: &str) -> Result<()> {
    if dir.is_empty() || tfdata_dataset::io::fs::scheme(dir).is_some_and(|s| s != "file") {
        return Ok(());
    }
    let local = dir.strip_prefix("file://").unwrap_or(dir);
    match std::fs::create_dir(local) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(Error::io(
            format!("{dir}: creating the checkpoint's directory"),
            e,
        )),
        _ => Ok(()),
    }
}

/// Writes `bytes` as `path` through a temporary file and a rename, so a
/// reader never sees half a file.
fn commit(path: &str, bytes: &[u8]) -> Result<()> {
    // Unique per write: two calls in this process never share a temporary.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = format!("{path}.tempstate{}-{n}", std::process::id());
    create_file(&temp, bytes)?;
    tfdata_dataset::io::file_system(path)?.rename(&temp, path)
}

fn save_v2(attrs: &NodeAttrs) -> Result<Compute> {
    let n = attrs.dtypes("dtypes")?.len();
    Ok(Box::new(move |inputs| {
        if inputs.len() != n + 3 {
            return Err(invalid(format!(
                "SaveV2: expected {} inputs, got {}",
                n + 3,
                inputs.len()
            )));
        }
        let mut inputs = inputs.into_iter();
        let mut next = || {
            inputs
                .next()
                .ok_or_else(|| invalid("SaveV2: missing input"))
        };
        let (prefix, names, slices) = (next()?, next()?, next()?);
        let tensors: Vec<Tensor> = inputs.collect();
        let (prefix, names, slices) = names_and_slices(&prefix, &names, &slices)?;
        if names.len() != tensors.len() {
            return Err(invalid(format!(
                "Got {} tensor names but {} tensors.",
                names.len(),
                tensors.len()
            )));
        }
        no_slices(&slices)?;
        let mut by_name = BTreeMap::new();
        for (name, t) in names.iter().zip(&tensors) {
            if by_name.insert(name.clone(), t).is_some() {
                return Err(invalid(format!("Adding duplicate key: {name}")));
            }
        }
        write_bundle(&prefix, &by_name)?;
        Ok(vec![])
    }))
}

/// `SaveV2`'s and `RestoreV2`'s common inputs: the prefix, and as many
/// tensor names as slice specs.
fn names_and_slices(
    prefix: &Tensor,
    names: &Tensor,
    slices: &Tensor,
) -> Result<(String, Vec<String>, Vec<String>)> {
    let prefix = one_string("prefix", prefix)?;
    let (names, slices) = (strings(names)?, strings(slices)?);
    if names.len() != slices.len() {
        return Err(invalid(format!(
            "tensor_names and shape_and_slices have different number of elements: {} vs. {}",
            names.len(),
            slices.len()
        )));
    }
    Ok((prefix, names, slices))
}

fn restore_v2(attrs: &NodeAttrs) -> Result<Compute> {
    let dtypes = attrs.dtypes("dtypes")?;
    Ok(Box::new(move |inputs| {
        let [prefix, names, slices] = take::<3>("RestoreV2", inputs)?;
        let (prefix, names, slices) = names_and_slices(&prefix, &names, &slices)?;
        if names.len() != dtypes.len() {
            return Err(invalid(format!(
                "Got {} tensor names, but {} expected dtypes.",
                names.len(),
                dtypes.len()
            )));
        }
        no_slices(&slices)?;
        if !tfdata_dataset::io::exists(&format::index_name(&prefix))? {
            // TensorFlow then tries the V1 format, whose reader says this.
            return Err(Error::NotFound {
                what: "checkpoint",
                id: format!(
                    "(Unsuccessful TensorSliceReader constructor: Failed to find any matching \
                     files for {prefix})"
                ),
            });
        }
        let index = Index::read(&prefix)?;
        let shards = i64::from(index.header.num_shards);
        let mut out = Vec::with_capacity(names.len());
        for (name, &want) in names.iter().zip(&dtypes) {
            let entry = index.entry(name)?;
            let stored = DType::from_code(entry.dtype).map_err(|_| {
                Error::Unimplemented(format!(
                    "tensor_name = {name}: restoring dtype code {} is not supported",
                    entry.dtype
                ))
            })?;
            if stored != want {
                return Err(invalid(format!(
                    "tensor_name = {name}; expected dtype {} does not equal original dtype {}",
                    tf_name(want),
                    tf_name(stored)
                )));
            }
            if !entry.slices.is_empty() {
                return Err(Error::Unimplemented(format!(
                    "tensor_name = {name}: a checkpoint tensor saved as slices"
                )));
            }
            format::entry_shape(name, &entry, stored)?;
            if entry.size < 0
                || entry.offset < 0
                || entry.size as u64 > crate::MAX_TENSOR_BYTES as u64
            {
                return Err(Error::DataLoss {
                    location: format!("checkpoint tensor {name}"),
                    reason: format!("bad offset {} or size {}", entry.offset, entry.size),
                });
            }
            if entry.shard_id < 0 || i64::from(entry.shard_id) >= shards {
                return Err(Error::DataLoss {
                    location: format!("checkpoint tensor {name}"),
                    reason: format!("shard {} of {shards}", entry.shard_id),
                });
            }
            let path = format::data_name(&prefix, entry.shard_id.into(), shards);
            let bytes = tfdata_dataset::io::file_system(&path)?.read_range(
                &path,
                entry.offset as u64,
                entry.size as u64,
            )?;
            if bytes.len() as i64 != entry.size {
                return Err(Error::DataLoss {
                    location: path,
                    reason: format!(
                        "Requested {} bytes but read {} bytes.",
                        entry.size,
                        bytes.len()
                    ),
                });
            }
            out.push(format::decode(name, &entry, stored, &bytes)?);
        }
        Ok(out)
    }))
}

/// `Save` and `SaveSlices` (whose `shapes_and_slices` must all be empty:
/// whole tensors): a V1 checkpoint file (`v1`).
fn save_v1(attrs: &NodeAttrs, slices: bool) -> Result<Compute> {
    let n = attrs.dtypes("T")?.len();
    let fixed = if slices { 3 } else { 2 };
    Ok(Box::new(move |inputs| {
        if inputs.len() != n + fixed {
            return Err(invalid(format!(
                "Save: expected {} inputs, got {}",
                n + fixed,
                inputs.len()
            )));
        }
        let mut inputs = inputs.into_iter();
        let mut next = || inputs.next().ok_or_else(|| invalid("Save: missing input"));
        let filename = one_string("filename", &next()?)?;
        let names = strings(&next()?)?;
        if slices {
            no_slices(&strings(&next()?)?)?;
        }
        let tensors: Vec<Tensor> = inputs.collect();
        if names.len() != tensors.len() {
            return Err(invalid(format!(
                "Expected {} tensors but got {} tensor names.",
                tensors.len(),
                names.len()
            )));
        }
        let named: Vec<(String, &Tensor)> = names.into_iter().zip(&tensors).collect();
        let mut seen = std::collections::HashSet::new();
        if let Some((dup, _)) = named.iter().find(|(n, _)| !seen.insert(n.as_str())) {
            return Err(invalid(format!("Duplicate tensor name: {dup}")));
        }
        commit(&filename, &v1::file_bytes(&named)?)?;
        Ok(vec![])
    }))
}

/// `Restore`: a whole tensor of a V1 checkpoint (`v1`).
fn restore_v1(attrs: &NodeAttrs) -> Result<Compute> {
    let dt = attrs.dtype("dt")?;
    Ok(Box::new(move |inputs| {
        let [pattern, name] = take::<2>("Restore", inputs)?;
        let (pattern, name) = v1_names(&pattern, &name)?;
        Ok(vec![v1::restore(&pattern, &name, dt)?])
    }))
}

/// `RestoreSlice` with an empty `shape_and_slice` (the whole tensor); a
/// part of a tensor is refused.
fn restore_slice_v1(attrs: &NodeAttrs) -> Result<Compute> {
    let dt = attrs.dtype("dt")?;
    Ok(Box::new(move |inputs| {
        let [pattern, name, spec] = take::<3>("RestoreSlice", inputs)?;
        let (pattern, name) = v1_names(&pattern, &name)?;
        let spec = one_string("shape_and_slice", &spec)?;
        if !spec.is_empty() {
            return Err(Error::Unimplemented(format!(
                "RestoreSlice of part of a tensor (shape_and_slice {spec:?}): tfdata restores \
                 whole tensors only"
            )));
        }
        Ok(vec![v1::restore(&pattern, &name, dt)?])
    }))
}

/// `Restore`'s file pattern and tensor name, each one string.
fn v1_names(pattern: &Tensor, name: &Tensor) -> Result<(String, String)> {
    let pattern = one_string("file_pattern", pattern)?;
    let name = one_string("tensor_name", name)?;
    Ok((pattern, name))
}

fn merge_v2(attrs: &NodeAttrs) -> Result<Compute> {
    let delete_old_dirs = attrs.bool_or("delete_old_dirs", true)?;
    let allow_missing = attrs.bool_or("allow_missing_files", false)?;
    Ok(Box::new(move |inputs| {
        let [prefixes, destination] = take::<2>("MergeV2Checkpoints", inputs)?;
        if prefixes.shape().len() != 1 {
            return Err(invalid(format!(
                "Input checkpoint_prefixes should be an 1-D tensor, got {} instead.",
                shape_str(prefixes.shape())
            )));
        }
        if !destination.shape().is_empty() {
            return Err(invalid(format!(
                "Input destination_prefix should be a scalar tensor, got {} instead.",
                shape_str(destination.shape())
            )));
        }
        let prefixes = strings(&prefixes)?;
        let destination = one_string("destination_prefix", &destination)?;
        merge(&prefixes, &destination, allow_missing)?;
        if delete_old_dirs {
            // Best effort, as TensorFlow: a source directory left empty goes.
            let keep = dirname(&destination);
            for p in &prefixes {
                let dir = dirname(p);
                if !dir.is_empty() && dir != keep {
                    let _ = std::fs::remove_dir(dir);
                }
            }
        }
        Ok(vec![])
    }))
}

/// Merges the bundles under `prefixes` into one under `destination`: their
/// data files renamed to the merged bundle's shards, one index for all, the
/// old indexes deleted.
fn merge(prefixes: &[String], destination: &str, allow_missing: bool) -> Result<()> {
    make_dir(dirname(destination))?;
    let mut num_shards = 0i32;
    let mut version: Option<Vec<u8>> = None;
    let mut merged: BTreeMap<Vec<u8>, Entry> = BTreeMap::new();
    // Old data file → its shard number in the merged bundle.
    let mut shard_files: Vec<String> = Vec::new();
    let mut any = false;
    for prefix in prefixes {
        if !tfdata_dataset::io::exists(&format::index_name(prefix))? {
            if allow_missing {
                continue;
            }
            return Err(invalid(format!(
                "allow_missing_files was set to false and {prefix} did not exist.NOT_FOUND: \
                 {prefix} not found"
            )));
        }
        any = true;
        let index = Index::read(prefix)?;
        let this_version = index
            .header
            .version
            .clone()
            .unwrap_or_default()
            .encode_to_vec();
        match &version {
            None => version = Some(this_version),
            Some(v) if *v != this_version => {
                return Err(invalid("Merging bundles with different format versions"));
            }
            Some(_) => {}
        }
        num_shards = num_shards.saturating_add(index.header.num_shards);
        for (key, value) in &index.entries {
            let mut entry: Entry = format::parse(key, value)?;
            if let Some(existing) = merged.get_mut(key) {
                if existing.slices.is_empty() || entry.slices.is_empty() {
                    return Err(invalid(format!(
                        "Duplicate tensor keyed by {} encountered, when merging prefix: {prefix}",
                        String::from_utf8_lossy(key)
                    )));
                }
                existing.slices.append(&mut entry.slices);
                continue;
            }
            let file = format::data_name(
                prefix,
                entry.shard_id.into(),
                index.header.num_shards.into(),
            );
            let shard = match shard_files.iter().position(|f| *f == file) {
                Some(i) => i,
                None => {
                    shard_files.push(file);
                    shard_files.len() - 1
                }
            };
            entry.shard_id = shard as i32;
            merged.insert(key.clone(), entry);
        }
    }
    if !any {
        return Err(invalid(
            "At least one prefix checkpoint file must exist, but none existed.",
        ));
    }
    let fs = tfdata_dataset::io::file_system(destination)?;
    let total = shard_files.len() as i64;
    for (i, file) in shard_files.iter().enumerate() {
        fs.rename(file, &format::data_name(destination, i as i64, total))?;
    }
    let mut header = format::header(num_shards);
    header.version = Some(
        prost::Message::decode(&version.unwrap_or_default()[..])
            .map_err(|_| Error::Internal("re-reading a bundle version".into()))?,
    );
    let mut index = table::TableWriter::new();
    index.add(b"", &header.encode_to_vec());
    for (key, entry) in &merged {
        index.add(key, &entry.encode_to_vec());
    }
    create_file(&format::index_name(destination), &index.finish())?;
    for prefix in prefixes.iter().filter(|p| *p != destination) {
        let _ = tfdata_dataset::io::delete(&format::index_name(prefix));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
