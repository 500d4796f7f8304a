//! `WrapDatasetVariant` and `UnwrapDatasetVariant`: a dataset wrapped into
//! another variant (so it can cross devices) and back. A wrapped dataset is
//! no dataset: dataset ops refuse it until it is unwrapped, and each op
//! refuses the other kind with TensorFlow's message.

use std::sync::Arc;

use tfdata_core::Error;
use tfdata_proto::tensorflow::NodeDef;

use super::node::Inputs;
use crate::function::CompiledNode;
use crate::value::Value;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef) -> Option<CompiledNode> {
    let wrap = match node.op.as_str() {
        "WrapDatasetVariant" => true,
        "UnwrapDatasetVariant" => false,
        _ => return None,
    };
    let (name, op) = (node.name.clone(), node.op.clone());
    Some(CompiledNode {
        outputs: vec![("output_handle".into(), 1)],
        run: Arc::new(move |values| {
            let mut i = Inputs::new(values, &name, &op);
            let out = match (wrap, i.next("input_handle")?) {
                (true, Value::Dataset(d)) => Value::WrappedDataset(d),
                (true, _) => {
                    return Err(Error::InvalidArgument(
                        "Tensor must be a Dataset object.".into(),
                    ));
                }
                (false, Value::WrappedDataset(d)) => Value::Dataset(d),
                (false, _) => {
                    return Err(Error::InvalidArgument(
                        "Tensor must be a WrappedDataset variant object.".into(),
                    ));
                }
            };
            Ok(vec![out])
        }),
    })
}
