//! `InitializeTableFromDataset`: a lookup table filled from a dataset of
//! `(key, value)` scalars (`tf.data.experimental.DatasetInitializer`),
//! which TensorFlow serialises into a pipeline's outer graph beside the
//! `HashTableV2` node, so it runs once when the graph is translated.

use std::sync::Arc;

use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::spec::Shape;
use tfdata_proto::tensorflow::NodeDef;

use super::consume::shape_string;
use super::node::Inputs;
use crate::function::CompiledNode;
use crate::kernels::lookup::MAX_TABLE_ENTRIES;
use crate::table::LookupTable;
use crate::value::Value;

/// The node compiled, if it is this module's.
pub(super) fn compile(node: &NodeDef) -> Option<CompiledNode> {
    if node.op != "InitializeTableFromDataset" {
        return None;
    }
    let (name, op) = (node.name.clone(), node.op.clone());
    Some(CompiledNode {
        outputs: Vec::new(),
        run: Arc::new(move |values| {
            let mut i = Inputs::new(values, &name, &op);
            let table = match i.next("table_handle")? {
                Value::Table(t) => t,
                other => {
                    return Err(i.err(format!(
                        "input `table_handle` must be a lookup table, got {}",
                        other.describe()
                    )));
                }
            };
            let dataset = i.dataset()?;
            if let Some(spec) = dataset.element_spec()? {
                let specs = spec.flatten();
                let types: Vec<DType> = specs.iter().map(|s| s.dtype).collect();
                let shapes: Vec<&Shape> = specs.iter().map(|s| &s.shape).collect();
                check_types(&table, &types)?;
                for shape in shapes {
                    if !shape.is_compatible_with(&[]) {
                        // TensorFlow's message says "key" for the value too.
                        return Err(Error::InvalidArgument(format!(
                            "Expected scalar for key. Obtained: {}",
                            shape_string(shape)
                        )));
                    }
                }
            }
            fill(&table, &dataset)?;
            Ok(Vec::new())
        }),
    })
}

fn check_types(table: &LookupTable, types: &[DType]) -> Result<()> {
    let [key, value] = types else {
        return Err(Error::InvalidArgument(
            "Dataset should have two output types only".into(),
        ));
    };
    // TensorFlow prints the dtypes' enum numbers here.
    if *key != table.key_dtype() {
        return Err(Error::InvalidArgument(format!(
            "Key dtype expected: {} but obtained: {} from the dataset",
            table.key_dtype().code(),
            key.code()
        )));
    }
    if *value != table.value_dtype() {
        return Err(Error::InvalidArgument(format!(
            "Value dtype expected: {} but obtained: {} from the dataset",
            table.value_dtype().code(),
            value.code()
        )));
    }
    Ok(())
}

/// Inserts every element's pair; an initialised table is left as it is
/// (TensorFlow logs and succeeds), an empty dataset is TensorFlow's
/// `OutOfRange` "end of iterator".
fn fill(table: &LookupTable, dataset: &tfdata_dataset::Dataset) -> Result<()> {
    let mut init = table.init();
    if init.initialized_size().is_some() {
        return Ok(());
    }
    // TensorFlow would read an infinite dataset forever.
    if dataset.cardinality() == tfdata_dataset::INFINITE_CARDINALITY {
        return Err(Error::InvalidArgument(
            "InitializeTableFromDataset: the dataset is infinite (TensorFlow would read it \
             forever)"
                .into(),
        ));
    }
    let mut it = dataset.iter()?;
    let mut read = 0usize;
    while let Some(element) = it.next_element()? {
        read += 1;
        if read > MAX_TABLE_ENTRIES {
            return Err(Error::InvalidArgument(format!(
                "InitializeTableFromDataset: the dataset has more than {MAX_TABLE_ENTRIES} \
                 entries"
            )));
        }
        let [key, value] = element.components.as_slice() else {
            return Err(Error::InvalidArgument(
                "Dataset should have two output types only".into(),
            ));
        };
        check_types(table, &[key.dtype(), value.dtype()])?;
        let keys = crate::table::keys_of(scalar(key)?)?;
        let values = crate::table::scalars_of(scalar(value)?)?;
        for (k, v) in keys.into_iter().zip(values) {
            init.insert(k, v)?;
        }
    }
    if read == 0 {
        return Err(Error::Remote {
            code: tonic::Code::OutOfRange,
            message: "end of iterator".into(),
        });
    }
    init.finish();
    Ok(())
}

/// A scalar component (what TensorFlow's shape check asks of the spec).
fn scalar(t: &Tensor) -> Result<&Tensor> {
    if !t.shape().is_empty() {
        return Err(Error::InvalidArgument(format!(
            "Expected scalar for key. Obtained: {}",
            shape_string(&Shape::known(t.shape()))
        )));
    }
    Ok(t)
}
