//! The ops that return their input unchanged: the gradient markers
//! (`StopGradient`, `PreventGradient`), `Snapshot`, and the two that check
//! it first, `EnsureShape` (its shape against the declared one) and
//! `CheckNumerics` (no Inf or NaN, read from the float bits). They copy
//! nothing, so they share no code with the ops that lay tensors out.

use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result};

use super::layout::{err, shape_str, take};
use super::{Compute, KernelDef, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "EnsureShape",
        outputs: one_output,
        build: build_ensure_shape,
    },
    KernelDef {
        op: "StopGradient",
        outputs: one_output,
        build: build_pass_through,
    },
    KernelDef {
        op: "PreventGradient",
        outputs: one_output,
        build: build_pass_through,
    },
    KernelDef {
        op: "Snapshot",
        outputs: one_output,
        build: build_pass_through,
    },
    KernelDef {
        op: "CheckNumerics",
        outputs: one_output,
        build: build_check_numerics,
    },
];

fn build_ensure_shape(a: &NodeAttrs) -> Result<Compute> {
    let proto = a.shape("shape")?;
    // `None`: any rank; -1 dims: any size.
    let expected: Option<Vec<i64>> =
        (!proto.unknown_rank).then(|| proto.dim.iter().map(|d| d.size).collect());
    Ok(Box::new(move |inputs| {
        let [x] = take("EnsureShape", inputs)?;
        if let Some(want) = &expected {
            let fits = want.len() == x.shape().len()
                && want.iter().zip(x.shape()).all(|(&w, &h)| w < 0 || w == h);
            if !fits {
                let shown: Vec<String> = want
                    .iter()
                    .map(|&d| if d < 0 { "?".into() } else { d.to_string() })
                    .collect();
                return Err(err(
                    "EnsureShape",
                    format!(
                        "Shape of tensor input {} is not compatible with expected shape [{}].",
                        shape_str(x.shape()),
                        shown.join(",")
                    ),
                ));
            }
        }
        Ok(vec![x])
    }))
}

fn build_pass_through(a: &NodeAttrs) -> Result<Compute> {
    let op = a.op.to_string();
    Ok(Box::new(move |inputs| {
        let [x] = take(&op, inputs)?;
        Ok(vec![x])
    }))
}

/// (exponent bits, mantissa bits) of the float dtypes `CheckNumerics` takes.
fn float_layout(dtype: DType) -> Option<(u32, u32)> {
    match dtype {
        DType::Half => Some((5, 10)),
        DType::BFloat16 => Some((8, 7)),
        DType::Float => Some((8, 23)),
        DType::Double => Some((11, 52)),
        _ => None,
    }
}

fn build_check_numerics(a: &NodeAttrs) -> Result<Compute> {
    let message = String::from_utf8_lossy(a.bytes("message")?).into_owned();
    Ok(Box::new(move |inputs| {
        let [x] = take("CheckNumerics", inputs)?;
        let (Some((exp, mant)), Some(size), TensorData::Buffer(bytes)) =
            (float_layout(x.dtype()), x.dtype().size(), x.data())
        else {
            return Err(err(
                "CheckNumerics",
                format!("unsupported dtype {}", x.dtype()),
            ));
        };
        let mant_mask = (1u64 << mant) - 1;
        let exp_mask = ((1u64 << exp) - 1) << mant;
        let (mut nan, mut inf) = (false, false);
        for e in bytes.chunks_exact(size) {
            let mut buf = [0u8; 8];
            buf[..size].copy_from_slice(e);
            let bits = u64::from_le_bytes(buf);
            if bits & exp_mask == exp_mask {
                if bits & mant_mask != 0 {
                    nan = true;
                } else {
                    inf = true;
                }
            }
        }
        let what = match (inf, nan) {
            (false, false) => return Ok(vec![x]),
            (true, false) => "Inf",
            (false, true) => "NaN",
            (true, true) => "Inf and NaN",
        };
        Err(Error::InvalidArgument(format!(
            "CheckNumerics: {message} : Tensor had {what} values"
        )))
    }))
}
