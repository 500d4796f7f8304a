//! Elements as Arrow record batches, for readers that want columns
//! (`as_arrow_iterator()`: pandas, polars, Ray): the way back of
//! [`super::convert`].
//!
//! An element is a batch of rows along its first dimension: each component
//! of a dict is a column (a nested dict a struct column; a tuple's
//! components are columns `"0"`, `"1"`, ...), and every column must have
//! the same first dimension. A single row (scalar components) is refused
//! with a hint to batch, rather than guessing whether a vector is one row
//! or many.
//!
//! | tensor | Arrow |
//! | --- | --- |
//! | integers, floats (`float16`/`32`/`64`), `bool` | the same type |
//! | `string` | `binary` (TensorFlow strings are bytes), or `utf8` when asked (checked) |
//! | `[rows, d1, ..., dk]` | `k` nested `fixed_size_list`s of the above |
//!
//! Fixed-width columns share the tensor's buffer (no copy); strings are
//! copied once into one values buffer. Other dtypes (complex, bfloat16,
//! quantized) are refused naming the column.

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, FixedSizeListArray, PrimitiveArray, RecordBatch,
    StringArray, StructArray, types,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{Field, Schema};
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Element, Error, Result, Tensor};

use crate::spec::Structure;

/// What `string` tensors become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StringColumns {
    /// `binary`: the bytes as they are.
    Binary,
    /// `utf8`: text; a value that is not UTF-8 is an error naming the
    /// column.
    Utf8,
}

/// Total bytes of one string column's values an Arrow `binary` array can
/// hold (its offsets are 32-bit).
const MAX_STRING_COLUMN_BYTES: usize = i32::MAX as usize;

/// `element` (of `structure`) as one record batch.
pub fn record_batch(
    element: &Element,
    structure: &Structure,
    strings: StringColumns,
) -> Result<RecordBatch> {
    let named: Vec<(String, &Structure)> = match structure {
        Structure::Dict(fields) => fields.iter().map(|(k, s)| (k.clone(), s)).collect(),
        Structure::Tuple(items) => items
            .iter()
            .enumerate()
            .map(|(i, s)| (i.to_string(), s))
            .collect(),
        Structure::Tensor(_) => {
            return Err(Error::InvalidArgument(
                "an Arrow record batch needs named columns: elements must be dicts (as the \
                 columnar sources make) or tuples, not a single tensor"
                    .into(),
            ));
        }
    };
    let mut components = element.components.iter();
    let mut rows = None;
    let mut fields = Vec::with_capacity(named.len());
    let mut columns = Vec::with_capacity(named.len());
    for (name, s) in named {
        let (field, column) = column(&name, s, &mut components, &mut rows, strings)?;
        fields.push(field);
        columns.push(column);
    }
    if components.next().is_some() {
        return Err(Error::InvalidArgument(
            "the element has more components than its structure names".into(),
        ));
    }
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows.unwrap_or(0)));
    RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &options)
        .map_err(|e| Error::Internal(format!("building a record batch: {e}")))
}

/// The column `name` of structure `s`, taking its tensors from
/// `components`; `rows` is the first column's row count, which every other
/// must match.
fn column<'a>(
    name: &str,
    s: &Structure,
    components: &mut impl Iterator<Item = &'a Tensor>,
    rows: &mut Option<usize>,
    strings: StringColumns,
) -> Result<(Field, ArrayRef)> {
    let fields: Vec<(String, &Structure)> = match s {
        Structure::Tensor(_) => {
            let tensor = components.next().ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "column {name}: the element has fewer components than its structure names"
                ))
            })?;
            let array = tensor_column(name, tensor, rows, strings)?;
            let field = Field::new(name, array.data_type().clone(), false);
            return Ok((field, array));
        }
        Structure::Dict(f) => f.iter().map(|(k, s)| (k.clone(), s)).collect(),
        Structure::Tuple(items) => items
            .iter()
            .enumerate()
            .map(|(i, s)| (i.to_string(), s))
            .collect(),
    };
    let mut children = Vec::with_capacity(fields.len());
    let mut arrays = Vec::with_capacity(fields.len());
    for (child, s) in fields {
        let path = format!("{name}.{child}");
        let (field, array) = column(&path, s, components, rows, strings)?;
        children.push(Arc::new(field.with_name(child)));
        arrays.push(array);
    }
    // An empty dict has no column to tell the rows; the batch's count does.
    let len = arrays.first().map_or(rows.unwrap_or(0), |a| a.len());
    let array = StructArray::try_new_with_length(children.into(), arrays, None, len)
        .map_err(|e| Error::InvalidArgument(format!("column {name}: {e}")))?;
    let field = Field::new(name, array.data_type().clone(), false);
    Ok((field, Arc::new(array)))
}

/// One tensor `[rows, d1, ..., dk]` as a column of `rows` values.
fn tensor_column(
    name: &str,
    tensor: &Tensor,
    rows: &mut Option<usize>,
    strings: StringColumns,
) -> Result<ArrayRef> {
    let Some((&first, inner)) = tensor.shape().split_first() else {
        return Err(Error::InvalidArgument(format!(
            "column {name} is a scalar: elements are single rows; read them in batches \
             (batch_size= of the source, or .batch(n)) to get record batches"
        )));
    };
    let n = usize::try_from(first).map_err(|_| bad_shape(name, tensor))?;
    match rows {
        Some(r) if *r != n => {
            return Err(Error::InvalidArgument(format!(
                "column {name} has {n} rows, another column {r}: every column of a batch must \
                 have the same first dimension"
            )));
        }
        _ => *rows = Some(n),
    }
    let inner: Vec<usize> = inner
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| bad_shape(name, tensor)))
        .collect::<Result<_>>()?;
    let values: usize = n
        .checked_mul(inner.iter().product())
        .ok_or_else(|| bad_shape(name, tensor))?;
    let mut array = leaf(name, tensor, values, strings)?;
    // Innermost dimension first: [n, a, b] is a list of `a` lists of `b`.
    for (level, &size) in inner.iter().enumerate().rev() {
        let outer = inner[..level].iter().product::<usize>() * n;
        let size_i32 = i32::try_from(size).map_err(|_| bad_shape(name, tensor))?;
        let item = Arc::new(Field::new("item", array.data_type().clone(), false));
        array = Arc::new(
            FixedSizeListArray::try_new(item, size_i32, array, None)
                .map_err(|e| Error::Internal(format!("column {name}: {e}")))?,
        );
        debug_assert_eq!(array.len(), outer);
    }
    Ok(array)
}

fn bad_shape(name: &str, tensor: &Tensor) -> Error {
    Error::InvalidArgument(format!(
        "column {name}: shape {:?} cannot be a column",
        tensor.shape()
    ))
}

/// The tensor's `values` values as a flat Arrow array.
fn leaf(name: &str, tensor: &Tensor, values: usize, strings: StringColumns) -> Result<ArrayRef> {
    fn primitive<T: arrow_array::ArrowPrimitiveType>(buffer: Buffer, values: usize) -> ArrayRef {
        Arc::new(PrimitiveArray::<T>::new(
            ScalarBuffer::new(buffer, 0, values),
            None,
        ))
    }
    let width = tensor.dtype().size().unwrap_or(1);
    let buffer = || match tensor.data() {
        TensorData::Buffer(b) if b.len() < values.saturating_mul(width) => {
            Err(bad_shape(name, tensor))
        }
        // The tensor's bytes, shared (a `bytes::Bytes` becomes an Arrow
        // buffer without a copy) when they are aligned for the type, as
        // Arrow requires; else copied once into an aligned buffer (a tensor
        // sliced from a received message may start anywhere).
        TensorData::Buffer(b) if (b.as_ptr() as usize).is_multiple_of(width) => {
            Ok(Buffer::from(b.clone()))
        }
        TensorData::Buffer(b) => Ok(Buffer::from_slice_ref(&b[..])),
        TensorData::Strings(_) => Err(Error::Internal(format!(
            "column {name}: a {} tensor holds strings",
            tensor.dtype()
        ))),
    };
    Ok(match tensor.dtype() {
        DType::Int8 => primitive::<types::Int8Type>(buffer()?, values),
        DType::Int16 => primitive::<types::Int16Type>(buffer()?, values),
        DType::Int32 => primitive::<types::Int32Type>(buffer()?, values),
        DType::Int64 => primitive::<types::Int64Type>(buffer()?, values),
        DType::UInt8 => primitive::<types::UInt8Type>(buffer()?, values),
        DType::UInt16 => primitive::<types::UInt16Type>(buffer()?, values),
        DType::UInt32 => primitive::<types::UInt32Type>(buffer()?, values),
        DType::UInt64 => primitive::<types::UInt64Type>(buffer()?, values),
        DType::Half => primitive::<types::Float16Type>(buffer()?, values),
        DType::Float => primitive::<types::Float32Type>(buffer()?, values),
        DType::Double => primitive::<types::Float64Type>(buffer()?, values),
        DType::Bool => {
            let b = buffer()?;
            Arc::new(BooleanArray::from_iter(
                b.as_slice()[..values].iter().map(|&v| Some(v != 0)),
            ))
        }
        DType::String => {
            let s = tensor.string_values()?;
            let total: usize = s.iter().map(|v| v.len()).sum();
            if total > MAX_STRING_COLUMN_BYTES {
                return Err(Error::InvalidArgument(format!(
                    "column {name}: {total} bytes of strings in one batch, more than an Arrow \
                     binary column holds ({MAX_STRING_COLUMN_BYTES}); use smaller batches"
                )));
            }
            let mut data = Vec::with_capacity(total);
            for v in s {
                data.extend_from_slice(v);
            }
            let offsets = OffsetBuffer::<i32>::from_lengths(s.iter().map(|v| v.len()));
            let data = Buffer::from(data);
            match strings {
                StringColumns::Binary => Arc::new(BinaryArray::new(offsets, data, None)),
                StringColumns::Utf8 => {
                    Arc::new(StringArray::try_new(offsets, data, None).map_err(|e| {
                        Error::InvalidArgument(format!(
                            "column {name} holds bytes that are not UTF-8 text ({e}); read it \
                             as binary"
                        ))
                    })?)
                }
            }
        }
        other => {
            return Err(Error::Unimplemented(format!(
                "column {name}: {other} tensors have no Arrow type here (supported: integers, \
                 floats, bool, string)"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Shape, TensorSpec};
    use arrow_array::cast::AsArray;

    fn spec(dtype: DType) -> Structure {
        Structure::Tensor(TensorSpec::new(dtype, Shape(None)))
    }

    fn dict(fields: Vec<(&str, Structure)>) -> Structure {
        Structure::Dict(
            fields
                .into_iter()
                .map(|(k, s)| (k.to_string(), s))
                .collect(),
        )
    }

    #[test]
    fn a_batched_dict_is_a_record_batch_sharing_the_tensor_buffers() {
        let ids = Tensor::from_slice(&[1i64, 2, 3], vec![3]).unwrap();
        let xy = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], vec![3, 2]).unwrap();
        let names = Tensor::strings(vec!["a".into(), "bé".into(), "".into()], vec![3]).unwrap();
        let flags = Tensor::from_slice(&[true, false, true], vec![3]).unwrap();
        // Sorted keys: flags, id, name, xy.
        let structure = dict(vec![
            ("flags", spec(DType::Bool)),
            ("id", spec(DType::Int64)),
            ("name", spec(DType::String)),
            ("xy", spec(DType::Float)),
        ]);
        let e = Element::new(vec![flags, ids.clone(), names, xy]);
        let b = record_batch(&e, &structure, StringColumns::Utf8).unwrap();
        assert_eq!(b.num_rows(), 3);
        let id = b.column(1).as_primitive::<types::Int64Type>();
        assert_eq!(id.values().as_ref(), &[1, 2, 3]);
        let TensorData::Buffer(bytes) = ids.data() else {
            unreachable!()
        };
        assert_eq!(
            id.values().inner().as_ptr(),
            bytes.as_ptr(),
            "the column shares the tensor's buffer"
        );
        assert_eq!(b.column(2).as_string::<i32>().value(1), "bé");
        let xy = b.column(3).as_fixed_size_list();
        assert_eq!(xy.value_length(), 2);
        assert_eq!(
            xy.value(2)
                .as_primitive::<types::Float32Type>()
                .values()
                .as_ref(),
            &[5.0, 6.0]
        );
        assert!(!b.column(0).as_boolean().value(1));
        let binary = record_batch(&e, &structure, StringColumns::Binary).unwrap();
        assert_eq!(
            binary.column(2).as_binary::<i32>().value(1),
            "bé".as_bytes()
        );
    }

    #[test]
    fn rows_mismatched_columns_and_bad_text_are_refused_saying_why() {
        let structure = dict(vec![("a", spec(DType::Int64)), ("b", spec(DType::Int64))]);
        let row = Element::new(vec![Tensor::scalar(1i64), Tensor::scalar(2i64)]);
        let err = record_batch(&row, &structure, StringColumns::Binary).unwrap_err();
        assert!(err.to_string().contains("batch_size="), "{err}");
        let mismatched = Element::new(vec![
            Tensor::vector(&[1i64, 2]),
            Tensor::vector(&[1i64, 2, 3]),
        ]);
        let err = record_batch(&mismatched, &structure, StringColumns::Binary).unwrap_err();
        assert!(err.to_string().contains("same first dimension"), "{err}");
        let text = dict(vec![("t", spec(DType::String))]);
        let bad = Element::new(vec![
            Tensor::strings(vec![vec![0xffu8].into()], vec![1]).unwrap(),
        ]);
        let err = record_batch(&bad, &text, StringColumns::Utf8).unwrap_err();
        assert!(err.to_string().contains("column t") && err.to_string().contains("UTF-8"));
        let single = spec(DType::Int64);
        let err = record_batch(
            &Element::new(vec![Tensor::vector(&[1i64])]),
            &single,
            StringColumns::Binary,
        )
        .unwrap_err();
        assert!(err.to_string().contains("named columns"), "{err}");
    }

    #[test]
    fn a_misaligned_buffer_is_copied_not_refused() {
        let bytes = bytes::Bytes::from(vec![0u8; 17]).slice(1..17);
        let t = Tensor::new(DType::Int64, vec![2], TensorData::Buffer(bytes)).unwrap();
        let structure = dict(vec![("a", spec(DType::Int64))]);
        let b = record_batch(&Element::new(vec![t]), &structure, StringColumns::Binary).unwrap();
        assert_eq!(
            b.column(0)
                .as_primitive::<types::Int64Type>()
                .values()
                .as_ref(),
            &[0, 0]
        );
    }

    #[test]
    fn nested_dicts_are_struct_columns() {
        let structure = dict(vec![(
            "image",
            dict(vec![
                ("bytes", spec(DType::String)),
                ("h", spec(DType::Int32)),
            ]),
        )]);
        let e = Element::new(vec![
            Tensor::strings(vec!["x".into(), "y".into()], vec![2]).unwrap(),
            Tensor::vector(&[4i32, 5]),
        ]);
        let b = record_batch(&e, &structure, StringColumns::Binary).unwrap();
        let image = b.column(0).as_struct();
        assert_eq!(image.column_names(), vec!["bytes", "h"]);
        assert_eq!(
            image.column(1).as_primitive::<types::Int32Type>().value(1),
            5
        );
    }
}
