//! One Arrow column of a record batch read out as tensor data, as its
//! [`TensorPlan`] says: dictionaries decoded, lists' spans found, nulls
//! replaced by the declared value (or refused), fixed-width values shared
//! with Arrow's buffer and strings sliced from its values buffer. The plans
//! (what each type becomes) are `super`'s; this is their reading.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    BinaryType, BinaryViewType, ByteArrayType, ByteViewType, LargeBinaryType, LargeUtf8Type,
    Utf8Type,
};
use arrow_array::{Array, ArrayRef, OffsetSizeTrait};
use arrow_buffer::ArrowNativeType;
use arrow_schema::DataType;
use bytes::{Bytes, BytesMut};
use tfdata_core::tensor::TensorData;
use tfdata_core::{Error, Result, Tensor};

use super::{ColumnPlan, Fill, Leaf, TensorPlan};

/// `array` of `plan`, its tensors converted, appended to `out` in
/// flattening order.
pub(super) fn collect_columns<'a>(
    plan: &'a ColumnPlan,
    array: &ArrayRef,
    what: &str,
    out: &mut Vec<(&'a TensorPlan, Column)>,
) -> Result<()> {
    match plan {
        ColumnPlan::Tensor(t) => {
            out.push((t, Column::of(t, array, what)?));
            Ok(())
        }
        ColumnPlan::Struct(fields) => {
            let s = array
                .as_struct_opt()
                .ok_or_else(|| mismatch(what, "a struct", array))?;
            if s.null_count() > 0 {
                return Err(Error::InvalidArgument(format!(
                    "{what}: a struct column has null rows; structs must not be null"
                )));
            }
            for (name, p) in fields {
                let child = s
                    .column_by_name(name)
                    .ok_or_else(|| mismatch(what, "a struct with this field", array))?;
                collect_columns(p, child, what, out)?;
            }
            Ok(())
        }
    }
}

fn mismatch(what: &str, want: &str, got: &ArrayRef) -> Error {
    Error::DataLoss {
        location: what.to_string(),
        reason: format!(
            "expected {want}, the file has {} (the schema changed between files?)",
            got.data_type()
        ),
    }
}

/// One column of a batch, converted: its values flattened, and per row
/// where they start (in list items) and how many list items it has.
pub(super) struct Column {
    values: Values,
    /// Per row: first item and number of items (one for a plain column).
    rows: Vec<(usize, usize)>,
}

enum Values {
    /// Fixed-width values, `size` bytes each.
    Fixed {
        data: Bytes,
        size: usize,
    },
    Strings(Vec<Bytes>),
}

impl Column {
    fn of(plan: &TensorPlan, array: &ArrayRef, what: &str) -> Result<Column> {
        let array = decode_dictionary(array, what)?;
        let rows = array.len();
        let per_item = plan.item_values();
        // Peel the outer list, then the fixed-size lists, to the leaf.
        let (rows_spans, leaf, leaf_null_rows) = if plan.var_len {
            let (spans, child) = list_spans(&array, plan, what)?;
            (spans, child, Vec::new())
        } else {
            let spans = (0..rows).map(|r| (r, 1)).collect();
            let nulls: Vec<usize> = if array.null_count() > 0 {
                (0..rows).filter(|&r| array.is_null(r)).collect()
            } else {
                Vec::new()
            };
            (spans, array.clone(), nulls)
        };
        if !leaf_null_rows.is_empty() && plan.null_value.is_none() {
            return Err(null_error(plan, what));
        }
        let mut leaf = leaf;
        for _ in &plan.dims {
            let fsl = leaf
                .as_fixed_size_list_opt()
                .ok_or_else(|| mismatch(what, "a fixed-size list", &leaf))?;
            if fsl.null_count() > 0 && plan.null_value.is_none() {
                return Err(null_error(plan, what));
            }
            let size = fsl.value_length() as usize;
            let start = fsl.value_offset(0).max(0) as usize;
            leaf = fsl.values().slice(start, fsl.len() * size);
        }
        let leaf = decode_dictionary(&leaf, what)?;
        let values = leaf_values(plan, &leaf, what)?;
        // Rows in list items: a plain column's row is one item of
        // `per_item` leaf values.
        let mut col = Column {
            values,
            rows: rows_spans,
        };
        if per_item == 0 {
            return Ok(col);
        }
        // Nulls at the outer level of a non-list column (fixed lists and
        // plain values): the whole row takes the null value.
        if !plan.var_len && !leaf_null_rows.is_empty() {
            col.fill_rows(plan, &leaf_null_rows, per_item);
        }
        Ok(col)
    }

    /// Replaces rows `rows` (whole items of `per_item` values) by the null
    /// value.
    fn fill_rows(&mut self, plan: &TensorPlan, rows: &[usize], per_item: usize) {
        let Some(fill) = &plan.null_value else {
            return;
        };
        match (&mut self.values, fill) {
            (Values::Fixed { data, size }, Fill::Fixed(v)) => {
                let mut owned = BytesMut::from(&data[..]);
                for &r in rows {
                    let (start, _) = self.rows[r];
                    for i in 0..per_item {
                        let at = (start * per_item + i) * *size;
                        if let Some(slot) = owned.get_mut(at..at + *size) {
                            slot.copy_from_slice(v);
                        }
                    }
                }
                *data = owned.freeze();
            }
            (Values::Strings(s), Fill::Bytes(v)) => {
                for &r in rows {
                    let (start, _) = self.rows[r];
                    for i in 0..per_item {
                        if let Some(slot) = s.get_mut(start * per_item + i) {
                            *slot = v.clone();
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// Row `row` as a tensor: its list items, with the fixed dimensions.
    pub(super) fn row_tensor(&self, plan: &TensorPlan, row: usize) -> Result<Tensor> {
        let (start, items) = self.rows[row];
        let per_item = plan.item_values();
        let mut shape: Vec<i64> = Vec::with_capacity(plan.dims.len() + 1);
        if plan.var_len {
            shape.push(items as i64);
        }
        shape.extend(plan.dims.iter().map(|&d| d as i64));
        let (from, n) = (start * per_item, items * per_item);
        let data = match &self.values {
            Values::Fixed { data, size } => {
                TensorData::Buffer(data.slice(from * size..(from + n) * size))
            }
            Values::Strings(s) => TensorData::Strings(s[from..from + n].to_vec()),
        };
        Tensor::new(plan.dtype, shape, data)
    }

    /// All rows as one tensor: `[rows, ...]`, varying-length rows padded
    /// to the longest.
    pub(super) fn into_batch_tensor(
        self,
        plan: &TensorPlan,
        rows: usize,
        what: &str,
    ) -> Result<Tensor> {
        let per_item = plan.item_values();
        let mut shape: Vec<i64> = vec![rows as i64];
        let dims = plan.dims.iter().map(|&d| d as i64);
        if !plan.var_len {
            shape.extend(dims);
            // The rows are contiguous: the buffer as it is, and the
            // strings moved, not cloned (a clone per string is an atomic
            // increment on the shared buffer).
            let total = rows * per_item;
            let data = match self.values {
                Values::Fixed { data, size } => TensorData::Buffer(data.slice(0..total * size)),
                Values::Strings(mut s) => {
                    s.truncate(total);
                    TensorData::Strings(s)
                }
            };
            return Tensor::new(plan.dtype, shape, data);
        }
        let longest = self.rows.iter().map(|&(_, n)| n).max().unwrap_or(0);
        let ragged = self.rows.iter().any(|&(_, n)| n != longest);
        let padding = match (&plan.padding, ragged) {
            (_, false) => None,
            (Some(p), true) => Some(p),
            (None, true) => {
                return Err(Error::InvalidArgument(format!(
                    "{what}: column {} holds lists of different lengths in one batch of {rows} \
                     rows; declare a padding value for it (padding_values), or read one row per \
                     element (batch_size=None)",
                    plan.path
                )));
            }
        };
        shape.push(longest as i64);
        shape.extend(dims);
        let row_values = longest * per_item;
        let data = match &self.values {
            Values::Fixed { data, size } => {
                let pad = match padding {
                    Some(Fill::Fixed(v)) => v.as_slice(),
                    _ => &[],
                };
                let mut out = BytesMut::with_capacity(rows * row_values * size);
                for &(start, items) in &self.rows {
                    let (from, n) = (start * per_item * size, items * per_item * size);
                    out.extend_from_slice(&data[from..from + n]);
                    for _ in items * per_item..row_values {
                        out.extend_from_slice(pad);
                    }
                }
                TensorData::Buffer(out.freeze())
            }
            Values::Strings(s) => {
                let pad = match padding {
                    Some(Fill::Bytes(b)) => b.clone(),
                    _ => Bytes::new(),
                };
                let mut out = Vec::with_capacity(rows * row_values);
                for &(start, items) in &self.rows {
                    out.extend_from_slice(&s[start * per_item..(start + items) * per_item]);
                    out.extend(std::iter::repeat_n(
                        pad.clone(),
                        (longest - items) * per_item,
                    ));
                }
                TensorData::Strings(out)
            }
        };
        Tensor::new(plan.dtype, shape, data)
    }
}

fn null_error(plan: &TensorPlan, what: &str) -> Error {
    Error::InvalidArgument(format!(
        "{what}: column {} has nulls; declare a value for them (null_values), or filter \
         those rows out",
        plan.path
    ))
}

/// An Arrow buffer as `Bytes`, shared: the tensor holds a reference to
/// Arrow's allocation instead of a copy of it.
fn shared(buffer: &arrow_buffer::Buffer) -> Bytes {
    struct Owner(arrow_buffer::Buffer);
    impl AsRef<[u8]> for Owner {
        fn as_ref(&self) -> &[u8] {
            self.0.as_slice()
        }
    }
    Bytes::from_owner(Owner(buffer.clone()))
}

/// A dictionary-encoded array decoded to its values' type.
fn decode_dictionary(array: &ArrayRef, what: &str) -> Result<ArrayRef> {
    let Some(dict) = array.as_any_dictionary_opt() else {
        return Ok(array.clone());
    };
    arrow_select::take::take(dict.values().as_ref(), dict.keys(), None).map_err(|e| {
        Error::DataLoss {
            location: what.to_string(),
            reason: format!("decoding a dictionary column: {e}"),
        }
    })
}

/// A varying-length list column: per row its span in the child's items
/// (a null row, once a null value is declared, is an empty list), and the
/// child sliced to those items.
fn list_spans(
    array: &ArrayRef,
    plan: &TensorPlan,
    what: &str,
) -> Result<(Vec<(usize, usize)>, ArrayRef)> {
    fn spans<O: OffsetSizeTrait>(
        list: &arrow_array::GenericListArray<O>,
    ) -> (Vec<(usize, usize)>, ArrayRef) {
        let offsets = list.value_offsets();
        let base = offsets.first().map_or(0, |o| o.as_usize());
        let end = offsets.last().map_or(0, |o| o.as_usize());
        let spans = offsets
            .windows(2)
            .map(|w| (w[0].as_usize() - base, w[1].as_usize() - w[0].as_usize()))
            .collect();
        (spans, list.values().slice(base, end - base))
    }
    let (mut spans, child) = if let Some(l) = array.as_list_opt::<i32>() {
        spans(l)
    } else if let Some(l) = array.as_list_opt::<i64>() {
        spans(l)
    } else {
        return Err(mismatch(what, "a list", array));
    };
    let nulls: Vec<usize> = (0..array.len()).filter(|&r| array.is_null(r)).collect();
    if !nulls.is_empty() && plan.null_value.is_none() {
        return Err(null_error(plan, what));
    }
    // A null list is an empty one once a null value is declared.
    for &r in &nulls {
        spans[r].1 = 0;
    }
    let child_nulls = child.null_count() > 0;
    if child_nulls && plan.null_value.is_none() {
        return Err(null_error(plan, what));
    }
    Ok((spans, child))
}

/// The leaf values of `array` (`plan`'s leaf type), nulls filled.
fn leaf_values(plan: &TensorPlan, array: &ArrayRef, what: &str) -> Result<Values> {
    let nulls: Vec<usize> = if array.null_count() > 0 {
        (0..array.len()).filter(|&i| array.is_null(i)).collect()
    } else {
        Vec::new()
    };
    if !nulls.is_empty() && plan.null_value.is_none() {
        return Err(null_error(plan, what));
    }
    let mut values = match plan.leaf {
        Leaf::Fixed(size) => {
            let data = array.to_data();
            if data.buffers().is_empty() || data.data_type().primitive_width() != Some(size) {
                return Err(mismatch(what, &format!("{size}-byte values"), array));
            }
            let start = data.offset() * size;
            let end = start + data.len() * size;
            let buffer = &data.buffers()[0];
            if buffer.len() < end {
                return Err(mismatch(
                    what,
                    &format!("{} {size}-byte values", data.len()),
                    array,
                ));
            }
            // Arrow's buffer itself, shared (no copy): tensors slice it.
            Values::Fixed {
                data: shared(buffer).slice(start..end),
                size,
            }
        }
        Leaf::Bool => {
            let b = array
                .as_boolean_opt()
                .ok_or_else(|| mismatch(what, "booleans", array))?;
            let data: Vec<u8> = (0..b.len()).map(|i| u8::from(b.value(i))).collect();
            Values::Fixed {
                data: data.into(),
                size: 1,
            }
        }
        Leaf::Bytes => Values::Strings(byte_values(array, what)?),
    };
    if !nulls.is_empty() {
        match (&mut values, &plan.null_value) {
            (Values::Fixed { data, size }, Some(Fill::Fixed(v))) => {
                let mut owned = BytesMut::from(&data[..]);
                for &i in &nulls {
                    owned[i * *size..(i + 1) * *size].copy_from_slice(v);
                }
                *data = owned.freeze();
            }
            (Values::Strings(s), Some(Fill::Bytes(v))) => {
                for &i in &nulls {
                    s[i] = v.clone();
                }
            }
            _ => return Err(null_error(plan, what)),
        }
    }
    Ok(values)
}

/// A string or binary array's values: the data copied once, each value a
/// slice of it.
fn byte_values(array: &ArrayRef, what: &str) -> Result<Vec<Bytes>> {
    fn offsets<T: ByteArrayType>(a: &arrow_array::GenericByteArray<T>) -> Vec<Bytes> {
        let offsets = a.value_offsets();
        let base = offsets.first().map_or(0, |o| o.as_usize());
        let end = offsets.last().map_or(0, |o| o.as_usize());
        // The values buffer shared, each string a slice of it.
        let data = shared(a.values()).slice(base..end);
        offsets
            .windows(2)
            .map(|w| data.slice(w[0].as_usize() - base..w[1].as_usize() - base))
            .collect()
    }
    fn views<T: ByteViewType + ?Sized>(a: &arrow_array::GenericByteViewArray<T>) -> Vec<Bytes> {
        (0..a.len())
            .map(|i| Bytes::copy_from_slice(a.value(i).as_ref()))
            .collect()
    }
    use DataType as A;
    Ok(match array.data_type() {
        A::Utf8 => offsets(array.as_bytes::<Utf8Type>()),
        A::LargeUtf8 => offsets(array.as_bytes::<LargeUtf8Type>()),
        A::Binary => offsets(array.as_bytes::<BinaryType>()),
        A::LargeBinary => offsets(array.as_bytes::<LargeBinaryType>()),
        A::Utf8View => {
            let a = array.as_string_view();
            (0..a.len())
                .map(|i| Bytes::copy_from_slice(a.value(i).as_bytes()))
                .collect()
        }
        A::BinaryView => views(array.as_byte_view::<BinaryViewType>()),
        A::FixedSizeBinary(_) => {
            let a = array.as_fixed_size_binary();
            (0..a.len())
                .map(|i| Bytes::copy_from_slice(a.value(i)))
                .collect()
        }
        _ => return Err(mismatch(what, "strings or binary", array)),
    })
}
