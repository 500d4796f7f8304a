//! Feature crosses (`tf.sparse.cross`, `tf.sparse.cross_hashed`, the
//! feature columns' `crossed_column`): `SparseCross`, `SparseCrossV2` and
//! `SparseCrossHashed`.
//!
//! Each input is a column of a batch: a rank-2 sparse tensor (its entries
//! of row `b` are row `b`'s features) or a dense matrix (row `b` holds
//! `cols` features). Row `b` of the output holds every combination of one
//! feature per column, sparse columns first, the last column varying
//! fastest; a row where some column has no feature gets none.
//!
//! A combination is a string (the features joined by a separator, integers
//! written in decimal) or a hash: TensorFlow's `FingerprintCat64` chain over
//! the features' 64-bit values (a string feature its farmhash
//! `Fingerprint64`), modulo the bucket count. These hashes are what a model
//! was trained with, so they are TensorFlow's bit for bit, quirks included:
//! `SparseCrossHashed` hashes a sparse integer feature from its first four
//! bytes (TensorFlow passes `sizeof(DataType)` as the length), a dense one
//! not at all (its value is the hash). Under `strong_hash` (SipHash keyed by
//! `salt`) a sparse integer is hashed from four bytes too, and a dense one is
//! refused: TensorFlow 2.21 crashes on it.

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::hash::{fingerprint64, siphash};
use super::{Compute, KernelDef, check_size};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "SparseCross",
        outputs,
        build: sparse_cross,
    },
    KernelDef {
        op: "SparseCrossV2",
        outputs,
        build: sparse_cross_v2,
    },
    KernelDef {
        op: "SparseCrossHashed",
        outputs,
        build: sparse_cross_hashed,
    },
];

fn outputs(_: &NodeAttrs) -> Result<super::OutputArgs> {
    Ok(vec![
        ("output_indices", 1),
        ("output_values", 1),
        ("output_shape", 1),
    ])
}

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument(message.into())
}

fn shape_str(s: &[i64]) -> String {
    let d: Vec<String> = s.iter().map(i64::to_string).collect();
    format!("[{}]", d.join(","))
}

/// TensorFlow's `FingerprintCat64`: two fingerprints combined into one.
pub(super) fn fingerprint_cat64(fp1: u64, fp2: u64) -> u64 {
    const MUL: u64 = 0xc6a4_a793_5bd1_e995;
    let shift_mix = |v: u64| v ^ (v >> 47);
    let mut r = fp1 ^ MUL;
    r ^= shift_mix(fp2.wrapping_mul(MUL)).wrapping_mul(MUL);
    r = r.wrapping_mul(MUL);
    r = shift_mix(r).wrapping_mul(MUL);
    shift_mix(r)
}

/// One input column's features.
enum Column<'a> {
    /// A sparse column: row `b`'s features are values `start[b]..start[b] +
    /// count[b]`.
    Sparse {
        values: &'a Tensor,
        start: Vec<usize>,
        count: Vec<usize>,
    },
    Dense(&'a Tensor),
}

impl Column<'_> {
    fn count(&self, b: usize) -> usize {
        match self {
            Column::Sparse { count, .. } => count[b],
            Column::Dense(t) => t.shape()[1] as usize,
        }
    }

    /// The flat position of feature `n` of row `b` in the column's values.
    fn at(&self, b: usize, n: usize) -> usize {
        match self {
            Column::Sparse { start, .. } => start[b] + n,
            Column::Dense(t) => b * t.shape()[1] as usize + n,
        }
    }

    fn values(&self) -> &Tensor {
        match self {
            Column::Sparse { values, .. } => values,
            Column::Dense(t) => t,
        }
    }

    fn is_sparse(&self) -> bool {
        matches!(self, Column::Sparse { .. })
    }
}

/// A feature as a string: its bytes, or an integer in decimal.
fn feature_string(t: &Tensor, i: usize) -> Result<Bytes> {
    match t.data() {
        TensorData::Strings(s) => Ok(s[i].clone()),
        TensorData::Buffer(_) => Ok(Bytes::from(int_at(t, i)?.to_string())),
    }
}

fn int_at(t: &Tensor, i: usize) -> Result<i64> {
    let TensorData::Buffer(b) = t.data() else {
        return Err(invalid("expected an int64 feature"));
    };
    if t.dtype() != DType::Int64 {
        return Err(invalid(format!(
            "features must be int64 or string, got {}",
            t.dtype()
        )));
    }
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i * 8..i * 8 + 8]);
    Ok(i64::from_le_bytes(w))
}

/// The inputs split into their four lists (and what follows them).
struct Inputs<'a> {
    indices: &'a [Tensor],
    values: &'a [Tensor],
    shapes: &'a [Tensor],
    dense: &'a [Tensor],
    rest: &'a [Tensor],
}

fn split_inputs<'a>(inputs: &'a [Tensor], n: usize, extra: usize) -> Result<Inputs<'a>> {
    if inputs.len() < 3 * n + extra {
        return Err(invalid(format!(
            "SparseCross: expected at least {} inputs, got {}",
            3 * n + extra,
            inputs.len()
        )));
    }
    let dense_end = inputs.len() - extra;
    Ok(Inputs {
        indices: &inputs[..n],
        values: &inputs[n..2 * n],
        shapes: &inputs[2 * n..3 * n],
        dense: &inputs[3 * n..dense_end],
        rest: &inputs[dense_end..],
    })
}

/// TensorFlow's `ValidateInput`, in its order and words. `string_internal`:
/// `SparseCross` with `internal_type = string`, which refuses int64 inputs.
fn validate(inp: &Inputs, string_internal: bool) -> Result<i64> {
    for (i, t) in inp.indices.iter().enumerate() {
        if t.shape().len() != 2 {
            return Err(invalid(format!(
                "Input indices should be a matrix but received shape {} at position {i}",
                shape_str(t.shape())
            )));
        }
        if t.shape()[1] != 2 {
            return Err(invalid(format!(
                "Expected D2 of index to be 2 got {} at position {i}",
                t.shape()[1]
            )));
        }
        if t.dtype() != DType::Int64 {
            return Err(invalid("Input indices should be of type int64"));
        }
    }
    for (i, t) in inp.values.iter().enumerate() {
        if string_internal && t.dtype() == DType::Int64 {
            // TensorFlow prints the two dtypes as their enum numbers.
            return Err(invalid(format!(
                "Input values should be of internal type {} but received {}",
                DType::String.code(),
                DType::Int64.code()
            )));
        }
        if t.shape().len() != 1 {
            return Err(invalid(format!(
                "Input values should be a vector but received shape {} at position {i}",
                shape_str(t.shape())
            )));
        }
        if inp.indices[i].shape()[0] != t.shape()[0] {
            return Err(invalid(format!(
                "Expected size of values to be {} got {} at position {i}",
                inp.indices[i].shape()[0],
                t.shape()[0]
            )));
        }
    }
    for (i, t) in inp.shapes.iter().enumerate() {
        if t.shape().len() != 1 {
            return Err(invalid(format!(
                "Input shapes should be a vector but received shape {} at position {i}",
                shape_str(t.shape())
            )));
        }
        if t.shape()[0] != 2 {
            return Err(invalid(format!(
                "shape should imply a 2D tensor, but got {} at position {i}",
                shape_str(t.shape())
            )));
        }
        if t.dtype() != DType::Int64 {
            return Err(invalid("Input shape should be of type int64"));
        }
    }
    for (i, t) in inp.dense.iter().enumerate() {
        if string_internal && t.dtype() == DType::Int64 {
            return Err(invalid(format!(
                "Dense inputs should be of internal type {} but received {}",
                DType::String.code(),
                DType::Int64.code()
            )));
        }
        if t.shape().len() != 2 {
            return Err(invalid(format!(
                "Dense inputs should be a matrix but received shape {} at position {i}",
                shape_str(t.shape())
            )));
        }
    }
    for t in inp.values.iter().chain(inp.dense) {
        if !matches!(t.dtype(), DType::Int64 | DType::String) {
            return Err(invalid(format!(
                "SparseCross: features must be int64 or string, got {}",
                t.dtype()
            )));
        }
    }
    let first_row = |t: &Tensor| -> Result<i64> { Ok(t.to_vec::<i64>()?[0]) };
    let batch = match (inp.shapes.first(), inp.dense.first()) {
        (Some(s), _) => first_row(s)?,
        (None, Some(d)) => d.shape()[0],
        (None, None) => 0,
    };
    for (i, s) in inp.shapes.iter().enumerate() {
        let b = first_row(s)?;
        if b != batch {
            return Err(invalid(format!(
                "Expected batch size {batch} got {b} at position {i}"
            )));
        }
    }
    for (i, d) in inp.dense.iter().enumerate() {
        if d.shape()[0] != batch {
            return Err(invalid(format!(
                "Expected batch size {batch} got {} at dense tensor {i}",
                d.shape()[0]
            )));
        }
    }
    if batch < 0 {
        return Err(invalid(format!("SparseCross: negative batch size {batch}")));
    }
    Ok(batch)
}

/// The columns, sparse first. A sparse column's row `b` is the run of
/// entries at its cursor whose row index is `b` (TensorFlow's reading,
/// which takes the entries as sorted by row).
fn columns<'a>(inp: &Inputs<'a>, batch: usize) -> Result<Vec<Column<'a>>> {
    check_size("SparseCross", DType::Int64, batch as u64)?;
    let mut cols = Vec::with_capacity(inp.values.len() + inp.dense.len());
    for (ind, values) in inp.indices.iter().zip(inp.values) {
        let flat = ind.to_vec::<i64>()?;
        let n = ind.shape()[0] as usize;
        let (mut start, mut count) = (Vec::with_capacity(batch), Vec::with_capacity(batch));
        let mut cur = 0usize;
        for b in 0..batch {
            start.push(cur);
            let first = cur;
            while cur < n && flat[cur * 2] == b as i64 {
                cur += 1;
            }
            count.push(cur - first);
        }
        cols.push(Column::Sparse {
            values,
            start,
            count,
        });
    }
    cols.extend(inp.dense.iter().map(Column::Dense));
    Ok(cols)
}

/// Runs the cross: `cross(b, picks)` makes the value of one combination.
fn run<T>(
    cols: &[Column],
    batch: usize,
    mut cross: impl FnMut(usize, &[usize]) -> Result<T>,
) -> Result<(Vec<T>, Vec<i64>, i64)> {
    let mut total: u64 = 0;
    let mut max_count: u64 = 0;
    for b in 0..batch {
        let c = cols
            .iter()
            .try_fold(1u64, |acc, c| acc.checked_mul(c.count(b) as u64))
            .ok_or_else(|| invalid("SparseCross: too many crosses"))?;
        let c = if cols.is_empty() { 1 } else { c };
        max_count = max_count.max(c);
        total = total.saturating_add(c);
    }
    check_size("SparseCross", DType::Int64, total.saturating_mul(3))?;
    let mut values = Vec::with_capacity(total as usize);
    let mut indices = Vec::with_capacity(total as usize * 2);
    let mut picks = vec![0usize; cols.len()];
    for b in 0..batch {
        if cols.iter().any(|c| c.count(b) == 0) {
            continue;
        }
        picks.iter_mut().for_each(|p| *p = 0);
        let mut k = 0i64;
        loop {
            values.push(cross(b, &picks)?);
            indices.extend_from_slice(&[b as i64, k]);
            k += 1;
            // The next combination: the last column fastest.
            let mut carry = true;
            for (i, c) in cols.iter().enumerate().rev() {
                picks[i] += 1;
                if picks[i] == c.count(b) {
                    picks[i] = 0;
                } else {
                    carry = false;
                    break;
                }
            }
            if carry {
                break;
            }
        }
    }
    Ok((values, indices, max_count as i64))
}

fn finish_output(values: Tensor, indices: Vec<i64>, batch: i64, max: i64) -> Result<Vec<Tensor>> {
    let n = indices.len() as i64 / 2;
    Ok(vec![
        Tensor::from_slice(&indices, vec![n, 2])?,
        values,
        Tensor::vector(&[batch, max]),
    ])
}

fn joined(cols: &[Column], b: usize, picks: &[usize], sep: &[u8]) -> Result<Bytes> {
    let mut s = Vec::new();
    for (i, (c, &p)) in cols.iter().zip(picks).enumerate() {
        if i > 0 {
            s.extend_from_slice(sep);
        }
        s.extend_from_slice(&feature_string(c.values(), c.at(b, p))?);
    }
    Ok(Bytes::from(s))
}

pub(super) fn bucket(h: u64, num_buckets: i64) -> i64 {
    if num_buckets > 0 {
        (h % num_buckets as u64) as i64
    } else {
        (h % i64::MAX as u64) as i64
    }
}

fn sparse_cross(attrs: &NodeAttrs) -> Result<Compute> {
    let n = attrs.count("N")?;
    let num_buckets = attrs.int("num_buckets")?;
    let hash_key = attrs.int("hash_key")? as u64;
    let out_type = attrs.dtype("out_type")?;
    let internal = attrs.dtype("internal_type")?;
    // TensorFlow's kernels: a string output is never hashed, an int64
    // output always is (`hashed_output` is not read).
    if !matches!(out_type, DType::Int64 | DType::String)
        || !matches!(internal, DType::Int64 | DType::String)
    {
        return Err(attrs.error("out_type and internal_type must be int64 or string"));
    }
    Ok(Box::new(move |inputs| {
        let inp = split_inputs(&inputs, n, 0)?;
        let batch = validate(&inp, internal == DType::String)?;
        let cols = columns(&inp, batch as usize)?;
        if out_type == DType::String {
            let (values, indices, max) =
                run(&cols, batch as usize, |b, p| joined(&cols, b, p, b"_X_"))?;
            let n = values.len() as i64;
            return finish_output(Tensor::strings(values, vec![n])?, indices, batch, max);
        }
        let (values, indices, max) = run(&cols, batch as usize, |b, p| {
            let mut h = hash_key;
            for (c, &pick) in cols.iter().zip(p) {
                let t = c.values();
                let at = c.at(b, pick);
                let f = match t.data() {
                    TensorData::Strings(s) => fingerprint64(&s[at]),
                    TensorData::Buffer(_) => int_at(t, at)? as u64,
                };
                h = fingerprint_cat64(h, f);
            }
            Ok(bucket(h, num_buckets))
        })?;
        finish_output(Tensor::vector(&values), indices, batch, max)
    }))
}

fn sparse_cross_v2(attrs: &NodeAttrs) -> Result<Compute> {
    let n = attrs.count("N")?;
    Ok(Box::new(move |inputs| {
        let inp = split_inputs(&inputs, n, 1)?;
        let batch = validate(&inp, false)?;
        let sep = &inp.rest[0];
        if !sep.shape().is_empty() || sep.dtype() != DType::String {
            // TensorFlow's `Tensor::DebugString`: up to three values.
            let shown: Vec<String> = sep
                .string_values()
                .unwrap_or(&[])
                .iter()
                .take(3)
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect();
            let more = if sep.num_elements() > 3 { "..." } else { "" };
            return Err(invalid(format!(
                "Input separator should be a scalar. Received: Tensor<type: {} shape: {} values: {}{more}>",
                sep.dtype(),
                shape_str(sep.shape()),
                shown.join(" ")
            )));
        }
        let sep = sep.string_values()?[0].clone();
        let cols = columns(&inp, batch as usize)?;
        let (values, indices, max) = run(&cols, batch as usize, |b, p| joined(&cols, b, p, &sep))?;
        let n = values.len() as i64;
        finish_output(Tensor::strings(values, vec![n])?, indices, batch, max)
    }))
}

fn sparse_cross_hashed(attrs: &NodeAttrs) -> Result<Compute> {
    let n = attrs.count("N")?;
    Ok(Box::new(move |inputs| {
        let inp = split_inputs(&inputs, n, 3)?;
        let batch = validate(&inp, false)?;
        let num_buckets = scalar_of::<i64>(&inp.rest[0], "num_buckets")?;
        let strong = scalar_of::<bool>(&inp.rest[1], "strong_hash")?;
        let salt = inp.rest[2].to_vec::<i64>()?;
        if salt.len() != 2 {
            return Err(invalid(format!(
                "Input \"salt\" must have length 2 but has length {}",
                salt.len()
            )));
        }
        let key = [salt[0] as u64, salt[1] as u64];
        let cols = columns(&inp, batch as usize)?;
        let (values, indices, max) = run(&cols, batch as usize, |b, p| {
            let mut h = 0u64;
            for (i, (c, &pick)) in cols.iter().zip(p).enumerate() {
                let t = c.values();
                let at = c.at(b, pick);
                let f = match t.data() {
                    TensorData::Strings(s) if strong => siphash(key, &s[at]),
                    TensorData::Strings(s) => fingerprint64(&s[at]),
                    TensorData::Buffer(_) => {
                        let v = int_at(t, at)?;
                        // Four bytes: TensorFlow's `sizeof(dtype())`.
                        let head = &v.to_le_bytes()[..4];
                        if strong && !c.is_sparse() {
                            return Err(invalid(
                                "SparseCrossHashed: strong_hash of a dense int64 column is refused \
                                 (TensorFlow 2.21 crashes on it)",
                            ));
                        } else if strong {
                            siphash(key, head)
                        } else if c.is_sparse() {
                            fingerprint64(head)
                        } else {
                            v as u64
                        }
                    }
                };
                h = if i == 0 { f } else { fingerprint_cat64(h, f) };
            }
            Ok(bucket(h, num_buckets))
        })?;
        finish_output(Tensor::vector(&values), indices, batch, max)
    }))
}

fn scalar_of<T: tfdata_core::NativeType>(t: &Tensor, what: &str) -> Result<T> {
    t.to_vec::<T>()?
        .first()
        .copied()
        .ok_or_else(|| invalid(format!("{what} must be a scalar")))
}
