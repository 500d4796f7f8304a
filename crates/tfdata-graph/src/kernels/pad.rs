//! Padding: `Pad` and `PadV2` (a constant around the input, zero or the
//! given value) and `MirrorPad` (the input reflected at its edges,
//! `REFLECT` or `SYMMETRIC`). A module of its own because the three share
//! the paddings' checks and the row-by-row copy; like the other layout ops
//! they move elements over bytes or string handles ([`super::layout`]).

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{Result, Tensor};

use super::layout::{Out, Src, checked_elements, err, ints, shape_str, strides, take};
use super::shape::product;
use super::{Compute, KernelDef, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "Pad",
        outputs: one_output,
        build: build_pad,
    },
    KernelDef {
        op: "PadV2",
        outputs: one_output,
        build: build_pad_v2,
    },
    KernelDef {
        op: "MirrorPad",
        outputs: one_output,
        build: build_mirror_pad,
    },
];

/// Paddings as (before, after) pairs, one per dimension of `x`.
fn paddings(op: &str, x: &Tensor, p: &Tensor) -> Result<Vec<(i64, i64)>> {
    let rank = x.shape().len();
    if p.shape().len() != 2 || p.shape()[1] != 2 {
        return Err(err(
            op,
            format!(
                "paddings must be a matrix with 2 columns: {}",
                shape_str(p.shape())
            ),
        ));
    }
    if p.shape()[0] != rank as i64 {
        return Err(err(
            op,
            format!(
                "The first dimension of paddings must be the rank of inputs{} {}",
                shape_str(p.shape()),
                shape_str(x.shape())
            ),
        ));
    }
    let values = ints(op, "paddings", p)?;
    values
        .chunks_exact(2)
        .map(|c| match *c {
            [before, after] if before >= 0 && after >= 0 => Ok((before, after)),
            [before, after] => Err(err(
                op,
                format!("Paddings must be non-negative: {before} {after}"),
            )),
            _ => Err(err(op, "paddings must have 2 columns")),
        })
        .collect()
}

fn padded_shape(op: &str, x: &Tensor, pads: &[(i64, i64)]) -> Result<Vec<i64>> {
    x.shape()
        .iter()
        .zip(pads)
        .map(|(&d, &(b, a))| {
            d.checked_add(b)
                .and_then(|d| d.checked_add(a))
                .ok_or_else(|| err(op, "the output is too large"))
        })
        .collect()
}

/// Emits dimension `d` onward of the padded tensor: the padding rows as
/// repeats of the constant, the input's rows in between.
#[allow(clippy::too_many_arguments)]
fn pad_rows(
    src: &Src,
    constant: &Src,
    out: &mut Out,
    in_shape: &[i64],
    in_strides: &[i64],
    out_shape: &[i64],
    pads: &[(i64, i64)],
    d: usize,
    offset: i64,
) -> Result<()> {
    let row = product(&out_shape[d + 1..]) as usize;
    let (before, after) = pads[d];
    out.repeat(constant, 0, before as usize * row)?;
    if d + 1 == in_shape.len() {
        out.push(src, offset as usize, in_shape[d] as usize)?;
    } else {
        for i in 0..in_shape[d] {
            pad_rows(
                src,
                constant,
                out,
                in_shape,
                in_strides,
                out_shape,
                pads,
                d + 1,
                offset + i * in_strides[d],
            )?;
        }
    }
    out.repeat(constant, 0, after as usize * row)
}

fn pad(op: &str, x: &Tensor, p: &Tensor, constant: &Tensor) -> Result<Tensor> {
    let pads = paddings(op, x, p)?;
    let shape = padded_shape(op, x, &pads)?;
    let n = checked_elements(op, x.dtype(), &shape)?;
    let mut out = Out::new(op, x.dtype(), n)?;
    let (src, c) = (Src::of(x), Src::of(constant));
    if x.num_elements() == 0 || x.shape().is_empty() {
        // Nothing of the input survives (or there is nothing to pad): a
        // flat fill or copy, without walking empty rows.
        if x.num_elements() == 0 {
            out.repeat(&c, 0, n as usize)?;
        } else {
            out.push(&src, 0, 1)?;
        }
    } else {
        pad_rows(
            &src,
            &c,
            &mut out,
            x.shape(),
            &strides(x.shape()),
            &shape,
            &pads,
            0,
            0,
        )?;
    }
    out.finish(x.dtype(), shape)
}

fn build_pad(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x, p] = take("Pad", inputs)?;
        let zero = match x.dtype().size() {
            Some(size) => Tensor::new(
                x.dtype(),
                vec![],
                TensorData::Buffer(vec![0u8; size].into()),
            )?,
            None => Tensor::scalar_string(Bytes::new()),
        };
        Ok(vec![pad("Pad", &x, &p, &zero)?])
    }))
}

fn build_pad_v2(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        let [x, p, constant] = take("PadV2", inputs)?;
        if !constant.shape().is_empty() {
            return Err(err(
                "PadV2",
                format!(
                    "constant_values must be a scalar. Got: {}",
                    shape_str(constant.shape())
                ),
            ));
        }
        if constant.dtype() != x.dtype() {
            return Err(err("PadV2", "constant_values must have the input's dtype"));
        }
        Ok(vec![pad("PadV2", &x, &p, &constant)?])
    }))
}

/// Emits dimension `d` onward of the mirror-padded tensor.
fn mirror_rows(
    src: &Src,
    out: &mut Out,
    in_shape: &[i64],
    in_strides: &[i64],
    maps: &[Vec<i64>],
    d: usize,
    offset: i64,
) -> Result<()> {
    for &i in &maps[d] {
        let at = offset + i * in_strides[d];
        if d + 1 == in_shape.len() {
            out.push(src, at as usize, 1)?;
        } else {
            mirror_rows(src, out, in_shape, in_strides, maps, d + 1, at)?;
        }
    }
    Ok(())
}

fn build_mirror_pad(a: &NodeAttrs) -> Result<Compute> {
    // REFLECT leaves out the edge element, SYMMETRIC repeats it.
    let edge = match a.string("mode")? {
        "REFLECT" => 1,
        "SYMMETRIC" => 0,
        other => return Err(a.error(format!("mode must be REFLECT or SYMMETRIC, got {other:?}"))),
    };
    Ok(Box::new(move |inputs| {
        let [x, p] = take("MirrorPad", inputs)?;
        let pads = paddings("MirrorPad", &x, &p)?;
        for (&dim, &(before, after)) in x.shape().iter().zip(&pads) {
            if before > dim - edge || after > dim - edge {
                let message = if edge == 1 {
                    format!(
                        "paddings must be less than the dimension size: {before}, {after} not less than {dim}"
                    )
                } else {
                    format!(
                        "paddings must be no greater than the dimension size: {before}, {after} greater than {dim}"
                    )
                };
                return Err(err("MirrorPad", message));
            }
        }
        let shape = padded_shape("MirrorPad", &x, &pads)?;
        let n = checked_elements("MirrorPad", x.dtype(), &shape)?;
        let mut out = Out::new("MirrorPad", x.dtype(), n)?;
        let src = Src::of(&x);
        if x.shape().is_empty() {
            out.push(&src, 0, 1)?;
        } else if n > 0 {
            // Per dimension, the input index of each output index.
            let maps: Vec<Vec<i64>> = x
                .shape()
                .iter()
                .zip(&pads)
                .map(|(&dim, &(before, after))| {
                    (-before..dim + after)
                        .map(|j| match j {
                            j if j < 0 => -j - 1 + edge,
                            j if j >= dim => 2 * dim - 1 - j - edge,
                            j => j,
                        })
                        .collect()
                })
                .collect();
            mirror_rows(&src, &mut out, x.shape(), &strides(x.shape()), &maps, 0, 0)?;
        }
        Ok(vec![out.finish(x.dtype(), shape)?])
    }))
}
