//! `ReadFile` (`tf.io.read_file`): a whole file as one string, through the
//! engine's file systems (local paths and object-store URLs).

use std::io::Read;

use tfdata_core::{DType, Error, Result, Tensor};

use super::layout::{err, take};
use super::{Compute, KernelDef, check_size};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "ReadFile",
    outputs: |_| Ok(vec![("contents", 1)]),
    build: read_file,
}];

fn read_file(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [name] = take::<1>("ReadFile", inputs)?;
        let names = name.string_values()?;
        let [path] = names else {
            return Err(err("ReadFile", "filename must be a scalar string"));
        };
        let path = String::from_utf8_lossy(path).into_owned();
        let file = tfdata_dataset::io::open(&path)?;
        // One byte past the limit tells a file that is too large from one
        // that fits, without reading it all.
        let limit = crate::MAX_TENSOR_BYTES as u64;
        let mut contents = Vec::new();
        file.take(limit + 1)
            .read_to_end(&mut contents)
            .map_err(|e| Error::io(format!("ReadFile: reading {path}"), e))?;
        if contents.len() as u64 > limit {
            check_size("ReadFile", DType::UInt8, limit + 1)?;
        }
        Ok(vec![Tensor::scalar_string(contents)])
    }))
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use tfdata_core::Tensor;

    #[test]
    fn reads_a_file_or_names_the_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        std::fs::write(&path, b"\x00bytes\xff").unwrap();
        let out = run(
            "ReadFile",
            &[],
            vec![Tensor::scalar_string(path.to_str().unwrap().to_string())],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::scalar_string(&b"\x00bytes\xff"[..]));
        let missing = dir.path().join("missing");
        let err = run(
            "ReadFile",
            &[],
            vec![Tensor::scalar_string(missing.to_str().unwrap().to_string())],
        )
        .unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
