//! `OneShotIterator`: a node's own iterator over the dataset its
//! `dataset_factory` function makes, made the first time the node runs and
//! kept by the node across its function's calls (each call reads on where
//! the last one stopped), as TensorFlow's kernel keeps it.

use std::sync::{Arc, Mutex};

use tfdata_core::{Error, Result};
use tfdata_dataset::spec::Shape;
use tfdata_proto::tensorflow::NodeDef;

use super::consume::Declared;
use super::iterator_handles::check_declared;
use super::node::function;
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler};
use crate::iterator::IteratorHandle;
use crate::value::Value;

/// What the first run made: the iterator, or the failure every later run
/// answers again (TensorFlow keeps its initialisation's status).
type Made = std::result::Result<Arc<IteratorHandle>, (tonic::Code, String)>;

pub(super) fn compile(
    node: &NodeDef,
    attrs: &NodeAttrs,
    compiler: &mut Compiler<'_>,
) -> Result<Option<CompiledNode>> {
    if node.op != "OneShotIterator" {
        return Ok(None);
    }
    let shared = attrs.string_or("shared_name", "")?;
    let container = attrs.string_or("container", "")?;
    if !shared.is_empty() || !container.is_empty() {
        return Err(attrs.error(format!(
            "a shared iterator (shared_name {shared:?}, container {container:?}) is not supported"
        )));
    }
    let factory = function(attrs, "dataset_factory", compiler)?;
    let declared = Declared::of(attrs)?;
    let node_name = node.name.clone();
    let made: Arc<Mutex<Option<Made>>> = Arc::new(Mutex::new(None));
    Ok(Some(CompiledNode {
        outputs: vec![("handle".into(), 1)],
        run: Arc::new(move |_| {
            let mut made = made
                .lock()
                .map_err(|_| Error::Internal("a one-shot iterator's lock was poisoned".into()))?;
            let result = made.get_or_insert_with(|| {
                make(&factory, &declared, &node_name).map_err(|e| (e.code(), e.to_string()))
            });
            match result {
                Ok(handle) => Ok(vec![Value::Iterator(handle.clone())]),
                Err((code, message)) => Err(Error::Remote {
                    code: *code,
                    message: message.clone(),
                }),
            }
        }),
    }))
}

/// Runs the factory and starts an iterator over its dataset, checked
/// against the declared types and shapes as TensorFlow checks it.
fn make(
    factory: &crate::function::Function,
    declared: &Declared,
    node: &str,
) -> Result<Arc<IteratorHandle>> {
    let out = factory.call(Vec::new())?;
    let Some(Value::Dataset(dataset)) = out.into_iter().next() else {
        return Err(Error::InvalidArgument(format!(
            "OneShotIterator node {node:?}: the dataset_factory function must return a dataset"
        )));
    };
    if let Some(spec) = dataset.element_spec()? {
        let specs = spec.flatten();
        let types: Vec<_> = specs.iter().map(|s| s.dtype).collect();
        let shapes: Vec<Shape> = specs.iter().map(|s| s.shape.clone()).collect();
        check_declared((&types, &shapes), &declared.types, &declared.shapes)?;
    }
    let handle = IteratorHandle::named(declared.types.clone(), declared.shapes.clone(), node)?;
    handle.bind(&dataset)?;
    Ok(handle)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

    use std::collections::HashMap;

    use tfdata_core::{DType, Tensor};
    use tfdata_proto::tensorflow::{
        AttrValue, FunctionDef, FunctionDefLibrary, GraphDef, NameAttrList, NodeDef, OpDef,
        TensorShapeProto, attr_value, op_def::ArgDef,
    };

    use crate::function::Compiler;
    use crate::graph::Library;
    use crate::kernels::testing::{list, node, ty};

    fn named(mut n: NodeDef, name: &str, inputs: &[&str]) -> NodeDef {
        n.name = name.into();
        n.input = inputs.iter().map(|s| s.to_string()).collect();
        n
    }

    fn int64(name: &str, v: i64) -> NodeDef {
        let value = AttrValue {
            value: Some(attr_value::Value::Tensor(
                tfdata_core::element::tensor_to_proto(&Tensor::scalar(v)),
            )),
        };
        named(
            node("Const", &[("value", value), ("dtype", ty(DType::Int64))]),
            name,
            &[],
        )
    }

    fn function(name: &str, ret: &str, ret_type: i32, nodes: Vec<NodeDef>) -> FunctionDef {
        FunctionDef {
            signature: Some(OpDef {
                name: name.into(),
                output_arg: vec![ArgDef {
                    name: "out".into(),
                    r#type: ret_type,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            node_def: nodes,
            ret: [("out".to_string(), ret.to_string())].into(),
            ..Default::default()
        }
    }

    /// One int64 scalar component.
    fn element_attrs() -> Vec<(&'static str, AttrValue)> {
        vec![
            (
                "output_types",
                list(attr_value::ListValue {
                    r#type: vec![DType::Int64.code()],
                    ..Default::default()
                }),
            ),
            (
                "output_shapes",
                list(attr_value::ListValue {
                    shape: vec![TensorShapeProto::default()],
                    ..Default::default()
                }),
            ),
        ]
    }

    #[test]
    fn each_call_reads_on_where_the_last_stopped() {
        let range = named(
            node("RangeDataset", &element_attrs()),
            "range",
            &["start:output:0", "stop:output:0", "step:output:0"],
        );
        let factory = function(
            "factory",
            "range:handle:0",
            21,
            vec![int64("start", 0), int64("stop", 3), int64("step", 1), range],
        );
        let mut attrs = element_attrs();
        attrs.push((
            "dataset_factory",
            AttrValue {
                value: Some(attr_value::Value::Func(NameAttrList {
                    name: "factory".into(),
                    attr: HashMap::new(),
                })),
            },
        ));
        let one_shot = named(node("OneShotIterator", &attrs), "it", &[]);
        let get = named(
            node("IteratorGetNext", &element_attrs()),
            "get",
            &["it:handle:0"],
        );
        let main = function("main", "get:components:0", 9, vec![one_shot, get]);
        let library = Library::of(&GraphDef {
            library: Some(FunctionDefLibrary {
                function: vec![factory, main],
            }),
            ..Default::default()
        })
        .unwrap();
        let nodes = crate::translate::dataset_nodes();
        let f = Compiler::new(&library, &nodes).function("main").unwrap();
        let read = || -> tfdata_core::Result<i64> {
            let out = f.call(Vec::new())?.pop().unwrap();
            out.into_tensor("out")?.to_scalar::<i64>()
        };
        assert_eq!(
            (read().unwrap(), read().unwrap(), read().unwrap()),
            (0, 1, 2)
        );
        let end = read().unwrap_err();
        assert!(end.to_string().contains("End of sequence"), "{end}");
    }
}
