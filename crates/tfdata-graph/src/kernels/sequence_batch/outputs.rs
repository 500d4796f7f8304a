//! The second pass: each feature kind's output tensors (dense with
//! defaults or padding, sparse triples, ragged values and row splits),
//! written from the slots the first pass ([`super::slots`]) counted and
//! sized, with TensorFlow's checks and messages.

use bytes::Bytes;
use tfdata_core::{DType, Result, Tensor};

use super::slots::{Slot, rows_of, sequence_error};
use super::wire::{self, Wire};
use super::{invalid, key_str, type_name};
use crate::kernels::check_size;
use crate::kernels::sequence_example::Values;
use crate::kernels::strings::shape_string;

/// A dense shape's element count, refused when it overflows.
fn elements(shape: &[i64]) -> Result<i64> {
    shape
        .iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| invalid(format!("dense shape {} is too large", shape_string(shape))))
}

pub(super) fn context_dense(
    key: &Bytes,
    slot: &Slot<'_>,
    dtype: DType,
    shape: &[i64],
    default: &Tensor,
    is_batch: bool,
    name: &dyn Fn(usize) -> String,
) -> Result<Tensor> {
    let per = elements(shape)?;
    if slot.length as i64 != per {
        return Err(invalid(format!(
            "Inconsistent max number of elements for feature {}: expected {per}, but found {}",
            key_str(key),
            slot.length
        )));
    }
    let n = slot.protos.len();
    check_size(
        "ParseSequenceExample",
        dtype,
        (n as u64).saturating_mul(per as u64),
    )?;
    let mut values = Values::new(dtype);
    for (e, proto) in slot.protos.iter().enumerate() {
        let before = values.len();
        match proto {
            None if default.num_elements() == 0 => {
                return Err(invalid(format!(
                    "Feature: {} (data type: {}) is required but could not be found.",
                    key_str(key),
                    type_name(dtype)
                )));
            }
            None => values.append_tensor(default)?,
            Some([]) => {}
            Some(p) => {
                wire::read_feature(dtype, &mut Wire::new(p), &mut values);
            }
        }
        if values.len() - before != per as usize {
            return Err(invalid(format!(
                "Unexpected number of elements in example {}",
                name(e)
            )));
        }
    }
    let mut full = if is_batch { vec![n as i64] } else { Vec::new() };
    full.extend_from_slice(shape);
    values.tensor(full)
}

pub(super) fn context_sparse(slot: &Slot<'_>, dtype: DType, is_batch: bool) -> Result<[Tensor; 3]> {
    check_size("ParseSequenceExample", DType::Int64, 2 * slot.length as u64)?;
    let mut values = Values::new(dtype);
    let mut indices = Vec::new();
    let mut widest = 0usize;
    for (e, proto) in slot.protos.iter().enumerate() {
        let Some(p) = proto.filter(|p| !p.is_empty()) else {
            continue;
        };
        let added = wire::read_feature(dtype, &mut Wire::new(p), &mut values);
        widest = widest.max(added);
        for i in 0..added {
            if is_batch {
                indices.push(e as i64);
            }
            indices.push(i as i64);
        }
    }
    if values.len() != slot.length {
        return Err(invalid("Unexpected total number of elements in feature"));
    }
    let total = values.len() as i64;
    let (rank, shape) = if is_batch {
        (2, vec![slot.protos.len() as i64, widest as i64])
    } else {
        (1, vec![widest as i64])
    };
    Ok([
        Tensor::from_slice(&indices, vec![total, rank])?,
        values.tensor(vec![total])?,
        Tensor::vector(&shape),
    ])
}

/// Row splits in the split dtype TensorFlow's attribute names.
fn splits(dtype: DType, v: &[i64]) -> Result<Tensor> {
    if dtype == DType::Int32 {
        let narrow: Vec<i32> = v.iter().map(|&x| x as i32).collect();
        return Ok(Tensor::vector(&narrow));
    }
    Ok(Tensor::vector(v))
}

pub(super) fn context_ragged(slot: &Slot<'_>, dtype: DType, split: DType) -> Result<[Tensor; 2]> {
    check_size("ParseSequenceExample", dtype, slot.length as u64)?;
    let mut values = Values::new(dtype);
    let mut row_splits = vec![0i64];
    for proto in &slot.protos {
        if let Some(p) = proto.filter(|p| !p.is_empty()) {
            wire::read_feature(dtype, &mut Wire::new(p), &mut values);
        }
        row_splits.push(values.len() as i64);
    }
    let total = values.len() as i64;
    Ok([values.tensor(vec![total])?, splits(split, &row_splits)?])
}

#[allow(clippy::too_many_arguments)]
pub(super) fn list_dense(
    key: &Bytes,
    slot: &Slot<'_>,
    dtype: DType,
    shape: &[i64],
    may_miss: bool,
    is_batch: bool,
    name: &dyn Fn(usize) -> String,
) -> Result<[Tensor; 2]> {
    let per = elements(shape)? as usize;
    if !slot.length.is_multiple_of(per) {
        let mut total = vec![-1];
        total.extend_from_slice(shape);
        return Err(invalid(format!(
            "Feature list '{}' has an unexpected number of values.  Total values size: {} is \
             not consistent with output shape: {}",
            key_str(key),
            slot.length,
            shape_string(&total).replace("-1", "?")
        )));
    }
    let longest = slot.length / per;
    let n = slot.protos.len();
    check_size(
        "ParseSequenceExample",
        dtype,
        (n as u64).saturating_mul(slot.length as u64),
    )?;
    let mut values = Values::new(dtype);
    let mut lengths = Vec::with_capacity(n);
    for (e, proto) in slot.protos.iter().enumerate() {
        let start = values.len();
        let mut rows = 0;
        match proto {
            None if !may_miss => {
                return Err(invalid(format!(
                    "Name: {}, Feature list '{}' is required but could not be found.  Did you \
                     mean to include it in feature_list_dense_missing_assumed_empty or \
                     feature_list_dense_defaults?",
                    name(e),
                    key_str(key)
                )));
            }
            None => {}
            Some([]) => {}
            Some(p) => {
                let check = |r: usize, added: usize| {
                    if added != per {
                        return Err(invalid(format!(
                            "Name: {}, Key: {}, Index: {r}.  Number of values != expected.  \
                             values size: {added} but output shape: {}",
                            name(e),
                            key_str(key),
                            shape_string(shape)
                        )));
                    }
                    Ok(())
                };
                // Rows of one or two bytes hold no values (checked while
                // counting); each must still have the row's size.
                let mut w = Wire::new(p);
                while !w.at_end() {
                    if !w.expect_tag(0x0a) {
                        return Err(sequence_error(key, &name(e)));
                    }
                    let len = w.varint32().ok_or_else(|| sequence_error(key, &name(e)))?;
                    let limit = w.push_limit(len);
                    let added = if len > 2 {
                        wire::read_feature(dtype, &mut w, &mut values)
                    } else {
                        0
                    };
                    check(rows, added)?;
                    rows += 1;
                    w.pop_limit(limit);
                }
            }
        }
        lengths.push(rows as i64);
        // Padding: zeros, or empty strings.
        values.pad(start + slot.length);
    }
    let mut full = if is_batch { vec![n as i64] } else { Vec::new() };
    full.push(longest as i64);
    full.extend_from_slice(shape);
    let lengths = if is_batch {
        Tensor::vector(&lengths)
    } else {
        Tensor::scalar(lengths[0])
    };
    Ok([values.tensor(full)?, lengths])
}

pub(super) fn list_sparse(
    key: &Bytes,
    slot: &Slot<'_>,
    dtype: DType,
    is_batch: bool,
    name: &dyn Fn(usize) -> String,
) -> Result<[Tensor; 3]> {
    check_size("ParseSequenceExample", DType::Int64, 3 * slot.length as u64)?;
    let mut values = Values::new(dtype);
    let mut indices = Vec::new();
    let (mut most_rows, mut widest) = (0usize, 0usize);
    for (e, proto) in slot.protos.iter().enumerate() {
        let Some(p) = proto.filter(|p| !p.is_empty()) else {
            continue;
        };
        let rows = rows_of(key, p, dtype, &name(e), |r, w, len| {
            if len <= 2 {
                return Ok(());
            }
            let added = wire::read_feature(dtype, w, &mut values);
            widest = widest.max(added);
            for i in 0..added {
                if is_batch {
                    indices.push(e as i64);
                }
                indices.extend([r as i64, i as i64]);
            }
            Ok(())
        })?;
        most_rows = most_rows.max(rows);
    }
    if values.len() != slot.length {
        return Err(invalid(format!(
            "Unexpected number of elements in feature {}",
            key_str(key)
        )));
    }
    let total = values.len() as i64;
    let (rank, shape) = if is_batch {
        (
            3,
            vec![slot.protos.len() as i64, most_rows as i64, widest as i64],
        )
    } else {
        (2, vec![most_rows as i64, widest as i64])
    };
    Ok([
        Tensor::from_slice(&indices, vec![total, rank])?,
        values.tensor(vec![total])?,
        Tensor::vector(&shape),
    ])
}

pub(super) fn list_ragged(
    key: &Bytes,
    slot: &Slot<'_>,
    dtype: DType,
    split: DType,
    name: &dyn Fn(usize) -> String,
) -> Result<[Tensor; 3]> {
    check_size("ParseSequenceExample", dtype, slot.length as u64)?;
    check_size("ParseSequenceExample", DType::Int64, slot.rows as u64 + 1)?;
    let mut values = Values::new(dtype);
    let mut inner = vec![0i64];
    let mut outer = vec![0i64];
    for (e, proto) in slot.protos.iter().enumerate() {
        if let Some(p) = proto.filter(|p| !p.is_empty()) {
            rows_of(key, p, dtype, &name(e), |_, w, len| {
                if len > 2 {
                    wire::read_feature(dtype, w, &mut values);
                }
                inner.push(values.len() as i64);
                Ok(())
            })?;
        }
        outer.push(inner.len() as i64 - 1);
    }
    if values.len() != slot.length {
        return Err(invalid(format!(
            "Unexpected number of elements for feature {}",
            key_str(key)
        )));
    }
    let total = values.len() as i64;
    Ok([
        values.tensor(vec![total])?,
        splits(split, &outer)?,
        splits(split, &inner)?,
    ])
}
