//! `tf.train.Example` parsing with the semantics of `tf.io.parse_single_example`
//! and `tf.io.parse_example` (TensorFlow 2.21), plus [`ExampleBuilder`] to
//! write Examples for tests and benchmarks.
//!
//! Most TFRecord input pipelines store `Example`s, so a pipeline that moves
//! from TensorFlow to tfdata must get the same tensors, and the same errors,
//! from the same bytes and feature specs. What TensorFlow does, and so what
//! this module does:
//!
//! * a [`FeatureSpec::Fixed`] feature must carry exactly as many values as its
//!   shape holds, in the list matching its dtype (`int64_list`,
//!   `float_list`, `bytes_list`); a feature that is absent, or present with
//!   no list set, takes the spec's default, reshaped to the spec's shape;
//!   without a default (or with a default of no elements) it is an error;
//! * a [`FeatureSpec::VarLen`] feature gives its values as a 1-D tensor; an
//!   absent feature gives an empty one;
//! * a name that appears twice in an Example keeps its last value (protobuf
//!   map semantics);
//! * errors are `InvalidArgument` with TensorFlow's wording, so messages can
//!   be searched for the same way.
//!
//! Known differences, all on bytes TensorFlow's own writers never produce: a
//! list mixing packed and unpacked encodings, which TensorFlow's fast parser
//! rejects, is accepted here (as the protobuf spec requires); a `Feature` with
//! two lists set keeps the last one (protobuf oneof semantics) where
//! TensorFlow's fast parser looks at the first; and a feature name that is not
//! valid UTF-8 fails to parse here, where TensorFlow accepts it.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use prost::Message;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_proto::tensorflow::{self as pb, feature::Kind};

/// How to parse one feature: TensorFlow's `tf.io.FixedLenFeature` and
/// `tf.io.VarLenFeature`. The dtype must be `Int64`, `Float` or `String`,
/// the only value types an `Example` can carry; [`FeatureSpec::validate`]
/// rejects anything else (the parse functions validate every spec first).
#[derive(Debug, Clone, PartialEq)]
pub enum FeatureSpec {
    /// Exactly `product(shape)` values, returned with that shape.
    /// `default` replaces an absent feature; it must have the spec's dtype and
    /// as many elements as `shape` (any shape: it is reshaped, as TensorFlow's
    /// Python layer does with `tf.reshape`).
    Fixed {
        dtype: DType,
        shape: Vec<i64>,
        default: Option<Tensor>,
    },
    /// Any number of values, returned as a 1-D tensor. TensorFlow returns a
    /// `SparseTensor`; tfdata has no sparse tensors, and for a single Example
    /// the dense form (what `tf.sparse.to_dense` gives) loses nothing.
    VarLen { dtype: DType },
}

impl FeatureSpec {
    /// A required fixed-shape feature (`tf.io.FixedLenFeature(shape, dtype)`).
    /// `shape` may be empty for a scalar.
    pub fn fixed(dtype: DType, shape: impl Into<Vec<i64>>) -> FeatureSpec {
        FeatureSpec::Fixed {
            dtype,
            shape: shape.into(),
            default: None,
        }
    }

    /// A variable-length feature (`tf.io.VarLenFeature(dtype)`).
    pub fn var_len(dtype: DType) -> FeatureSpec {
        FeatureSpec::VarLen { dtype }
    }

    /// This fixed feature with a default for Examples that lack it
    /// (`default_value=`). Checked by [`FeatureSpec::validate`], not here, so
    /// specs can be built in one expression.
    ///
    /// # Panics
    ///
    /// On a [`FeatureSpec::VarLen`] spec: TensorFlow's `VarLenFeature` has no
    /// default (an absent feature is simply empty), so asking for one is a
    /// bug at the call site rather than bad input.
    pub fn with_default(self, default: Tensor) -> FeatureSpec {
        match self {
            FeatureSpec::Fixed { dtype, shape, .. } => FeatureSpec::Fixed {
                dtype,
                shape,
                default: Some(default),
            },
            FeatureSpec::VarLen { .. } => {
                panic!("FeatureSpec::with_default: a VarLen feature has no default")
            }
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            FeatureSpec::Fixed { dtype, .. } | FeatureSpec::VarLen { dtype } => *dtype,
        }
    }

    /// Checks what TensorFlow checks when it builds the parse op: a dtype an
    /// Example can hold, a fully known shape, and a default that fits it.
    pub fn validate(&self) -> Result<()> {
        let dtype = self.dtype();
        if !matches!(dtype, DType::Int64 | DType::Float | DType::String) {
            return Err(Error::InvalidArgument(format!(
                "an Example feature cannot have dtype {dtype}; the allowed values are: \
                 float, int64, string"
            )));
        }
        let FeatureSpec::Fixed { shape, default, .. } = self else {
            return Ok(());
        };
        if shape.iter().any(|&d| d < 0) {
            return Err(Error::InvalidArgument(format!(
                "a fixed-length feature needs a fully known shape, got {shape:?} \
                 (variable-length values need a VarLen feature)"
            )));
        }
        let n = tfdata_core::tensor::num_elements(shape)?;
        if let Some(default) = default {
            if default.dtype() != dtype {
                return Err(Error::InvalidArgument(format!(
                    "default value has dtype {} but the feature is {dtype}",
                    default.dtype()
                )));
            }
            if default.num_elements() != n {
                return Err(Error::InvalidArgument(format!(
                    "default value has {} values, but the feature's shape {} has {n}",
                    default.num_elements(),
                    shape_string(shape)
                )));
            }
        }
        Ok(())
    }
}

/// Parses one serialized `tf.train.Example` like `tf.io.parse_single_example`:
/// one tensor per entry of `features`, under the same name. Features of the
/// Example that `features` does not name are ignored.
///
/// Errors (all `InvalidArgument`, as in TensorFlow): a spec that fails
/// [`FeatureSpec::validate`]; bytes that are not an Example ("Could not parse
/// example input"); a required feature that is absent; a feature whose list
/// has another dtype than its spec, or (for a fixed feature) another number
/// of values than its shape.
pub fn parse_single_example(
    serialized: &[u8],
    features: &BTreeMap<String, FeatureSpec>,
) -> Result<BTreeMap<String, Tensor>> {
    validate_specs(features)?;
    let mut found = decode(serialized)
        .map_err(|e| Error::InvalidArgument(format!("Could not parse example input: {e}")))?;
    let mut out = BTreeMap::new();
    for (name, spec) in features {
        let kind = found.remove(name.as_str()).and_then(|f| f.kind);
        let tensor = match spec {
            FeatureSpec::Fixed {
                dtype,
                shape,
                default,
            } => {
                let mut column = Column::new(*dtype, 1, shape);
                column
                    .push(*dtype, shape, default.as_ref(), kind)
                    .map_err(|e| e.single(name, *dtype, shape))?;
                column.finish(*dtype, shape.clone())?
            }
            FeatureSpec::VarLen { dtype } => var_len(name, *dtype, kind)?,
        };
        out.insert(name.clone(), tensor);
    }
    Ok(out)
}

/// Parses a batch of serialized Examples like `tf.io.parse_example`, for
/// fixed features only: each output has shape `[serialized.len()] + shape`.
/// Faster than parsing one at a time and batching, since each feature's
/// values are written once, straight into the batch's buffer, and byte
/// strings stay slices of the input.
///
/// Errors are those of [`parse_single_example`], worded as TensorFlow words
/// them for a batch (naming the example's index), and `Unimplemented` for a
/// VarLen feature: TensorFlow returns a `SparseTensor` there, which has no
/// dense form without padding, and tfdata has no sparse tensors.
pub fn parse_example_batch(
    serialized: &[Bytes],
    features: &BTreeMap<String, FeatureSpec>,
) -> Result<BTreeMap<String, Tensor>> {
    validate_specs(features)?;
    let mut columns = Vec::with_capacity(features.len());
    for (name, spec) in features {
        match spec {
            FeatureSpec::Fixed {
                dtype,
                shape,
                default,
            } => columns.push((
                name,
                *dtype,
                shape,
                default.as_ref(),
                Column::new(*dtype, serialized.len(), shape),
            )),
            FeatureSpec::VarLen { .. } => {
                return Err(Error::Unimplemented(format!(
                    "parse_example_batch: feature {name} is VarLen, whose batched form is a \
                     SparseTensor, and tfdata has no sparse tensors; parse each Example with \
                     parse_single_example, or declare the feature Fixed"
                )));
            }
        }
    }
    for (index, bytes) in serialized.iter().enumerate() {
        // Decoding from `Bytes` makes every byte string a slice of the input.
        let mut found = decode(bytes.clone()).map_err(|e| {
            Error::InvalidArgument(format!(
                "Could not parse example input, Index: {index}: {e}"
            ))
        })?;
        for (name, dtype, shape, default, column) in &mut columns {
            let kind = found.remove(name.as_str()).and_then(|f| f.kind);
            column
                .push(*dtype, shape, *default, kind)
                .map_err(|e| e.batch(name, *dtype, shape, index))?;
        }
    }
    let mut out = BTreeMap::new();
    for (name, dtype, shape, _, column) in columns {
        let mut batch_shape = Vec::with_capacity(shape.len() + 1);
        batch_shape.push(serialized.len() as i64);
        batch_shape.extend_from_slice(shape);
        out.insert(name.clone(), column.finish(dtype, batch_shape)?);
    }
    Ok(out)
}

/// Writes `tf.train.Example`s, for tests and benchmarks. Features are written
/// sorted by name, so the same builder always gives the same bytes (the
/// bytes of TensorFlow's `SerializeToString(deterministic=True)`). Setting a
/// name twice keeps the last values.
#[derive(Debug, Clone, Default)]
pub struct ExampleBuilder {
    features: BTreeMap<String, pb::Feature>,
}

impl ExampleBuilder {
    pub fn new() -> ExampleBuilder {
        ExampleBuilder::default()
    }

    /// An `int64_list` feature.
    pub fn int64(self, name: impl Into<String>, values: &[i64]) -> ExampleBuilder {
        self.kind(
            name,
            Kind::Int64List(pb::Int64List {
                value: values.to_vec(),
            }),
        )
    }

    /// A `float_list` feature.
    pub fn float(self, name: impl Into<String>, values: &[f32]) -> ExampleBuilder {
        self.kind(
            name,
            Kind::FloatList(pb::FloatList {
                value: values.to_vec(),
            }),
        )
    }

    /// A `bytes_list` feature (TensorFlow's string dtype).
    pub fn bytes<T: AsRef<[u8]>>(self, name: impl Into<String>, values: &[T]) -> ExampleBuilder {
        let value = values
            .iter()
            .map(|v| Bytes::copy_from_slice(v.as_ref()))
            .collect();
        self.kind(name, Kind::BytesList(pb::BytesList { value }))
    }

    fn kind(mut self, name: impl Into<String>, kind: Kind) -> ExampleBuilder {
        self.features
            .insert(name.into(), pb::Feature { kind: Some(kind) });
        self
    }

    /// The serialized Example. The map entries are framed here rather than
    /// by prost, whose `HashMap` would write them in a different order on
    /// every run.
    pub fn build(&self) -> Vec<u8> {
        let mut features = Vec::new();
        let mut entry = Vec::new();
        for (name, feature) in &self.features {
            entry.clear();
            put_len_delimited(&mut entry, 1, name.as_bytes());
            put_len_delimited(&mut entry, 2, &feature.encode_to_vec());
            put_len_delimited(&mut features, 1, &entry);
        }
        let mut example = Vec::with_capacity(features.len() + 8);
        put_len_delimited(&mut example, 1, &features);
        example
    }
}

/// Appends field `field` with wire type LEN (2) holding `payload`.
fn put_len_delimited(out: &mut Vec<u8>, field: u32, payload: &[u8]) {
    put_varint(out, u64::from(field << 3 | 2));
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn validate_specs(features: &BTreeMap<String, FeatureSpec>) -> Result<()> {
    for (name, spec) in features {
        spec.validate().map_err(|e| match e {
            Error::InvalidArgument(m) => Error::InvalidArgument(format!("feature {name}: {m}")),
            other => other,
        })?;
    }
    Ok(())
}

/// The Example's features by name. Never panics: prost reports malformed
/// input (bad varints, lengths past the end, nesting too deep) as an error.
fn decode(buf: impl bytes::Buf) -> std::result::Result<HashMap<String, pb::Feature>, String> {
    pb::Example::decode(buf)
        .map(|e| e.features.map(|f| f.feature).unwrap_or_default())
        .map_err(|e| e.to_string())
}

/// TensorFlow's `DataTypeString`, which its parse errors use (`float`, not
/// `float32`).
fn tf_type_name(dtype: DType) -> &'static str {
    match dtype {
        DType::Float => "float",
        other => other.name(),
    }
}

/// The dtype an Example list carries.
fn kind_dtype(kind: &Kind) -> DType {
    match kind {
        Kind::BytesList(_) => DType::String,
        Kind::FloatList(_) => DType::Float,
        Kind::Int64List(_) => DType::Int64,
    }
}

fn kind_len(kind: &Kind) -> usize {
    match kind {
        Kind::BytesList(l) => l.value.len(),
        Kind::FloatList(l) => l.value.len(),
        Kind::Int64List(l) => l.value.len(),
    }
}

/// TensorFlow's `TensorShape::DebugString`: `[2,3]`, `[]` for a scalar.
fn shape_string(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

fn var_len(name: &str, dtype: DType, kind: Option<Kind>) -> Result<Tensor> {
    let Some(kind) = kind else {
        return Column::new(dtype, 0, &[]).finish(dtype, vec![0]);
    };
    let actual = kind_dtype(&kind);
    if actual != dtype {
        return Err(Error::InvalidArgument(format!(
            "Key: {name}.  Data types don't match. Expected type: {}, Actual type: {}",
            tf_type_name(dtype),
            tf_type_name(actual)
        )));
    }
    let n = kind_len(&kind);
    let mut column = Column::new(dtype, 0, &[]);
    column.push_values(kind);
    column.finish(dtype, vec![n as i64])
}

/// Why one fixed feature of one Example could not be filled in; worded by
/// [`FixedError::single`] or [`FixedError::batch`], since TensorFlow words
/// the two cases differently.
enum FixedError {
    Required,
    DtypeMismatch(DType),
    WrongCount(usize),
}

impl FixedError {
    fn single(self, name: &str, dtype: DType, shape: &[i64]) -> Error {
        Error::InvalidArgument(match self {
            FixedError::Required => required_message(name, dtype),
            FixedError::DtypeMismatch(actual) => format!(
                "Key: {name}.  Data types don't match. Data type: {} but expected type: {}",
                tf_type_name(actual),
                tf_type_name(dtype)
            ),
            // TensorFlow's single-Example path only says "Some int64_list
            // slice was not parsed"; its batch wording below says what is
            // wrong, so both paths use that.
            FixedError::WrongCount(n) => format!(
                "Key: {name}.  Number of {} values != expected.  Values size: {n} but output \
                 shape: {}",
                tf_type_name(dtype),
                shape_string(shape)
            ),
        })
    }

    fn batch(self, name: &str, dtype: DType, shape: &[i64], index: usize) -> Error {
        Error::InvalidArgument(match self {
            // TensorFlow names no index here; the name is of the (absent)
            // `example_names` input.
            FixedError::Required => format!("Name: <unknown>, {}", required_message(name, dtype)),
            FixedError::DtypeMismatch(actual) => format!(
                "Name: <unknown>, Key: {name}, Index: {index}.  Data types don't match. Data \
                 type: {} but expected type: {}",
                tf_type_name(actual),
                tf_type_name(dtype)
            ),
            FixedError::WrongCount(n) => format!(
                "Name: <unknown>, Key: {name}, Index: {index}.  Number of {} values != \
                 expected.  Values size: {n} but output shape: {}",
                tf_type_name(dtype),
                shape_string(shape)
            ),
        })
    }
}

fn required_message(name: &str, dtype: DType) -> String {
    format!(
        "Feature: {name} (data type: {}) is required but could not be found.",
        tf_type_name(dtype)
    )
}

/// The values of one fixed feature across a batch, in row-major order.
enum Column {
    /// Little-endian int64 or float32, as `Tensor` stores them.
    Numeric(Vec<u8>),
    Strings(Vec<Bytes>),
}

impl Column {
    fn new(dtype: DType, batch: usize, shape: &[i64]) -> Column {
        // Validated specs have non-negative dims; a huge product only means
        // no preallocation.
        let per_example = tfdata_core::tensor::num_elements(shape).unwrap_or(0);
        let elements = usize::try_from(per_example)
            .ok()
            .and_then(|n| n.checked_mul(batch))
            .unwrap_or(0)
            // A capacity is a hint: never let a spec's shape reserve more
            // than the values could plausibly fill.
            .min(1 << 20);
        match dtype.size() {
            Some(size) => Column::Numeric(Vec::with_capacity(elements * size)),
            None => Column::Strings(Vec::with_capacity(elements)),
        }
    }

    /// Appends one Example's values of a fixed feature, or its default.
    fn push(
        &mut self,
        dtype: DType,
        shape: &[i64],
        default: Option<&Tensor>,
        kind: Option<Kind>,
    ) -> std::result::Result<(), FixedError> {
        let Some(kind) = kind else {
            // As in TensorFlow, a default of no elements counts as none.
            return match default {
                Some(d) if d.num_elements() > 0 => {
                    self.push_default(d);
                    Ok(())
                }
                _ => Err(FixedError::Required),
            };
        };
        let actual = kind_dtype(&kind);
        if actual != dtype {
            return Err(FixedError::DtypeMismatch(actual));
        }
        let n = kind_len(&kind);
        // Validated specs have a product that fits u64.
        let expected = tfdata_core::tensor::num_elements(shape).unwrap_or(u64::MAX);
        if n as u64 != expected {
            return Err(FixedError::WrongCount(n));
        }
        self.push_values(kind);
        Ok(())
    }

    /// Appends a list whose dtype matches this column.
    fn push_values(&mut self, kind: Kind) {
        match (self, kind) {
            (Column::Numeric(buf), Kind::Int64List(l)) => {
                buf.reserve(l.value.len() * 8);
                for v in l.value {
                    buf.extend_from_slice(&v.to_le_bytes());
                }
            }
            (Column::Numeric(buf), Kind::FloatList(l)) => {
                buf.reserve(l.value.len() * 4);
                for v in l.value {
                    buf.extend_from_slice(&v.to_le_bytes());
                }
            }
            (Column::Strings(out), Kind::BytesList(l)) => out.extend(l.value),
            // Callers check the dtype first; a mismatch appends nothing and
            // `finish` reports the size error.
            _ => {}
        }
    }

    fn push_default(&mut self, default: &Tensor) {
        match (self, default.data()) {
            (Column::Numeric(buf), TensorData::Buffer(b)) => buf.extend_from_slice(b),
            (Column::Strings(out), TensorData::Strings(s)) => out.extend(s.iter().cloned()),
            // Validated defaults have the column's dtype.
            _ => {}
        }
    }

    fn finish(self, dtype: DType, shape: Vec<i64>) -> Result<Tensor> {
        match self {
            Column::Numeric(buf) => Tensor::new(dtype, shape, TensorData::Buffer(buf.into())),
            Column::Strings(s) => Tensor::strings(s, shape),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(list: Vec<(&str, FeatureSpec)>) -> BTreeMap<String, FeatureSpec> {
        list.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    fn message(err: Error) -> String {
        match err {
            Error::InvalidArgument(m) => m,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn fixed_var_len_and_defaults() {
        let ex = ExampleBuilder::new()
            .int64("label", &[3])
            .float("m", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
            .bytes("tags", &[&b"a"[..], b"\xff\x00"])
            .build();
        let spec = specs(vec![
            ("label", FeatureSpec::fixed(DType::Int64, vec![])),
            ("m", FeatureSpec::fixed(DType::Float, [2, 3])),
            ("tags", FeatureSpec::var_len(DType::String)),
            ("absent", FeatureSpec::var_len(DType::Int64)),
            (
                "fallback",
                FeatureSpec::fixed(DType::Int64, [2])
                    .with_default(Tensor::from_slice(&[7i64, 8], vec![1, 2]).unwrap()),
            ),
        ]);
        let out = parse_single_example(&ex, &spec).unwrap();
        assert_eq!(out["label"], Tensor::scalar(3i64));
        assert_eq!(out["m"].shape(), &[2, 3]);
        assert_eq!(out["m"].to_vec::<f32>().unwrap()[5], 6.0);
        assert_eq!(
            out["tags"].string_values().unwrap(),
            &[Bytes::from_static(b"a"), Bytes::from_static(b"\xff\x00")]
        );
        assert_eq!(out["absent"].shape(), &[0]);
        assert_eq!(out["absent"].dtype(), DType::Int64);
        assert_eq!(out["fallback"], Tensor::vector(&[7i64, 8]));
    }

    #[test]
    fn errors_use_tensorflow_wording() {
        let ex = ExampleBuilder::new()
            .int64("a", &[1, 2, 3])
            .float("f", &[])
            .build();
        let err = |spec| message(parse_single_example(&ex, &specs(vec![spec])).unwrap_err());
        assert_eq!(
            err(("zz", FeatureSpec::fixed(DType::Float, [2]))),
            "Feature: zz (data type: float) is required but could not be found."
        );
        assert_eq!(
            err(("a", FeatureSpec::fixed(DType::Int64, [2, 2]))),
            "Key: a.  Number of int64 values != expected.  Values size: 3 but output shape: [2,2]"
        );
        assert_eq!(
            err(("a", FeatureSpec::fixed(DType::String, [3]))),
            "Key: a.  Data types don't match. Data type: int64 but expected type: string"
        );
        // An empty list still has a dtype.
        assert_eq!(
            err(("f", FeatureSpec::var_len(DType::Int64))),
            "Key: f.  Data types don't match. Expected type: int64, Actual type: float"
        );
        // A zero-element default is no default, in TensorFlow too.
        let empty = Tensor::from_slice::<i64>(&[], vec![0]).unwrap();
        assert_eq!(
            err((
                "zz",
                FeatureSpec::fixed(DType::Int64, [0]).with_default(empty)
            )),
            "Feature: zz (data type: int64) is required but could not be found."
        );
    }

    #[test]
    fn specs_are_validated() {
        let bad = [
            FeatureSpec::fixed(DType::Int32, []),
            FeatureSpec::var_len(DType::Double),
            FeatureSpec::fixed(DType::Int64, [-1]),
            FeatureSpec::fixed(DType::Int64, [3]).with_default(Tensor::scalar(1i64)),
            FeatureSpec::fixed(DType::Int64, []).with_default(Tensor::scalar(1.5f32)),
        ];
        for spec in bad {
            let err = spec.validate().unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{spec:?}: {err}");
            let err = parse_single_example(b"", &specs(vec![("x", spec)])).unwrap_err();
            assert!(err.to_string().contains("feature x: "), "{err}");
        }
        FeatureSpec::fixed(DType::String, [2, 2])
            .with_default(Tensor::strings(vec![Bytes::new(); 4], vec![4]).unwrap())
            .validate()
            .unwrap();
    }

    #[test]
    #[should_panic(expected = "VarLen feature has no default")]
    fn var_len_has_no_default() {
        let _ = FeatureSpec::var_len(DType::Int64).with_default(Tensor::scalar(1i64));
    }

    #[test]
    fn batch_is_row_major_with_defaults() {
        let a = Bytes::from(ExampleBuilder::new().int64("x", &[1, 2]).build());
        let b = Bytes::from(ExampleBuilder::new().bytes("s", &["q"]).build());
        let spec = specs(vec![
            (
                "x",
                FeatureSpec::fixed(DType::Int64, [2]).with_default(Tensor::vector(&[8i64, 9])),
            ),
            (
                "s",
                FeatureSpec::fixed(DType::String, []).with_default(Tensor::scalar_string("d")),
            ),
        ]);
        let out = parse_example_batch(&[a.clone(), b, a], &spec).unwrap();
        assert_eq!(
            out["x"],
            Tensor::from_slice(&[1i64, 2, 8, 9, 1, 2], vec![3, 2]).unwrap()
        );
        let s: Vec<&[u8]> = out["s"]
            .string_values()
            .unwrap()
            .iter()
            .map(|b| &b[..])
            .collect();
        assert_eq!(s, [&b"d"[..], b"q", b"d"]);

        let empty = parse_example_batch(&[], &spec).unwrap();
        assert_eq!(empty["x"].shape(), &[0, 2]);

        let var = specs(vec![("v", FeatureSpec::var_len(DType::Int64))]);
        let err = parse_example_batch(&[], &var).unwrap_err();
        assert!(matches!(err, Error::Unimplemented(_)), "{err}");
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        let ex = ExampleBuilder::new()
            .int64("a", &[1, -2, i64::MAX])
            .float("f", &[0.5; 3])
            .bytes("s", &["xyz"])
            .build();
        let spec = specs(vec![
            ("a", FeatureSpec::var_len(DType::Int64)),
            ("f", FeatureSpec::var_len(DType::Float)),
            ("s", FeatureSpec::var_len(DType::String)),
        ]);
        // Every truncation, and every single-byte corruption, either parses
        // or is an InvalidArgument.
        for cut in 0..ex.len() {
            if let Err(e) = parse_single_example(&ex[..cut], &spec) {
                assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            }
        }
        for i in 0..ex.len() {
            for v in [0x00, 0x7f, 0x80, 0xff] {
                let mut bad = ex.clone();
                bad[i] = v;
                if let Err(e) = parse_single_example(&bad, &spec) {
                    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
                }
            }
        }
        let err = message(parse_single_example(b"\x0a\x05abc", &spec).unwrap_err());
        assert!(err.starts_with("Could not parse example input: "), "{err}");
        let err = parse_example_batch(
            &[Bytes::from(ex.clone()), Bytes::from_static(b"\x0a\x05abc")],
            &BTreeMap::new(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("Index: 1"), "{err}");
    }

    #[test]
    fn unpacked_and_mixed_encodings_are_accepted() {
        // Int64List {value: 7, value: 8 (unpacked), value: [9] (packed)}.
        let list = [0x08, 7, 0x08, 8, 0x0a, 1, 9];
        let mut feature = Vec::new();
        put_len_delimited(&mut feature, 3, &list);
        let mut entry = Vec::new();
        put_len_delimited(&mut entry, 1, b"a");
        put_len_delimited(&mut entry, 2, &feature);
        let mut features = Vec::new();
        put_len_delimited(&mut features, 1, &entry);
        let mut ex = Vec::new();
        put_len_delimited(&mut ex, 1, &features);
        let spec = specs(vec![("a", FeatureSpec::fixed(DType::Int64, [3]))]);
        let out = parse_single_example(&ex, &spec).unwrap();
        assert_eq!(out["a"].to_vec::<i64>().unwrap(), [7, 8, 9]);
    }

    #[test]
    fn builder_output_decodes_with_prost() {
        let ex = ExampleBuilder::new()
            .float("b", &[1.5])
            .int64("a", &[])
            .int64("b", &[4])
            .build();
        let decoded = pb::Example::decode(&ex[..]).unwrap();
        let map = decoded.features.unwrap().feature;
        assert_eq!(map.len(), 2);
        assert_eq!(
            map["b"].kind,
            Some(Kind::Int64List(pb::Int64List { value: vec![4] }))
        );
        assert_eq!(
            map["a"].kind,
            Some(Kind::Int64List(pb::Int64List { value: vec![] }))
        );
    }
}
