//! `tf.train.Example` parsing kernels: `ParseExampleV2`
//! (`tf.io.parse_example`), its V1 `ParseExample`, and `ParseSingleExample`.
//!
//! Examples are parsed by the engine's `tf.train.Example` parser
//! ([`tfdata_dataset::example`]), which has TensorFlow's semantics and
//! wording; this module turns its var-len results into TensorFlow's sparse
//! triples (`indices`, `values`, `dense_shape`) and ragged features
//! (`tf.io.RaggedFeature`) into values and row splits. Not supported, with a
//! clear `Unimplemented` error: dense features with an unknown first
//! dimension (`FixedLenSequenceFeature(allow_missing=True)`).

use std::collections::BTreeMap;

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::example::{FeatureSpec, parse_example_batch, parse_single_example};
use tfdata_proto::tensorflow::TensorShapeProto;

use super::strings::{shape_string, strings};
use super::{Compute, KernelDef, check_size};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "ParseExampleV2",
        outputs: |a| {
            let sparse = a.count("num_sparse")?;
            let ragged = a.dtype_codes("ragged_value_types")?.len();
            Ok(vec![
                ("sparse_indices", sparse),
                ("sparse_values", a.dtype_codes("sparse_types")?.len()),
                ("sparse_shapes", sparse),
                ("dense_values", a.dtype_codes("Tdense")?.len()),
                ("ragged_values", ragged),
                ("ragged_row_splits", ragged),
            ])
        },
        build: parse_example_v2,
    },
    KernelDef {
        op: "ParseExample",
        outputs: |a| {
            let sparse = a.count("Nsparse")?;
            Ok(vec![
                ("sparse_indices", sparse),
                ("sparse_values", a.dtype_codes("sparse_types")?.len()),
                ("sparse_shapes", sparse),
                ("dense_values", a.dtype_codes("Tdense")?.len()),
            ])
        },
        build: parse_example_v1,
    },
    KernelDef {
        op: "ParseSingleExample",
        outputs: |a| {
            let sparse = a.count("num_sparse")?;
            Ok(vec![
                ("sparse_indices", sparse),
                ("sparse_values", a.dtype_codes("sparse_types")?.len()),
                ("sparse_shapes", sparse),
                ("dense_values", a.dtype_codes("Tdense")?.len()),
            ])
        },
        build: parse_single,
    },
];

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// Prefixes the op name to an error from the Example parser.
fn named(op: &str, e: Error) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{op}: {m}")),
        Error::Unimplemented(m) => Error::Unimplemented(format!("{op}: {m}")),
        other => other,
    }
}

/// The feature types and shapes a parse node declares.
struct Schema {
    op: &'static str,
    sparse_types: Vec<DType>,
    dense_types: Vec<DType>,
    dense_shapes: Vec<Vec<i64>>,
    /// `tf.io.RaggedFeature`s (ParseExampleV2 only): value and row-split
    /// dtypes. Parsed as var-len features; a batch's values are
    /// concatenated and its row splits are the running counts.
    ragged_types: Vec<(DType, DType)>,
}

fn dims(op: &str, shape: &TensorShapeProto) -> Result<Vec<i64>> {
    if shape.unknown_rank {
        return Err(invalid(op, "dense_shapes must have a known rank"));
    }
    Ok(shape.dim.iter().map(|d| d.size).collect())
}

impl Schema {
    fn of(op: &'static str, attrs: &NodeAttrs) -> Result<Schema> {
        // ParseExample (V1) names the count `Nsparse`.
        let num_sparse = attrs.count(if op == "ParseExample" {
            "Nsparse"
        } else {
            "num_sparse"
        })?;
        let sparse_types = attrs.dtypes("sparse_types")?;
        let dense_types = attrs.dtypes("Tdense")?;
        let dense_shapes = attrs
            .shapes("dense_shapes")?
            .iter()
            .map(|s| dims(op, s))
            .collect::<Result<Vec<_>>>()?;
        if sparse_types.len() != num_sparse {
            return Err(invalid(
                op,
                format!(
                    "len(sparse_types) = {} but num_sparse = {num_sparse}",
                    sparse_types.len()
                ),
            ));
        }
        if dense_shapes.len() != dense_types.len() {
            return Err(invalid(
                op,
                format!(
                    "len(dense_shapes) = {} but len(Tdense) = {}",
                    dense_shapes.len(),
                    dense_types.len()
                ),
            ));
        }
        for shape in &dense_shapes {
            if shape.iter().any(|&d| d < 0) {
                return Err(Error::Unimplemented(format!(
                    "{op}: dense feature of shape {} has an unknown dimension \
                     (FixedLenSequenceFeature with allow_missing=True); tfdata parses only \
                     fully defined dense shapes",
                    shape_string(shape)
                )));
            }
        }
        let ragged_values = attrs.dtypes("ragged_value_types")?;
        let ragged_splits = attrs.dtypes("ragged_split_types")?;
        if ragged_values.len() != ragged_splits.len() {
            return Err(invalid(
                op,
                format!(
                    "len(ragged_value_types) = {} but len(ragged_split_types) = {}",
                    ragged_values.len(),
                    ragged_splits.len()
                ),
            ));
        }
        if let Some(t) = ragged_splits
            .iter()
            .find(|t| !matches!(t, DType::Int32 | DType::Int64))
        {
            return Err(invalid(
                op,
                format!("ragged_split_types must be int32 or int64, got {t}"),
            ));
        }
        Ok(Schema {
            op,
            sparse_types,
            dense_types,
            dense_shapes,
            ragged_types: ragged_values.into_iter().zip(ragged_splits).collect(),
        })
    }

    /// The feature specs by key, with the dense defaults (an empty default
    /// means the feature is required).
    fn specs(&self, keys: &Keys<'_>, defaults: &[Tensor]) -> Result<BTreeMap<String, FeatureSpec>> {
        let op = self.op;
        let Keys {
            sparse: sparse_keys,
            dense: dense_keys,
            ragged: ragged_keys,
        } = *keys;
        if ragged_keys.len() != self.ragged_types.len() {
            return Err(invalid(
                op,
                format!(
                    "expected {} ragged keys, got {}",
                    self.ragged_types.len(),
                    ragged_keys.len()
                ),
            ));
        }
        if sparse_keys.len() != self.sparse_types.len()
            || dense_keys.len() != self.dense_types.len()
        {
            return Err(invalid(
                op,
                format!(
                    "expected {} sparse and {} dense keys, got {} and {}",
                    self.sparse_types.len(),
                    self.dense_types.len(),
                    sparse_keys.len(),
                    dense_keys.len()
                ),
            ));
        }
        if defaults.len() != self.dense_types.len() {
            return Err(invalid(
                op,
                format!(
                    "expected {} dense defaults, got {}",
                    self.dense_types.len(),
                    defaults.len()
                ),
            ));
        }
        let key = |k: &Bytes| {
            String::from_utf8(k.to_vec())
                .map_err(|_| invalid(op, "feature keys must be UTF-8 in tfdata"))
        };
        let mut specs = BTreeMap::new();
        let mut insert = |name: String, spec: FeatureSpec| {
            if specs.insert(name.clone(), spec).is_some() {
                return Err(invalid(op, format!("Duplicate feature key: {name}")));
            }
            Ok(())
        };
        for (k, &t) in sparse_keys.iter().zip(&self.sparse_types) {
            insert(key(k)?, FeatureSpec::var_len(t))?;
        }
        for (k, &(t, _)) in ragged_keys.iter().zip(&self.ragged_types) {
            insert(key(k)?, FeatureSpec::var_len(t))?;
        }
        for (i, k) in dense_keys.iter().enumerate() {
            let (t, shape, default) = (self.dense_types[i], &self.dense_shapes[i], &defaults[i]);
            if default.dtype() != t {
                return Err(invalid(
                    op,
                    format!(
                        "dense_defaults[{i}] has dtype {} but Tdense[{i}] is {t}",
                        default.dtype()
                    ),
                ));
            }
            let spec = FeatureSpec::fixed(t, shape.clone());
            let spec = if default.num_elements() == 0 {
                spec
            } else {
                spec.with_default(default.clone())
            };
            spec.validate()
                .map_err(|e| invalid(op, format!("dense_defaults[{i}]: {e}")))?;
            insert(key(k)?, spec)?;
        }
        Ok(specs)
    }
}

/// Sparse triples for one example's var-len values (`indices` `[n, 1]`).
fn sparse_single(values: Tensor) -> Result<[Tensor; 3]> {
    let n = values.num_elements() as i64;
    let indices: Vec<i64> = (0..n).collect();
    Ok([
        Tensor::from_slice(&indices, vec![n, 1])?,
        values,
        Tensor::vector(&[n]),
    ])
}

/// Per-example var-len values concatenated into a batch's sparse triple
/// (`indices` `[n, 2]`, `dense_shape` `[batch, longest]`).
fn sparse_batch(op: &str, dtype: DType, rows: Vec<Tensor>) -> Result<[Tensor; 3]> {
    let total: u64 = rows.iter().map(Tensor::num_elements).sum();
    check_size(op, DType::Int64, 2 * total)?;
    check_size(op, dtype, total)?;
    let mut indices = Vec::with_capacity(2 * total as usize);
    let mut longest = 0;
    for (r, row) in rows.iter().enumerate() {
        let n = row.num_elements() as i64;
        longest = longest.max(n);
        for c in 0..n {
            indices.extend([r as i64, c]);
        }
    }
    Ok([
        Tensor::from_slice(&indices, vec![total as i64, 2])?,
        concatenated(dtype, &rows, total)?,
        Tensor::vector(&[rows.len() as i64, longest]),
    ])
}

/// Per-example 1-D values, one after another (`total` of them).
fn concatenated(dtype: DType, rows: &[Tensor], total: u64) -> Result<Tensor> {
    if dtype == DType::String {
        let mut v = Vec::with_capacity(total as usize);
        for row in rows {
            v.extend_from_slice(row.string_values()?);
        }
        return Tensor::strings(v, vec![total as i64]);
    }
    let mut v = Vec::new();
    for row in rows {
        if let TensorData::Buffer(b) = row.data() {
            v.extend_from_slice(b);
        }
    }
    Tensor::new(dtype, vec![total as i64], TensorData::Buffer(v.into()))
}

/// A batch's ragged feature: the values concatenated and the row splits
/// (`[0, n0, n0 + n1, ...]`) in `split_type`.
fn ragged_batch(
    op: &str,
    (dtype, split_type): (DType, DType),
    rows: &[Tensor],
) -> Result<[Tensor; 2]> {
    let total: u64 = rows.iter().map(Tensor::num_elements).sum();
    check_size(op, dtype, total)?;
    let mut splits = Vec::with_capacity(rows.len() + 1);
    let mut at = 0i64;
    splits.push(0);
    for row in rows {
        at += row.num_elements() as i64;
        splits.push(at);
    }
    let splits = if split_type == DType::Int32 {
        let narrow: Vec<i32> = splits.iter().map(|&v| v as i32).collect();
        Tensor::vector(&narrow)
    } else {
        Tensor::vector(&splits)
    };
    Ok([concatenated(dtype, rows, total)?, splits])
}

/// Outputs in TensorFlow's order: the sparse triples as three lists, the
/// dense values, then the ragged pairs as two lists.
fn assemble(sparse: Vec<[Tensor; 3]>, dense: Vec<Tensor>, ragged: Vec<[Tensor; 2]>) -> Vec<Tensor> {
    let mut out = Vec::with_capacity(sparse.len() * 3 + dense.len() + ragged.len() * 2);
    let mut triples: Vec<_> = sparse.into_iter().map(|t| t.into_iter()).collect();
    for _ in 0..3 {
        for t in &mut triples {
            out.extend(t.next());
        }
    }
    out.extend(dense);
    let mut pairs: Vec<_> = ragged.into_iter().map(|t| t.into_iter()).collect();
    for _ in 0..2 {
        for t in &mut pairs {
            out.extend(t.next());
        }
    }
    out
}

/// A parse's feature keys by kind.
#[derive(Clone, Copy)]
struct Keys<'a> {
    sparse: &'a [Bytes],
    dense: &'a [Bytes],
    ragged: &'a [Bytes],
}

fn parse(
    schema: &Schema,
    serialized: &Tensor,
    keys: Keys<'_>,
    defaults: &[Tensor],
) -> Result<Vec<Tensor>> {
    let op = schema.op;
    let specs = schema.specs(&keys, defaults)?;
    let Keys {
        sparse: sparse_keys,
        dense: dense_keys,
        ragged: ragged_keys,
    } = keys;
    let records = strings(op, serialized, "serialized")?;
    let name = |k: &Bytes| String::from_utf8_lossy(k).into_owned();
    match serialized.shape() {
        [] => {
            let mut parsed = parse_single_example(&records[0], &specs)
                .map_err(|e| named(op, unparseable(e, records)))?;
            let mut take = |k: &Bytes| {
                parsed
                    .remove(&name(k))
                    .ok_or_else(|| Error::Internal(format!("{op}: feature {} not parsed", name(k))))
            };
            let sparse = sparse_keys
                .iter()
                .map(|k| sparse_single(take(k)?))
                .collect::<Result<Vec<_>>>()?;
            let dense = dense_keys
                .iter()
                .map(&mut take)
                .collect::<Result<Vec<_>>>()?;
            // One example's ragged feature: its values, and no row splits
            // (TensorFlow's empty splits for a scalar input).
            let ragged = ragged_keys
                .iter()
                .zip(&schema.ragged_types)
                .map(|(k, &(_, split))| {
                    Ok([
                        take(k)?,
                        Tensor::new(split, vec![0], TensorData::Buffer(Bytes::new()))?,
                    ])
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(assemble(sparse, dense, ragged))
        }
        [_] => {
            let (fixed, var): (BTreeMap<_, _>, BTreeMap<_, _>) = specs
                .into_iter()
                .partition(|(_, s)| matches!(s, FeatureSpec::Fixed { .. }));
            let mut dense_out = parse_example_batch(records, &fixed)
                .map_err(|e| named(op, unparseable(e, records)))?;
            let mut rows: BTreeMap<String, Vec<Tensor>> = BTreeMap::new();
            if !var.is_empty() {
                for (index, record) in records.iter().enumerate() {
                    let parsed = parse_single_example(record, &var)
                        .map_err(|e| named(op, unparseable(batch_wording(e, index), records)))?;
                    for (k, t) in parsed {
                        rows.entry(k).or_default().push(t);
                    }
                }
            }
            let sparse = sparse_keys
                .iter()
                .zip(&schema.sparse_types)
                .map(|(k, &t)| sparse_batch(op, t, rows.remove(&name(k)).unwrap_or_default()))
                .collect::<Result<Vec<_>>>()?;
            let dense = dense_keys
                .iter()
                .map(|k| {
                    dense_out.remove(&name(k)).ok_or_else(|| {
                        Error::Internal(format!("{op}: feature {} not parsed", name(k)))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let ragged = ragged_keys
                .iter()
                .zip(&schema.ragged_types)
                .map(|(k, &types)| {
                    ragged_batch(op, types, &rows.remove(&name(k)).unwrap_or_default())
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(assemble(sparse, dense, ragged))
        }
        other => Err(invalid(
            op,
            format!(
                "Expected serialized to be a scalar or vector, got shape: {}",
                shape_string(other)
            ),
        )),
    }
}

/// A record that is no `Example`, worded as TensorFlow words it ("Could not
/// parse example input, value: '<the record>'"; ours cut at 256 bytes) with
/// the parser's reason after.
fn unparseable(e: Error, records: &[Bytes]) -> Error {
    let Error::InvalidArgument(m) = &e else {
        return e;
    };
    let Some(rest) = m.strip_prefix("Could not parse example input") else {
        return e;
    };
    let index = rest
        .split("Index: ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|d| d.parse::<usize>().ok())
        .unwrap_or(0);
    let record = records.get(index).map_or(&[][..], |r| &r[..]);
    const SHOWN: usize = 256;
    let cut = if record.len() > SHOWN { "..." } else { "" };
    Error::InvalidArgument(format!(
        "Could not parse example input, value: '{}{cut}' ({})",
        String::from_utf8_lossy(&record[..record.len().min(SHOWN)]),
        rest.trim_start_matches([',', ':', ' '])
    ))
}

/// A single-Example error worded as TensorFlow words it in a batch.
fn batch_wording(e: Error, index: usize) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(
            if let Some(rest) = m.strip_prefix("Could not parse example input: ") {
                format!("Could not parse example input, Index: {index}: {rest}")
            } else if let Some(rest) = m.strip_prefix("Key: ") {
                match rest.split_once(".  ") {
                    Some((key, tail)) => {
                        format!("Name: <unknown>, Key: {key}, Index: {index}.  {tail}")
                    }
                    None => m,
                }
            } else {
                m
            },
        ),
        other => other,
    }
}

fn parse_example_v2(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "ParseExampleV2";
    let schema = Schema::of(OP, attrs)?;
    let n_dense = schema.dense_types.len();
    Ok(Box::new(move |inputs| {
        super::expect_inputs(OP, &inputs, 5 + n_dense)?;
        let sparse_keys = strings(OP, &inputs[2], "sparse_keys")?;
        let dense_keys = strings(OP, &inputs[3], "dense_keys")?;
        let ragged_keys = strings(OP, &inputs[4], "ragged_keys")?;
        let keys = Keys {
            sparse: sparse_keys,
            dense: dense_keys,
            ragged: ragged_keys,
        };
        parse(&schema, &inputs[0], keys, &inputs[5..])
    }))
}

/// `ParseExample` (V1): a batch only, and the keys as one scalar tensor
/// each rather than one vector per kind.
fn parse_example_v1(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "ParseExample";
    let schema = Schema::of(OP, attrs)?;
    let n_sparse = schema.sparse_types.len();
    let n_dense = schema.dense_types.len();
    Ok(Box::new(move |inputs| {
        super::expect_inputs(OP, &inputs, 2 + n_sparse + 2 * n_dense)?;
        let (serialized, names) = (&inputs[0], &inputs[1]);
        if serialized.shape().len() != 1 {
            return Err(invalid(
                OP,
                format!(
                    "Expected serialized to be a vector, got shape: {}",
                    shape_string(serialized.shape())
                ),
            ));
        }
        if names.num_elements() > 0 && names.shape() != serialized.shape() {
            return Err(invalid(
                OP,
                format!(
                    "Expected names have the same shape as serialized: name.shape={}, \
                     serialized.shape={}",
                    shape_string(names.shape()),
                    shape_string(serialized.shape())
                ),
            ));
        }
        let scalars = |what: &str, list: &[Tensor]| -> Result<Vec<Bytes>> {
            list.iter()
                .enumerate()
                .map(|(i, t)| match (t.shape(), strings(OP, t, what)?) {
                    ([], [k]) => Ok(k.clone()),
                    _ => Err(invalid(
                        OP,
                        format!(
                            "Expected {what}[{i}] to be a scalar, got shape: {}",
                            shape_string(t.shape())
                        ),
                    )),
                })
                .collect()
        };
        let sparse_keys = scalars("sparse_keys", &inputs[2..2 + n_sparse])?;
        let dense_keys = scalars("dense_keys", &inputs[2 + n_sparse..2 + n_sparse + n_dense])?;
        let keys = Keys {
            sparse: &sparse_keys,
            dense: &dense_keys,
            ragged: &[],
        };
        parse(&schema, serialized, keys, &inputs[2 + n_sparse + n_dense..])
    }))
}

fn parse_single(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "ParseSingleExample";
    let schema = Schema::of(OP, attrs)?;
    let keys = |k: &str| -> Result<Vec<Bytes>> {
        if !attrs.has(k) {
            return Ok(Vec::new());
        }
        Ok(attrs
            .strings(k)?
            .into_iter()
            .map(Bytes::copy_from_slice)
            .collect())
    };
    let sparse_keys = keys("sparse_keys")?;
    let dense_keys = keys("dense_keys")?;
    let n_dense = schema.dense_types.len();
    Ok(Box::new(move |inputs| {
        super::expect_inputs(OP, &inputs, 1 + n_dense)?;
        if !inputs[0].shape().is_empty() {
            return Err(invalid(
                OP,
                format!(
                    "Expected serialized to be a scalar, got shape: {}",
                    shape_string(inputs[0].shape())
                ),
            ));
        }
        // A default (any but an empty one, which makes the feature
        // required) must have the feature's shape, as TensorFlow checks.
        for (i, (d, shape)) in inputs[1..].iter().zip(&schema.dense_shapes).enumerate() {
            if d.num_elements() > 0 && d.shape() != shape.as_slice() {
                return Err(invalid(
                    OP,
                    format!(
                        "def_value[{i}].shape() == {} is not compatible with dense_shapes_[{i}] == {}",
                        shape_string(d.shape()),
                        shape_string(shape)
                    ),
                ));
            }
        }
        let keys = Keys {
            sparse: &sparse_keys,
            dense: &dense_keys,
            ragged: &[],
        };
        parse(&schema, &inputs[0], keys, &inputs[1..]).map_err(single_wording)
    }))
}

/// A dense feature of the wrong length, worded as TensorFlow's
/// single-Example parser words it (its batch parser counts the values).
fn single_wording(e: Error) -> Error {
    let Error::InvalidArgument(m) = &e else {
        return e;
    };
    let Some((head, rest)) = m.split_once("Key: ") else {
        return e;
    };
    let Some((key, tail)) = rest.split_once(".  Number of ") else {
        return e;
    };
    let what = match tail.split(' ').next() {
        Some("int64") => "Some int64_list slice was not parsed.",
        Some("float") => "Some float_list slice was not parsed.",
        Some("string") => "Parsing bytes_list failed.",
        _ => return e,
    };
    Error::InvalidArgument(format!(
        "{head}Key: {key}.  Can't parse serialized Example: {what}"
    ))
}

#[cfg(test)]
mod tests {
    use tfdata_core::{DType, Result, Tensor};
    use tfdata_dataset::example::ExampleBuilder;
    use tfdata_proto::tensorflow::attr_value::ListValue;
    use tfdata_proto::tensorflow::{AttrValue, TensorShapeProto, tensor_shape_proto::Dim};

    use super::super::testing::{err, int, list, run, svec, types};

    fn shapes(s: &[&[i64]]) -> AttrValue {
        let shape = s
            .iter()
            .map(|d| TensorShapeProto {
                dim: d
                    .iter()
                    .map(|&size| Dim {
                        size,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        list(ListValue {
            shape,
            ..Default::default()
        })
    }

    fn keys(k: &[&str]) -> AttrValue {
        list(ListValue {
            s: k.iter().map(|s| s.as_bytes().to_vec().into()).collect(),
            ..Default::default()
        })
    }

    fn e0() -> Vec<u8> {
        ExampleBuilder::new()
            .int64("a", &[1, 2, 3])
            .bytes("s", &["x", "y"])
            .float("d", &[1.5, 2.5])
            .build()
    }
    fn e1() -> Vec<u8> {
        ExampleBuilder::new()
            .int64("a", &[4])
            .float("d", &[3.5, 4.5])
            .build()
    }
    fn e2() -> Vec<u8> {
        ExampleBuilder::new()
            .float("d", &[5.5, 6.5])
            .bytes("s", &["z"])
            .build()
    }

    /// The TensorFlow reference node: sparse `a` (int64) and `s` (string),
    /// dense `d` (float [2], required) and `e` (int64 [], default 7).
    fn parse_v2(serialized: Tensor, e_default: Tensor) -> Result<Vec<Tensor>> {
        run(
            "ParseExampleV2",
            &[
                ("num_sparse", int(2)),
                ("sparse_types", types(&[DType::Int64, DType::String])),
                ("Tdense", types(&[DType::Float, DType::Int64])),
                ("dense_shapes", shapes(&[&[2], &[]])),
            ],
            vec![
                serialized,
                Tensor::strings(vec![], vec![0]).unwrap(),
                svec(&[b"a", b"s"]),
                svec(&[b"d", b"e"]),
                Tensor::strings(vec![], vec![0]).unwrap(),
                Tensor::from_slice::<f32>(&[], vec![0]).unwrap(),
                e_default,
            ],
        )
    }

    #[test]
    fn parse_example_v2_batch_matches_tensorflow() {
        let out = parse_v2(svec(&[&e0(), &e1(), &e2()]), Tensor::scalar(7i64)).unwrap();
        assert_eq!(out.len(), 8);
        assert_eq!(out[0].to_vec::<i64>().unwrap(), [0, 0, 0, 1, 0, 2, 1, 0]);
        assert_eq!(out[0].shape(), [4, 2]);
        assert_eq!(out[1].to_vec::<i64>().unwrap(), [0, 0, 0, 1, 2, 0]);
        assert_eq!(out[2].to_vec::<i64>().unwrap(), [1, 2, 3, 4]);
        assert_eq!(out[3].string_values().unwrap(), ["x", "y", "z"]);
        assert_eq!(out[4].to_vec::<i64>().unwrap(), [3, 3]);
        assert_eq!(out[5].to_vec::<i64>().unwrap(), [3, 2]);
        assert_eq!(
            out[6].to_vec::<f32>().unwrap(),
            [1.5, 2.5, 3.5, 4.5, 5.5, 6.5]
        );
        assert_eq!(out[6].shape(), [3, 2]);
        assert_eq!(out[7].to_vec::<i64>().unwrap(), [7, 7, 7]);

        let out = parse_v2(
            Tensor::strings(vec![], vec![0]).unwrap(),
            Tensor::scalar(7i64),
        )
        .unwrap();
        assert_eq!(out[0].shape(), [0, 2]);
        assert_eq!(out[4].to_vec::<i64>().unwrap(), [0, 0]);
        assert_eq!(out[6].shape(), [0, 2]);
    }

    #[test]
    fn parse_example_v2_scalar_matches_tensorflow() {
        let out = parse_v2(Tensor::scalar_string(e0()), Tensor::scalar(7i64)).unwrap();
        assert_eq!(out[0].to_vec::<i64>().unwrap(), [0, 1, 2]);
        assert_eq!(out[0].shape(), [3, 1]);
        assert_eq!(out[1].shape(), [2, 1]);
        assert_eq!(out[4].to_vec::<i64>().unwrap(), [3]);
        assert_eq!(out[5].to_vec::<i64>().unwrap(), [2]);
        assert_eq!(out[6].to_vec::<f32>().unwrap(), [1.5, 2.5]);
        assert_eq!(
            (out[7].to_vec::<i64>().unwrap(), out[7].shape().len()),
            (vec![7], 0)
        );
    }

    #[test]
    fn parse_example_v2_errors_match_tensorflow() {
        let seven = || Tensor::scalar(7i64);
        let only_a = ExampleBuilder::new().int64("a", &[1]).build();
        assert_eq!(
            err(parse_v2(svec(&[&e0(), &only_a]), seven())),
            "ParseExampleV2: Name: <unknown>, Feature: d (data type: float) is required but could not be found."
        );
        assert_eq!(
            err(parse_v2(Tensor::scalar_string(only_a), seven())),
            "ParseExampleV2: Feature: d (data type: float) is required but could not be found."
        );
        let d_int = ExampleBuilder::new().int64("d", &[1, 2]).build();
        assert_eq!(
            err(parse_v2(svec(&[&e0(), &d_int]), seven())),
            "ParseExampleV2: Name: <unknown>, Key: d, Index: 1.  Data types don't match. Data type: int64 but expected type: float"
        );
        let d3 = ExampleBuilder::new().float("d", &[1.0, 2.0, 3.0]).build();
        assert_eq!(
            err(parse_v2(svec(&[&e0(), &d3]), seven())),
            "ParseExampleV2: Name: <unknown>, Key: d, Index: 1.  Number of float values != expected.  Values size: 3 but output shape: [2]"
        );
        let a_float = ExampleBuilder::new()
            .float("a", &[1.0])
            .float("d", &[1.0, 2.0])
            .build();
        assert_eq!(
            err(parse_v2(svec(&[&e0(), &a_float]), seven())),
            "ParseExampleV2: Name: <unknown>, Key: a, Index: 1.  Data types don't match. Expected type: int64, Actual type: float"
        );
        assert!(
            err(parse_v2(svec(&[&e0(), b"\xff\xff"]), seven()))
                .contains("Could not parse example input, value: '\u{fffd}\u{fffd}' (Index: 1")
        );
        // Ragged split types other than int32/int64 are refused when the
        // node is built.
        let r = run(
            "ParseExampleV2",
            &[
                ("num_sparse", int(0)),
                ("ragged_value_types", types(&[DType::Int64])),
                ("ragged_split_types", types(&[DType::Float])),
            ],
            vec![],
        );
        assert!(
            matches!(r, Err(tfdata_core::Error::InvalidArgument(m)) if m.contains("ragged_split_types"))
        );
    }

    #[test]
    fn parse_single_example_matches_tensorflow() {
        let attrs = [
            ("num_sparse", int(2)),
            ("sparse_keys", keys(&["a", "s"])),
            ("dense_keys", keys(&["d", "e"])),
            ("sparse_types", types(&[DType::Int64, DType::String])),
            ("Tdense", types(&[DType::Float, DType::Int64])),
            ("dense_shapes", shapes(&[&[2], &[]])),
        ];
        let no_f32 = || Tensor::from_slice::<f32>(&[], vec![0]).unwrap();
        let out = run(
            "ParseSingleExample",
            &attrs,
            vec![Tensor::scalar_string(e0()), no_f32(), Tensor::scalar(7i64)],
        )
        .unwrap();
        assert_eq!(out[0].to_vec::<i64>().unwrap(), [0, 1, 2]);
        assert_eq!(out[3].string_values().unwrap(), ["x", "y"]);
        assert_eq!(out[5].to_vec::<i64>().unwrap(), [2]);
        assert_eq!(out[6].to_vec::<f32>().unwrap(), [1.5, 2.5]);
        assert_eq!(out[7].to_vec::<i64>().unwrap(), [7]);
        let no_i64 = Tensor::from_slice::<i64>(&[], vec![0]).unwrap();
        assert_eq!(
            err(run(
                "ParseSingleExample",
                &attrs,
                vec![Tensor::scalar_string(e1()), no_f32(), no_i64]
            )),
            "ParseSingleExample: Feature: e (data type: int64) is required but could not be found."
        );

        let m = ExampleBuilder::new()
            .int64("m", &[1, 2, 3, 4, 5, 6])
            .build();
        let attrs = [
            ("num_sparse", int(0)),
            ("dense_keys", keys(&["m"])),
            ("Tdense", types(&[DType::Int64])),
            ("dense_shapes", shapes(&[&[2, 3]])),
        ];
        let out = run(
            "ParseSingleExample",
            &attrs,
            vec![
                Tensor::scalar_string(m),
                Tensor::from_slice::<i64>(&[], vec![0]).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(
            (out[0].shape(), out[0].to_vec::<i64>().unwrap()),
            (&[2i64, 3][..], vec![1, 2, 3, 4, 5, 6])
        );

        let attrs = [
            ("num_sparse", int(1)),
            ("sparse_keys", keys(&["a"])),
            ("sparse_types", types(&[DType::Float])),
        ];
        let out = run(
            "ParseSingleExample",
            &attrs,
            vec![Tensor::scalar_string(ExampleBuilder::new().build())],
        )
        .unwrap();
        assert_eq!(out[0].shape(), [0, 1]);
        assert_eq!(out[1].shape(), [0]);
        assert_eq!(out[2].to_vec::<i64>().unwrap(), [0]);
    }
}
