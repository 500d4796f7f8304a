//! The parts of dataset nodes that need more than a builder call: file
//! names, `MatchingFiles` and a cast after `RangeDataset(output_type=...)`.

use std::sync::Arc;

use bytes::Bytes;
use tfdata_core::{DType, Element, Error, Result, Tensor};
use tfdata_dataset::functions::ResolvedMap;
use tfdata_dataset::spec::{Shape, Structure, TensorSpec};
use tfdata_dataset::{Dataset, FunctionRef, Inline};

/// File names from a scalar or vector string tensor.
pub(super) fn names(t: &Tensor) -> Result<Vec<String>> {
    if t.shape().len() > 1 {
        return Err(Error::InvalidArgument(format!(
            "file names must be a scalar or a vector, got shape {:?}",
            t.shape()
        )));
    }
    Ok(t.string_values()?
        .iter()
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect())
}

/// `MatchingFiles`: every pattern's matches, sorted together (an empty
/// result is not an error here; `list_files` asserts on it itself).
pub(super) fn matching_files(patterns: &[String]) -> Result<Tensor> {
    let mut files = Vec::new();
    for p in patterns {
        files.extend(tfdata_dataset::io::glob(p)?);
    }
    files.sort();
    let n = files.len() as i64;
    Tensor::strings(files.into_iter().map(Bytes::from).collect(), vec![n])
}

/// `ds` with its one component cast to `dtype`.
pub(super) fn cast_map(ds: Dataset, dtype: DType) -> Dataset {
    let f: tfdata_dataset::MapFn = Arc::new(move |e: Element| {
        let out = e
            .components
            .iter()
            .map(|t| tfdata_dataset::kernels::cast(t, dtype))
            .collect::<Result<Vec<_>>>()?;
        Ok(Element::new(out))
    });
    let output = Some(Structure::Tensor(TensorSpec::new(dtype, Shape::scalar())));
    let inline = Inline {
        map: Some(Arc::new(move |_| {
            Ok(ResolvedMap {
                f: f.clone(),
                output: output.clone(),
            })
        })),
        ..Default::default()
    };
    ds.map_with(FunctionRef::inline("range_output_type", inline), None, true)
}
