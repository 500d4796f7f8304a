//! Multi-device iterator nodes inside a function
//! (`AnonymousMultiDeviceIterator{,V3}`, a node's own `MultiDeviceIterator`,
//! `MultiDeviceIteratorInit`, `MultiDeviceIteratorGetNextFromShard`, their
//! string handles and `DeleteMultiDeviceIterator`), over
//! [`crate::multi_device::MultiDeviceIterator`].

use std::sync::Arc;

use tfdata_core::{Error, Result, Tensor};
use tfdata_dataset::spec::Shape;
use tfdata_proto::tensorflow::NodeDef;

use super::consume::Declared;
use super::iterator_handles::{check_declared, decode, encode};
use super::node::Inputs;
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;
use crate::multi_device::{MultiDeviceIterator, TYPE_HASH, TYPE_NAME, not_found};
use crate::value::Value;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    let name = node.name.clone();
    let op = node.op.clone();
    Ok(Some(match node.op.as_str() {
        "AnonymousMultiDeviceIterator" | "AnonymousMultiDeviceIteratorV3" => {
            let declared = Declared::of(attrs)?;
            let shards = shards(attrs)?;
            // The deleter only lets TensorFlow free the iterator when the
            // handle goes away; ours is freed with its last reference.
            let deleter = node.op == "AnonymousMultiDeviceIterator";
            CompiledNode {
                outputs: if deleter {
                    vec![("handle".into(), 1), ("deleter".into(), 1)]
                } else {
                    vec![("handle".into(), 1)]
                },
                run: Arc::new(move |_| {
                    let it = MultiDeviceIterator::new(
                        shards,
                        declared.types.clone(),
                        declared.shapes.clone(),
                    );
                    let mut out = vec![Value::MultiDeviceIterator(Arc::new(it))];
                    if deleter {
                        out.push(Value::Resource);
                    }
                    Ok(out)
                }),
            }
        }
        // A node's own iterator, made once and kept by the node across the
        // calls of its function, as TensorFlow's kernel keeps its resource.
        // A `shared_name` shares one between nodes through the device's
        // resource manager, which our workers do not have.
        "MultiDeviceIterator" => {
            let shared = attrs.string_or("shared_name", "")?;
            if !shared.is_empty() {
                return Err(attrs.error(format!(
                    "a shared multi-device iterator (shared_name {shared:?}) is not supported"
                )));
            }
            let declared = Declared::of(attrs)?;
            let it = MultiDeviceIterator::named(
                shards(attrs)?,
                declared.types.clone(),
                declared.shapes.clone(),
                &node.name,
            )?;
            CompiledNode {
                outputs: vec![("handle".into(), 1)],
                run: Arc::new(move |_| Ok(vec![Value::MultiDeviceIterator(it.clone())])),
            }
        }
        "MultiDeviceIteratorInit" => CompiledNode {
            outputs: vec![("incarnation_id".into(), 1)],
            run: Arc::new(move |values| {
                let mut i = Inputs::new(values, &name, &op);
                let dataset = i.dataset()?;
                let it = multi_device(&mut i)?;
                let max_buffer_size = i.int("max_buffer_size")?;
                // TensorFlow checks the dataset against the declared types
                // and shapes when it starts iterating.
                if let Some(spec) = dataset.element_spec()? {
                    let specs = spec.flatten();
                    let types: Vec<_> = specs.iter().map(|s| s.dtype).collect();
                    let shapes: Vec<Shape> = specs.iter().map(|s| s.shape.clone()).collect();
                    let (want_types, want_shapes) = it.declared();
                    check_declared((&types, &shapes), want_types, want_shapes)?;
                }
                let incarnation = it.init(&dataset, max_buffer_size)?;
                Ok(vec![Value::Tensor(Tensor::scalar(incarnation))])
            }),
        },
        "MultiDeviceIteratorGetNextFromShard" => {
            let declared = Declared::of(attrs)?;
            CompiledNode {
                outputs: vec![("components".into(), declared.types.len())],
                run: Arc::new(move |values| {
                    let mut i = Inputs::new(values, &name, &op);
                    let it = multi_device(&mut i)?;
                    let shard = i.int("shard_num")?;
                    let incarnation = i.int("incarnation_id")?;
                    let Some(element) = it.next_from_shard(shard, incarnation)? else {
                        return Err(Error::Remote {
                            code: tonic::Code::OutOfRange,
                            message: "End of sequence".into(),
                        });
                    };
                    declared.check(&element.components)?;
                    Ok(element.components.into_iter().map(Value::Tensor).collect())
                }),
            }
        }
        "MultiDeviceIteratorToStringHandle" => CompiledNode {
            outputs: vec![("string_handle".into(), 1)],
            run: Arc::new(move |values| {
                let mut i = Inputs::new(values, &name, &op);
                let (container, name) = multi_device(&mut i)?.name()?;
                Ok(vec![Value::Tensor(Tensor::scalar_string(encode(
                    container, name, TYPE_HASH, TYPE_NAME,
                )))])
            }),
        },
        "MultiDeviceIteratorFromStringHandle" => {
            let types = attrs.dtypes("output_types")?;
            let shapes: Vec<Shape> = attrs
                .shapes("output_shapes")?
                .iter()
                .map(super::inline::shape)
                .collect();
            CompiledNode {
                outputs: vec![("multi_device_iterator".into(), 1)],
                run: Arc::new(move |values| {
                    let mut i = Inputs::new(values, &name, &op);
                    let proto = decode(&i.tensor("string_handle")?)?;
                    if proto.hash_code != TYPE_HASH {
                        return Err(not_found(&proto.container, &proto.name));
                    }
                    let it = MultiDeviceIterator::by_name(&proto.container, &proto.name)?;
                    check_declared(it.declared(), &types, &shapes)?;
                    Ok(vec![Value::MultiDeviceIterator(it)])
                }),
            }
        }
        // Frees nothing TensorFlow's caller could still see: its iterator
        // goes with its last handle, as ours does (TensorFlow's reads
        // through the handle after the delete go on, as ours do).
        "DeleteMultiDeviceIterator" => CompiledNode {
            outputs: Vec::new(),
            run: Arc::new(move |values| {
                let mut i = Inputs::new(values, &name, &op);
                multi_device(&mut i)?;
                Ok(Vec::new())
            }),
        },
        _ => return Ok(None),
    }))
}

/// The number of shards: one per device named (at least one, as
/// TensorFlow's op definition requires).
fn shards(attrs: &NodeAttrs) -> Result<usize> {
    let n = attrs.strings("devices")?.len();
    if n == 0 {
        return Err(attrs.error("attribute `devices` must name at least one device"));
    }
    Ok(n)
}

/// The node's multi-device iterator input.
fn multi_device(i: &mut Inputs) -> Result<Arc<MultiDeviceIterator>> {
    match i.next("multi_device_iterator")? {
        Value::MultiDeviceIterator(it) => Ok(it),
        other => Err(i.err(format!(
            "input `multi_device_iterator` must be a multi-device iterator, got {}",
            other.describe()
        ))),
    }
}
