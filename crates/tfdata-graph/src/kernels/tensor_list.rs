//! TensorList: what a `tf.TensorArray` becomes inside a `tf.function`
//! (`TensorListReserve`, `TensorListSetItem` in a `while_loop`, then
//! `TensorListStack`), and the other list ops around it.
//!
//! In TensorFlow a list is a `DT_VARIANT` scalar holding element tensors,
//! an element dtype and a partial element shape. Here it is a
//! [`Value::List`] carrying the same, passed along edges and through
//! `While` loop state like any value; it never crosses a dataset boundary
//! (a map returning a TensorArray unstacked is not supported). Ops take a
//! list and return a new one: the [`Arc`] is copied only when shared (the
//! executor moves a value at its last use, so a loop's writes are in
//! place).
//!
//! Elements never set read as zeros of the element shape when it is known
//! (from the op, the list, or the elements that are set), as in
//! TensorFlow; otherwise reading them is TensorFlow's error. Messages are
//! TensorFlow 2.21's graph kernels'. Where TensorFlow crashes or returns
//! uninitialised memory (a negative scatter index, scattering past the end
//! of a list, which leaves the gap uninitialised) ours is an error.

use std::sync::Arc;

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use super::ResourceKernelDef;
use super::lookup::tf_name;
use crate::attrs::NodeAttrs;
use crate::kernels::NodeFn;
use crate::value::Value;

pub use crate::list::{PartialShape, TensorList};

pub(super) fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

pub(super) fn show(s: &PartialShape) -> String {
    match s {
        None => "<unknown>".into(),
        Some(d) => {
            let d: Vec<String> = d
                .iter()
                .map(|&x| if x < 0 { "?".into() } else { x.to_string() })
                .collect();
            format!("[{}]", d.join(","))
        }
    }
}

pub(super) fn known(s: &[i64]) -> PartialShape {
    Some(s.to_vec())
}

/// TensorFlow's `PartialTensorShape::MergeWith`.
pub(super) fn merge(a: &PartialShape, b: &PartialShape) -> Result<PartialShape> {
    let (Some(x), Some(y)) = (a, b) else {
        return Ok(a.clone().or_else(|| b.clone()));
    };
    let err = || {
        invalid(format!(
            "PartialTensorShape: Incompatible shapes during merge: {} vs. {}",
            show(a),
            show(b)
        ))
    };
    if x.len() != y.len() {
        return Err(invalid(format!(
            "PartialTensorShape: Incompatible ranks during merge: {} vs. {}",
            x.len(),
            y.len()
        )));
    }
    x.iter()
        .zip(y)
        .map(|(&p, &q)| match (p, q) {
            (-1, q) => Ok(q),
            (p, -1) => Ok(p),
            (p, q) if p == q => Ok(p),
            _ => Err(err()),
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

pub(super) fn compatible(a: &PartialShape, b: &PartialShape) -> bool {
    merge(a, b).is_ok()
}

pub(super) fn fully(s: &PartialShape) -> Option<&[i64]> {
    s.as_deref().filter(|d| d.iter().all(|&x| x >= 0))
}

/// An `element_shape` input: int32 or int64, a scalar -1 for an unknown
/// rank, or a vector of dims (-1 unknown).
pub(super) fn read_shape(t: &Tensor) -> Result<PartialShape> {
    let dims: Vec<i64> = match t.dtype() {
        DType::Int32 => t.to_vec::<i32>()?.into_iter().map(i64::from).collect(),
        DType::Int64 => t.to_vec::<i64>()?,
        d => {
            return Err(invalid(format!(
                "element_shape must be int32 or int64, got {d}"
            )));
        }
    };
    match t.shape().len() {
        0 if dims == [-1] => Ok(None),
        0 => Err(invalid(
            "The only valid scalar shape tensor is the fully unknown shape specified as -1.",
        )),
        1 => {
            if let Some(d) = dims.iter().find(|&&d| d < -1) {
                return Err(invalid(format!("Dimension {d} must be >= -1")));
            }
            Ok(Some(dims))
        }
        r => Err(invalid(format!(
            "Shape must be at most rank 1 but is rank {r}"
        ))),
    }
}

pub(super) fn scalar_i64(t: &Tensor, what: &str) -> Result<i64> {
    match t.dtype() {
        DType::Int32 => t.to_vec::<i32>()?.first().map(|&v| i64::from(v)),
        DType::Int64 => t.to_vec::<i64>()?.first().copied(),
        _ => None,
    }
    .filter(|_| t.shape().is_empty())
    .ok_or_else(|| invalid(format!("{what} must be an integer scalar")))
}

pub(super) fn list_of(v: Value, op: &str) -> Result<Arc<TensorList>> {
    match v {
        Value::List(l) => Ok(l),
        other => Err(invalid(format!(
            "{op}: input_handle must be a TensorList, got {}",
            other.describe()
        ))),
    }
}

pub(super) fn take<const N: usize>(op: &str, inputs: Vec<Value>) -> Result<[Value; N]> {
    let n = inputs.len();
    inputs
        .try_into()
        .map_err(|_| invalid(format!("{op}: expected {N} inputs, got {n}")))
}

fn check_dtype(want: DType, list: &TensorList) -> Result<()> {
    if want != list.dtype {
        return Err(invalid(format!(
            "Invalid data types; op elements {} but list elements {}",
            tf_name(want),
            tf_name(list.dtype)
        )));
    }
    Ok(())
}

/// A tensor of `dtype` and `shape` filled with zeros (empty strings).
pub(super) fn zeros(dtype: DType, shape: &[i64]) -> Result<Tensor> {
    let n = tfdata_core::tensor::num_elements(shape)?;
    super::check_size("TensorList", dtype, n)?;
    match dtype.size() {
        Some(size) => Tensor::new(
            dtype,
            shape.to_vec(),
            TensorData::Buffer(Bytes::from(vec![0u8; n as usize * size])),
        ),
        None => Tensor::new(
            dtype,
            shape.to_vec(),
            TensorData::Strings(vec![Bytes::new(); n as usize]),
        ),
    }
}

/// Tensors of one dtype, concatenated along a new or their first axis
/// (`shape` is the result's).
pub(super) fn join(dtype: DType, shape: Vec<i64>, parts: &[Tensor]) -> Result<Tensor> {
    let n = tfdata_core::tensor::num_elements(&shape)?;
    super::check_size("TensorList", dtype, n)?;
    if dtype.size().is_some() {
        let mut out = Vec::new();
        for p in parts {
            if let TensorData::Buffer(b) = p.data() {
                out.extend_from_slice(b);
            }
        }
        Tensor::new(dtype, shape, TensorData::Buffer(Bytes::from(out)))
    } else {
        let mut out = Vec::new();
        for p in parts {
            out.extend(p.string_values()?.iter().cloned());
        }
        Tensor::new(dtype, shape, TensorData::Strings(out))
    }
}

/// The element shape reading unset elements needs: the op's merged with
/// the list's, then with the set elements' (those of `among`).
fn element_shape_for(
    list: &TensorList,
    op_shape: &PartialShape,
    among: impl Iterator<Item = usize>,
) -> Result<PartialShape> {
    let mut s = merge(op_shape, &list.element_shape)?;
    if fully(&s).is_some() {
        return Ok(s);
    }
    for i in among {
        if let Some(Some(t)) = list.items.get(i) {
            s = merge(&s, &known(t.shape()))?;
        }
    }
    Ok(s)
}

/// Elements `indices` stacked (`what` words the unset-element error).
fn stack(
    list: &TensorList,
    op_shape: &PartialShape,
    indices: &[usize],
    what: &str,
) -> Result<Tensor> {
    let partial = element_shape_for(list, op_shape, indices.iter().copied())?;
    let Some(shape) = fully(&partial).map(<[i64]>::to_vec) else {
        return Err(invalid(format!("{what}: {}", show(&partial))));
    };
    let mut parts = Vec::with_capacity(indices.len());
    for &i in indices {
        parts.push(match &list.items[i] {
            Some(t) => {
                // Every element must have the shape (TensorFlow's merge error).
                merge(&known(&shape), &known(t.shape()))?;
                t.clone()
            }
            None => zeros(list.dtype, &shape)?,
        });
    }
    let mut out_shape = vec![indices.len() as i64];
    out_shape.extend(&shape);
    join(list.dtype, out_shape, &parts)
}

pub(super) fn node(
    f: impl Fn(Vec<Value>) -> Result<Vec<Value>> + Send + Sync + 'static,
) -> Result<NodeFn> {
    Ok(Arc::new(f))
}

pub(super) fn list_value(l: TensorList) -> Value {
    Value::List(Arc::new(l))
}

/// Bounds a list's length (each element costs a slot).
pub(super) fn check_len(op: &str, n: i64) -> Result<usize> {
    super::check_size(op, DType::Int64, n.max(0) as u64)?;
    Ok(n as usize)
}

fn reserve(attrs: &NodeAttrs) -> Result<NodeFn> {
    let dtype = attrs.dtype("element_dtype")?;
    node(move |inputs| {
        let [shape, n] = take("TensorListReserve", inputs)?;
        let shape = read_shape(shape.tensor("element_shape")?)?;
        let n = scalar_i64(n.tensor("num_elements")?, "num_elements")?;
        if n < 0 {
            return Err(invalid(format!(
                "The num_elements to reserve must be a non negative number, but got {n}"
            )));
        }
        let n = check_len("TensorListReserve", n)?;
        Ok(vec![list_value(TensorList {
            dtype,
            element_shape: shape,
            items: vec![None; n],
            max: -1,
        })])
    })
}

fn empty(attrs: &NodeAttrs) -> Result<NodeFn> {
    let dtype = attrs.dtype("element_dtype")?;
    node(move |inputs| {
        let [shape, max] = take("EmptyTensorList", inputs)?;
        let shape = read_shape(shape.tensor("element_shape")?)?;
        let max = scalar_i64(max.tensor("max_num_elements")?, "max_num_elements")?;
        if max < -1 {
            return Err(invalid(format!(
                "max_num_elements expected to be at least -1 but got {max}"
            )));
        }
        Ok(vec![list_value(TensorList {
            dtype,
            element_shape: shape,
            items: Vec::new(),
            max,
        })])
    })
}

fn from_tensor(attrs: &NodeAttrs) -> Result<NodeFn> {
    let dtype = attrs.dtype("element_dtype")?;
    node(move |inputs| {
        let [t, shape] = take("TensorListFromTensor", inputs)?;
        let t = t.into_tensor("tensor")?;
        let shape = read_shape(shape.tensor("element_shape")?)?;
        if t.dtype() != dtype {
            return Err(invalid(format!(
                "Invalid data types; op elements {} but list elements {}",
                tf_name(t.dtype()),
                tf_name(dtype)
            )));
        }
        let Some((&n, rest)) = t.shape().split_first() else {
            return Err(invalid(format!(
                "Tensor must be at least a vector, but saw shape: {}",
                show(&known(t.shape()))
            )));
        };
        if !compatible(&shape, &known(rest)) {
            return Err(invalid(format!(
                "Specified a list with shape {} from a tensor with shape {}",
                show(&shape),
                show(&known(rest))
            )));
        }
        let items = unstack(&t, n, rest)?;
        Ok(vec![list_value(TensorList {
            dtype,
            element_shape: shape,
            items: items.into_iter().map(Some).collect(),
            max: -1,
        })])
    })
}

/// The `n` rows of `t` (of shape `[n] + rest`).
pub(super) fn unstack(t: &Tensor, n: i64, rest: &[i64]) -> Result<Vec<Tensor>> {
    let n = check_len("TensorList", n)?;
    let per = tfdata_core::tensor::num_elements(rest)? as usize;
    (0..n)
        .map(|i| match t.data() {
            TensorData::Buffer(b) => {
                let size = t.dtype().size().unwrap_or(1) * per;
                Tensor::new(
                    t.dtype(),
                    rest.to_vec(),
                    TensorData::Buffer(b.slice(i * size..(i + 1) * size)),
                )
            }
            TensorData::Strings(s) => Tensor::new(
                t.dtype(),
                rest.to_vec(),
                TensorData::Strings(s[i * per..(i + 1) * per].to_vec()),
            ),
        })
        .collect()
}

fn set_item(attrs: &NodeAttrs) -> Result<NodeFn> {
    let resize = attrs.bool_or("resize_if_index_out_of_bounds", false)?;
    node(move |inputs| {
        let [l, index, item] = take("TensorListSetItem", inputs)?;
        let mut l = list_of(l, "TensorListSetItem")?;
        let index = scalar_i64(index.tensor("index")?, "index")?;
        let item = item.into_tensor("item")?;
        check_dtype(item.dtype(), &l)?;
        let size = l.items.len() as i64;
        let writable = (0..size).contains(&index) || (resize && index >= 0);
        if !writable {
            return Err(invalid(format!(
                "Trying to modify element {index} in a list with {size} elements."
            )));
        }
        if !compatible(&known(item.shape()), &l.element_shape) {
            return Err(invalid(format!(
                "Tried to set a tensor with incompatible shape at a list index. Item element \
                 shape: {} list shape: {}",
                show(&known(item.shape())),
                show(&l.element_shape)
            )));
        }
        let list = Arc::make_mut(&mut l);
        if index >= size {
            let n = check_len("TensorListSetItem", index + 1)?;
            list.items.resize(n, None);
        }
        list.items[index as usize] = Some(item);
        Ok(vec![Value::List(l)])
    })
}

fn get_item(attrs: &NodeAttrs) -> Result<NodeFn> {
    let dtype = attrs.dtype("element_dtype")?;
    node(move |inputs| {
        let [l, index, shape] = take("TensorListGetItem", inputs)?;
        let l = list_of(l, "TensorListGetItem")?;
        check_dtype(dtype, &l)?;
        let index = scalar_i64(index.tensor("index")?, "index")?;
        let shape = read_shape(shape.tensor("element_shape")?)?;
        let size = l.items.len() as i64;
        if !(0..size).contains(&index) {
            return Err(invalid(format!(
                "Trying to access element {index} in a list with {size} elements."
            )));
        }
        Ok(vec![Value::Tensor(read_item(&l, index as usize, &shape)?)])
    })
}

/// Element `i`: as set, or zeros of the element shape if it is known.
fn read_item(l: &TensorList, i: usize, op_shape: &PartialShape) -> Result<Tensor> {
    if let Some(t) = &l.items[i] {
        return Ok(t.clone());
    }
    let partial = element_shape_for(l, op_shape, 0..l.items.len())?;
    match fully(&partial) {
        Some(s) => zeros(l.dtype, s),
        None => Err(invalid(format!(
            "Trying to read an uninitialized tensor but element_shape is not fully defined: {} \
             and no list element is set.",
            show(&partial)
        ))),
    }
}

fn stack_op(attrs: &NodeAttrs) -> Result<NodeFn> {
    let dtype = attrs.dtype("element_dtype")?;
    let num = attrs.int_or("num_elements", -1)?;
    node(move |inputs| {
        let [l, shape] = take("TensorListStack", inputs)?;
        let l = list_of(l, "TensorListStack")?;
        check_dtype(dtype, &l)?;
        let shape = read_shape(shape.tensor("element_shape")?)?;
        let n = l.items.len();
        if num != -1 && num != n as i64 {
            return Err(invalid(format!(
                "Operation expected a list with {num} elements but got a list with {n} elements."
            )));
        }
        let partial = merge(&shape, &l.element_shape)?;
        if n == 0 && fully(&partial).is_none() {
            return Err(invalid(format!(
                "Tried to stack elements of an empty list with non-fully-defined element_shape: {}",
                show(&partial)
            )));
        }
        let all: Vec<usize> = (0..n).collect();
        let what = "Tried to stack list which only contains uninitialized tensors and has a \
                    non-fully-defined element_shape";
        Ok(vec![Value::Tensor(stack(&l, &shape, &all, what)?)])
    })
}

fn gather(attrs: &NodeAttrs) -> Result<NodeFn> {
    let dtype = attrs.dtype("element_dtype")?;
    node(move |inputs| {
        let [l, indices, shape] = take("TensorListGather", inputs)?;
        let l = list_of(l, "TensorListGather")?;
        check_dtype(dtype, &l)?;
        let shape = read_shape(shape.tensor("element_shape")?)?;
        let indices = indices.tensor("indices")?.to_vec::<i32>()?;
        let n = l.items.len();
        let mut picked = Vec::with_capacity(indices.len());
        for i in indices {
            if i < 0 || i as usize >= n {
                return Err(invalid(format!(
                    "Trying to gather element {i} in a list with {n} elements."
                )));
            }
            picked.push(i as usize);
        }
        if picked.is_empty() {
            let partial = merge(&shape, &l.element_shape)?;
            if fully(&partial).is_none() {
                return Err(invalid(format!(
                    "Tried to gather 0-elements from a list with non-fully-defined shape: {}",
                    show(&partial)
                )));
            }
        }
        let what = "Tried to gather uninitialized tensors from a list with non-fully-defined \
                    element_shape";
        Ok(vec![Value::Tensor(stack(&l, &shape, &picked, what)?)])
    })
}

fn length(_: &NodeAttrs) -> Result<NodeFn> {
    node(|inputs| {
        let [l] = take("TensorListLength", inputs)?;
        let l = list_of(l, "TensorListLength")?;
        Ok(vec![Value::Tensor(Tensor::scalar(l.items.len() as i32))])
    })
}

fn element_shape(attrs: &NodeAttrs) -> Result<NodeFn> {
    let ty = attrs.dtype("shape_type")?;
    node(move |inputs| {
        let [l] = take("TensorListElementShape", inputs)?;
        let l = list_of(l, "TensorListElementShape")?;
        let (dims, shape) = match &l.element_shape {
            None => (vec![-1], vec![]),
            Some(d) => (d.clone(), vec![d.len() as i64]),
        };
        let t = if ty == DType::Int64 {
            Tensor::from_slice(&dims, shape)?
        } else {
            let d: Vec<i32> = dims.iter().map(|&x| x as i32).collect();
            Tensor::from_slice(&d, shape)?
        };
        Ok(vec![Value::Tensor(t)])
    })
}

fn push_back(_: &NodeAttrs) -> Result<NodeFn> {
    node(|inputs| {
        let [l, t] = take("TensorListPushBack", inputs)?;
        let mut l = list_of(l, "TensorListPushBack")?;
        let t = t.into_tensor("tensor")?;
        check_dtype(t.dtype(), &l)?;
        if !compatible(&known(t.shape()), &l.element_shape) {
            return Err(invalid(format!(
                "Tried to append a tensor with incompatible shape to a list. Op element shape: \
                 {} list shape: {}",
                show(&known(t.shape())),
                show(&l.element_shape)
            )));
        }
        let n = l.items.len();
        if l.max != -1 && n as i64 >= l.max {
            return Err(invalid(format!(
                "Tried to push item into a full list list size: {n} max_num_elements: {}",
                l.max
            )));
        }
        check_len("TensorListPushBack", n as i64 + 1)?;
        Arc::make_mut(&mut l).items.push(Some(t));
        Ok(vec![Value::List(l)])
    })
}

fn pop_back(attrs: &NodeAttrs) -> Result<NodeFn> {
    let dtype = attrs.dtype("element_dtype")?;
    node(move |inputs| {
        let [l, shape] = take("TensorListPopBack", inputs)?;
        let mut l = list_of(l, "TensorListPopBack")?;
        check_dtype(dtype, &l)?;
        let shape = read_shape(shape.tensor("element_shape")?)?;
        let Some(last) = l.items.len().checked_sub(1) else {
            return Err(invalid("Trying to pop from an empty list."));
        };
        let item = read_item(&l, last, &shape)?;
        Arc::make_mut(&mut l).items.pop();
        Ok(vec![Value::List(l), Value::Tensor(item)])
    })
}

fn resize(_: &NodeAttrs) -> Result<NodeFn> {
    node(|inputs| {
        let [l, size] = take("TensorListResize", inputs)?;
        let mut l = list_of(l, "TensorListResize")?;
        let size = scalar_i64(size.tensor("size")?, "size")?;
        if size < 0 {
            return Err(invalid(format!(
                "TensorListSlice expects size to be non-negative. Got: {size}"
            )));
        }
        let n = check_len("TensorListResize", size)?;
        Arc::make_mut(&mut l).items.resize(n, None);
        Ok(vec![Value::List(l)])
    })
}

fn scatter(_: &NodeAttrs) -> Result<NodeFn> {
    node(|inputs| {
        let [l, t, indices] = take("TensorListScatterIntoExistingList", inputs)?;
        let mut l = list_of(l, "TensorListScatterIntoExistingList")?;
        let t = t.into_tensor("tensor")?;
        check_dtype(t.dtype(), &l)?;
        let indices = indices.tensor("indices")?.to_vec::<i32>()?;
        let Some((&rows, rest)) = t.shape().split_first() else {
            return Err(invalid(format!(
                "Tensor must be at least a vector, but saw shape: {}",
                show(&known(t.shape()))
            )));
        };
        if indices.len() as i64 != rows {
            return Err(invalid(format!(
                "Expected len(indices) == tensor.shape[0], but saw: {} vs. {rows}",
                indices.len()
            )));
        }
        let size = l.items.len();
        if let Some(&i) = indices.iter().find(|&&i| i < 0 || i as usize > size) {
            // TensorFlow crashes on a negative index and leaves a gap past
            // the end uninitialised.
            return Err(invalid(format!(
                "TensorListScatterIntoExistingList: index {i} outside a list of {size} elements"
            )));
        }
        let items = unstack(&t, rows, rest)?;
        let list = Arc::make_mut(&mut l);
        for (i, item) in indices.into_iter().zip(items) {
            let i = i as usize;
            if i == list.items.len() {
                list.items.push(None);
            }
            list.items[i] = Some(item);
        }
        Ok(vec![Value::List(l)])
    })
}

pub(super) const HANDLE: fn(&NodeAttrs) -> Result<super::OutputArgs> = |_| Ok(vec![("handle", 1)]);
pub(super) const OUTPUT_HANDLE: fn(&NodeAttrs) -> Result<super::OutputArgs> =
    |_| Ok(vec![("output_handle", 1)]);

pub(super) const KERNELS: &[ResourceKernelDef] = &[
    ResourceKernelDef {
        op: "TensorListReserve",
        outputs: HANDLE,
        build: reserve,
    },
    ResourceKernelDef {
        op: "EmptyTensorList",
        outputs: HANDLE,
        build: empty,
    },
    ResourceKernelDef {
        op: "TensorListFromTensor",
        outputs: OUTPUT_HANDLE,
        build: from_tensor,
    },
    ResourceKernelDef {
        op: "TensorListSetItem",
        outputs: OUTPUT_HANDLE,
        build: set_item,
    },
    ResourceKernelDef {
        op: "TensorListGetItem",
        outputs: |_| Ok(vec![("item", 1)]),
        build: get_item,
    },
    ResourceKernelDef {
        op: "TensorListStack",
        outputs: |_| Ok(vec![("tensor", 1)]),
        build: stack_op,
    },
    ResourceKernelDef {
        op: "TensorListGather",
        outputs: |_| Ok(vec![("values", 1)]),
        build: gather,
    },
    ResourceKernelDef {
        op: "TensorListLength",
        outputs: |_| Ok(vec![("length", 1)]),
        build: length,
    },
    ResourceKernelDef {
        op: "TensorListElementShape",
        outputs: |_| Ok(vec![("element_shape", 1)]),
        build: element_shape,
    },
    ResourceKernelDef {
        op: "TensorListPushBack",
        outputs: OUTPUT_HANDLE,
        build: push_back,
    },
    ResourceKernelDef {
        op: "TensorListPopBack",
        outputs: |_| Ok(vec![("output_handle", 1), ("tensor", 1)]),
        build: pop_back,
    },
    ResourceKernelDef {
        op: "TensorListResize",
        outputs: OUTPUT_HANDLE,
        build: resize,
    },
    ResourceKernelDef {
        op: "TensorListScatterIntoExistingList",
        outputs: OUTPUT_HANDLE,
        build: scatter,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::testing::node;
    use tfdata_core::Tensor;

    fn build(op: &str, attrs: &[(&str, tfdata_proto::tensorflow::AttrValue)]) -> NodeFn {
        let n = node(op, attrs);
        let k = super::KERNELS.iter().find(|k| k.op == op).unwrap();
        (k.build)(&NodeAttrs::of(&n)).unwrap()
    }

    #[test]
    fn a_shared_list_is_copied_on_write() {
        use crate::kernels::testing::ty;
        let dt = [("element_dtype", ty(DType::Float))];
        let reserve = build("TensorListReserve", &dt);
        let set = build("TensorListSetItem", &dt);
        let stack = build("TensorListStack", &dt);
        let shape = || Value::Tensor(Tensor::from_slice(&[1i32], vec![1]).unwrap());
        let l = reserve(vec![shape(), Value::Tensor(Tensor::scalar(2i32))])
            .unwrap()
            .remove(0);
        let item = Value::Tensor(Tensor::from_slice(&[5.0f32], vec![1]).unwrap());
        let written = set(vec![l.clone(), Value::Tensor(Tensor::scalar(1i32)), item])
            .unwrap()
            .remove(0);
        let read = |l: Value| {
            stack(vec![l, shape()]).unwrap()[0]
                .tensor("")
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
        };
        assert_eq!(read(written), vec![0.0, 5.0]);
        assert_eq!(read(l), vec![0.0, 0.0]);
        // A tensor where a list is wanted is an error, not a panic.
        let err = stack(vec![shape(), shape()]).unwrap_err().to_string();
        assert!(err.contains("must be a TensorList"), "{err}");
    }
}
