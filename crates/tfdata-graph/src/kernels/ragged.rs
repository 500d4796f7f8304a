//! Ragged kernels, as far as dense tensors carry them: what
//! `tf.strings.split(...)` and `.to_tensor()` emit in a traced function.
//!
//! `tf.strings.split` on a vector becomes `StringSplitV2` (sparse indices
//! and values), then `RaggedFromValueRowIds`: a `DenseBincount` of the row
//! ids and a `Cumsum` (a math kernel) for the row splits; `.to_tensor()` is
//! `RaggedTensorToTensor` with `FIRST_DIM_SIZE` and `VALUE_ROWIDS`
//! partitions. Ragged values that cross a function boundary travel as
//! `RaggedTensorToVariant` / `RaggedTensorFromVariant` (`ragged_variant`).

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::{int_values, shape_string};
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "RaggedTensorToTensor",
        outputs: |_| Ok(vec![("result", 1)]),
        build: to_tensor,
    },
    KernelDef {
        op: "DenseBincount",
        outputs: super::one_output,
        build: dense_bincount,
    },
];

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

#[derive(Clone, Copy, PartialEq)]
enum Partition {
    RowSplits,
    ValueRowIds,
    FirstDimSize,
}

fn to_tensor(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "RaggedTensorToTensor";
    let types = attrs
        .strings("row_partition_types")?
        .into_iter()
        .map(|t| match t {
            b"ROW_SPLITS" => Ok(Partition::RowSplits),
            b"VALUE_ROWIDS" => Ok(Partition::ValueRowIds),
            b"FIRST_DIM_SIZE" => Ok(Partition::FirstDimSize),
            other => Err(invalid(
                OP,
                format!(
                    "unsupported row partition type {:?}",
                    String::from_utf8_lossy(other)
                ),
            )),
        })
        .collect::<Result<Vec<_>>>()?;
    match types.split_first() {
        Some((Partition::FirstDimSize, rest))
            if !rest.is_empty() && rest.iter().all(|&t| t == Partition::ValueRowIds) => {}
        Some((Partition::RowSplits, rest)) if rest.iter().all(|&t| t == Partition::RowSplits) => {}
        _ => {
            return Err(invalid(
                OP,
                "row_partition_types must be ROW_SPLITS... or FIRST_DIM_SIZE, VALUE_ROWIDS...",
            ));
        }
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 3 + types.len())?;
        let (shape_t, values, default) = (&inputs[0], &inputs[1], &inputs[2]);
        if values.shape().is_empty() {
            return Err(invalid(OP, "values must have rank >= 1"));
        }
        let n_values = values.shape()[0] as usize;
        // Every level as row splits over the next level's elements.
        let mut levels: Vec<Vec<usize>> = Vec::new();
        let mut rows = 0usize;
        for (&t, p) in types.iter().zip(&inputs[3..]) {
            let v = int_values(OP, p, "row_partition_tensors")?;
            match t {
                Partition::FirstDimSize => {
                    rows = usize::try_from(*v.first().unwrap_or(&-1))
                        .map_err(|_| invalid(OP, "first dimension size must be >= 0"))?;
                }
                Partition::RowSplits => {
                    if v.first() != Some(&0) || v.windows(2).any(|w| w[0] > w[1]) {
                        return Err(invalid(OP, "Invalid row split size."));
                    }
                    levels.push(v.iter().map(|&x| x as usize).collect());
                }
                Partition::ValueRowIds => {
                    let parent = if levels.is_empty() {
                        rows
                    } else {
                        *levels.last().and_then(|l| l.last()).unwrap_or(&0)
                    };
                    if v.windows(2).any(|w| w[0] > w[1])
                        || v.iter().any(|&r| r < 0 || r as usize >= parent)
                    {
                        return Err(invalid(
                            OP,
                            "Invalid value_rowids: must be sorted and in [0, nrows)",
                        ));
                    }
                    check_size(OP, DType::Int64, parent as u64 + 1)?;
                    let mut splits = vec![0usize; parent + 1];
                    for &r in &v {
                        splits[r as usize + 1] += 1;
                    }
                    for i in 0..parent {
                        splits[i + 1] += splits[i];
                    }
                    levels.push(splits);
                }
            }
        }
        // The output shape: rows, the longest row of each level, the
        // values' inner dimensions; fixed where `shape` fixes them.
        let inner: Vec<i64> = values.shape()[1..].to_vec();
        let mut dims = vec![levels[0].len() as i64 - 1];
        for l in &levels {
            dims.push(
                l.windows(2)
                    .map(|w| (w[1] - w[0]) as i64)
                    .max()
                    .unwrap_or(0),
            );
        }
        dims.extend(&inner);
        let wanted = int_values(OP, shape_t, "shape")?;
        if !shape_t.shape().is_empty() && !wanted.is_empty() {
            if wanted.len() != dims.len() {
                return Err(invalid(
                    OP,
                    format!(
                        "shape {} does not match the ragged rank (want rank {})",
                        shape_string(&wanted),
                        dims.len()
                    ),
                ));
            }
            for (d, &w) in dims.iter_mut().zip(&wanted) {
                if w >= 0 {
                    *d = w;
                }
            }
        }
        if dims[levels.len() + 1..] != inner[..] {
            return Err(invalid(OP, "shape must keep the values' inner dimensions"));
        }
        let inner_n = tfdata_core::tensor::num_elements(&inner)? as usize;
        let total = tfdata_core::tensor::num_elements(&dims)?;
        check_size(OP, values.dtype(), total)?;
        // The default, broadcast to one inner element.
        if default.dtype() != values.dtype() {
            return Err(invalid(OP, "default_value must have the values' dtype"));
        }
        let dn = default.num_elements() as usize;
        if dn != 1 && dn != inner_n {
            return Err(invalid(
                OP,
                format!(
                    "default_value of shape {} does not broadcast to {}",
                    shape_string(default.shape()),
                    shape_string(&inner)
                ),
            ));
        }
        // Output offset (in inner elements) of each value, or None if cut.
        let mut place: Vec<Option<usize>> = vec![None; n_values];
        let mut frontier: Vec<(usize, Option<usize>)> = (0..(dims[0].max(0) as usize)
            .min(levels[0].len() - 1))
            .map(|r| (r, Some(r)))
            .collect();
        for (k, splits) in levels.iter().enumerate() {
            let width = dims[k + 1] as usize;
            let mut next = Vec::new();
            for (e, out) in frontier {
                let (a, b) = (
                    splits.get(e).copied().unwrap_or(0),
                    splits.get(e + 1).copied().unwrap_or(0),
                );
                for (j, child) in (a..b).enumerate() {
                    next.push((child, out.filter(|_| j < width).map(|o| o * width + j)));
                }
            }
            frontier = next;
        }
        for (v, out) in frontier {
            if v < n_values {
                place[v] = out;
            }
        }
        let count = total as usize / inner_n.max(1);
        let fill = |k: usize| if dn == 1 { 0 } else { k };
        let result = match (values.data(), default.data()) {
            (TensorData::Strings(v), TensorData::Strings(d)) => {
                let mut out: Vec<Bytes> = (0..count * inner_n)
                    .map(|i| d[fill(i % inner_n.max(1))].clone())
                    .collect();
                for (i, p) in place.iter().enumerate() {
                    if let Some(o) = p {
                        out[o * inner_n..(o + 1) * inner_n]
                            .clone_from_slice(&v[i * inner_n..(i + 1) * inner_n]);
                    }
                }
                TensorData::Strings(out)
            }
            (TensorData::Buffer(v), TensorData::Buffer(d)) => {
                let size = values.dtype().size().unwrap_or(1);
                let row = inner_n * size;
                let mut one = Vec::with_capacity(row);
                for k in 0..inner_n {
                    let at = fill(k) * size;
                    one.extend_from_slice(&d[at..at + size]);
                }
                let mut out = one.repeat(count);
                for (i, p) in place.iter().enumerate() {
                    if let Some(o) = p {
                        out[o * row..(o + 1) * row].copy_from_slice(&v[i * row..(i + 1) * row]);
                    }
                }
                TensorData::Buffer(out.into())
            }
            _ => return Err(invalid(OP, "default_value must have the values' dtype")),
        };
        Ok(vec![Tensor::new(values.dtype(), dims, result)?])
    }))
}

fn dense_bincount(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "DenseBincount";
    let binary = attrs.bool_or("binary_output", false)?;
    let dtype = attrs.dtype("T")?;
    if !matches!(
        dtype,
        DType::Int32 | DType::Int64 | DType::Float | DType::Double
    ) {
        return Err(invalid(OP, format!("unsupported dtype {dtype}")));
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 3)?;
        let (input, size_t, weights) = (&inputs[0], &inputs[1], &inputs[2]);
        let values = int_values(OP, input, "input")?;
        let size = int_values(OP, size_t, "size")?;
        let size = match size[..] {
            [s] if s >= 0 => s as usize,
            _ => return Err(invalid(OP, "size must be a non-negative scalar")),
        };
        let (rows, per_row) = match *input.shape() {
            [n] => (1, n as usize),
            [r, n] => (r as usize, n as usize),
            _ => return Err(invalid(OP, "input must be 1-D or 2-D")),
        };
        if values.iter().any(|&v| v < 0) {
            return Err(invalid(OP, "Input arr must be non-negative!"));
        }
        let w: Option<Vec<f64>> = if weights.num_elements() == 0 {
            None
        } else {
            if weights.shape() != input.shape() {
                return Err(invalid(OP, "weights and input must have the same shape"));
            }
            Some(tfdata_dataset::kernels::cast(weights, DType::Double)?.to_vec::<f64>()?)
        };
        check_size(OP, dtype, (rows as u64).saturating_mul(size as u64))?;
        let mut out = vec![0f64; rows * size];
        for (i, &v) in values.iter().enumerate() {
            let v = v as usize;
            if v < size {
                let slot = &mut out[(i / per_row.max(1)) * size + v];
                *slot = if binary {
                    1.0
                } else {
                    *slot + w.as_ref().map_or(1.0, |w| w[i])
                };
            }
        }
        let shape = if input.shape().len() == 1 {
            vec![size as i64]
        } else {
            vec![rows as i64, size as i64]
        };
        let doubles = Tensor::from_slice(&out, shape)?;
        Ok(vec![tfdata_dataset::kernels::cast(&doubles, dtype)?])
    }))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use tfdata_core::{DType, Tensor};
    use tfdata_proto::tensorflow::attr_value::ListValue;

    use super::super::testing::{boolean, list, run, ty};

    fn partitions(p: &[&str]) -> (&'static str, tfdata_proto::tensorflow::AttrValue) {
        (
            "row_partition_types",
            list(ListValue {
                s: p.iter().map(|s| s.as_bytes().to_vec().into()).collect(),
                ..Default::default()
            }),
        )
    }

    fn to_tensor(
        types: &[&str],
        shape: Tensor,
        values: Tensor,
        default: Tensor,
        parts: Vec<Tensor>,
    ) -> tfdata_core::Result<Tensor> {
        let mut inputs = vec![shape, values, default];
        inputs.extend(parts);
        run("RaggedTensorToTensor", &[partitions(types)], inputs).map(|mut o| o.remove(0))
    }

    fn ints(t: &Tensor) -> (Vec<i32>, Vec<i64>) {
        (t.to_vec().unwrap(), t.shape().to_vec())
    }

    #[test]
    fn ragged_to_tensor_matches_tensorflow() {
        let values = || Tensor::vector(&[1i32, 2, 3, 4, 5]);
        let splits = || Tensor::vector(&[0i64, 2, 2, 5]);
        let t = to_tensor(
            &["ROW_SPLITS"],
            Tensor::scalar(-1i64),
            values(),
            Tensor::scalar(0i32),
            vec![splits()],
        )
        .unwrap();
        assert_eq!(ints(&t), (vec![1, 2, 0, 0, 0, 0, 3, 4, 5], vec![3, 3]));
        let t = to_tensor(
            &["ROW_SPLITS"],
            Tensor::vector(&[2i64, 2]),
            values(),
            Tensor::scalar(9i32),
            vec![splits()],
        )
        .unwrap();
        assert_eq!(ints(&t), (vec![1, 2, 9, 9], vec![2, 2]));
        let t = to_tensor(
            &["ROW_SPLITS"],
            Tensor::vector(&[4i64, -1]),
            values(),
            Tensor::scalar(9i32),
            vec![splits()],
        )
        .unwrap();
        assert_eq!(
            ints(&t),
            (vec![1, 2, 9, 9, 9, 9, 3, 4, 5, 9, 9, 9], vec![4, 3])
        );
        let t = to_tensor(
            &["FIRST_DIM_SIZE", "VALUE_ROWIDS"],
            Tensor::scalar(-1i64),
            values(),
            Tensor::scalar(0i32),
            vec![Tensor::scalar(4i64), Tensor::vector(&[0i64, 0, 2, 2, 2])],
        )
        .unwrap();
        assert_eq!(
            ints(&t),
            (vec![1, 2, 0, 0, 0, 0, 3, 4, 5, 0, 0, 0], vec![4, 3])
        );
        let t = to_tensor(
            &["ROW_SPLITS", "ROW_SPLITS"],
            Tensor::scalar(-1i64),
            Tensor::vector(&[1i32, 2, 3, 4, 5, 6]),
            Tensor::scalar(0i32),
            vec![
                Tensor::vector(&[0i64, 2, 3]),
                Tensor::vector(&[0i64, 1, 3, 6]),
            ],
        )
        .unwrap();
        assert_eq!(
            ints(&t),
            (vec![1, 0, 0, 2, 3, 0, 4, 5, 6, 0, 0, 0], vec![2, 2, 3])
        );
        let t = to_tensor(
            &["ROW_SPLITS"],
            Tensor::scalar(-1i64),
            Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], vec![3, 2]).unwrap(),
            Tensor::vector(&[7i32, 8]),
            vec![Tensor::vector(&[0i64, 1, 3])],
        )
        .unwrap();
        assert_eq!(ints(&t), (vec![1, 2, 7, 8, 3, 4, 5, 6], vec![2, 2, 2]));
        let s: Vec<Bytes> = ["a", "b", "c"].iter().map(|x| Bytes::from(*x)).collect();
        let t = to_tensor(
            &["ROW_SPLITS"],
            Tensor::scalar(-1i64),
            Tensor::strings(s, vec![3]).unwrap(),
            Tensor::scalar_string(""),
            vec![Tensor::vector(&[0i64, 1, 1, 3])],
        )
        .unwrap();
        assert_eq!(t.string_values().unwrap(), ["a", "", "", "", "b", "c"]);
        assert_eq!(t.shape(), [3, 2]);
        // Splits past the values leave defaults, as in TensorFlow.
        let t = to_tensor(
            &["ROW_SPLITS"],
            Tensor::scalar(-1i64),
            Tensor::vector(&[1i32, 2, 3]),
            Tensor::scalar(0i32),
            vec![Tensor::vector(&[0i64, 2, 5])],
        )
        .unwrap();
        assert_eq!(ints(&t), (vec![1, 2, 0, 3, 0, 0], vec![2, 3]));
        let t = to_tensor(
            &["ROW_SPLITS"],
            Tensor::scalar(-1i64),
            Tensor::from_slice::<i32>(&[], vec![0]).unwrap(),
            Tensor::scalar(0i32),
            vec![Tensor::vector(&[0i64, 0, 0])],
        )
        .unwrap();
        assert_eq!(t.shape(), [2, 0]);
        for bad in [[0i64, 2, 1, 3], [1, 2, 3, 3]] {
            let e = to_tensor(
                &["ROW_SPLITS"],
                Tensor::scalar(-1i64),
                Tensor::vector(&[1i32, 2, 3]),
                Tensor::scalar(0i32),
                vec![Tensor::vector(&bad)],
            )
            .unwrap_err();
            assert!(e.to_string().contains("Invalid row split size."), "{e}");
        }
        let e = to_tensor(
            &["ROW_SPLITS"],
            Tensor::vector(&[1i64 << 20, 1 << 20]),
            values(),
            Tensor::scalar(0i32),
            vec![splits()],
        )
        .unwrap_err();
        assert!(e.to_string().contains("exceeds the limit"), "{e}");
    }

    #[test]
    fn split_then_to_tensor_pipeline() {
        // What `tf.strings.split(x).to_tensor('')` runs on ["a b", "", "c d e"].
        let lines: Vec<Bytes> = ["a b", "", "c d e"]
            .iter()
            .map(|x| Bytes::from(*x))
            .collect();
        let split = run(
            "StringSplitV2",
            &[],
            vec![
                Tensor::strings(lines, vec![3]).unwrap(),
                Tensor::scalar_string(""),
            ],
        )
        .unwrap();
        let indices: Vec<i64> = split[0].to_vec().unwrap();
        let rowids: Vec<i64> = indices.chunks(2).map(|p| p[0]).collect();
        let dense = to_tensor(
            &["FIRST_DIM_SIZE", "VALUE_ROWIDS"],
            Tensor::scalar(-1i64),
            split[1].clone(),
            Tensor::scalar_string(""),
            vec![Tensor::scalar(3i64), Tensor::vector(&rowids)],
        )
        .unwrap();
        assert_eq!(dense.shape(), [3, 3]);
        assert_eq!(
            dense.string_values().unwrap(),
            ["a", "b", "", "", "", "", "c", "d", "e"]
        );
    }

    #[test]
    fn dense_bincount_matches_tensorflow() {
        let bc = |t: DType, input: Tensor, size: Tensor, weights: Tensor, binary: bool| {
            run(
                "DenseBincount",
                &[("T", ty(t)), ("binary_output", boolean(binary))],
                vec![input, size, weights],
            )
            .map(|mut o| o.remove(0))
        };
        let none64 = || Tensor::from_slice::<i64>(&[], vec![0]).unwrap();
        let nonef = || Tensor::from_slice::<f32>(&[], vec![0]).unwrap();
        let out = bc(
            DType::Int64,
            Tensor::vector(&[0i64, 0, 2, 2, 2]),
            Tensor::scalar(4i64),
            none64(),
            false,
        )
        .unwrap();
        assert_eq!(out.to_vec::<i64>().unwrap(), [2, 0, 3, 0]);
        let out = bc(
            DType::Float,
            Tensor::vector(&[0i32, 0, 2, 5]),
            Tensor::scalar(4i32),
            nonef(),
            true,
        )
        .unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), [1.0, 0.0, 1.0, 0.0]);
        let out = bc(
            DType::Float,
            Tensor::vector(&[0i32, 0, 2]),
            Tensor::scalar(3i32),
            Tensor::vector(&[0.5f32, 1.5, 2.0]),
            false,
        )
        .unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), [2.0, 0.0, 2.0]);
        let out = bc(
            DType::Int32,
            Tensor::from_slice(&[0i32, 1, 1, 1], vec![2, 2]).unwrap(),
            Tensor::scalar(3i32),
            Tensor::from_slice::<i32>(&[], vec![0]).unwrap(),
            false,
        )
        .unwrap();
        assert_eq!(
            (out.to_vec::<i32>().unwrap(), out.shape().to_vec()),
            (vec![1, 1, 0, 0, 2, 0], vec![2, 3])
        );
        let e = bc(
            DType::Float,
            Tensor::vector(&[0i32, -1]),
            Tensor::scalar(3i32),
            nonef(),
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("Input arr must be non-negative!"));
    }

    #[test]
    fn hostile_sizes_are_refused() {
        let e = to_tensor(
            &["FIRST_DIM_SIZE", "VALUE_ROWIDS"],
            Tensor::scalar(-1i64),
            Tensor::vector(&[1i32]),
            Tensor::scalar(0i32),
            vec![Tensor::scalar(1i64 << 60), Tensor::vector(&[0i64])],
        )
        .unwrap_err();
        assert!(e.to_string().contains("exceeds the limit"), "{e}");
        assert!(
            run(
                "RaggedTensorToTensor",
                &[partitions(&["FIRST_DIM_SIZE"])],
                vec![]
            )
            .is_err()
        );
        let e = run(
            "DenseBincount",
            &[("T", ty(DType::Int64))],
            vec![
                Tensor::vector(&[1i64]),
                Tensor::scalar(1i64 << 62),
                Tensor::from_slice::<i64>(&[], vec![0]).unwrap(),
            ],
        )
        .unwrap_err();
        assert!(e.to_string().contains("exceeds the limit"), "{e}");
    }
}
