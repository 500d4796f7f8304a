//! Arrow columns as tensors: what a column's type becomes (its
//! [`ColumnPlan`]: a dtype and a shape per row, or a nested dictionary for
//! a struct), and a record batch's columns as one element per row or one
//! element for the whole batch.
//!
//! | Arrow | tensor |
//! | --- | --- |
//! | `Int8` … `UInt64`, `Float16`/`32`/`64`, `Boolean` | the same dtype |
//! | `Utf8`, `LargeUtf8`, `Utf8View`, `Binary`, `LargeBinary`, `BinaryView`, `FixedSizeBinary` | `string` (TensorFlow's bytes) |
//! | `Timestamp`, `Date64`, `Time64`, `Duration` | `int64`, in the column's unit |
//! | `Date32`, `Time32` | `int32` |
//! | `Dictionary(_, V)` | as `V` (decoded) |
//! | `FixedSizeList(T, n)` | a dimension of `n` (nested: one per level) |
//! | `List(T)`, `LargeList(T)` | a dimension of the row's length: a row alone is a vector of it; a batch pads rows to its longest with the column's padding value, or is refused naming the column |
//! | `Struct` | a nested dictionary of its fields |
//!
//! Anything else (decimals, intervals, maps, unions, lists of lists of
//! varying length) is refused naming the column and its type. A null is
//! replaced by the column's declared null value, or refused naming the
//! column.
//!
//! The batch form is the fast path: each fixed-width column's tensor is
//! Arrow's value buffer itself, shared without a copy (strings: slices of
//! Arrow's values buffer, one per row, without copying or allocating), with
//! no work per row.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    BinaryType, BinaryViewType, ByteArrayType, ByteViewType, LargeBinaryType, LargeUtf8Type,
    Utf8Type,
};
use arrow_array::{Array, ArrayRef, OffsetSizeTrait, RecordBatch};
use arrow_buffer::ArrowNativeType;
use arrow_schema::{DataType, Field, Schema};
use bytes::{Bytes, BytesMut};
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Element, Error, Result, Tensor};

use crate::spec::{Shape, Structure, TensorSpec};

/// Dimensions of one column's rows at most (nested fixed-size lists).
const MAX_RANK: usize = 8;

/// What a column's values are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leaf {
    /// Fixed-width little-endian values of this many bytes.
    Fixed(usize),
    /// Bit-packed booleans.
    Bool,
    /// Byte strings.
    Bytes,
}

/// How one tensor-valued column (or struct field) becomes tensors.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorPlan {
    /// The column (`a.b` for a struct's field), for errors.
    pub path: String,
    pub dtype: DType,
    leaf: Leaf,
    /// The rows are lists of varying length (the first dimension).
    var_len: bool,
    /// Fixed dimensions after it (fixed-size lists).
    dims: Vec<usize>,
    /// Replaces nulls (scalar bytes of `dtype`, or one string).
    null_value: Option<Fill>,
    /// Pads a batch's shorter rows (varying-length columns).
    padding: Option<Fill>,
}

/// A declared value, in the column's dtype.
#[derive(Debug, Clone, PartialEq)]
enum Fill {
    Fixed(Vec<u8>),
    Bytes(Bytes),
}

/// A column: a tensor, or a struct's fields by name.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnPlan {
    Tensor(TensorPlan),
    Struct(BTreeMap<String, ColumnPlan>),
}

/// What the user declared for columns: values for their nulls and padding
/// for their varying-length lists (by column path).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declared {
    pub null_values: BTreeMap<String, Tensor>,
    pub padding_values: BTreeMap<String, Tensor>,
}

impl ColumnPlan {
    /// The plan for `field` (a top-level column or a struct's field at
    /// `path`).
    pub fn of(field: &Field, path: &str, declared: &Declared) -> Result<ColumnPlan> {
        if let DataType::Struct(fields) = field.data_type() {
            let mut plans = BTreeMap::new();
            for f in fields {
                let sub = format!("{path}.{}", f.name());
                plans.insert(f.name().clone(), ColumnPlan::of(f, &sub, declared)?);
            }
            return Ok(ColumnPlan::Struct(plans));
        }
        let mut var_len = false;
        let mut dims = Vec::new();
        let mut t = field.data_type();
        loop {
            t = match t {
                DataType::Dictionary(_, value) => value,
                DataType::FixedSizeList(child, n) => {
                    dims.push(usize::try_from(*n).unwrap_or(0));
                    child.data_type()
                }
                DataType::List(child) | DataType::LargeList(child) => {
                    if var_len || !dims.is_empty() {
                        return Err(unsupported(
                            path,
                            field.data_type(),
                            "only the outermost list may vary in length",
                        ));
                    }
                    var_len = true;
                    child.data_type()
                }
                _ => break,
            };
            if dims.len() > MAX_RANK {
                return Err(unsupported(path, field.data_type(), "too deeply nested"));
            }
        }
        let (dtype, leaf) = leaf_type(t).ok_or_else(|| unsupported(path, field.data_type(), ""))?;
        let fill =
            |what: &str, v: Option<&Tensor>| v.map(|t| fill_of(path, what, dtype, t)).transpose();
        Ok(ColumnPlan::Tensor(TensorPlan {
            path: path.to_string(),
            dtype,
            leaf,
            var_len,
            dims,
            null_value: fill("null value", declared.null_values.get(path))?,
            padding: fill("padding value", declared.padding_values.get(path))?,
        }))
    }

    /// The element structure of this column's value: per row, or for a
    /// batch of rows.
    pub fn structure(&self, batched: bool) -> Structure {
        match self {
            ColumnPlan::Tensor(t) => Structure::Tensor(t.spec(batched)),
            ColumnPlan::Struct(fields) => Structure::Dict(
                fields
                    .iter()
                    .map(|(k, p)| (k.clone(), p.structure(batched)))
                    .collect(),
            ),
        }
    }

    /// Its tensors in flattening order (a struct's fields sorted by name).
    fn tensors<'a>(&'a self, out: &mut Vec<&'a TensorPlan>) {
        match self {
            ColumnPlan::Tensor(t) => out.push(t),
            ColumnPlan::Struct(fields) => fields.values().for_each(|p| p.tensors(out)),
        }
    }
}

impl TensorPlan {
    fn spec(&self, batched: bool) -> TensorSpec {
        let mut dims: Vec<Option<i64>> = Vec::new();
        if batched {
            dims.push(None);
        }
        if self.var_len {
            dims.push(None);
        }
        dims.extend(self.dims.iter().map(|&d| Some(d as i64)));
        TensorSpec::new(self.dtype, Shape(Some(dims)))
    }

    /// Values per list item (the product of the fixed dimensions).
    fn item_values(&self) -> usize {
        self.dims.iter().product()
    }
}

fn leaf_type(t: &DataType) -> Option<(DType, Leaf)> {
    use DataType as A;
    Some(match t {
        A::Int8 => (DType::Int8, Leaf::Fixed(1)),
        A::Int16 => (DType::Int16, Leaf::Fixed(2)),
        A::Int32 | A::Date32 | A::Time32(_) => (DType::Int32, Leaf::Fixed(4)),
        A::Int64 | A::Date64 | A::Time64(_) | A::Timestamp(_, _) | A::Duration(_) => {
            (DType::Int64, Leaf::Fixed(8))
        }
        A::UInt8 => (DType::UInt8, Leaf::Fixed(1)),
        A::UInt16 => (DType::UInt16, Leaf::Fixed(2)),
        A::UInt32 => (DType::UInt32, Leaf::Fixed(4)),
        A::UInt64 => (DType::UInt64, Leaf::Fixed(8)),
        A::Float16 => (DType::Half, Leaf::Fixed(2)),
        A::Float32 => (DType::Float, Leaf::Fixed(4)),
        A::Float64 => (DType::Double, Leaf::Fixed(8)),
        A::Boolean => (DType::Bool, Leaf::Bool),
        A::Utf8
        | A::LargeUtf8
        | A::Utf8View
        | A::Binary
        | A::LargeBinary
        | A::BinaryView
        | A::FixedSizeBinary(_) => (DType::String, Leaf::Bytes),
        _ => return None,
    })
}

fn unsupported(path: &str, t: &DataType, why: &str) -> Error {
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(": {why}")
    };
    Error::Unimplemented(format!(
        "column {path}: Arrow type {t} cannot be read as a tensor{why} (supported: integers, \
         floats, booleans, strings and binary, timestamps and dates, dictionaries of those, \
         fixed-size lists, one varying-length list level, structs)"
    ))
}

/// `value` (a scalar tensor) in `dtype`, as a fill for `path`.
fn fill_of(path: &str, what: &str, dtype: DType, value: &Tensor) -> Result<Fill> {
    let wrong = || {
        Error::InvalidArgument(format!(
            "column {path}: the {what} must be a scalar of the column's dtype {dtype} (or a \
             number for a numeric column), got a {} tensor of shape {:?}",
            value.dtype(),
            value.shape()
        ))
    };
    if !value.shape().is_empty() {
        return Err(wrong());
    }
    if dtype == DType::String {
        return match value.data() {
            TensorData::Strings(s) => Ok(Fill::Bytes(s[0].clone())),
            TensorData::Buffer(_) => Err(wrong()),
        };
    }
    let as_f64 = match value.dtype() {
        DType::Int64 => value.to_scalar::<i64>().ok().map(|v| v as f64),
        DType::Int32 => value.to_scalar::<i32>().ok().map(f64::from),
        DType::Double => value.to_scalar::<f64>().ok(),
        DType::Float => value.to_scalar::<f32>().ok().map(f64::from),
        DType::Bool => value
            .to_scalar::<bool>()
            .ok()
            .map(|b| f64::from(u8::from(b))),
        _ => None,
    };
    if value.dtype() == dtype
        && let TensorData::Buffer(b) = value.data()
    {
        return Ok(Fill::Fixed(b.to_vec()));
    }
    let v = as_f64.ok_or_else(wrong)?;
    let integral = v.fract() == 0.0;
    let bytes = match dtype {
        DType::Int8 if integral => (v as i8).to_le_bytes().to_vec(),
        DType::Int16 if integral => (v as i16).to_le_bytes().to_vec(),
        DType::Int32 if integral => (v as i32).to_le_bytes().to_vec(),
        DType::Int64 if integral => (v as i64).to_le_bytes().to_vec(),
        DType::UInt8 if integral && v >= 0.0 => (v as u8).to_le_bytes().to_vec(),
        DType::UInt16 if integral && v >= 0.0 => (v as u16).to_le_bytes().to_vec(),
        DType::UInt32 if integral && v >= 0.0 => (v as u32).to_le_bytes().to_vec(),
        DType::UInt64 if integral && v >= 0.0 => (v as u64).to_le_bytes().to_vec(),
        DType::Float => (v as f32).to_le_bytes().to_vec(),
        DType::Double => v.to_le_bytes().to_vec(),
        DType::Bool => vec![u8::from(v != 0.0)],
        _ => return Err(wrong()),
    };
    Ok(Fill::Fixed(bytes))
}

/// The plans of a record batch's columns, and the element structure they
/// make.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchPlan {
    /// Top-level columns by name (flattening order: sorted).
    pub columns: BTreeMap<String, ColumnPlan>,
    pub batched: bool,
}

impl BatchPlan {
    /// The plan for `schema`'s `columns` (all, in the schema, when `None`).
    pub fn new(
        schema: &Schema,
        columns: Option<&[String]>,
        declared: &Declared,
        batched: bool,
    ) -> Result<BatchPlan> {
        let mut plans = BTreeMap::new();
        let names: Vec<String> = match columns {
            Some(c) => c.to_vec(),
            None => schema.fields().iter().map(|f| f.name().clone()).collect(),
        };
        for name in names {
            let field = schema.field_with_name(&name).map_err(|_| {
                Error::InvalidArgument(format!(
                    "column {name} is not in the file (its columns: {})",
                    schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            if plans
                .insert(name.clone(), ColumnPlan::of(field, &name, declared)?)
                .is_some()
            {
                return Err(Error::InvalidArgument(format!(
                    "column {name} is named twice"
                )));
            }
        }
        if plans.is_empty() {
            return Err(Error::InvalidArgument("no columns to read".into()));
        }
        for path in declared
            .null_values
            .keys()
            .chain(declared.padding_values.keys())
        {
            let mut known = false;
            for plan in plans.values() {
                let mut ts = Vec::new();
                plan.tensors(&mut ts);
                known |= ts.iter().any(|t| &t.path == path);
            }
            if !known {
                return Err(Error::InvalidArgument(format!(
                    "a null or padding value is declared for {path}, which is not a column read"
                )));
            }
        }
        Ok(BatchPlan {
            columns: plans,
            batched,
        })
    }

    pub fn structure(&self) -> Structure {
        Structure::Dict(
            self.columns
                .iter()
                .map(|(k, p)| (k.clone(), p.structure(self.batched)))
                .collect(),
        )
    }

    /// `batch`'s rows as elements: one per row, or one for the batch.
    /// `what` names where the batch came from, for errors.
    pub fn elements(&self, batch: &RecordBatch, what: &str) -> Result<Vec<Element>> {
        let rows = batch.num_rows();
        let mut columns: Vec<(&TensorPlan, Column)> = Vec::new();
        for (name, plan) in &self.columns {
            let array = batch.column_by_name(name).ok_or_else(|| Error::DataLoss {
                location: what.to_string(),
                reason: format!("column {name} is missing from a batch"),
            })?;
            collect_columns(plan, array, what, &mut columns)?;
        }
        if self.batched {
            let components = columns
                .into_iter()
                .map(|(plan, col)| col.into_batch_tensor(plan, rows, what))
                .collect::<Result<Vec<_>>>()?;
            return Ok(vec![Element::new(components)]);
        }
        (0..rows)
            .map(|row| {
                let components = columns
                    .iter()
                    .map(|(plan, col)| col.row_tensor(plan, row))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Element::new(components))
            })
            .collect()
    }
}

/// `array` of `plan`, its tensors converted, appended to `out` in
/// flattening order.
fn collect_columns<'a>(
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
struct Column {
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
    fn row_tensor(&self, plan: &TensorPlan, row: usize) -> Result<Tensor> {
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
    fn into_batch_tensor(self, plan: &TensorPlan, rows: usize, what: &str) -> Result<Tensor> {
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

/// Shared plans are cheap to hand to iterators.
pub type SharedPlan = Arc<BatchPlan>;

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{Int64Builder, ListBuilder, StringDictionaryBuilder};
    use arrow_array::types::Int32Type;
    use arrow_array::{FixedSizeListArray, Float32Array, Int64Array, StringArray, StructArray};

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    fn plan(b: &RecordBatch, declared: &Declared, batched: bool) -> BatchPlan {
        BatchPlan::new(&b.schema(), None, declared, batched).unwrap()
    }

    #[test]
    fn rows_become_dicts_and_batches_one_tensor_per_column() {
        let mut dict = StringDictionaryBuilder::<Int32Type>::new();
        for v in ["cat", "dog", "cat"] {
            dict.append_value(v);
        }
        let fixed = FixedSizeListArray::try_new(
            Arc::new(Field::new("item", DataType::Float32, false)),
            2,
            Arc::new(Float32Array::from(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
            None,
        )
        .unwrap();
        let b = batch(vec![
            ("id", Arc::new(Int64Array::from(vec![7, 8, 9])) as ArrayRef),
            ("label", Arc::new(dict.finish())),
            ("xy", Arc::new(fixed)),
        ]);
        let rows = plan(&b, &Declared::default(), false);
        assert_eq!(
            rows.structure().to_string(),
            plan(&b, &Declared::default(), false)
                .structure()
                .to_string()
        );
        let elements = rows.elements(&b, "t").unwrap();
        assert_eq!(elements.len(), 3);
        // Sorted: id, label, xy.
        let e = &elements[1].components;
        assert_eq!(e[0].to_scalar::<i64>().unwrap(), 8);
        assert_eq!(e[1].string_values().unwrap()[0], "dog");
        assert_eq!(e[2].to_vec::<f32>().unwrap(), vec![3.0, 4.0]);
        let batched = plan(&b, &Declared::default(), true)
            .elements(&b, "t")
            .unwrap();
        let c = &batched[0].components;
        assert_eq!(c[0].shape(), &[3]);
        assert_eq!(c[2].shape(), &[3, 2]);
        assert_eq!(c[1].string_values().unwrap().len(), 3);
    }

    #[test]
    fn nulls_and_ragged_lists_need_declared_values() {
        let mut lists = ListBuilder::new(Int64Builder::new());
        lists.values().append_value(1);
        lists.append(true);
        lists.values().append_value(2);
        lists.values().append_value(3);
        lists.append(true);
        let b = batch(vec![
            (
                "n",
                Arc::new(Int64Array::from(vec![Some(1), None])) as ArrayRef,
            ),
            ("l", Arc::new(lists.finish())),
        ]);
        let err = plan(&b, &Declared::default(), false)
            .elements(&b, "f.parquet row group 0")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("column n has nulls") && err.contains("f.parquet"),
            "{err}"
        );
        let declared = Declared {
            null_values: [("n".to_string(), Tensor::scalar(-1i64))].into(),
            padding_values: [("l".to_string(), Tensor::scalar(0i64))].into(),
        };
        let rows = plan(&b, &declared, false).elements(&b, "t").unwrap();
        assert_eq!(rows[1].components[1].to_scalar::<i64>().unwrap(), -1);
        assert_eq!(rows[1].components[0].to_vec::<i64>().unwrap(), vec![2, 3]);
        let one = plan(&b, &declared, true).elements(&b, "t").unwrap();
        assert_eq!(one[0].components[0].shape(), &[2, 2]);
        assert_eq!(
            one[0].components[0].to_vec::<i64>().unwrap(),
            vec![1, 0, 2, 3]
        );
        let no_padding = Declared {
            padding_values: BTreeMap::new(),
            ..declared
        };
        let err = plan(&b, &no_padding, true).elements(&b, "t").unwrap_err();
        assert!(err.to_string().contains("padding value"), "{err}");
    }

    #[test]
    fn structs_are_nested_dicts_and_unsupported_types_are_named() {
        let s = StructArray::from(vec![
            (
                Arc::new(Field::new("path", DataType::Utf8, false)),
                Arc::new(StringArray::from(vec!["a.jpg"])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("bytes", DataType::Binary, false)),
                Arc::new(arrow_array::BinaryArray::from(vec![b"\xff\xd8".as_ref()])) as ArrayRef,
            ),
        ]);
        let b = batch(vec![("image", Arc::new(s) as ArrayRef)]);
        let p = plan(&b, &Declared::default(), false);
        assert_eq!(p.structure().to_string().matches("string").count(), 2);
        let e = p.elements(&b, "t").unwrap();
        assert_eq!(
            e[0].components[0].string_values().unwrap()[0].as_ref(),
            b"\xff\xd8"
        );
        let decimal = Field::new("price", DataType::Decimal128(10, 2), false);
        let err = ColumnPlan::of(&decimal, "price", &Declared::default()).unwrap_err();
        assert!(err.to_string().contains("column price") && err.to_string().contains("Decimal128"));
    }
}
