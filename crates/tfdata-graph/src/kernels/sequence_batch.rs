//! `ParseSequenceExampleV2` (`tf.io.parse_sequence_example`) and its V1
//! `ParseSequenceExample`: a scalar or a batch of `tf.train.SequenceExample`
//! records into context features (sparse, dense with defaults, ragged) and
//! feature lists (sparse, dense padded to the batch's longest with their
//! lengths, ragged with outer and inner row splits).
//!
//! TensorFlow runs these ops through its hand-written wire parser, not a
//! protobuf library, and what it accepts, refuses and reports follows that
//! parser: a map entry must be its key then its value, a `Feature`'s first
//! field decides its kind, an empty `Feature` in a list is a row with no
//! values, and a feature's lengths are counted for the whole batch before
//! any values are written (so a type mismatch anywhere is reported before a
//! missing required feature). This module reads the records the same way
//! ([`wire`]), observed against TensorFlow 2.21, and keeps its order of
//! checks and its messages.
//!
//! A parse reads the batch in two passes: [`slots`] finds each requested
//! feature in every record and counts its values, [`outputs`] writes each
//! kind's tensors from those counts. This module holds the two ops, their
//! attributes and keys, and the order in which the parse checks its inputs.
//!
//! Differences, refused with an error rather than computed: ragged features
//! of a scalar record (TensorFlow leaves their row splits uninitialised), a
//! dense feature list whose rows have no elements (TensorFlow divides by
//! zero and the process dies). Where several features are wrong at once,
//! TensorFlow reports the first in its hash map's order, tfdata the first
//! in key order.

use bytes::Bytes;
use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::{shape_string, strings};
use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

mod outputs;
mod slots;
mod wire;

use outputs::{
    context_dense, context_ragged, context_sparse, list_dense, list_ragged, list_sparse,
};
use slots::{count_context, count_list, extract, slots};

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "ParseSequenceExampleV2",
        outputs: |a| {
            let cs = a.count("Ncontext_sparse")?;
            let cr = a.dtype_codes("context_ragged_value_types")?.len();
            let fs = a.count("Nfeature_list_sparse")?;
            let fd = a.count("Nfeature_list_dense")?;
            let fr = a.dtype_codes("feature_list_ragged_value_types")?.len();
            Ok(vec![
                ("context_sparse_indices", cs),
                ("context_sparse_values", cs),
                ("context_sparse_shapes", cs),
                (
                    "context_dense_values",
                    a.dtype_codes("Tcontext_dense")?.len(),
                ),
                ("context_ragged_values", cr),
                ("context_ragged_row_splits", cr),
                ("feature_list_sparse_indices", fs),
                ("feature_list_sparse_values", fs),
                ("feature_list_sparse_shapes", fs),
                ("feature_list_dense_values", fd),
                ("feature_list_dense_lengths", fd),
                ("feature_list_ragged_values", fr),
                ("feature_list_ragged_outer_splits", fr),
                ("feature_list_ragged_inner_splits", fr),
            ])
        },
        build: parse_v2,
    },
    KernelDef {
        op: "ParseSequenceExample",
        outputs: |a| {
            let cs = a.count("Ncontext_sparse")?;
            let fs = a.count("Nfeature_list_sparse")?;
            let fd = a.count("Nfeature_list_dense")?;
            Ok(vec![
                ("context_sparse_indices", cs),
                ("context_sparse_values", cs),
                ("context_sparse_shapes", cs),
                ("context_dense_values", a.count("Ncontext_dense")?),
                ("feature_list_sparse_indices", fs),
                ("feature_list_sparse_values", fs),
                ("feature_list_sparse_shapes", fs),
                ("feature_list_dense_values", fd),
                ("feature_list_dense_lengths", fd),
            ])
        },
        build: parse_v1,
    },
];

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument(message.into())
}

/// TensorFlow's `DataTypeString` for the three feature dtypes.
fn type_name(dtype: DType) -> &'static str {
    match dtype {
        DType::Float => "float",
        DType::Int64 => "int64",
        _ => "string",
    }
}

/// What a node's attributes fix: dtypes and shapes (keys come later for
/// V2, from inputs).
struct Attrs {
    context_sparse: Vec<DType>,
    context_dense: Vec<(DType, Vec<i64>)>,
    context_ragged: Vec<(DType, DType)>,
    list_sparse: Vec<DType>,
    list_dense: Vec<(DType, Vec<i64>)>,
    list_ragged: Vec<(DType, DType)>,
}

fn fixed_dims(shapes: &[tfdata_proto::tensorflow::TensorShapeProto]) -> Result<Vec<Vec<i64>>> {
    shapes
        .iter()
        .map(|s| {
            if s.unknown_rank || s.dim.iter().any(|d| d.size < 0) {
                return Err(Error::Unimplemented(
                    "dense shapes with unknown dimensions are not supported".into(),
                ));
            }
            Ok(s.dim.iter().map(|d| d.size).collect())
        })
        .collect()
}

fn check_feature_types(types: &[DType]) -> Result<()> {
    match types
        .iter()
        .find(|t| !matches!(t, DType::Int64 | DType::Float | DType::String))
    {
        Some(t) => Err(invalid(format!("Unsupported data type: {t}"))),
        None => Ok(()),
    }
}

fn ragged_types(attrs: &NodeAttrs, values: &str, splits: &str) -> Result<Vec<(DType, DType)>> {
    let v = attrs.dtypes(values)?;
    let s = attrs.dtypes(splits)?;
    if v.len() != s.len() {
        return Err(invalid(format!(
            "len({values}) ({}) must match len({splits}) ({})",
            v.len(),
            s.len()
        )));
    }
    check_feature_types(&v)?;
    if let Some(t) = s.iter().find(|t| !matches!(t, DType::Int32 | DType::Int64)) {
        return Err(invalid(format!("Unsupported ragged split type: {t}")));
    }
    Ok(v.into_iter().zip(s).collect())
}

impl Attrs {
    fn of(attrs: &NodeAttrs, v2: bool) -> Result<Attrs> {
        let context_sparse = attrs.dtypes("context_sparse_types")?;
        let dense_types = attrs.dtypes("Tcontext_dense")?;
        let dense_shapes = fixed_dims(attrs.shapes("context_dense_shapes")?)?;
        let list_sparse = attrs.dtypes("feature_list_sparse_types")?;
        let list_types = attrs.dtypes("feature_list_dense_types")?;
        let list_shapes = fixed_dims(attrs.shapes("feature_list_dense_shapes")?)?;
        let n_cs = attrs.count("Ncontext_sparse")?;
        let n_fs = attrs.count("Nfeature_list_sparse")?;
        let n_fd = attrs.count("Nfeature_list_dense")?;
        if n_cs != context_sparse.len() {
            return Err(invalid(format!(
                "num_context_sparse ({n_cs}) must match the size of context_sparse_types ({})",
                context_sparse.len()
            )));
        }
        if dense_types.len() != dense_shapes.len() {
            return Err(invalid(format!(
                "len(Tcontext_dense) ({}) must match len(context_dense_shapes) ({})",
                dense_types.len(),
                dense_shapes.len()
            )));
        }
        if n_fs != list_sparse.len() {
            return Err(invalid(format!(
                "num_feature_list_sparse ({n_fs}) must match the size of \
                 feature_list_sparse_types ({})",
                list_sparse.len()
            )));
        }
        if n_fd != list_types.len() || n_fd != list_shapes.len() {
            return Err(invalid(format!(
                "num_feature_list_dense ({n_fd}) must match the size of feature_list_dense_types \
                 ({}) and feature_list_dense_shapes ({})",
                list_types.len(),
                list_shapes.len()
            )));
        }
        for t in [&context_sparse, &dense_types, &list_sparse, &list_types] {
            check_feature_types(t)?;
        }
        // A dense feature list's rows are cut from the values by the row
        // size: TensorFlow divides by it (and dies on zero).
        if let Some(s) = list_shapes.iter().find(|s| s.contains(&0)) {
            return Err(invalid(format!(
                "a dense feature list's rows must have elements, got shape {} (TensorFlow \
                 divides by the row size)",
                shape_string(s)
            )));
        }
        let (context_ragged, list_ragged) = if v2 {
            (
                ragged_types(
                    attrs,
                    "context_ragged_value_types",
                    "context_ragged_split_types",
                )?,
                ragged_types(
                    attrs,
                    "feature_list_ragged_value_types",
                    "feature_list_ragged_split_types",
                )?,
            )
        } else {
            (Vec::new(), Vec::new())
        };
        Ok(Attrs {
            context_sparse,
            context_dense: dense_types.into_iter().zip(dense_shapes).collect(),
            context_ragged,
            list_sparse,
            list_dense: list_types.into_iter().zip(list_shapes).collect(),
            list_ragged,
        })
    }
}

/// The keys of one parse, by kind (V2: from the key inputs; V1: from the
/// attributes).
struct Keys {
    context_sparse: Vec<Bytes>,
    context_dense: Vec<Bytes>,
    context_ragged: Vec<Bytes>,
    list_sparse: Vec<Bytes>,
    list_dense: Vec<Bytes>,
    list_ragged: Vec<Bytes>,
    /// Per dense feature list: may it be missing (then it is empty)?
    assumed_empty: Vec<bool>,
}

fn parse_v2(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "ParseSequenceExampleV2";
    let a = Attrs::of(attrs, true)?;
    let n_defaults = a.context_dense.len();
    Ok(Box::new(move |inputs| {
        super::expect_inputs(OP, &inputs, 9 + n_defaults)?;
        let key_list = |i: usize, what: &str| -> Result<Vec<Bytes>> {
            Ok(strings(OP, &inputs[i], what)?.to_vec())
        };
        let keys = Keys {
            context_sparse: key_list(2, "context_sparse_keys")?,
            context_dense: key_list(3, "context_dense_keys")?,
            context_ragged: key_list(4, "context_ragged_keys")?,
            list_sparse: key_list(5, "feature_list_sparse_keys")?,
            list_dense: key_list(6, "feature_list_dense_keys")?,
            list_ragged: key_list(7, "feature_list_ragged_keys")?,
            assumed_empty: {
                let t = &inputs[8];
                if t.dtype() != DType::Bool {
                    return Err(invalid(format!(
                        "{OP}: feature_list_dense_missing_assumed_empty must be bool, got {}",
                        t.dtype()
                    )));
                }
                t.to_vec::<bool>()?
            },
        };
        // TensorFlow's order of the count checks.
        let counts = [
            (
                keys.context_dense.len(),
                a.context_dense.len(),
                "Expected len(context_dense_keys) to match len(Tcontext_dense)",
            ),
            (
                keys.context_sparse.len(),
                a.context_sparse.len(),
                "Expected len(context_sparse_keys) to match Ncontext_sparse",
            ),
            (
                keys.context_ragged.len(),
                a.context_ragged.len(),
                "Expected len(context_ragged_keys) to match len(context_ragged_value_types)",
            ),
            (
                keys.list_dense.len(),
                a.list_dense.len(),
                "Expected len(feature_list_dense_keys) to match Nfeature_list_dense",
            ),
            (
                keys.assumed_empty.len(),
                a.list_dense.len(),
                "Expected len(feature_list_dense_missing_assumed_empty to match \
                 Nfeature_list_dense",
            ),
            (
                keys.list_sparse.len(),
                a.list_sparse.len(),
                "Expected len(feature_list_sparse_keys) to match Nfeature_list_sparse",
            ),
            (
                keys.list_ragged.len(),
                a.list_ragged.len(),
                "Expected len(feature_list_ragged_keys) to match \
                 len(feature_list_ragged_value_types)",
            ),
        ];
        check_serialized(&inputs[0])?;
        for (got, want, message) in counts {
            if got != want {
                return Err(invalid(message));
            }
        }
        let out = parse(&a, &keys, &inputs[0], &inputs[1], &inputs[9..])?;
        Ok(out.v2())
    }))
}

fn parse_v1(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "ParseSequenceExample";
    let a = Attrs::of(attrs, false)?;
    let list = |key: &str| -> Result<Vec<Bytes>> {
        Ok(attrs
            .strings(key)?
            .into_iter()
            .map(Bytes::copy_from_slice)
            .collect())
    };
    let sized = |key: &str, n: usize| -> Result<Vec<Bytes>> {
        let keys = list(key)?;
        if keys.len() != n {
            return Err(invalid(format!(
                "len({key}) ({}) must match the count of its types ({n})",
                keys.len()
            )));
        }
        Ok(keys)
    };
    let assumed: Vec<Bytes> = list("feature_list_dense_missing_assumed_empty")?;
    let list_dense = sized("feature_list_dense_keys", a.list_dense.len())?;
    let keys = Keys {
        context_sparse: sized("context_sparse_keys", a.context_sparse.len())?,
        context_dense: sized("context_dense_keys", a.context_dense.len())?,
        context_ragged: Vec::new(),
        list_sparse: sized("feature_list_sparse_keys", a.list_sparse.len())?,
        assumed_empty: list_dense.iter().map(|k| assumed.contains(k)).collect(),
        list_dense,
        list_ragged: Vec::new(),
    };
    let n_defaults = a.context_dense.len();
    Ok(Box::new(move |inputs| {
        super::expect_inputs(OP, &inputs, 2 + n_defaults)?;
        check_serialized(&inputs[0])?;
        let out = parse(&a, &keys, &inputs[0], &inputs[1], &inputs[2..])?;
        Ok(out.v1())
    }))
}

fn check_serialized(serialized: &Tensor) -> Result<()> {
    if serialized.shape().len() > 1 {
        return Err(invalid(format!(
            "Expected serialized to be a scalar or vector, got shape: {}",
            shape_string(serialized.shape())
        )));
    }
    Ok(())
}

/// One parse's outputs, by kind.
#[derive(Default)]
struct Parsed {
    context_sparse: Vec<[Tensor; 3]>,
    context_dense: Vec<Tensor>,
    context_ragged: Vec<[Tensor; 2]>,
    list_sparse: Vec<[Tensor; 3]>,
    list_dense: Vec<[Tensor; 2]>,
    list_ragged: Vec<[Tensor; 3]>,
}

/// The `i`th part of each group, one after another.
fn parts<const N: usize>(groups: &[[Tensor; N]], i: usize) -> impl Iterator<Item = Tensor> + '_ {
    groups.iter().map(move |g| g[i].clone())
}

impl Parsed {
    fn v1(self) -> Vec<Tensor> {
        let mut out = Vec::new();
        (0..3).for_each(|i| out.extend(parts(&self.context_sparse, i)));
        out.extend(self.context_dense);
        (0..3).for_each(|i| out.extend(parts(&self.list_sparse, i)));
        (0..2).for_each(|i| out.extend(parts(&self.list_dense, i)));
        out
    }

    fn v2(self) -> Vec<Tensor> {
        let mut out = Vec::new();
        (0..3).for_each(|i| out.extend(parts(&self.context_sparse, i)));
        out.extend(self.context_dense);
        (0..2).for_each(|i| out.extend(parts(&self.context_ragged, i)));
        (0..3).for_each(|i| out.extend(parts(&self.list_sparse, i)));
        (0..2).for_each(|i| out.extend(parts(&self.list_dense, i)));
        (0..3).for_each(|i| out.extend(parts(&self.list_ragged, i)));
        out
    }
}

/// A feature key as text, for messages.
fn key_str(k: &Bytes) -> String {
    String::from_utf8_lossy(k).into_owned()
}

fn parse(
    a: &Attrs,
    keys: &Keys,
    serialized: &Tensor,
    debug_name: &Tensor,
    defaults: &[Tensor],
) -> Result<Parsed> {
    let is_batch = serialized.shape().len() == 1;
    let records = strings("ParseSequenceExample", serialized, "serialized")?;
    let names = strings("ParseSequenceExample", debug_name, "debug_name")?;
    let n = records.len();
    let has_ragged = !a.context_ragged.is_empty() || !a.list_ragged.is_empty();
    if !is_batch && has_ragged {
        return Err(Error::Unimplemented(
            "ragged features of a scalar serialized SequenceExample are not supported \
             (TensorFlow leaves their row splits uninitialised); pass a vector"
                .into(),
        ));
    }
    // The defaults' count, shapes and dtypes (TensorFlow's input checks).
    if defaults.len() != a.context_dense.len() {
        return Err(invalid(format!(
            "Expected len(context_dense_defaults) == len(context_dense_keys) but got: {} vs. {}",
            defaults.len(),
            a.context_dense.len()
        )));
    }
    for (d, (default, (dtype, shape))) in defaults.iter().zip(&a.context_dense).enumerate() {
        if default.num_elements() == 0 {
            continue;
        }
        if default.shape() != shape.as_slice() {
            return Err(invalid(format!(
                "default_value[{d}].shape() == {} != context_dense_shapes[{d}] == {}",
                shape_string(default.shape()),
                shape_string(shape)
            )));
        }
        if default.dtype() != *dtype {
            return Err(invalid(format!(
                "context_dense_defaults[{d}].dtype() == {} != context_dense_types[{d}] == {}",
                type_name(default.dtype()),
                type_name(*dtype)
            )));
        }
    }
    let name = |e: usize| -> String {
        if names.is_empty() {
            "<unknown>".into()
        } else {
            String::from_utf8_lossy(&names[e]).into_owned()
        }
    };
    if !names.is_empty() && names.len() != n {
        return Err(invalid(
            "example_names must be empty or have the correct number of elements",
        ));
    }
    let mut context = slots(
        "Context",
        n,
        (&keys.context_sparse, &a.context_sparse),
        (
            &keys.context_ragged,
            a.context_ragged.iter().map(|r| r.0).collect(),
        ),
        (
            &keys.context_dense,
            a.context_dense
                .iter()
                .zip(defaults)
                .map(|((t, _), d)| (*t, d.num_elements() as usize))
                .collect(),
        ),
    )?;
    let mut lists = slots(
        "Sequence",
        n,
        (&keys.list_sparse, &a.list_sparse),
        (
            &keys.list_ragged,
            a.list_ragged.iter().map(|r| r.0).collect(),
        ),
        (
            &keys.list_dense,
            a.list_dense.iter().map(|(t, _)| (*t, 0)).collect(),
        ),
    )?;
    for (e, record) in records.iter().enumerate() {
        extract(record, e, &mut context, &mut lists).ok_or_else(|| {
            invalid(format!(
                "Invalid protocol message input, example id: {}",
                name(e)
            ))
        })?;
    }
    // Counting, section by section, in key order.
    let order = |section: &[&[Bytes]]| -> Vec<Bytes> {
        let mut seen = Vec::new();
        for k in section.iter().flat_map(|s| s.iter()) {
            if !seen.contains(k) {
                seen.push(k.clone());
            }
        }
        seen
    };
    for k in order(&[
        &keys.context_sparse,
        &keys.context_ragged,
        &keys.context_dense,
    ]) {
        let slot = context.get_mut(&k).expect("registered");
        count_context(&k, slot, &name)?;
    }
    for k in order(&[&keys.list_sparse, &keys.list_ragged, &keys.list_dense]) {
        let slot = lists.get_mut(&k).expect("registered");
        count_list(&k, slot, &name)?;
    }

    let mut out = Parsed::default();
    for ((k, (dtype, shape)), default) in keys
        .context_dense
        .iter()
        .zip(&a.context_dense)
        .zip(defaults)
    {
        out.context_dense.push(context_dense(
            k,
            &context[k],
            *dtype,
            shape,
            default,
            is_batch,
            &name,
        )?);
    }
    for (k, &dtype) in keys.context_sparse.iter().zip(&a.context_sparse) {
        out.context_sparse
            .push(context_sparse(&context[k], dtype, is_batch)?);
    }
    for (k, &(dtype, split)) in keys.context_ragged.iter().zip(&a.context_ragged) {
        out.context_ragged
            .push(context_ragged(&context[k], dtype, split)?);
    }
    for ((k, (dtype, shape)), &may_miss) in keys
        .list_dense
        .iter()
        .zip(&a.list_dense)
        .zip(&keys.assumed_empty)
    {
        out.list_dense.push(list_dense(
            k, &lists[k], *dtype, shape, may_miss, is_batch, &name,
        )?);
    }
    for (k, &dtype) in keys.list_sparse.iter().zip(&a.list_sparse) {
        out.list_sparse
            .push(list_sparse(k, &lists[k], dtype, is_batch, &name)?);
    }
    for (k, &(dtype, split)) in keys.list_ragged.iter().zip(&a.list_ragged) {
        out.list_ragged
            .push(list_ragged(k, &lists[k], dtype, split, &name)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// context { "a": int64 [1, 2] } feature_lists { "f": [float [1.0]] },
    /// written by hand.
    fn record() -> Vec<u8> {
        let mut r = vec![0x0a, 0x0d, 0x0a, 0x0b, 0x0a, 0x01, b'a', 0x12, 0x06];
        r.extend([0x1a, 0x04, 0x0a, 0x02, 0x01, 0x02]);
        r.extend([
            0x12, 0x11, 0x0a, 0x0f, 0x0a, 0x01, b'f', 0x12, 0x0a, 0x0a, 0x08,
        ]);
        r.extend([0x12, 0x06, 0x0a, 0x04, 0x00, 0x00, 0x80, 0x3f]);
        r
    }

    fn schemas() -> Vec<(Attrs, Keys, Vec<Tensor>)> {
        let key = |s: &str| vec![Bytes::copy_from_slice(s.as_bytes())];
        let none = Vec::new;
        vec![
            (
                Attrs {
                    context_sparse: vec![DType::Int64],
                    context_dense: vec![],
                    context_ragged: vec![],
                    list_sparse: vec![],
                    list_dense: vec![(DType::Float, vec![1])],
                    list_ragged: vec![],
                },
                Keys {
                    context_sparse: key("a"),
                    context_dense: none(),
                    context_ragged: none(),
                    list_sparse: none(),
                    list_dense: key("f"),
                    list_ragged: none(),
                    assumed_empty: vec![true],
                },
                vec![],
            ),
            (
                Attrs {
                    context_sparse: vec![],
                    context_dense: vec![(DType::Int64, vec![2])],
                    context_ragged: vec![],
                    list_sparse: vec![DType::Float],
                    list_dense: vec![],
                    list_ragged: vec![(DType::Float, DType::Int32)],
                },
                Keys {
                    context_sparse: none(),
                    context_dense: key("a"),
                    context_ragged: none(),
                    list_sparse: key("f"),
                    list_dense: none(),
                    list_ragged: key("g"),
                    assumed_empty: vec![],
                },
                vec![Tensor::vector(&[5i64, 6])],
            ),
        ]
    }

    fn run(a: &Attrs, k: &Keys, d: &[Tensor], rec: &[u8]) -> Result<Parsed> {
        let batch = Tensor::strings(vec![Bytes::copy_from_slice(rec)], vec![1]).unwrap();
        parse(a, k, &batch, &Tensor::strings(vec![], vec![0]).unwrap(), d)
    }

    #[test]
    fn parses_the_record() {
        let schemas = schemas();
        let (a, k, d) = &schemas[0];
        let out = run(a, k, d, &record()).unwrap();
        assert_eq!(out.context_sparse[0][1].to_vec::<i64>().unwrap(), [1, 2]);
        assert_eq!(out.list_dense[0][0].to_vec::<f32>().unwrap(), [1.0]);
        assert_eq!(out.list_dense[0][1].to_vec::<i64>().unwrap(), [1]);
    }

    /// Every cut and every flipped byte of a record is parsed or refused,
    /// never a panic.
    #[test]
    fn hostile_records_never_panic() {
        let rec = record();
        for (a, k, d) in &schemas() {
            for cut in 0..rec.len() {
                let _ = run(a, k, d, &rec[..cut]);
            }
            for i in 0..rec.len() {
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut bad = rec.clone();
                    bad[i] ^= flip;
                    let _ = run(a, k, d, &bad);
                }
            }
        }
    }
}
