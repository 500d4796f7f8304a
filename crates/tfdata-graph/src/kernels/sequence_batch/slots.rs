//! The first of the parse's two passes: one [`Slot`] per requested
//! feature, where its bytes are in each record ([`extract`]) and how many
//! values (and rows) it has across the batch ([`count_context`],
//! [`count_list`]). TensorFlow counts every feature before it writes any,
//! so a type mismatch anywhere is reported before a missing required
//! feature; the outputs ([`super::outputs`]) are sized from these counts.

use std::collections::HashMap;

use bytes::Bytes;
use tfdata_core::{DType, Error, Result};

use super::wire::{self, Wire};
use super::{invalid, key_str, type_name};

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Dense,
    Sparse,
    Ragged,
}

/// One requested feature across the batch: the bytes of its `Feature`
/// (context) or `FeatureList` (lists) in each record where present, and
/// the lengths counted from them.
pub(super) struct Slot<'a> {
    kind: Kind,
    dtype: DType,
    pub(super) protos: Vec<Option<&'a [u8]>>,
    /// Sparse and ragged: the batch's total values; dense: the most in
    /// one record (a context feature starts at its default's size).
    pub(super) length: usize,
    /// Ragged feature lists: the batch's total rows.
    pub(super) rows: usize,
}

pub(super) type Slots<'a> = HashMap<Bytes, Slot<'a>>;

/// TensorFlow's order: sparse, ragged, dense. A key may be requested twice
/// as the same kind (both read one slot).
pub(super) fn slots<'a>(
    section: &str,
    n: usize,
    sparse: (&[Bytes], &[DType]),
    ragged: (&[Bytes], Vec<DType>),
    dense: (&[Bytes], Vec<(DType, usize)>),
) -> Result<Slots<'a>> {
    let mut map: Slots<'a> = HashMap::new();
    let fresh = |dtype| Slot {
        kind: Kind::Dense,
        dtype,
        protos: vec![None; n],
        length: 0,
        rows: 0,
    };
    for (k, &t) in sparse.0.iter().zip(sparse.1) {
        let slot = map.entry(k.clone()).or_insert_with(|| fresh(t));
        slot.kind = Kind::Sparse;
        slot.dtype = t;
        slot.length = 0;
    }
    for (k, t) in ragged.0.iter().zip(ragged.1) {
        let slot = map.entry(k.clone()).or_insert_with(|| fresh(t));
        if slot.kind == Kind::Sparse {
            return Err(invalid(format!(
                "{section} feature {} cannot be both ragged and sparse",
                key_str(k)
            )));
        }
        slot.kind = Kind::Ragged;
        slot.dtype = t;
        slot.length = 0;
    }
    for (k, (t, default_len)) in dense.0.iter().zip(dense.1) {
        let slot = map.entry(k.clone()).or_insert_with(|| fresh(t));
        if slot.kind != Kind::Dense {
            return Err(invalid(format!(
                "{section} feature {} cannot be both dense and sparse",
                key_str(k)
            )));
        }
        slot.dtype = t;
        slot.length = default_len;
    }
    Ok(map)
}

/// Finds each requested feature's bytes in one record; `None` when the
/// record is not a `SequenceExample` as TensorFlow's parser reads one.
pub(super) fn extract<'a>(
    record: &'a [u8],
    e: usize,
    context: &mut Slots<'a>,
    lists: &mut Slots<'a>,
) -> Option<()> {
    let mut w = Wire::new(record);
    while !w.at_end() {
        let section = if w.expect_tag(0x0a) {
            &mut *context
        } else if w.expect_tag(0x12) {
            &mut *lists
        } else {
            w.skip_field()?;
            continue;
        };
        let len = w.varint32()?;
        let outer = w.push_limit(len);
        while !w.at_end() {
            if !w.expect_tag(0x0a) {
                return None;
            }
            let len = w.varint32()?;
            let entry = w.push_limit(len);
            if !w.expect_tag(0x0a) {
                return None;
            }
            let key = w.string()?;
            if !w.expect_tag(0x12) {
                return None;
            }
            let value = w.string()?;
            if !w.at_end() {
                return None;
            }
            w.pop_limit(entry);
            if let Some(slot) = section.get_mut(key) {
                slot.protos[e] = Some(value);
            }
        }
        w.pop_limit(outer);
    }
    Some(())
}

fn mismatch_context(name: &str, key: &Bytes, dtype: DType) -> Error {
    invalid(format!(
        "Name: {name}, Context feature: {}.  Data types don't match. Expected type: {}",
        key_str(key),
        type_name(dtype)
    ))
}

fn mismatch_list(name: &str, key: &Bytes, row: usize, dtype: DType) -> Error {
    invalid(format!(
        "Name: {name}, Feature list: {}, Index: {row}.  Data types don't match. Expected type: {}",
        key_str(key),
        type_name(dtype)
    ))
}

pub(super) fn count_context(
    key: &Bytes,
    slot: &mut Slot<'_>,
    name: &dyn Fn(usize) -> String,
) -> Result<()> {
    for (e, proto) in slot.protos.iter().enumerate() {
        let Some(proto) = proto.filter(|p| !p.is_empty()) else {
            continue;
        };
        let n = wire::feature_len(slot.dtype, &mut Wire::new(proto))
            .ok_or_else(|| mismatch_context(&name(e), key, slot.dtype))?;
        match slot.kind {
            Kind::Sparse | Kind::Ragged => slot.length += n,
            Kind::Dense => slot.length = slot.length.max(n),
        }
    }
    Ok(())
}

pub(super) fn sequence_error(key: &Bytes, name: &str) -> Error {
    invalid(format!(
        "Error in sequence feature {} in example {name}",
        key_str(key)
    ))
}

/// Walks one record's `FeatureList` row by row, as TensorFlow's parser
/// steps through it: `row(index, wire, len)` is called for every row,
/// with the wire limited to the row's `Feature` when it has values
/// (`len > 2`); a row of 0 bytes (an empty `Feature`) or 2 (an empty list
/// of the right kind) has none.
pub(super) fn rows_of(
    key: &Bytes,
    proto: &[u8],
    dtype: DType,
    name: &str,
    mut row: impl FnMut(usize, &mut Wire<'_>, u32) -> Result<()>,
) -> Result<usize> {
    let mut w = Wire::new(proto);
    let mut rows = 0usize;
    while !w.at_end() {
        if !w.expect_tag(0x0a) {
            return Err(sequence_error(key, name));
        }
        let len = w.varint32().ok_or_else(|| sequence_error(key, name))?;
        match len {
            0 => row(rows, &mut w, len)?,
            1 => return Err(sequence_error(key, name)),
            2 => {
                if !wire::skip_empty_feature(&mut w, dtype) {
                    return Err(mismatch_list(name, key, rows, dtype));
                }
                row(rows, &mut w, len)?;
            }
            _ => {
                let limit = w.push_limit(len);
                row(rows, &mut w, len)?;
                w.pop_limit(limit);
            }
        }
        rows += 1;
    }
    Ok(rows)
}

pub(super) fn count_list(
    key: &Bytes,
    slot: &mut Slot<'_>,
    name: &dyn Fn(usize) -> String,
) -> Result<()> {
    for (e, proto) in slot.protos.iter().enumerate() {
        let Some(proto) = proto.filter(|p| !p.is_empty()) else {
            continue;
        };
        let dtype = slot.dtype;
        let mut values = 0usize;
        let rows = rows_of(key, proto, dtype, &name(e), |r, w, len| {
            if len <= 2 {
                return Ok(());
            }
            values += wire::feature_len(dtype, w)
                .ok_or_else(|| mismatch_list(&name(e), key, r, dtype))?;
            Ok(())
        })?;
        match slot.kind {
            Kind::Sparse => slot.length += values,
            Kind::Ragged => {
                slot.length += values;
                slot.rows += rows;
            }
            Kind::Dense => slot.length = slot.length.max(values),
        }
    }
    Ok(())
}
