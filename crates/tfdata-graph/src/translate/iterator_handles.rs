//! What else a function body may do with an iterator besides reading it:
//! name it by a string and find it again (`IteratorToStringHandle`,
//! `IteratorFromStringHandle{,V2}`), ask its device (`IteratorGetDevice`),
//! save and restore its position (`SerializeIterator`,
//! `DeserializeIterator`). The handles are iterators.rs's
//! [`Value::Iterator`]s.

use std::sync::Arc;

use prost::Message;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::spec::Shape;
use tfdata_proto::tensorflow::NodeDef;

use super::consume::{Declared, shape_string, type_string};
use super::inline::shape;
use super::node::Inputs;
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;
use crate::iterator::{IteratorHandle, TYPE_NAME, not_found};
use crate::value::Value;

/// The device a TensorFlow worker runs a dataset's functions on: the one
/// CPU of the standalone runtime it builds datasets in (what TensorFlow
/// 2.21 answers on CPU, and what its string handles name).
pub(super) const DEVICE: &str = "/job:localhost/replica:0/task:0/device:CPU:0";

/// The iterator resource type's hash as TensorFlow 2.21 on Linux writes it
/// (libstdc++'s hash of [`TYPE_NAME`], read off the handles TensorFlow
/// makes): a handle carrying another hash names another kind of resource,
/// which no iterator lookup finds.
const TYPE_HASH: u64 = 8_918_088_204_830_721_661;

/// TensorFlow's `ResourceHandleProto`, the bytes of a string handle (its
/// `dtypes_and_shapes`, field 6, which iterator handles leave empty, is
/// skipped when read).
#[derive(Clone, PartialEq, Message)]
pub(super) struct ResourceHandleProto {
    #[prost(string, tag = "1")]
    pub device: String,
    #[prost(string, tag = "2")]
    pub container: String,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(uint64, tag = "4")]
    pub hash_code: u64,
    #[prost(string, tag = "5")]
    pub maybe_type_name: String,
}

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    let name = node.name.clone();
    let op = node.op.clone();
    Ok(Some(match node.op.as_str() {
        "IteratorToStringHandle" => CompiledNode {
            outputs: vec![("string_handle".into(), 1)],
            run: Arc::new(move |values| {
                let mut i = Inputs::new(values, &name, &op);
                let handle = iterator(&mut i)?;
                Ok(vec![Value::Tensor(Tensor::scalar_string(to_string(
                    &handle,
                )?))])
            }),
        },
        // A node's own iterator, made once and kept by the node across its
        // function's calls, as TensorFlow's kernel keeps its resource (a
        // `MakeIterator` in each call starts it again). A `shared_name`
        // shares one between nodes through the device's resource manager,
        // which our workers do not have.
        "Iterator" | "IteratorV2" => {
            let shared = attrs.string_or("shared_name", "")?;
            let container = attrs.string_or("container", "")?;
            if !shared.is_empty() || !container.is_empty() {
                return Err(attrs.error(format!(
                    "a shared iterator (shared_name {shared:?}, container {container:?}) is \
                     not supported"
                )));
            }
            let declared = Declared::of(attrs)?;
            let handle = IteratorHandle::named(declared.types, declared.shapes, &node.name)?;
            CompiledNode {
                outputs: vec![("handle".into(), 1)],
                run: Arc::new(move |_| Ok(vec![Value::Iterator(handle.clone())])),
            }
        }
        "IteratorFromStringHandle" | "IteratorFromStringHandleV2" => {
            let types = attrs.dtypes("output_types")?;
            let shapes: Vec<Shape> = attrs.shapes("output_shapes")?.iter().map(shape).collect();
            CompiledNode {
                outputs: vec![("resource_handle".into(), 1)],
                run: Arc::new(move |values| {
                    let mut i = Inputs::new(values, &name, &op);
                    let s = i.tensor("string_handle")?;
                    let handle = from_string(&s)?;
                    check_declared(handle.declared(), &types, &shapes)?;
                    Ok(vec![Value::Iterator(handle)])
                }),
            }
        }
        // The device of the iterator's kernels, TensorFlow's `device()`
        // name of the CPU it runs on (bound or not).
        "IteratorGetDevice" | "ExperimentalIteratorGetDevice" => CompiledNode {
            outputs: vec![("device".into(), 1)],
            run: Arc::new(move |values| {
                let mut i = Inputs::new(values, &name, &op);
                iterator(&mut i)?;
                Ok(vec![Value::Tensor(Tensor::scalar_string(DEVICE))])
            }),
        },
        // `external_state_policy` only says whether TensorFlow warns, fails
        // or stays silent about state it cannot save; the saved position
        // here holds none (see `IteratorHandle::restore` for what it can
        // restore).
        "SerializeIterator" => CompiledNode {
            outputs: vec![("serialized".into(), 1)],
            run: Arc::new(move |values| {
                let mut i = Inputs::new(values, &name, &op);
                let handle = iterator(&mut i)?;
                Ok(vec![Value::IteratorState(Arc::new(handle.save()?))])
            }),
        },
        "DeserializeIterator" => CompiledNode {
            outputs: Vec::new(),
            run: Arc::new(move |values| {
                let mut i = Inputs::new(values, &name, &op);
                let handle = iterator(&mut i)?;
                let state = match i.next("serialized")? {
                    Value::IteratorState(s) => s,
                    other => {
                        return Err(i.err(format!(
                            "input `serialized` must be an iterator state, got {}",
                            other.describe()
                        )));
                    }
                };
                handle.restore(&state)?;
                Ok(Vec::new())
            }),
        },
        _ => return Ok(None),
    }))
}

/// A string handle's bytes: the handle's device, container and name, and
/// the resource type's hash and name.
pub(super) fn encode(container: &str, name: String, hash_code: u64, type_name: &str) -> Vec<u8> {
    ResourceHandleProto {
        device: DEVICE.into(),
        container: container.into(),
        name,
        hash_code,
        maybe_type_name: type_name.into(),
    }
    .encode_to_vec()
}

/// An iterator's string handle.
fn to_string(handle: &Arc<IteratorHandle>) -> Result<Vec<u8>> {
    let (container, name) = handle.name()?;
    Ok(encode(container, name, TYPE_HASH, TYPE_NAME))
}

/// The live iterator a string handle names, with TensorFlow's checks in
/// its order: a scalar, a `ResourceHandleProto`, made on this device, of
/// an iterator that still exists.
fn from_string(s: &Tensor) -> Result<Arc<IteratorHandle>> {
    let proto = decode(s)?;
    if proto.device != DEVICE {
        return Err(Error::InvalidArgument(format!(
            "Attempted create an iterator on device \"{DEVICE}\" from handle defined on device \
             \"{}\"",
            proto.device
        )));
    }
    // The containers resources live in here: anonymous ones, and the
    // device's own (`localhost`), where a node's named iterator is.
    if proto.container != "Anonymous" && proto.container != "localhost" {
        return Err(Error::Remote {
            code: tonic::Code::NotFound,
            message: format!(
                "Container {} does not exist. (Could not find resource: {}/{})",
                proto.container, proto.container, proto.name
            ),
        });
    }
    let found = if proto.hash_code == TYPE_HASH {
        IteratorHandle::by_name(&proto.container, &proto.name)?
    } else {
        None
    };
    let target = found.ok_or_else(|| not_found(&proto.container, &proto.name))?;
    Ok(Arc::new(IteratorHandle::alias(&target, proto.name)))
}

/// A string handle's proto: a scalar that parses.
pub(super) fn decode(s: &Tensor) -> Result<ResourceHandleProto> {
    let strings = s.string_values().map_err(|_| {
        Error::InvalidArgument("string_handle must be a scalar string tensor".into())
    })?;
    let [bytes] = strings else {
        return Err(Error::InvalidArgument(
            "string_handle must be a scalar".into(),
        ));
    };
    if !s.shape().is_empty() {
        return Err(Error::InvalidArgument(
            "string_handle must be a scalar".into(),
        ));
    }
    ResourceHandleProto::decode(&bytes[..]).map_err(|_| {
        Error::InvalidArgument("Could not parse string_handle as a valid ResourceHandle".into())
    })
}

/// TensorFlow's `VerifyTypesMatch` and `VerifyShapesCompatible` between
/// what the string-handle node declares (`expected`; nothing declared
/// checks nothing) and what the iterator was made with.
pub(super) fn check_declared(
    (got_types, got_shapes): (&[DType], &[Shape]),
    types: &[DType],
    shapes: &[Shape],
) -> Result<()> {
    if !types.is_empty() {
        if types.len() != got_types.len() {
            return Err(Error::InvalidArgument(format!(
                "Number of components does not match: expected {} types but got {}.",
                types.len(),
                got_types.len()
            )));
        }
        for (i, (want, got)) in types.iter().zip(got_types).enumerate() {
            if want != got {
                return Err(Error::InvalidArgument(format!(
                    "Data type mismatch at component {i}: expected {} but got {}.",
                    type_string(*want),
                    type_string(*got)
                )));
            }
        }
    }
    if !shapes.is_empty() {
        if shapes.len() != got_shapes.len() {
            return Err(Error::InvalidArgument(format!(
                "Number of components does not match: expected {} shapes but got {}.",
                shapes.len(),
                got_shapes.len()
            )));
        }
        for (i, (want, got)) in shapes.iter().zip(got_shapes).enumerate() {
            if !compatible(want, got) {
                return Err(Error::InvalidArgument(format!(
                    "Incompatible shapes at component {i}: expected {} but got {}.",
                    shape_string(want),
                    shape_string(got)
                )));
            }
        }
    }
    Ok(())
}

/// Two partial shapes are compatible when either rank is unknown, or the
/// ranks agree and each pair of dimensions is equal or has an unknown one.
fn compatible(a: &Shape, b: &Shape) -> bool {
    match (&a.0, &b.0) {
        (Some(x), Some(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(p, q)| p.is_none() || q.is_none() || p == q)
        }
        _ => true,
    }
}

/// The node's iterator input.
fn iterator(i: &mut Inputs) -> Result<Arc<IteratorHandle>> {
    match i.next("resource_handle")? {
        Value::Iterator(h) => Ok(h),
        other => Err(i.err(format!(
            "input `resource_handle` must be an iterator, got {}",
            other.describe()
        ))),
    }
}
