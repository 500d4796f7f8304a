//! RaggedTensors as `DT_VARIANT` values: how a `tf.RaggedTensor` crosses a
//! dataset boundary (a map returning one, `batch`, `unbatch`,
//! `ragged_batch`, a filter or flat_map reading one).
//!
//! * `RaggedTensorToVariant` packs row splits and flat values into one
//!   variant (`batched_input=false`), or cuts them into one variant per
//!   outer row (`batched_input=true`);
//! * `RaggedTensorFromVariant` reads a variant tensor of any rank back,
//!   stacking its entries (each of ragged rank `input_ragged_rank`) into
//!   one RaggedTensor of ragged rank `output_ragged_rank`;
//! * `RaggedTensorToVariantGradient` joins the values of a variant
//!   gradient back into the flat values' gradient.
//!
//! tfdata tensors hold no variants: each variant entry is carried as a
//! string, the serialized `VariantTensorDataProto` TensorFlow encodes a
//! `RaggedTensorVariant` to (type name, then the splits and the values).
//! Batching and slicing datasets then stack and cut those strings as
//! TensorFlow stacks and cuts the variants, and the worker serves them to
//! TensorFlow's clients as they are (`tfdata_core::element::
//! served_variant_proto`).

use bytes::Bytes;
use prost::Message;
use tfdata_core::element::{RAGGED_VARIANT, tensor_from_proto, tensor_to_proto};
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_proto::tensorflow::{TensorProto, VariantTensorDataProto};

use super::layout::{Out, Src, int_tensor, ints, shape_str};
use super::{Compute, KernelDef, OutputArgs, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "RaggedTensorToVariant",
        outputs: |_| Ok(vec![("encoded_ragged", 1)]),
        build: to_variant,
    },
    KernelDef {
        op: "RaggedTensorFromVariant",
        outputs: from_variant_outputs,
        build: from_variant,
    },
    KernelDef {
        op: "RaggedTensorToVariantGradient",
        outputs: |_| Ok(vec![("dense_values_grad", 1)]),
        build: to_variant_gradient,
    },
];

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument(message.into())
}

/// One RaggedTensor: its row splits (outermost first, each int32 or int64)
/// and its flat values.
struct Ragged {
    splits: Vec<Tensor>,
    values: Tensor,
}

impl Ragged {
    /// The carried form: a serialized `VariantTensorDataProto`, as
    /// TensorFlow encodes a `RaggedTensorVariant`.
    fn encode(&self) -> Bytes {
        VariantTensorDataProto {
            type_name: RAGGED_VARIANT.into(),
            tensors: self
                .splits
                .iter()
                .chain(std::iter::once(&self.values))
                .map(tensor_to_proto)
                .collect(),
            ..Default::default()
        }
        .encode_to_vec()
        .into()
    }

    /// The carried form read back; `None` when the bytes hold no
    /// `RaggedTensorVariant`.
    fn decode(bytes: &[u8]) -> Option<Ragged> {
        let proto = VariantTensorDataProto::decode(bytes).ok()?;
        Self::of_proto(&proto)
    }

    fn of_proto(proto: &VariantTensorDataProto) -> Option<Ragged> {
        if proto.type_name != RAGGED_VARIANT {
            return None;
        }
        let mut tensors = proto
            .tensors
            .iter()
            .map(|t| tensor_from_proto(t).ok())
            .collect::<Option<Vec<_>>>()?;
        let values = tensors.pop()?;
        Some(Ragged {
            splits: tensors,
            values,
        })
    }
}

/// The number of elements in one row of `values` (the product of its
/// inner dimensions).
fn inner_size(values: &Tensor) -> usize {
    values.shape().iter().skip(1).product::<i64>().max(0) as usize
}

/// Rows `start..limit` of `values` (along its first dimension).
fn rows(op: &str, values: &Tensor, start: usize, limit: usize) -> Result<Tensor> {
    let inner = inner_size(values);
    let n = limit.saturating_sub(start);
    let mut out = Out::new(op, values.dtype(), (n * inner) as u64)?;
    out.push(&Src::of(values), start * inner, n * inner)?;
    let mut shape = values.shape().to_vec();
    if let Some(d) = shape.first_mut() {
        *d = n as i64;
    }
    out.finish(values.dtype(), shape)
}

/// TensorFlow's `RaggedTensorVerifySplits` (with the last-element check),
/// in its words.
pub(super) fn verify_splits(splits: &[i64], rank: usize, num_values: i64) -> Result<()> {
    if rank != 1 {
        return Err(invalid(format!(
            "Invalid ragged splits: ragged splits must be rank 1 but is rank {rank}"
        )));
    }
    let Some(&first) = splits.first() else {
        return Err(invalid(
            "Invalid ragged splits: ragged splits must have at least one splits, but is empty",
        ));
    };
    if first != 0 {
        return Err(invalid(format!(
            "Invalid ragged splits: first element of ragged splits  must be 0 but is {first}"
        )));
    }
    let mut last = 0i64;
    for (j, &split) in splits.iter().enumerate().skip(1) {
        if split < last {
            return Err(invalid(format!(
                "Invalid ragged splits: ragged splits must be monotonically increasing, but \
                 ragged_splits[{j}]={split} is smaller than row_splits[{}]={last}",
                j - 1
            )));
        }
        last = split;
    }
    if last != num_values {
        return Err(invalid(format!(
            "Invalid ragged splits: last element of ragged splits must be the number of ragged \
             values({num_values}) but is {last}"
        )));
    }
    Ok(())
}

/// Checks a RaggedTensor's parts as `RaggedTensorToVariant` does, and
/// returns its splits as integers.
fn check_ragged(op: &str, r: &Ragged) -> Result<Vec<Vec<i64>>> {
    if !r.splits.is_empty() && r.values.shape().is_empty() {
        return Err(invalid(
            "Requires flat_values to have rank>=1 when nested_row_splits is not empty, but is 0.",
        ));
    }
    let splits = r
        .splits
        .iter()
        .map(|s| ints(op, "rt_nested_splits", s))
        .collect::<Result<Vec<_>>>()?;
    for (i, s) in splits.iter().enumerate() {
        let num_values = match splits.get(i + 1) {
            Some(next) => next.len() as i64 - 1,
            None => r.values.shape().first().copied().unwrap_or(0),
        };
        verify_splits(s, r.splits[i].shape().len(), num_values)?;
    }
    Ok(splits)
}

// --- RaggedTensorToVariant ---------------------------------------------------

fn to_variant(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "RaggedTensorToVariant";
    let ragged_rank = attrs.count("RAGGED_RANK")?;
    let batched = attrs.bool("batched_input")?;
    Ok(Box::new(move |mut inputs| {
        expect_inputs(OP, &inputs, ragged_rank + 1)?;
        let values = inputs.pop().unwrap_or_else(|| Tensor::scalar(0i32));
        let ragged = Ragged {
            splits: inputs,
            values,
        };
        let splits = check_ragged(OP, &ragged)?;
        if !batched {
            return Ok(vec![Tensor::strings(vec![ragged.encode()], vec![])?]);
        }
        let parts = unbatch(OP, &ragged, &splits)?;
        let n = parts.len() as i64;
        let encoded = parts.iter().map(Ragged::encode).collect();
        Ok(vec![Tensor::strings(encoded, vec![n])?])
    }))
}

/// The outer rows of a (checked) RaggedTensor, each a RaggedTensor of one
/// ragged rank less; a ragged rank 0 tensor's rows are its values' rows.
fn unbatch(op: &str, r: &Ragged, splits: &[Vec<i64>]) -> Result<Vec<Ragged>> {
    let Some(outer) = splits.first() else {
        let Some(&n) = r.values.shape().first() else {
            return Err(invalid("Can't unbatch rank-0 tensor."));
        };
        // One variant a row, however few values the rows hold.
        check_size(op, DType::String, n as u64)?;
        let mut shape = r.values.shape().to_vec();
        shape.remove(0);
        return (0..n as usize)
            .map(|i| {
                let row = rows(op, &r.values, i, i + 1)?;
                Ok(Ragged {
                    splits: Vec::new(),
                    values: Tensor::new(row.dtype(), shape.clone(), row.into_parts().2)?,
                })
            })
            .collect();
    };
    let splits_type = r.splits[0].dtype();
    let mut out = Vec::with_capacity(outer.len().saturating_sub(1));
    for w in outer.windows(2) {
        // The row's range at each level, narrowed level by level.
        let (mut start, mut limit) = (w[0] as usize, w[1] as usize);
        let mut part_splits = Vec::with_capacity(splits.len() - 1);
        for level in &splits[1..] {
            let run = &level[start..=limit];
            let base = run[0];
            let shifted: Vec<i64> = run.iter().map(|&s| s - base).collect();
            let len = shifted.len() as i64;
            part_splits.push(int_tensor(op, splits_type, &shifted, vec![len])?);
            (start, limit) = (run[0] as usize, run[run.len() - 1] as usize);
        }
        out.push(Ragged {
            splits: part_splits,
            values: rows(op, &r.values, start, limit)?,
        });
    }
    Ok(out)
}

// --- RaggedTensorFromVariant -------------------------------------------------

fn from_variant_outputs(a: &NodeAttrs) -> Result<OutputArgs> {
    Ok(vec![
        ("output_nested_splits", a.count("output_ragged_rank")?),
        ("output_dense_values", 1),
    ])
}

/// TensorFlow's `Tensor::DebugString` (its first three values).
fn debug_string(t: &Tensor) -> String {
    let values: Vec<String> = match t.data() {
        TensorData::Strings(s) => s
            .iter()
            .take(3)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect(),
        TensorData::Buffer(_) => match t.dtype() {
            DType::Int32 | DType::Int64 | DType::Int16 | DType::Int8 => ints("", "", t)
                .map(|v| v.iter().take(3).map(i64::to_string).collect())
                .unwrap_or_default(),
            DType::Float => t
                .to_vec::<f32>()
                .map(|v| v.iter().take(3).map(f32::to_string).collect())
                .unwrap_or_default(),
            DType::Double => t
                .to_vec::<f64>()
                .map(|v| v.iter().take(3).map(f64::to_string).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        },
    };
    let more = if t.num_elements() > 3 { "..." } else { "" };
    format!(
        "Tensor<type: {} shape: {} values: {}{more}>",
        t.dtype(),
        shape_str(t.shape()),
        values.join(" ")
    )
}

fn from_variant(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "RaggedTensorFromVariant";
    let input_attr = attrs.int("input_ragged_rank")?;
    if input_attr < -1 {
        // TensorFlow's op definition: at least -1 (inferred).
        return Err(attrs.error(format!("input_ragged_rank {input_attr} is below -1")));
    }
    let output_rank = attrs.count("output_ragged_rank")?;
    let value_type = attrs.dtype("Tvalues")?;
    let splits_type = attrs.dtype("Tsplits")?;
    if !matches!(splits_type, DType::Int32 | DType::Int64) {
        return Err(attrs.error(format!("Tsplits must be int32 or int64, got {splits_type}")));
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 1)?;
        let encoded = &inputs[0];
        let dims = encoded.shape().len() as i64;
        let out_rank = output_rank as i64;
        let input_rank = if input_attr == -1 {
            let mut inferred = out_rank - dims;
            if out_rank == 0 && inferred < 0 {
                // Dense entries stacked into a dense tensor.
                inferred = 0;
            }
            if inferred < 0 {
                return Err(invalid(format!(
                    "Inferred input_ragged_rank (output_ragged_rank - encoded_variant.dims()) \
                     must be >= 0, found output_ragged_rank: {out_rank}, \
                     encoded_variant.dims(): {dims}, inferred input_ragged_rank: {inferred}"
                )));
            }
            inferred
        } else {
            input_attr
        };
        if !(out_rank == 0 && input_rank == 0) && out_rank != dims + input_rank {
            return Err(invalid(format!(
                "output_ragged_rank must be equal to input_ragged_rank + encoded_ragged.dims(); \
                 output_ragged_rank: {out_rank}, input_ragged_rank: {input_rank}, \
                 encoded_variant.dims(): {dims}."
            )));
        }
        let parts = decode_all(
            encoded,
            input_rank as usize,
            out_rank,
            value_type,
            splits_type,
        )?;
        let out = if dims == 0 {
            parts
                .into_iter()
                .next()
                .ok_or_else(|| invalid("a scalar variant holds no RaggedTensorVariant"))?
        } else if out_rank == 0 {
            stack_dense(OP, &parts, value_type)?
        } else {
            nested_stack(
                OP,
                &parts,
                encoded.shape(),
                input_rank as usize,
                (value_type, splits_type),
            )?
        };
        let mut outputs = out.splits;
        outputs.push(out.values);
        Ok(outputs)
    }))
}

/// Every entry of `encoded`, checked as TensorFlow checks them (ragged
/// rank, dtypes, ranks), and further that its splits describe its values,
/// since the bytes may not come from `RaggedTensorToVariant`.
fn decode_all(
    encoded: &Tensor,
    ragged_rank: usize,
    output_rank: i64,
    value_type: DType,
    splits_type: DType,
) -> Result<Vec<Ragged>> {
    const OP: &str = "RaggedTensorFromVariant";
    let strings = encoded.string_values().map_err(|_| {
        invalid(format!(
            "Input Variant element at index 0 doesn't hold a RaggedTensorVariant: a {} tensor",
            encoded.dtype()
        ))
    })?;
    let mut out = Vec::with_capacity(strings.len());
    for (i, bytes) in strings.iter().enumerate() {
        let Some(r) = Ragged::decode(bytes) else {
            return Err(invalid(format!(
                "Input Variant element at index {i} doesn't hold a RaggedTensorVariant: {}",
                other_variant(bytes)
            )));
        };
        if r.splits.len() != ragged_rank {
            return Err(invalid(format!(
                "Encoded input RaggedTensorVariant has ragged_rank={}.  Expected ragged_rank={ragged_rank}.",
                r.splits.len()
            )));
        }
        if r.values.dtype() != value_type {
            return Err(invalid(format!(
                "Expected values Tensor dtype: {value_type}, found: {}",
                r.values.dtype()
            )));
        }
        if output_rank != 0 && r.values.shape().is_empty() {
            return Err(invalid(format!(
                "Ragged values must have rank >= 1; encoded scalar element at index {i} has \
                 values Tensor: {}",
                debug_string(&r.values)
            )));
        }
        for s in &r.splits {
            if s.dtype() != splits_type {
                return Err(invalid(format!(
                    "Expected row_splits Tensor dtype: {splits_type}, found: {}",
                    s.dtype()
                )));
            }
            if s.shape().len() != 1 {
                return Err(invalid(format!(
                    "Ragged splits must have rank 1; encoded scalar element at index {i} has \
                     splits Tensor {}",
                    debug_string(s)
                )));
            }
        }
        check_ragged(OP, &r)?;
        out.push(r);
    }
    Ok(out)
}

/// How TensorFlow names a variant that holds something else: the
/// SparseTensor string form holds one serialized tensor.
fn other_variant(bytes: &[u8]) -> String {
    match TensorProto::decode(bytes)
        .ok()
        .map(|p| tensor_from_proto(&p))
    {
        Some(Ok(t)) if !bytes.is_empty() => format!(
            "Variant<type: tensorflow::Tensor value: {}>",
            debug_string(&t)
        ),
        _ => "Variant<type: unknown>".into(),
    }
}

/// Dense entries (ragged rank 0, `output_ragged_rank` 0) stacked along a
/// new first dimension, as `tf.stack` would: their shapes must be equal.
fn stack_dense(op: &str, parts: &[Ragged], value_type: DType) -> Result<Ragged> {
    let Some(first) = parts.first() else {
        return Ok(Ragged {
            splits: Vec::new(),
            values: Out::new(op, value_type, 0)?.finish(value_type, vec![0])?,
        });
    };
    let shape = first.values.shape();
    let mut out = Out::new(
        op,
        value_type,
        first
            .values
            .num_elements()
            .saturating_mul(parts.len() as u64),
    )?;
    for (i, p) in parts.iter().enumerate() {
        if p.values.shape() != shape {
            return Err(incompatible(shape, i, p.values.shape(), ""));
        }
        out.push(&Src::of(&p.values), 0, p.values.num_elements() as usize)?;
    }
    let mut stacked = vec![parts.len() as i64];
    stacked.extend_from_slice(shape);
    Ok(Ragged {
        splits: Vec::new(),
        values: out.finish(value_type, stacked)?,
    })
}

fn incompatible(first: &[i64], i: usize, other: &[i64], hint: &str) -> Error {
    invalid(format!(
        "All flat_values must have compatible shapes.  Shape at index 0: {}.  Shape at index \
         {i}: {}{hint}",
        shape_str(first),
        shape_str(other)
    ))
}

/// TensorFlow's `NestedStackRaggedTensors`: the entries of a variant tensor
/// of shape `dims` (each of ragged rank `input_rank`) as one RaggedTensor.
/// The outer `dims.len() - 1` splits are uniform, as TensorFlow writes them
/// (each dimension's size, stepped by the next one's).
fn nested_stack(
    op: &str,
    parts: &[Ragged],
    dims: &[i64],
    input_rank: usize,
    (value_type, splits_type): (DType, DType),
) -> Result<Ragged> {
    let mut splits: Vec<Tensor> = Vec::with_capacity(dims.len() + input_rank);
    for i in 0..dims.len() - 1 {
        let step = dims[i + 1];
        // Sized by the variant's shape, which may be large while empty.
        check_size(op, splits_type, dims[i] as u64 + 1)?;
        let uniform: Vec<i64> = (0..=dims[i]).map(|j| j.saturating_mul(step)).collect();
        let len = uniform.len() as i64;
        splits.push(int_tensor(op, splits_type, &uniform, vec![len])?);
    }
    let mut rows_at = Vec::with_capacity(parts.len() + 1);
    rows_at.push(0i64);
    for p in parts {
        let n = match (input_rank, p.splits.first()) {
            (0, _) | (_, None) => p.values.shape().first().copied().unwrap_or(0),
            (_, Some(s)) => s.num_elements() as i64 - 1,
        };
        rows_at.push(rows_at[rows_at.len() - 1] + n);
    }
    let len = rows_at.len() as i64;
    splits.push(int_tensor(op, splits_type, &rows_at, vec![len])?);
    for level in 0..input_rank {
        let mut joined = vec![0i64];
        for p in parts {
            let Some(s) = p.splits.get(level) else {
                continue;
            };
            let last = joined[joined.len() - 1];
            let s = ints(op, "splits", s)?;
            joined.extend(s.iter().skip(1).map(|v| v + last));
        }
        check_size(op, splits_type, joined.len() as u64)?;
        let len = joined.len() as i64;
        splits.push(int_tensor(op, splits_type, &joined, vec![len])?);
    }
    let values = stack_values(op, parts, value_type)?;
    Ok(Ragged { splits, values })
}

/// The entries' values, one after the other along the first dimension:
/// their ranks, then their inner dimensions, must match.
fn stack_values(op: &str, parts: &[Ragged], value_type: DType) -> Result<Tensor> {
    let Some(first) = parts.first() else {
        // No entries: TensorFlow cannot know the values' shape, and
        // answers `[0]` of the values dtype.
        return Out::new(op, value_type, 0)?.finish(value_type, vec![0]);
    };
    let mut shape = first.values.shape().to_vec();
    let mut total = 0i64;
    for (i, p) in parts.iter().enumerate() {
        let s = p.values.shape();
        if s.len() != shape.len() {
            return Err(invalid(format!(
                "Rank of values must match for all components; values shape at index 0: {}, \
                 values shape at index {i}: {}",
                shape_str(&shape),
                shape_str(s)
            )));
        }
        total += s[0];
    }
    for (i, p) in parts.iter().enumerate() {
        let s = p.values.shape();
        if s[1..] != shape[1..] {
            return Err(incompatible(
                &shape[1..],
                i,
                &s[1..],
                ".  If you are using tf.map_fn, then you may need to specify an explicit \
                 fn_output_signature with appropriate ragged_rank, and/or convert output \
                 tensors to RaggedTensors.",
            ));
        }
    }
    shape[0] = total;
    let dtype = first.values.dtype();
    let inner = inner_size(&first.values);
    let mut out = Out::new(op, dtype, (total as u64).saturating_mul(inner as u64))?;
    for p in parts {
        out.push(&Src::of(&p.values), 0, p.values.num_elements() as usize)?;
    }
    out.finish(dtype, shape)
}

// --- RaggedTensorToVariantGradient -------------------------------------------

fn to_variant_gradient(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "RaggedTensorToVariantGradient";
    let value_type = attrs.dtype("Tvalues")?;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 3)?;
        let row_splits = ints(OP, "row_splits", &inputs[1])?;
        if inputs[2].shape().len() != 1 || inputs[2].dtype() != DType::Int32 {
            return Err(invalid(format!(
                "{OP}: dense_values_shape must be an int32 vector, got a {} tensor of shape {}",
                inputs[2].dtype(),
                shape_str(inputs[2].shape())
            )));
        }
        let dense_shape = ints(OP, "dense_values_shape", &inputs[2])?;
        if dense_shape.iter().any(|&d| d < 0) {
            return Err(invalid(format!(
                "{OP}: dense_values_shape {} has a negative dimension",
                shape_str(&dense_shape)
            )));
        }
        let strings = inputs[0].string_values().map_err(|_| {
            invalid(format!(
                "{OP}: encoded_ragged_grad must be a variant (string) tensor, got {}",
                inputs[0].dtype()
            ))
        })?;
        let mut values = Vec::with_capacity(strings.len());
        for (i, bytes) in strings.iter().enumerate() {
            values.push(match Ragged::decode(bytes) {
                Some(r) => r.values,
                // A default (empty) variant: the gradient did not reach
                // this row, whose values' gradient is zeros.
                None if bytes.is_empty() => {
                    zero_piece(OP, value_type, &row_splits, i, &dense_shape)?
                }
                None => {
                    return Err(invalid(format!(
                        "{OP}: encoded_ragged_grad element {i} doesn't hold a RaggedTensorVariant"
                    )));
                }
            });
        }
        if let Some(v) = values.iter().find(|v| v.dtype() != value_type) {
            return Err(invalid(format!(
                "{OP}: a gradient's values are {}, not {value_type} (Tvalues)",
                v.dtype()
            )));
        }
        if values.len() == 1 {
            // One piece: TensorFlow answers it as it is.
            return Ok(values);
        }
        let want: u64 = dense_shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
            .ok_or_else(|| invalid(format!("{OP}: dense_values_shape overflows")))?;
        let have: u64 = values.iter().map(Tensor::num_elements).sum();
        if have != want {
            // TensorFlow fills (or overruns) the output regardless.
            return Err(invalid(format!(
                "{OP}: the gradients hold {have} values but dense_values_shape {} holds {want}",
                shape_str(&dense_shape)
            )));
        }
        let mut out = Out::new(OP, value_type, want)?;
        for v in &values {
            out.push(&Src::of(v), 0, v.num_elements() as usize)?;
        }
        Ok(vec![out.finish(value_type, dense_shape)?])
    }))
}

/// Zeros for row `i`'s values: `dense_shape` with its first dimension the
/// row's length in `row_splits`.
fn zero_piece(
    op: &str,
    dtype: DType,
    row_splits: &[i64],
    i: usize,
    dense_shape: &[i64],
) -> Result<Tensor> {
    let (Some(&start), Some(&limit)) = (row_splits.get(i), row_splits.get(i + 1)) else {
        return Err(invalid(format!(
            "{op}: row_splits has no row {i} for a missing gradient"
        )));
    };
    let mut shape = dense_shape.to_vec();
    if shape.is_empty() || limit < start {
        return Err(invalid(format!(
            "{op}: cannot make zeros for row {i} (splits {start}..{limit}, shape {})",
            shape_str(dense_shape)
        )));
    }
    shape[0] = limit - start;
    let n = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
        .ok_or_else(|| {
            invalid(format!(
                "{op}: zeros of shape {} overflow",
                shape_str(&shape)
            ))
        })?;
    check_size(op, dtype, n)?;
    let data = match dtype.size() {
        Some(size) => TensorData::Buffer(vec![0u8; n as usize * size].into()),
        None => TensorData::Strings(vec![Bytes::new(); n as usize]),
    };
    Tensor::new(dtype, shape, data)
}

/// A `DT_VARIANT` constant of `RaggedTensorVariant`s (what TensorFlow folds
/// `from_tensor_slices(ragged)`'s input into), in the carried string form;
/// `None` for any other variant.
pub fn variant_constant(proto: &TensorProto) -> Option<Tensor> {
    let shape: Vec<i64> = proto
        .tensor_shape
        .as_ref()?
        .dim
        .iter()
        .map(|d| d.size)
        .collect();
    let n = usize::try_from(shape.iter().try_fold(1i64, |a, &d| a.checked_mul(d))?).ok()?;
    if n == 0 {
        return None;
    }
    let elements = if proto.variant_val.is_empty() {
        super::sparse_tensor::decode_variant_list(&proto.tensor_content, n)?
    } else {
        proto.variant_val.clone()
    };
    if elements.len() != n {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for v in &elements {
        let r = Ragged::of_proto(v)?;
        check_ragged("Const", &r).ok()?;
        out.push(r.encode());
    }
    Tensor::strings(out, shape).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::testing::{int, run, ty};
    use tfdata_proto::tensorflow::AttrValue;

    fn from_variant_attrs(out_rank: i64) -> Vec<(&'static str, AttrValue)> {
        vec![
            ("input_ragged_rank", int(-1)),
            ("output_ragged_rank", int(out_rank)),
            ("Tvalues", ty(DType::Int32)),
            ("Tsplits", ty(DType::Int64)),
        ]
    }

    #[test]
    fn hostile_entries_are_refused_not_trusted() {
        // Splits that run past the values, and bytes that hold no variant:
        // errors, where trusting them would read out of bounds.
        let bad_splits = Ragged {
            splits: vec![Tensor::vector(&[0i64, 9])],
            values: Tensor::vector(&[1i32, 2]),
        }
        .encode();
        for entry in [
            bad_splits,
            Bytes::from_static(b"\xff\xff\x0f"),
            Bytes::new(),
        ] {
            let input = Tensor::strings(vec![entry], vec![1]).unwrap();
            let e = run(
                "RaggedTensorFromVariant",
                &from_variant_attrs(1),
                vec![input],
            )
            .unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
    }

    #[test]
    fn an_empty_variant_of_a_huge_shape_is_refused() {
        let input = Tensor::strings(Vec::new(), vec![1 << 40, 0, 1]).unwrap();
        let e = run(
            "RaggedTensorFromVariant",
            &from_variant_attrs(3),
            vec![input],
        )
        .unwrap_err();
        assert!(e.to_string().contains("exceeds the limit"), "{e}");
    }

    #[test]
    fn entries_stack_into_one_ragged_tensor() {
        let entry = |values: &[i32]| {
            Ragged {
                splits: vec![Tensor::vector(&[0i64, values.len() as i64])],
                values: Tensor::vector(values),
            }
            .encode()
        };
        let input =
            Tensor::strings(vec![entry(&[1, 2]), entry(&[]), entry(&[3])], vec![3]).unwrap();
        let out = run(
            "RaggedTensorFromVariant",
            &from_variant_attrs(2),
            vec![input],
        )
        .unwrap();
        assert_eq!(out[0].to_vec::<i64>().unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(out[1].to_vec::<i64>().unwrap(), vec![0, 2, 2, 3]);
        assert_eq!(out[2].to_vec::<i32>().unwrap(), vec![1, 2, 3]);
    }
}
