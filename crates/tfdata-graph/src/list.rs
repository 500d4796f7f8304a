//! A TensorList's value (what a `tf.TensorArray` is inside a function):
//! the data a [`crate::value::Value::List`] carries; the list ops are
//! `kernels::tensor_list`.

use tfdata_core::{DType, Tensor};

/// A partial shape: `None` for an unknown rank, -1 for an unknown dim.
pub type PartialShape = Option<Vec<i64>>;

/// A TensorList's value.
#[derive(Clone, Debug)]
pub struct TensorList {
    pub dtype: DType,
    pub element_shape: PartialShape,
    /// `None`: never set.
    pub items: Vec<Option<Tensor>>,
    /// `EmptyTensorList`'s `max_num_elements` (-1: no limit).
    pub max: i64,
}
