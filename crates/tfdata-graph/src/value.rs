//! What flows along a graph's edges: tensors, and datasets (TensorFlow's
//! `DT_VARIANT` dataset handles, which dataset nodes produce and consume).

use tfdata_core::{Error, Result, Tensor};
use tfdata_dataset::Dataset;

#[derive(Clone, Debug)]
pub enum Value {
    Tensor(Tensor),
    Dataset(Dataset),
}

impl Value {
    /// The tensor, or an error naming `what` wanted it.
    pub fn into_tensor(self, what: &str) -> Result<Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            Value::Dataset(_) => Err(Error::InvalidArgument(format!(
                "{what}: expected a tensor, got a dataset"
            ))),
        }
    }

    pub fn tensor(&self, what: &str) -> Result<&Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            Value::Dataset(_) => Err(Error::InvalidArgument(format!(
                "{what}: expected a tensor, got a dataset"
            ))),
        }
    }

    pub fn into_dataset(self, what: &str) -> Result<Dataset> {
        match self {
            Value::Dataset(d) => Ok(d),
            Value::Tensor(t) => Err(Error::InvalidArgument(format!(
                "{what}: expected a dataset, got a {} tensor",
                t.dtype()
            ))),
        }
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Self {
        Value::Tensor(t)
    }
}
