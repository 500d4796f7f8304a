//! Checkpoint file names and `WriteFile`: `ShardedFilename`
//! (`basename-00003-of-00010`), `ShardedFilespec` (`basename-?????-of-00010`,
//! the glob of every shard) and `tf.io.write_file`.
//!
//! The names are C's `%05d`: five digits, zero-padded, a minus sign counting
//! as one of the five (`-0003`), wider numbers printed whole.

use std::io::Write;

use tfdata_core::{DType, Error, Result, Tensor};

use super::layout::{shape_str, take};
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "ShardedFilename",
        outputs: |_| Ok(vec![("filename", 1)]),
        build: sharded_filename,
    },
    KernelDef {
        op: "ShardedFilespec",
        outputs: |_| Ok(vec![("filename", 1)]),
        build: sharded_filespec,
    },
    KernelDef {
        op: "WriteFile",
        outputs: |_| Ok(vec![]),
        build: write_file,
    },
];

/// The one value of a scalar input, or TensorFlow's
/// "`what` must be a scalar, got shape [..]".
fn scalar<'t>(what: &str, t: &'t Tensor) -> Result<&'t Tensor> {
    if !t.shape().is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{what} must be a scalar, got shape {}",
            shape_str(t.shape())
        )));
    }
    Ok(t)
}

fn string_scalar(op: &str, t: &Tensor) -> Result<Vec<u8>> {
    match t.string_values()? {
        [s] => Ok(s.to_vec()),
        _ => Err(Error::InvalidArgument(format!("{op}: expected one string"))),
    }
}

fn int32_scalar(op: &str, t: &Tensor) -> Result<i32> {
    if t.dtype() != DType::Int32 {
        return Err(Error::InvalidArgument(format!(
            "{op}: expected an int32 tensor, got {}",
            t.dtype()
        )));
    }
    t.to_scalar::<i32>()
}

/// TensorFlow's name of shard `shard` of `num_shards` under `basename`
/// (also the data files of a tensor bundle: `prefix.data-00000-of-00001`).
pub(crate) fn shard_name(basename: &[u8], shard: i64, num_shards: i64) -> Vec<u8> {
    let mut out = basename.to_vec();
    out.extend_from_slice(format!("-{shard:05}-of-{num_shards:05}").as_bytes());
    out
}

fn sharded_filename(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let op = "ShardedFilename";
        let [basename, shard, num_shards] = take::<3>(op, inputs)?;
        let basename = string_scalar(op, scalar("basename", &basename)?)?;
        let shard = int32_scalar(op, scalar("shard", &shard)?)?;
        let num_shards = int32_scalar(op, scalar("num_shards", &num_shards)?)?;
        Ok(vec![Tensor::scalar_string(shard_name(
            &basename,
            shard.into(),
            num_shards.into(),
        ))])
    }))
}

fn sharded_filespec(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let op = "ShardedFilespec";
        let [basename, num_shards] = take::<2>(op, inputs)?;
        let mut out = string_scalar(op, scalar("basename", &basename)?)?;
        let num_shards = int32_scalar(op, scalar("num_shards", &num_shards)?)?;
        out.extend_from_slice(format!("-?????-of-{num_shards:05}").as_bytes());
        Ok(vec![Tensor::scalar_string(out)])
    }))
}

/// The directory part of `path` (TensorFlow's `io::Dirname`): everything
/// before the last `/`, or nothing.
pub(crate) fn dirname(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "",
    }
}

/// Writes `contents` as the file `path`, making its directory first, as
/// TensorFlow's `WriteFile` does.
pub(crate) fn write_whole_file(path: &str, contents: &[u8]) -> Result<()> {
    let dir = dirname(path);
    if !dir.is_empty() {
        tfdata_dataset::io::file_system(path)?.create_dir_all(dir)?;
    }
    create_file(path, contents)
}

/// Writes `contents` as the file `path`, whose directory must exist.
pub(crate) fn create_file(path: &str, contents: &[u8]) -> Result<()> {
    let mut out = tfdata_dataset::io::file_system(path)?.create(path)?;
    out.write_all(contents)
        .and_then(|()| out.flush())
        .map_err(|e| Error::io(format!("writing {path}"), e))
}

fn write_file(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let op = "WriteFile";
        let [filename, contents] = take::<2>(op, inputs)?;
        if !filename.shape().is_empty() {
            return Err(Error::InvalidArgument(format!(
                "Input filename tensor must be scalar, but had shape: {}",
                shape_str(filename.shape())
            )));
        }
        if !contents.shape().is_empty() {
            return Err(Error::InvalidArgument(format!(
                "Contents tensor must be scalar, but had shape: {}",
                shape_str(contents.shape())
            )));
        }
        let path = String::from_utf8_lossy(&string_scalar(op, &filename)?).into_owned();
        let contents = string_scalar(op, &contents)?;
        write_whole_file(&path, &contents)?;
        Ok(vec![])
    }))
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use tfdata_core::Tensor;

    #[test]
    fn names_shards_like_printf() {
        let out = run(
            "ShardedFilename",
            &[],
            vec![
                Tensor::scalar_string("a/b"),
                Tensor::scalar(-3i32),
                Tensor::scalar(100_000_000i32),
            ],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::scalar_string("a/b--0003-of-100000000"));
        let out = run(
            "ShardedFilespec",
            &[],
            vec![Tensor::scalar_string("x"), Tensor::scalar(7i32)],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::scalar_string("x-?????-of-00007"));
    }

    #[test]
    fn writes_a_file_making_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/dir/f.bin");
        let out = run(
            "WriteFile",
            &[],
            vec![
                Tensor::scalar_string(path.to_str().unwrap().to_string()),
                Tensor::scalar_string(&b"\x00hi"[..]),
            ],
        )
        .unwrap();
        assert!(out.is_empty());
        assert_eq!(std::fs::read(&path).unwrap(), b"\x00hi");
    }
}
