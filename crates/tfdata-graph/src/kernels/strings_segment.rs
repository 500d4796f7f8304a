//! `UnsortedSegmentJoin` (`tf.strings.unsorted_segment_join`): the strings
//! of each segment joined with `separator` in input order, segments that
//! get no string empty. `segment_ids` has a prefix of the input's shape;
//! the output is `[num_segments]` followed by the rest of it.

use bytes::Bytes;
use tfdata_core::{DType, Result, Tensor};

use super::numeric::{index_values, invalid, scalar_index};
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "UnsortedSegmentJoin",
    outputs: super::one_output,
    build,
}];

fn build(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    let separator = Bytes::copy_from_slice(attrs.bytes("separator").unwrap_or(b""));
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 3)?;
        Ok(vec![join(&op, &separator, &inputs)?])
    }))
}

fn join(op: &str, separator: &[u8], v: &[Tensor]) -> Result<Tensor> {
    let (input, ids_t, num_t) = (&v[0], &v[1], &v[2]);
    if input.dtype() != DType::String {
        return Err(invalid(
            op,
            format!("inputs must be strings, not {}", input.dtype()),
        ));
    }
    let strings = input.string_values()?;
    if !num_t.shape().is_empty() {
        return Err(invalid(op, "Number of segments must be a scalar"));
    }
    let num = scalar_index(op, "num_segments", num_t)?;
    if num < 0 {
        return Err(invalid(
            op,
            format!("Number of segments must be non-negative but got {num}"),
        ));
    }
    let (in_shape, id_shape) = (input.shape(), ids_t.shape());
    if id_shape.is_empty() {
        return Err(invalid(op, "Segment_id cannot have rank 0"));
    }
    if id_shape.len() > in_shape.len() {
        return Err(invalid(op, "Input cannot have rank less than segment_id"));
    }
    for (i, (&s, &d)) in id_shape.iter().zip(in_shape).enumerate() {
        if s != d {
            return Err(invalid(
                op,
                format!("Segment dimension is {s} while input dimension is {d} in rank {i}"),
            ));
        }
    }
    let ids = index_values(op, "segment_ids", ids_t)?;
    if ids.iter().any(|&s| s < 0 || s >= num) {
        return Err(invalid(
            op,
            "segment_ids are not allowed to exceed num_segments or to have negative values.",
        ));
    }
    let inner: usize = in_shape[id_shape.len()..]
        .iter()
        .map(|&d| d.max(0) as usize)
        .product();
    let mut shape = vec![num];
    shape.extend_from_slice(&in_shape[id_shape.len()..]);
    let cells = (num as u64).saturating_mul(inner as u64);
    super::check_size(op, DType::String, cells)?;
    let total: u64 = strings
        .iter()
        .map(|s| s.len() as u64 + separator.len() as u64)
        .sum();
    super::check_size(op, DType::UInt8, total)?;
    let mut out: Vec<Option<Vec<u8>>> = vec![None; cells as usize];
    for (k, &s) in ids.iter().enumerate() {
        for c in 0..inner {
            let (Some(piece), Some(cell)) = (
                strings.get(k * inner + c),
                out.get_mut(s as usize * inner + c),
            ) else {
                continue;
            };
            match cell {
                Some(joined) => {
                    joined.extend_from_slice(separator);
                    joined.extend_from_slice(piece);
                }
                None => *cell = Some(piece.to_vec()),
            }
        }
    }
    let values = out
        .into_iter()
        .map(|c| Bytes::from(c.unwrap_or_default()))
        .collect();
    Tensor::strings(values, shape)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{run, string};
    use bytes::Bytes;
    use tfdata_core::Tensor;

    #[test]
    fn joins_by_segment() {
        let s = |v: &[&str]| {
            v.iter()
                .map(|x| Bytes::from(x.to_string()))
                .collect::<Vec<_>>()
        };
        let input = Tensor::strings(s(&["a", "b", "c", "d"]), vec![4]).unwrap();
        let out = run(
            "UnsortedSegmentJoin",
            &[("separator", string(":"))],
            vec![
                input,
                Tensor::vector(&[1i32, 0, 1, 3]),
                Tensor::scalar(4i32),
            ],
        )
        .unwrap();
        assert_eq!(
            out[0].string_values().unwrap(),
            s(&["b", "a:c", "", "d"]).as_slice()
        );
    }
}
