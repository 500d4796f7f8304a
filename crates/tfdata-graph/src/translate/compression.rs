//! `CompressElement` and `UncompressElement` inside a function: an
//! element's components compressed into TensorFlow's `CompressedElement`
//! (one snappy block, `tfdata_core::element::compress`) and read back.
//! TensorFlow's clients end a pipeline with a map of `CompressElement`,
//! which the translator cuts off ([`super::compression_map`]); these nodes
//! are the op anywhere else.

use std::sync::Arc;

use tfdata_core::Element;
use tfdata_core::Result;
use tfdata_proto::tensorflow::NodeDef;

use super::consume::Declared;
use super::node::{Inputs, tensors};
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;
use crate::value::Value;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    let (name, op) = (node.name.clone(), node.op.clone());
    Ok(Some(match node.op.as_str() {
        "CompressElement" => CompiledNode {
            outputs: vec![("compressed".into(), 1)],
            run: Arc::new(|values| {
                let element = Element::new(tensors(values, "CompressElement components")?);
                let compressed = tfdata_core::element::compress(&element)?;
                Ok(vec![Value::Compressed(Arc::new(compressed))])
            }),
        },
        "UncompressElement" => {
            let declared = Declared::of(attrs)?;
            CompiledNode {
                outputs: vec![("components".into(), declared.types.len())],
                run: Arc::new(move |values| {
                    let mut i = Inputs::new(values, &name, &op);
                    let compressed = match i.next("compressed")? {
                        Value::Compressed(c) => c,
                        other => {
                            return Err(i.err(format!(
                                "input `compressed` must be a compressed element, got {}",
                                other.describe()
                            )));
                        }
                    };
                    let element = tfdata_core::element::uncompress(&compressed)?;
                    declared.check(&element.components)?;
                    Ok(element.components.into_iter().map(Value::Tensor).collect())
                }),
            }
        }
        _ => return Ok(None),
    }))
}
