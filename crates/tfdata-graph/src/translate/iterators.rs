//! Iterator nodes inside a function: what `it = iter(ds)` and `next(it)`
//! become in a traced `tf.function` (`AnonymousIteratorV3`,
//! `MakeIterator`, `IteratorGetNext`, `DeleteIterator`). The handle is a
//! [`Value::Iterator`], made per call of the function, so each element's
//! call iterates its dataset afresh, as TensorFlow's anonymous iterators do.

use std::sync::Arc;

use tfdata_core::{Error, Result, Tensor};
use tfdata_proto::tensorflow::NodeDef;

use super::consume::Declared;
use super::node::{Inputs, tensors};
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;
use crate::iterator::IteratorHandle;
use crate::value::Value;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    let name = node.name.clone();
    let op = node.op.clone();
    Ok(Some(match node.op.as_str() {
        "AnonymousIterator" | "AnonymousIteratorV3" => {
            let declared = Declared::of(attrs)?;
            CompiledNode {
                outputs: vec![("handle".into(), 1)],
                run: Arc::new(move |_| Ok(vec![new_handle(&declared)])),
            }
        }
        // The deleter only lets TensorFlow free the iterator when the
        // handle goes away; ours is freed with its last reference.
        "AnonymousIteratorV2" => {
            let declared = Declared::of(attrs)?;
            CompiledNode {
                outputs: vec![("handle".into(), 1), ("deleter".into(), 1)],
                run: Arc::new(move |_| Ok(vec![new_handle(&declared), Value::Resource])),
            }
        }
        "MakeIterator" => CompiledNode {
            outputs: Vec::new(),
            run: Arc::new(move |values| {
                let mut i = Inputs::new(values, &name, &op);
                let dataset = i.dataset()?;
                let handle = iterator(&mut i)?;
                handle.bind(&dataset)?;
                Ok(Vec::new())
            }),
        },
        "IteratorGetNext" | "IteratorGetNextSync" => {
            let declared = Declared::of(attrs)?;
            CompiledNode {
                outputs: vec![("components".into(), declared.types.len())],
                run: Arc::new(move |values| {
                    let mut i = Inputs::new(values, &name, &op);
                    let handle = iterator(&mut i)?;
                    let Some(element) = handle.next()? else {
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
        "IteratorGetNextAsOptional" => {
            let declared = Declared::of(attrs)?;
            CompiledNode {
                outputs: vec![("optional".into(), 1)],
                run: Arc::new(move |values| {
                    let mut i = Inputs::new(values, &name, &op);
                    let handle = iterator(&mut i)?;
                    let Some(element) = handle.next()? else {
                        return Ok(vec![Value::Optional(None)]);
                    };
                    declared.check(&element.components)?;
                    Ok(vec![Value::Optional(Some(element.components.into()))])
                }),
            }
        }
        "OptionalFromValue" => CompiledNode {
            outputs: vec![("optional".into(), 1)],
            run: Arc::new(move |values| {
                let components = tensors(values, "OptionalFromValue components")?;
                Ok(vec![Value::Optional(Some(components.into()))])
            }),
        },
        "OptionalNone" => CompiledNode {
            outputs: vec![("optional".into(), 1)],
            run: Arc::new(|_| Ok(vec![Value::Optional(None)])),
        },
        "OptionalHasValue" => CompiledNode {
            outputs: vec![("has_value".into(), 1)],
            run: Arc::new(move |values| {
                let mut i = Inputs::new(values, &name, &op);
                let has = optional(&mut i)?.is_some();
                Ok(vec![Value::Tensor(Tensor::scalar(has))])
            }),
        },
        "OptionalGetValue" => {
            let declared = Declared::of(attrs)?;
            CompiledNode {
                outputs: vec![("components".into(), declared.types.len())],
                run: Arc::new(move |values| {
                    let mut i = Inputs::new(values, &name, &op);
                    let Some(components) = optional(&mut i)? else {
                        return Err(Error::InvalidArgument(
                            "The given optional does not have a value.".into(),
                        ));
                    };
                    declared.check(&components)?;
                    Ok(components.iter().cloned().map(Value::Tensor).collect())
                }),
            }
        }
        "DeleteIterator" => CompiledNode {
            outputs: Vec::new(),
            run: Arc::new(move |values| {
                let mut i = Inputs::new(values, &name, &op);
                iterator(&mut i)?.release()?;
                Ok(Vec::new())
            }),
        },
        _ => return Ok(None),
    }))
}

fn new_handle(declared: &Declared) -> Value {
    Value::Iterator(Arc::new(IteratorHandle::new(
        declared.types.clone(),
        declared.shapes.clone(),
    )))
}

/// The node's `optional` input: the components, `None` when it has none.
fn optional(i: &mut Inputs) -> Result<Option<Arc<[Tensor]>>> {
    match i.next("optional")? {
        Value::Optional(o) => Ok(o),
        other => Err(i.err(format!(
            "input `optional` must be an optional, got {}",
            other.describe()
        ))),
    }
}

/// The node's `iterator` (or `handle`) input.
fn iterator(i: &mut Inputs) -> Result<Arc<IteratorHandle>> {
    match i.next("iterator")? {
        Value::Iterator(h) => Ok(h),
        other => Err(i.err(format!(
            "input `iterator` must be an iterator, got {}",
            other.describe()
        ))),
    }
}
