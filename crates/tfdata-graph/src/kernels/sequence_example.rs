//! `ParseSingleSequenceExample` (`tf.io.parse_single_sequence_example`):
//! one `tf.train.SequenceExample`'s context features (dense with defaults,
//! or sparse) and feature lists (dense: one row per step; sparse: the
//! steps' values as a `[steps, longest]` sparse tensor).
//!
//! The `SequenceExample` wire types are declared here (the proto crate has
//! `Example` only); `Feature` and `Features` are the proto crate's. Errors
//! carry TensorFlow 2.21's wording (observed), with the example's
//! `debug_name` after "Name: ".

use std::collections::HashMap;

use bytes::Bytes;
use prost::Message;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_proto::tensorflow::{Feature, Features, feature::Kind};

use super::strings::{shape_string, strings};
use super::{Compute, KernelDef, check_size};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "ParseSingleSequenceExample",
    outputs: |a| {
        let cs = a.count("Ncontext_sparse")?;
        let fs = a.count("Nfeature_list_sparse")?;
        Ok(vec![
            ("context_sparse_indices", cs),
            ("context_sparse_values", cs),
            ("context_sparse_shapes", cs),
            ("context_dense_values", a.count("Ncontext_dense")?),
            ("feature_list_sparse_indices", fs),
            ("feature_list_sparse_values", fs),
            ("feature_list_sparse_shapes", fs),
            ("feature_list_dense_values", a.count("Nfeature_list_dense")?),
        ])
    },
    build: parse_single_sequence,
}];

const OP: &str = "ParseSingleSequenceExample";

#[derive(Clone, PartialEq, Message)]
struct SequenceExample {
    #[prost(message, optional, tag = "1")]
    context: Option<Features>,
    #[prost(message, optional, tag = "2")]
    feature_lists: Option<FeatureLists>,
}

#[derive(Clone, PartialEq, Message)]
struct FeatureLists {
    #[prost(map = "string, message", tag = "1")]
    feature_list: HashMap<String, FeatureList>,
}

#[derive(Clone, PartialEq, Message)]
struct FeatureList {
    #[prost(message, repeated, tag = "1")]
    feature: Vec<Feature>,
}

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{OP}: {message}"))
}

/// TensorFlow's name for a feature dtype in its messages.
fn type_name(dtype: DType) -> &'static str {
    match dtype {
        DType::Float => "float",
        DType::Int64 => "int64",
        _ => "string",
    }
}

fn kind_dtype(kind: &Kind) -> DType {
    match kind {
        Kind::BytesList(_) => DType::String,
        Kind::FloatList(_) => DType::Float,
        Kind::Int64List(_) => DType::Int64,
    }
}

/// A feature's values of one dtype, gathered before they become a tensor
/// (`sequence_batch` gathers into it too).
pub(super) enum Values {
    Int(Vec<i64>),
    Float(Vec<f32>),
    Bytes(Vec<Bytes>),
}

impl Values {
    pub(super) fn new(dtype: DType) -> Values {
        match dtype {
            DType::Int64 => Values::Int(Vec::new()),
            DType::Float => Values::Float(Vec::new()),
            _ => Values::Bytes(Vec::new()),
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Values::Int(v) => v.len(),
            Values::Float(v) => v.len(),
            Values::Bytes(v) => v.len(),
        }
    }

    /// Appends `kind`'s values (the caller has checked the dtype); the
    /// number appended.
    fn extend(&mut self, kind: &Kind) -> usize {
        match (self, kind) {
            (Values::Int(v), Kind::Int64List(l)) => {
                v.extend_from_slice(&l.value);
                l.value.len()
            }
            (Values::Float(v), Kind::FloatList(l)) => {
                v.extend_from_slice(&l.value);
                l.value.len()
            }
            (Values::Bytes(v), Kind::BytesList(l)) => {
                v.extend(l.value.iter().cloned());
                l.value.len()
            }
            _ => 0,
        }
    }

    /// Pads with zeros (empty strings) to `len` values.
    pub(super) fn pad(&mut self, len: usize) {
        match self {
            Values::Int(v) => v.resize(len.max(v.len()), 0),
            Values::Float(v) => v.resize(len.max(v.len()), 0.0),
            Values::Bytes(v) => v.resize(len.max(v.len()), Bytes::new()),
        }
    }

    /// Appends a tensor's values (of this dtype: the caller checked).
    pub(super) fn append_tensor(&mut self, t: &Tensor) -> Result<()> {
        match self {
            Values::Int(v) => v.extend(t.to_vec::<i64>()?),
            Values::Float(v) => v.extend(t.to_vec::<f32>()?),
            Values::Bytes(v) => v.extend_from_slice(t.string_values()?),
        }
        Ok(())
    }

    pub(super) fn tensor(self, shape: Vec<i64>) -> Result<Tensor> {
        match self {
            Values::Int(v) => Tensor::from_slice(&v, shape),
            Values::Float(v) => Tensor::from_slice(&v, shape),
            Values::Bytes(v) => Tensor::strings(v, shape),
        }
    }
}

/// A node's feature keys, types and shapes.
struct Schema {
    context_sparse: Vec<(Bytes, DType)>,
    context_dense: Vec<(Bytes, DType, Vec<i64>)>,
    list_sparse: Vec<(Bytes, DType)>,
    list_dense: Vec<(Bytes, DType, Vec<i64>)>,
}

fn known_dims(shape: &tfdata_proto::tensorflow::TensorShapeProto) -> Result<Vec<i64>> {
    if shape.unknown_rank || shape.dim.iter().any(|d| d.size < 0) {
        return Err(invalid("dense shapes must be fully defined"));
    }
    Ok(shape.dim.iter().map(|d| d.size).collect())
}

fn check_types(what: &str, types: &[DType]) -> Result<()> {
    match types
        .iter()
        .find(|t| !matches!(t, DType::Int64 | DType::Float | DType::String))
    {
        Some(t) => Err(invalid(format!(
            "{what} must be int64, float or string, got {t}"
        ))),
        None => Ok(()),
    }
}

fn sized<T>(what: &str, n: usize, list: Vec<T>) -> Result<Vec<T>> {
    if list.len() != n {
        return Err(invalid(format!("expected {n} {what}, got {}", list.len())));
    }
    Ok(list)
}

/// Pairs scalar key inputs with their types.
fn keyed<T>(what: &str, keys: &[Tensor], rest: Vec<T>) -> Result<Vec<(Bytes, T)>> {
    let keys = keys
        .iter()
        .map(|t| match (t.shape(), strings(OP, t, what)?) {
            ([], [k]) => Ok(k.clone()),
            _ => Err(invalid(format!(
                "Expected {what} to be scalars, got shape: {}",
                shape_string(t.shape())
            ))),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(keys.into_iter().zip(rest).collect())
}

/// Sparse triples for one list of values: `indices` `[n, 1]`.
fn sparse_vector(values: Values) -> Result<[Tensor; 3]> {
    let n = values.len() as i64;
    let indices: Vec<i64> = (0..n).collect();
    Ok([
        Tensor::from_slice(&indices, vec![n, 1])?,
        values.tensor(vec![n])?,
        Tensor::vector(&[n]),
    ])
}

fn parse_single_sequence(attrs: &NodeAttrs) -> Result<Compute> {
    let nc_sparse = attrs.count("Ncontext_sparse")?;
    let nc_dense = attrs.count("Ncontext_dense")?;
    let nl_sparse = attrs.count("Nfeature_list_sparse")?;
    let nl_dense = attrs.count("Nfeature_list_dense")?;
    let c_sparse_types = sized(
        "context_sparse_types",
        nc_sparse,
        attrs.dtypes("context_sparse_types")?,
    )?;
    let c_dense_types = sized("Tcontext_dense", nc_dense, attrs.dtypes("Tcontext_dense")?)?;
    let l_sparse_types = sized(
        "feature_list_sparse_types",
        nl_sparse,
        attrs.dtypes("feature_list_sparse_types")?,
    )?;
    let l_dense_types = sized(
        "feature_list_dense_types",
        nl_dense,
        attrs.dtypes("feature_list_dense_types")?,
    )?;
    for (what, t) in [
        ("context_sparse_types", &c_sparse_types),
        ("Tcontext_dense", &c_dense_types),
        ("feature_list_sparse_types", &l_sparse_types),
        ("feature_list_dense_types", &l_dense_types),
    ] {
        check_types(what, t)?;
    }
    let c_dense_shapes = sized(
        "context_dense_shapes",
        nc_dense,
        attrs
            .shapes("context_dense_shapes")?
            .iter()
            .map(known_dims)
            .collect::<Result<Vec<_>>>()?,
    )?;
    let l_dense_shapes = sized(
        "feature_list_dense_shapes",
        nl_dense,
        attrs
            .shapes("feature_list_dense_shapes")?
            .iter()
            .map(known_dims)
            .collect::<Result<Vec<_>>>()?,
    )?;
    Ok(Box::new(move |inputs| {
        // serialized, missing-assumed-empty, four key lists, the defaults,
        // debug_name.
        super::expect_inputs(
            OP,
            &inputs,
            3 + nc_sparse + 2 * nc_dense + nl_sparse + nl_dense,
        )?;
        let mut at = 2;
        let mut next = |n: usize| {
            let s = &inputs[at..at + n];
            at += n;
            s
        };
        let c_sparse_keys = next(nc_sparse);
        let c_dense_keys = next(nc_dense);
        let l_sparse_keys = next(nl_sparse);
        let l_dense_keys = next(nl_dense);
        let defaults = next(nc_dense);
        let schema = Schema {
            context_sparse: keyed("context_sparse_keys", c_sparse_keys, c_sparse_types.clone())?,
            context_dense: keyed(
                "context_dense_keys",
                c_dense_keys,
                c_dense_types
                    .iter()
                    .copied()
                    .zip(c_dense_shapes.iter().cloned())
                    .collect(),
            )?
            .into_iter()
            .map(|(k, (t, s))| (k, t, s))
            .collect(),
            list_sparse: keyed(
                "feature_list_sparse_keys",
                l_sparse_keys,
                l_sparse_types.clone(),
            )?,
            list_dense: keyed(
                "feature_list_dense_keys",
                l_dense_keys,
                l_dense_types
                    .iter()
                    .copied()
                    .zip(l_dense_shapes.iter().cloned())
                    .collect(),
            )?
            .into_iter()
            .map(|(k, (t, s))| (k, t, s))
            .collect(),
        };
        let serialized = &inputs[0];
        if !serialized.shape().is_empty() {
            return Err(invalid(format!(
                "Expected serialized to be a scalar, got shape: {}",
                shape_string(serialized.shape())
            )));
        }
        let record = &strings(OP, serialized, "serialized")?[0];
        let assumed_empty = strings(OP, &inputs[1], "feature_list_dense_missing_assumed_empty")?;
        let debug_name = strings(OP, &inputs[inputs.len() - 1], "debug_name")?;
        let name = debug_name
            .first()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        parse_one(&schema, record, assumed_empty, defaults, &name)
    }))
}

/// The values of feature `key` in `map`, if present with a list set.
fn kind_of<'a>(map: Option<&'a HashMap<String, Feature>>, key: &Bytes) -> Option<&'a Kind> {
    let key = std::str::from_utf8(key).ok()?;
    map?.get(key)?.kind.as_ref()
}

fn parse_one(
    schema: &Schema,
    record: &Bytes,
    assumed_empty: &[Bytes],
    defaults: &[Tensor],
    name: &str,
) -> Result<Vec<Tensor>> {
    let example = SequenceExample::decode(record.clone()).map_err(|_| {
        const SHOWN: usize = 256;
        let cut = if record.len() > SHOWN { "..." } else { "" };
        invalid(format!(
            "Could not parse example input, value: '{}{cut}'",
            String::from_utf8_lossy(&record[..record.len().min(SHOWN)])
        ))
    })?;
    let context = example.context.as_ref().map(|c| &c.feature);
    let lists = example.feature_lists.as_ref().map(|l| &l.feature_list);
    let key_str = |k: &Bytes| String::from_utf8_lossy(k).into_owned();
    let mismatch = |what: &str, key: &Bytes, index: Option<usize>, want: DType, kind: &Kind| {
        let at = index.map(|i| format!(", Index: {i}")).unwrap_or_default();
        invalid(format!(
            "Name: {name}, {what}: {}{at}.  Data types don't match. Expected type: {}  \
             Feature is: {kind:?}",
            key_str(key),
            type_name(want),
        ))
    };
    let count_error = |key: &Bytes, index: usize, dtype: DType, got: usize, shape: &[i64]| {
        invalid(format!(
            "Name: {name}, Key: {}, Index: {index}.  Number of {} values != expected.  values \
             size: {got} but output shape: {}",
            key_str(key),
            type_name(dtype),
            shape_string(shape)
        ))
    };

    let mut c_sparse = Vec::with_capacity(schema.context_sparse.len());
    for (key, dtype) in &schema.context_sparse {
        let mut values = Values::new(*dtype);
        if let Some(kind) = kind_of(context, key) {
            if kind_dtype(kind) != *dtype {
                return Err(mismatch("Context feature", key, None, *dtype, kind));
            }
            values.extend(kind);
        }
        c_sparse.push(sparse_vector(values)?);
    }

    let mut c_dense = Vec::with_capacity(schema.context_dense.len());
    for ((key, dtype, shape), default) in schema.context_dense.iter().zip(defaults) {
        let want: i64 = shape.iter().product();
        match kind_of(context, key) {
            Some(kind) => {
                if kind_dtype(kind) != *dtype {
                    return Err(mismatch("Context feature", key, None, *dtype, kind));
                }
                let mut values = Values::new(*dtype);
                let got = values.extend(kind);
                if got as i64 != want {
                    return Err(count_error(key, 0, *dtype, got, shape));
                }
                c_dense.push(values.tensor(shape.clone())?);
            }
            None if default.num_elements() == 0 => {
                return Err(invalid(format!(
                    "Name: {name}, Context feature '{}' is required but could not be found.",
                    key_str(key)
                )));
            }
            None => {
                if default.dtype() != *dtype || default.num_elements() as i64 != want {
                    return Err(invalid(format!(
                        "Default value for context feature {} must have dtype {} and {want} \
                         values, got {} of shape {}",
                        key_str(key),
                        type_name(*dtype),
                        default.dtype(),
                        shape_string(default.shape())
                    )));
                }
                c_dense.push(super::layout::reshaped(default.clone(), shape.clone())?);
            }
        }
    }

    let mut l_sparse = Vec::with_capacity(schema.list_sparse.len());
    for (key, dtype) in &schema.list_sparse {
        let steps = std::str::from_utf8(key)
            .ok()
            .and_then(|k| lists?.get(k))
            .map_or(&[][..], |l| &l.feature[..]);
        let mut values = Values::new(*dtype);
        let mut indices = Vec::new();
        let mut longest = 0usize;
        for (step, feature) in steps.iter().enumerate() {
            let Some(kind) = &feature.kind else { continue };
            if kind_dtype(kind) != *dtype {
                return Err(mismatch("Feature List", key, Some(step), *dtype, kind));
            }
            let n = values.extend(kind);
            check_size(OP, DType::Int64, 2 * values.len() as u64)?;
            longest = longest.max(n);
            for j in 0..n {
                indices.extend([step as i64, j as i64]);
            }
        }
        let n = values.len() as i64;
        l_sparse.push([
            Tensor::from_slice(&indices, vec![n, 2])?,
            values.tensor(vec![n])?,
            Tensor::vector(&[steps.len() as i64, longest as i64]),
        ]);
    }

    let mut l_dense = Vec::with_capacity(schema.list_dense.len());
    for (key, dtype, shape) in &schema.list_dense {
        let want: i64 = shape.iter().product();
        let list = std::str::from_utf8(key).ok().and_then(|k| lists?.get(k));
        let Some(list) = list else {
            if !assumed_empty.contains(key) {
                return Err(invalid(format!(
                    "Name: {name}, Feature list '{}' is required but could not be found.  Did \
                     you mean to include it in feature_list_dense_missing_assumed_empty or \
                     feature_list_dense_defaults?",
                    key_str(key)
                )));
            }
            let mut empty = vec![0];
            empty.extend_from_slice(shape);
            l_dense.push(Values::new(*dtype).tensor(empty)?);
            continue;
        };
        let mut values = Values::new(*dtype);
        for (step, feature) in list.feature.iter().enumerate() {
            let got = match &feature.kind {
                Some(kind) if kind_dtype(kind) != *dtype => {
                    return Err(mismatch("Feature list", key, Some(step), *dtype, kind));
                }
                Some(kind) => values.extend(kind),
                None => 0,
            };
            if got as i64 != want {
                return Err(count_error(key, step, *dtype, got, shape));
            }
            check_size(OP, *dtype, values.len() as u64)?;
        }
        let mut full = vec![list.feature.len() as i64];
        full.extend_from_slice(shape);
        l_dense.push(values.tensor(full)?);
    }

    let mut out = Vec::new();
    for part in 0..3 {
        out.extend(c_sparse.iter().map(|t| t[part].clone()));
    }
    out.extend(c_dense);
    for part in 0..3 {
        out.extend(l_sparse.iter().map(|t| t[part].clone()));
    }
    out.extend(l_dense);
    Ok(out)
}
