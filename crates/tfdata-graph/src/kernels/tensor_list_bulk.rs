//! TensorList ops that move many elements at once: concatenating a list's
//! elements along their first axis (`TensorListConcat`, `…ConcatV2`),
//! splitting a tensor into a list of row ranges (`TensorListSplit`),
//! scattering rows into a new list (`TensorListScatter`, `…ScatterV2`) and
//! appending one list to another (`TensorListConcatLists`).
//!
//! The element-wise list ops and the list value's helpers are
//! `kernels::tensor_list`. Messages are TensorFlow 2.21's kernels'.
//! `TensorListConcatLists` takes TensorFlow's batches of lists; here a
//! list is always one (scalar) handle, so it appends one list to another.

use std::sync::Arc;

use tfdata_core::{DType, Result, Tensor};

use super::ResourceKernelDef;
use super::lookup::tf_name;
use super::tensor_list::{
    OUTPUT_HANDLE, PartialShape, TensorList, check_len, compatible, fully, invalid, join, known,
    list_of, list_value, merge, node, read_shape, scalar_i64, show, take, unstack, zeros,
};
use crate::attrs::NodeAttrs;
use crate::kernels::NodeFn;
use crate::value::Value;

/// A partial shape without its first dim (unknown rank stays unknown).
fn tail(s: &PartialShape) -> PartialShape {
    s.as_ref().map(|d| d.iter().skip(1).copied().collect())
}

/// What `TensorListConcat` (V1: the element shape is an attr and unset
/// elements need the leading dim the set ones share) and
/// `TensorListConcatV2` (the shape is an input merged with the list's, and
/// `leading_dims` sizes unset elements) compute.
struct ConcatSpec {
    /// The element shape the op gives (V1's attr, V2's merged input).
    element_shape: PartialShape,
    /// V2's `leading_dims`; `None` for V1.
    leading: Option<Vec<i64>>,
}

fn concat_elements(dtype: DType, l: &TensorList, spec: ConcatSpec) -> Result<Vec<Value>> {
    let v2 = spec.leading.is_some();
    // V1 never takes the leading dim from its attr; V2 does from its input.
    let first_dim = match (&spec.element_shape, v2) {
        (Some(d), true) => d.first().copied().unwrap_or(-1),
        _ => -1,
    };
    let mut rest = tail(&spec.element_shape);
    if l.items.is_empty() && fully(&rest).is_none() {
        return Err(invalid(format!(
            "All except the first dimension must be fully defined when concating an empty \
             tensor list. element_shape: {}",
            show(&rest)
        )));
    }
    let mut inferred = first_dim;
    // A list of a fully defined element shape had every element checked
    // against it when set; TensorFlow checks and infers only otherwise.
    if fully(&l.element_shape).is_none() {
        let mut check_dim = first_dim == -1;
        for (i, item) in l.items.iter().enumerate() {
            let Some(t) = item else { continue };
            let Some((&d0, r)) = t.shape().split_first() else {
                return Err(invalid(format!(
                    "Concat saw a scalar shape at index {i} but requires at least vectors."
                )));
            };
            rest = merge(&rest, &known(r))?;
            if first_dim != -1 && first_dim != d0 {
                return Err(invalid(format!(
                    "First entry of element_shape input does not match the first dim of list \
                     element at index: {i} Expected: {first_dim} Actual: {d0}"
                )));
            }
            if check_dim {
                if inferred == -1 {
                    inferred = d0;
                } else if inferred != d0 {
                    inferred = -1;
                    check_dim = false;
                }
            }
        }
    }
    let Some(rest) = fully(&rest).map(<[i64]>::to_vec) else {
        return Err(invalid(format!(
            "Trying to concat list with only uninitialized tensors but \
             element_shape_except_first_dim is not fully defined: {}",
            show(&rest)
        )));
    };
    let leading = spec.leading.unwrap_or_default();
    let mut lengths = Vec::with_capacity(l.items.len());
    let mut parts = Vec::with_capacity(l.items.len());
    let mut total = 0i64;
    for (i, item) in l.items.iter().enumerate() {
        let part = match item {
            Some(t) => t.clone(),
            None => {
                let dim = if i >= leading.len() && inferred != -1 {
                    inferred
                } else if !v2 {
                    return Err(invalid(
                        "Concating lists with uninitialized tensors is not supported in this \
                         version of TensorListConcat. Consider updating your GraphDef to run \
                         the newer version.",
                    ));
                } else if i >= leading.len() {
                    return Err(invalid(format!(
                        "List contains uninitialized tensor at index {i} but leading_dims has \
                         only {} elements.",
                        leading.len()
                    )));
                } else {
                    leading[i]
                };
                if dim < 0 {
                    return Err(invalid(format!("Dimension {dim} must be >= 0")));
                }
                let mut s = vec![dim];
                s.extend(&rest);
                zeros(dtype, &s)?
            }
        };
        let d0 = part.shape()[0];
        total = total
            .checked_add(d0)
            .ok_or_else(|| invalid("TensorListConcat: the result is too large"))?;
        lengths.push(d0);
        parts.push(part);
    }
    let mut shape = vec![total];
    shape.extend(&rest);
    let n = lengths.len() as i64;
    Ok(vec![
        Value::Tensor(join(dtype, shape, &parts)?),
        Value::Tensor(Tensor::from_slice(&lengths, vec![n])?),
    ])
}

fn check_element_dtype(want: DType, l: &TensorList) -> Result<()> {
    if want != l.dtype {
        return Err(invalid(format!(
            "Invalid data types; op elements {} but list elements {}",
            tf_name(want),
            tf_name(l.dtype)
        )));
    }
    Ok(())
}

/// `TensorListConcat`: the element shape is the `element_shape` attr.
fn concat_v1(attrs: &NodeAttrs) -> Result<NodeFn> {
    let dtype = attrs.dtype("element_dtype")?;
    let element_shape: PartialShape = if attrs.has("element_shape") {
        let p = attrs.shape("element_shape")?;
        (!p.unknown_rank).then(|| p.dim.iter().map(|d| d.size).collect())
    } else {
        None
    };
    node(move |inputs| {
        let [l] = take("TensorListConcat", inputs)?;
        let l = list_of(l, "TensorListConcat")?;
        if matches!(&element_shape, Some(d) if d.is_empty()) {
            return Err(invalid("element_shape must not be empty"));
        }
        check_element_dtype(dtype, &l)?;
        let spec = ConcatSpec {
            element_shape: element_shape.clone(),
            leading: None,
        };
        concat_elements(dtype, &l, spec)
    })
}

/// `TensorListConcatV2`: the element shape is an input, merged with the
/// list's; `leading_dims` sizes the unset elements.
fn concat_v2(attrs: &NodeAttrs) -> Result<NodeFn> {
    let dtype = attrs.dtype("element_dtype")?;
    node(move |inputs| {
        let [l, shape, leading] = take("TensorListConcatV2", inputs)?;
        let l = list_of(l, "TensorListConcatV2")?;
        check_element_dtype(dtype, &l)?;
        let shape = merge(
            &read_shape(shape.tensor("element_shape")?)?,
            &l.element_shape,
        )?;
        if matches!(&shape, Some(d) if d.is_empty()) {
            return Err(invalid(
                "Concat requires elements to be at least vectors, found scalars instead.",
            ));
        }
        let leading = leading.tensor("leading_dims")?.to_vec::<i64>()?;
        let spec = ConcatSpec {
            element_shape: shape,
            leading: Some(leading),
        };
        concat_elements(dtype, &l, spec)
    })
}

/// `TensorListSplit`: consecutive row ranges of `tensor`, `lengths` rows
/// each, as a new list.
fn split(_: &NodeAttrs) -> Result<NodeFn> {
    node(|inputs| {
        let [t, shape, lengths] = take("TensorListSplit", inputs)?;
        let t = t.into_tensor("tensor")?;
        let shape = read_shape(shape.tensor("element_shape")?)?;
        if matches!(&shape, Some(d) if d.is_empty()) {
            return Err(invalid(format!(
                "TensorListSplit requires element_shape to be at least of rank 1, but saw: {}",
                show(&shape)
            )));
        }
        let Some((&rows, rest)) = t.shape().split_first() else {
            return Err(invalid(
                "Tensor must be at least a vector, but saw shape: []",
            ));
        };
        if !compatible(&tail(&shape), &known(rest)) {
            return Err(invalid(format!(
                "tensor shape {} is not compatible with element_shape {}",
                show(&known(t.shape())),
                show(&shape)
            )));
        }
        let lengths = lengths.tensor("lengths")?;
        if lengths.shape().len() != 1 {
            return Err(invalid(format!(
                "Expected lengths to be a vector, received shape: {}",
                show(&known(lengths.shape()))
            )));
        }
        let lengths = lengths.to_vec::<i64>()?;
        let row_items = unstack(&t, rows, rest)?;
        let mut items = Vec::with_capacity(lengths.len());
        let mut start = 0i64;
        for length in lengths {
            if length < 0 {
                return Err(invalid(format!("Invalid value in lengths: {length}")));
            }
            let end = start.saturating_add(length);
            if end > rows {
                return Err(invalid(format!(
                    "Attempting to slice [{start}, {end}] from tensor with length {rows}"
                )));
            }
            let mut s = vec![length];
            s.extend(rest);
            let range = &row_items[start as usize..end as usize];
            items.push(Some(join(t.dtype(), s, range)?));
            start = end;
        }
        if start != rows {
            return Err(invalid(format!(
                "Unused values in tensor. Length of tensor: {rows} Values used: {start}"
            )));
        }
        Ok(vec![list_value(TensorList {
            dtype: t.dtype(),
            element_shape: shape,
            items,
            max: -1,
        })])
    })
}

/// `TensorListScatter` (`with_size`: false) and `TensorListScatterV2`
/// (a `num_elements` input, the list's least size): row `k` of `tensor`
/// becomes element `indices[k]` of a new list; later rows win.
fn scatter_new(with_size: bool) -> Result<NodeFn> {
    node(move |inputs| {
        let (t, indices, shape, num) = if with_size {
            let [t, i, s, n] = take("TensorListScatterV2", inputs)?;
            let n = scalar_i64(n.tensor("num_elements")?, "num_elements")?;
            (t, i, s, n)
        } else {
            let [t, i, s] = take("TensorListScatter", inputs)?;
            (t, i, s, -1)
        };
        let t = t.into_tensor("tensor")?;
        let shape = read_shape(shape.tensor("element_shape")?)?;
        if num < -1 {
            return Err(invalid(format!(
                "TensorListScatter expects num_elements >= -1, found: {num}"
            )));
        }
        let Some((&rows, rest)) = t.shape().split_first() else {
            return Err(invalid(
                "Tensor must be at least a vector, but saw shape: []",
            ));
        };
        if !compatible(&shape, &known(rest)) {
            return Err(invalid(format!(
                "Specified a list with shape {} from a tensor with shape {}",
                show(&shape),
                show(&known(rest))
            )));
        }
        let indices = indices.tensor("indices")?.to_vec::<i32>()?;
        if indices.len() as i64 != rows {
            return Err(invalid(format!(
                "Invalid number of rows in input tensor. Expected: {} Actual: {rows}",
                indices.len()
            )));
        }
        let mut highest = -1i64;
        for &i in &indices {
            if i < 0 {
                return Err(invalid(
                    "Indices in TensorListScatter must all be non-negative.",
                ));
            }
            if num != -1 && i64::from(i) >= num {
                return Err(invalid(format!(
                    "TensorListScatter: Trying to scatter at index {i} in list with size {num}"
                )));
            }
            highest = highest.max(i64::from(i));
        }
        let size = check_len("TensorListScatter", (highest + 1).max(num))?;
        let mut items = vec![None; size];
        for (i, row) in indices.into_iter().zip(unstack(&t, rows, rest)?) {
            items[i as usize] = Some(row);
        }
        Ok(vec![list_value(TensorList {
            dtype: t.dtype(),
            element_shape: shape,
            items,
            max: -1,
        })])
    })
}

fn scatter(_: &NodeAttrs) -> Result<NodeFn> {
    scatter_new(false)
}

fn scatter_v2(_: &NodeAttrs) -> Result<NodeFn> {
    scatter_new(true)
}

/// `TensorListConcatLists`: `input_b`'s elements after `input_a`'s; the
/// two lists' element shapes must be identical (unknown dims included).
fn concat_lists(attrs: &NodeAttrs) -> Result<NodeFn> {
    let dtype = attrs.dtype("element_dtype")?;
    node(move |inputs| {
        let [a, b] = take("TensorListConcatLists", inputs)?;
        let mut a = list_of(a, "TensorListConcatLists")?;
        let b = list_of(b, "TensorListConcatLists")?;
        for (name, l) in [("input_a", &a), ("input_b", &b)] {
            if l.dtype != dtype {
                return Err(invalid(format!(
                    "{name}[0].dtype != element_dtype.  Saw: {} vs. {}",
                    tf_name(l.dtype),
                    tf_name(dtype)
                )));
            }
        }
        if a.element_shape != b.element_shape {
            return Err(invalid(format!(
                "input_a and input_b TensorList element shapes are not identical at index 0.  \
                 Saw {} vs. {}",
                show(&a.element_shape),
                show(&b.element_shape)
            )));
        }
        check_len(
            "TensorListConcatLists",
            (a.items.len() + b.items.len()) as i64,
        )?;
        Arc::make_mut(&mut a).items.extend(b.items.iter().cloned());
        Ok(vec![Value::List(a)])
    })
}

pub(super) const KERNELS: &[ResourceKernelDef] = &[
    ResourceKernelDef {
        op: "TensorListConcat",
        outputs: |_| Ok(vec![("tensor", 1), ("lengths", 1)]),
        build: concat_v1,
    },
    ResourceKernelDef {
        op: "TensorListConcatV2",
        outputs: |_| Ok(vec![("tensor", 1), ("lengths", 1)]),
        build: concat_v2,
    },
    ResourceKernelDef {
        op: "TensorListSplit",
        outputs: OUTPUT_HANDLE,
        build: split,
    },
    ResourceKernelDef {
        op: "TensorListScatter",
        outputs: OUTPUT_HANDLE,
        build: scatter,
    },
    ResourceKernelDef {
        op: "TensorListScatterV2",
        outputs: OUTPUT_HANDLE,
        build: scatter_v2,
    },
    ResourceKernelDef {
        op: "TensorListConcatLists",
        outputs: |_| Ok(vec![("output", 1)]),
        build: concat_lists,
    },
];
