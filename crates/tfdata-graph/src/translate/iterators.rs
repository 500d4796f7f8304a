//! Iterator nodes inside a function: what `it = iter(ds)` and `next(it)`
//! become in a traced `tf.function` (`AnonymousIteratorV3`,
//! `MakeIterator`, `IteratorGetNext`, `DeleteIterator`). The handle is a
//! [`Value::Iterator`], made per call of the function, so each element's
//! call iterates its dataset afresh, as TensorFlow's anonymous iterators do.

use std::sync::Arc;

use tfdata_core::{Error, Result};
use tfdata_proto::tensorflow::NodeDef;

use super::consume::Declared;
use super::node::Inputs;
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;
use crate::iterator::IteratorHandle;
use crate::value::Value;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    let name = node.name.clone();
    let op = node.op.clone();
    Ok(Some(match node.op.as_str() {
        "AnonymousIterator" | "AnonymousIteratorV3" => CompiledNode {
            outputs: vec![("handle".into(), 1)],
            run: Arc::new(|_| Ok(vec![new_handle()])),
        },
        // The deleter only lets TensorFlow free the iterator when the
        // handle goes away; ours is freed with its last reference.
        "AnonymousIteratorV2" => CompiledNode {
            outputs: vec![("handle".into(), 1), ("deleter".into(), 1)],
            run: Arc::new(|_| Ok(vec![new_handle(), Value::Resource])),
        },
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

fn new_handle() -> Value {
    Value::Iterator(Arc::new(IteratorHandle::new()))
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
