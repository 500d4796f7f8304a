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
//!
//! This module holds the plans (what a column's type becomes, checked once
//! per file); [`column`] reads a batch's columns as they say.

mod column;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Element, Error, Result, Tensor};

use self::column::{Column, collect_columns};
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

/// Shared plans are cheap to hand to iterators.
pub type SharedPlan = Arc<BatchPlan>;

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{Int64Builder, ListBuilder, StringDictionaryBuilder};
    use arrow_array::types::Int32Type;
    use arrow_array::{
        ArrayRef, FixedSizeListArray, Float32Array, Int64Array, StringArray, StructArray,
    };

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
