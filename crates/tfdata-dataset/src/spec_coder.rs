//! Element specs as TensorFlow encodes them: a `tensorflow.StructuredValue`
//! (its `nested_structure_coder`), stored in `DataServiceMetadata.element_spec`
//! so that TensorFlow's `from_dataset_id` can read a dataset without being
//! told its `element_spec`, and our readers can rebuild TensorFlow's.
//!
//! Tensors are `TensorSpecProto`s, tuples `tuple_value`, lists `list_value`,
//! dictionaries `dict_value` (keys sorted, as TensorFlow writes them). Other
//! type specs (sparse, ragged, ...) are refused by name.

use std::collections::BTreeMap;

use tfdata_core::{DType, Error, Result};
use tfdata_proto::tensorflow::{
    DictValue, StructuredValue, TensorShapeProto, TensorSpecProto, TupleValue,
    structured_value::Kind, tensor_shape_proto,
};

use crate::spec::{Shape, Structure, TensorSpec};

fn shape_to_proto(shape: &Shape) -> TensorShapeProto {
    match &shape.0 {
        None => TensorShapeProto {
            dim: vec![],
            unknown_rank: true,
        },
        Some(dims) => TensorShapeProto {
            dim: dims
                .iter()
                .map(|d| tensor_shape_proto::Dim {
                    size: d.unwrap_or(-1),
                    name: String::new(),
                })
                .collect(),
            unknown_rank: false,
        },
    }
}

fn shape_from_proto(p: Option<&TensorShapeProto>) -> Shape {
    match p {
        None => Shape::scalar(),
        Some(p) if p.unknown_rank => Shape::unknown_rank(),
        Some(p) => Shape(Some(
            p.dim
                .iter()
                .map(|d| (d.size >= 0).then_some(d.size))
                .collect(),
        )),
    }
}

/// The `StructuredValue` TensorFlow would write for this structure.
pub fn to_structured_value(s: &Structure) -> StructuredValue {
    let kind = match s {
        Structure::Tensor(t) => Kind::TensorSpecValue(TensorSpecProto {
            name: String::new(),
            shape: Some(shape_to_proto(&t.shape)),
            dtype: t.dtype.code(),
        }),
        Structure::Tuple(items) => Kind::TupleValue(TupleValue {
            values: items.iter().map(to_structured_value).collect(),
        }),
        Structure::Dict(items) => Kind::DictValue(DictValue {
            fields: items
                .iter()
                .map(|(k, v)| (k.clone(), to_structured_value(v)))
                .collect(),
        }),
    };
    StructuredValue { kind: Some(kind) }
}

/// Bound on nesting accepted from a peer.
const MAX_DEPTH: usize = 64;

/// The structure a `StructuredValue` element spec describes.
pub fn from_structured_value(v: &StructuredValue) -> Result<Structure> {
    decode(v, 0)
}

fn decode(v: &StructuredValue, depth: usize) -> Result<Structure> {
    if depth > MAX_DEPTH {
        return Err(Error::InvalidArgument(format!(
            "element spec nested deeper than {MAX_DEPTH}"
        )));
    }
    let unsupported = |what: &str| {
        Error::Unimplemented(format!(
            "element specs containing {what} are not supported by tfdata"
        ))
    };
    Ok(match &v.kind {
        Some(Kind::TensorSpecValue(t)) => Structure::Tensor(TensorSpec::new(
            DType::from_code(t.dtype)?,
            shape_from_proto(t.shape.as_ref()),
        )),
        Some(Kind::TupleValue(t)) => Structure::Tuple(
            t.values
                .iter()
                .map(|v| decode(v, depth + 1))
                .collect::<Result<_>>()?,
        ),
        Some(Kind::ListValue(t)) => Structure::Tuple(
            t.values
                .iter()
                .map(|v| decode(v, depth + 1))
                .collect::<Result<_>>()?,
        ),
        Some(Kind::DictValue(d)) => Structure::Dict(
            d.fields
                .iter()
                .map(|(k, v)| Ok((k.clone(), decode(v, depth + 1)?)))
                .collect::<Result<BTreeMap<_, _>>>()?,
        ),
        Some(Kind::NamedTupleValue(n)) => Structure::Tuple(
            n.values
                .iter()
                .map(|p| match &p.value {
                    Some(v) => decode(v, depth + 1),
                    None => Err(Error::InvalidArgument(format!(
                        "named tuple field {:?} has no value",
                        p.key
                    ))),
                })
                .collect::<Result<_>>()?,
        ),
        Some(Kind::TypeSpecValue(t)) => {
            return Err(unsupported(&format!(
                "type spec {} (class {})",
                t.type_spec_class_name, t.type_spec_class
            )));
        }
        Some(Kind::BoundedTensorSpecValue(_)) => return Err(unsupported("bounded tensor specs")),
        Some(other) => return Err(unsupported(&format!("{other:?}"))),
        None => return Err(Error::InvalidArgument("empty element spec".into())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let s = Structure::Dict(BTreeMap::from([
            (
                "b".to_string(),
                Structure::Tensor(TensorSpec::new(DType::Float, Shape::known(&[2]))),
            ),
            (
                "a".to_string(),
                Structure::Tuple(vec![
                    Structure::Tensor(TensorSpec::new(DType::String, Shape::scalar())),
                    Structure::Tensor(TensorSpec::new(
                        DType::Int64,
                        Shape(Some(vec![None, Some(3)])),
                    )),
                    Structure::Tensor(TensorSpec::new(DType::UInt8, Shape::unknown_rank())),
                ]),
            ),
        ]));
        assert_eq!(from_structured_value(&to_structured_value(&s)).unwrap(), s);
    }
}
