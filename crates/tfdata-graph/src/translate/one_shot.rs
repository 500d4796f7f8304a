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
