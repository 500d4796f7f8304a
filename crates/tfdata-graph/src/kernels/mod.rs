//! The kernel set: TensorFlow ops on tensors, by op name, as the executor
//! ([`crate::function`]) runs them inside `FunctionDef` bodies.
//!
//! A kernel is built once per graph node ([`KernelDef::build`], which reads
//! and checks the node's attributes, compiles regexes and the like) and then
//! called once per element with the node's input tensors. Kernels match
//! TensorFlow 2.21's numerics; where they cannot, the kernel's module says
//! so and by how much (`docs/compatibility.md` lists every difference).
//!
//! Each module declares its kernels in a `KERNELS` table; [`lookup`] is the
//! one place names become kernels, and [`supported_ops`] lists them (the
//! dispatcher's "can tfdata workers run this graph" check and the docs).
//!
//! Bad input (a wrong dtype or shape, an index out of range, an absurd size)
//! is an `InvalidArgument` error, never a panic; outputs larger than
//! [`crate::MAX_TENSOR_BYTES`] are refused before they are allocated
//! ([`check_size`]).

use std::collections::HashMap;
use std::sync::OnceLock;

use tfdata_core::{DType, Error, Result, Tensor};

use crate::attrs::NodeAttrs;

mod assert;
mod bincount_batched;
mod bitcast;
mod bundle;
mod complex;
mod compressed;
mod counting;
mod decode_csv;
mod einsum;
mod file_write;
mod fill;
mod generator;
mod grads;
mod image;
mod image_area;
mod image_bmp;
mod image_color;
mod image_crop;
mod image_crop_grad;
mod image_crop_grad_boxes;
mod image_draw;
mod image_encode_jpeg;
mod image_encode_png;
mod image_formats;
mod image_gif;
mod image_glimpse;
mod image_jxl;
mod image_nms;
mod image_nms_combined;
mod image_projective;
mod image_resize_grad;
mod image_scale;
mod image_scale_grad;
mod image_webp;
mod io;
mod json_example;
mod layout;
mod lgamma_fdlibm;
mod libstdcxx_order;
mod linalg;
mod lmdb;
pub(crate) use lmdb::lmdb_removed;
pub mod lookup;
mod math;
mod mathx;
mod multinomial;
mod numeric;
mod order;
mod pad;
mod padded_raw;
mod parse_example;
mod pass_through;
mod quantized;
mod quantized_arith;
mod quantized_requantize;
mod quantized_resize;
mod ragged;
mod ragged_cross;
mod ragged_ops;
pub mod ragged_variant;
mod random;
pub(crate) mod random_index_shuffle;
mod random_samplers;
mod random_stateless;
mod random_truncated;
mod readers;
mod readers_v1;
mod reduce;
mod segment;
mod segment_grad;
mod sequence_batch;
mod sequence_example;
mod serialize;
mod shape;
mod signal;
mod slice;
mod sobol_sample;
mod sparse;
mod sparse_cross;
pub mod sparse_tensor;
mod special;
mod special_betainc;
mod special_fns;
mod special_gamma;
mod special_gamma_fns;
mod strings;
// The number syntax of TensorFlow's `safe_strto*`, which `CSVDataset` parses too.
pub(crate) use strings::{parse_f32, parse_float, parse_int};
mod strings_more;
mod strings_segment;
pub mod tensor_list;
mod tensor_list_bulk;
mod trig;
mod unicode;
mod variable;

/// A built kernel: input tensors in, output tensors out (flattened over the
/// op's output args, in order).
pub type Compute = Box<dyn Fn(Vec<Tensor>) -> Result<Vec<Tensor>> + Send + Sync>;

/// A kernel on values rather than tensors (resource ops, and the nodes a
/// [`crate::function::NodeCompiler`] builds): values in, values out.
/// Defined here, below the executor, because kernels build them and the
/// executor runs them.
pub type NodeFn = std::sync::Arc<
    dyn Fn(Vec<crate::value::Value>) -> Result<Vec<crate::value::Value>> + Send + Sync,
>;

/// An op's output args: names and tensor counts, in order.
pub type OutputArgs = Vec<(&'static str, usize)>;

/// One op of the kernel set.
pub struct KernelDef {
    /// TensorFlow's op name (`"AddV2"`).
    pub op: &'static str,
    /// The op's output args in order, with how many tensors each holds for
    /// this node (list outputs take their length from the attributes). Node
    /// inputs name outputs as `node:arg:index`.
    pub outputs: fn(&NodeAttrs) -> Result<OutputArgs>,
    /// Reads and checks the node's attributes, and returns the kernel.
    pub build: fn(&NodeAttrs) -> Result<Compute>,
}

/// An op on values rather than tensors: one that makes or reads a
/// resource ([`crate::value::Value::Table`]). Built like a [`KernelDef`],
/// run as a node of its own.
pub struct ResourceKernelDef {
    pub op: &'static str,
    pub outputs: fn(&NodeAttrs) -> Result<OutputArgs>,
    pub build: fn(&NodeAttrs) -> Result<NodeFn>,
}

/// The resource op `op`, if the set has it.
pub fn resource_lookup(op: &str) -> Option<&'static ResourceKernelDef> {
    RESOURCE_TABLES
        .iter()
        .flat_map(|t| t.iter())
        .find(|k| k.op == op)
}

/// The ops on values: lookup tables, TensorLists (one at a time and in
/// bulk), variables and the RNG states in them, legacy readers and queues.
const RESOURCE_TABLES: &[&[ResourceKernelDef]] = &[
    lookup::KERNELS,
    tensor_list::KERNELS,
    variable::KERNELS,
    generator::KERNELS,
    tensor_list_bulk::KERNELS,
    readers::KERNELS,
    readers_v1::KERNELS,
    lmdb::KERNELS,
];

/// Whether the kernel set runs `op` (on tensors or on resources).
pub fn runs(op: &str) -> bool {
    lookup(op).is_some() || resource_lookup(op).is_some()
}

/// `outputs` for ops with one output arg named `output`.
pub fn one_output(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("output", 1)])
}

/// `outputs` for ops with one output arg named `y` (unary math).
pub fn y_output(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("y", 1)])
}

/// `outputs` for ops with one output arg named `z` (binary math).
pub fn z_output(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("z", 1)])
}

fn table() -> &'static HashMap<&'static str, &'static KernelDef> {
    static TABLE: OnceLock<HashMap<&'static str, &'static KernelDef>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = HashMap::new();
        for set in ALL_TABLES {
            for k in *set {
                t.insert(k.op, k);
            }
        }
        t
    })
}

/// The kernel for `op`, if the set has it.
pub fn lookup(op: &str) -> Option<&'static KernelDef> {
    table().get(op).copied()
}

/// Every op the kernel set runs, sorted.
pub fn supported_ops() -> Vec<&'static str> {
    let mut ops: Vec<_> = table().keys().copied().collect();
    ops.extend(RESOURCE_TABLES.iter().flat_map(|t| t.iter()).map(|k| k.op));
    ops.sort_unstable();
    ops
}

/// Refuses an output of `elements` values of `dtype` larger than
/// [`crate::MAX_TENSOR_BYTES`] (strings count 16 bytes each, their size on
/// TensorFlow's heap), before anything is allocated.
pub fn check_size(what: &str, dtype: DType, elements: u64) -> Result<()> {
    let per = dtype.size().unwrap_or(16) as u128;
    if u128::from(elements) * per > crate::MAX_TENSOR_BYTES as u128 {
        return Err(Error::InvalidArgument(format!(
            "{what}: an output of {elements} {dtype} values exceeds the limit of {} bytes",
            crate::MAX_TENSOR_BYTES
        )));
    }
    Ok(())
}

/// Checks a kernel got exactly `n` inputs.
pub fn expect_inputs(op: &str, inputs: &[Tensor], n: usize) -> Result<()> {
    if inputs.len() != n {
        return Err(Error::InvalidArgument(format!(
            "{op}: expected {n} inputs, got {}",
            inputs.len()
        )));
    }
    Ok(())
}

/// Every tensor kernel table: the one list the lookup table is built from
/// and the check that no op is in two of them reads.
const ALL_TABLES: &[&[KernelDef]] = &[
    image_encode_jpeg::KERNELS,
    image_encode_png::KERNELS,
    image_gif::KERNELS,
    image_formats::KERNELS,
    math::KERNELS,
    complex::KERNELS,
    signal::KERNELS,
    reduce::KERNELS,
    shape::KERNELS,
    fill::KERNELS,
    pad::KERNELS,
    pass_through::KERNELS,
    slice::KERNELS,
    strings::KERNELS,
    strings_more::KERNELS,
    unicode::KERNELS,
    parse_example::KERNELS,
    decode_csv::KERNELS,
    image::KERNELS,
    image_area::KERNELS,
    image_bmp::KERNELS,
    image_color::KERNELS,
    image_crop::KERNELS,
    image_crop_grad::KERNELS,
    image_crop_grad_boxes::KERNELS,
    image_draw::KERNELS,
    image_glimpse::KERNELS,
    image_nms::KERNELS,
    image_nms_combined::KERNELS,
    image_projective::KERNELS,
    image_resize_grad::KERNELS,
    image_scale::KERNELS,
    image_scale_grad::KERNELS,
    ragged::KERNELS,
    ragged_ops::KERNELS,
    ragged_variant::KERNELS,
    ragged_cross::KERNELS,
    random::KERNELS,
    random_stateless::KERNELS,
    random_samplers::KERNELS,
    random_index_shuffle::KERNELS,
    random_truncated::KERNELS,
    multinomial::KERNELS,
    sparse::KERNELS,
    sparse_cross::KERNELS,
    sparse_tensor::KERNELS,
    sparse_tensor::tensors_map::KERNELS,
    io::KERNELS,
    assert::KERNELS,
    linalg::KERNELS,
    segment::KERNELS,
    order::KERNELS,
    einsum::KERNELS,
    serialize::KERNELS,
    trig::KERNELS,
    mathx::KERNELS,
    compressed::KERNELS,
    padded_raw::KERNELS,
    sequence_example::KERNELS,
    sequence_batch::KERNELS,
    json_example::KERNELS,
    file_write::KERNELS,
    bundle::KERNELS,
    bitcast::KERNELS,
    grads::KERNELS,
    special::KERNELS,
    special_gamma::KERNELS,
    counting::KERNELS,
    quantized::KERNELS,
    quantized_requantize::KERNELS,
    quantized_arith::KERNELS,
    quantized_resize::KERNELS,
    sobol_sample::KERNELS,
    bincount_batched::KERNELS,
    segment_grad::KERNELS,
    strings_segment::KERNELS,
];

#[cfg(test)]
#[test]
fn each_op_has_one_kernel() {
    let mut seen = std::collections::HashSet::new();
    for table in ALL_TABLES {
        for k in *table {
            assert!(seen.insert(k.op), "{} is in two kernel tables", k.op);
            assert!(
                !crate::function::EXECUTOR_OPS.contains(&k.op),
                "{} is an executor op",
                k.op
            );
        }
    }
    for k in RESOURCE_TABLES.iter().flat_map(|t| t.iter()) {
        assert!(seen.insert(k.op), "{} is in two kernel tables", k.op);
        assert!(!crate::function::EXECUTOR_OPS.contains(&k.op));
    }
    assert_eq!(seen.len(), supported_ops().len());
}

/// Test support: run one kernel as a node with the given attributes.
#[cfg(test)]
#[allow(dead_code)] // each kernel module's tests use some of them
pub(crate) mod testing {
    use std::collections::HashMap;

    use bytes::Bytes;
    use tfdata_core::{DType, Error, Result, Tensor};
    use tfdata_proto::tensorflow::attr_value::ListValue;
    use tfdata_proto::tensorflow::{AttrValue, NodeDef, attr_value};

    use crate::attrs::NodeAttrs;

    /// A `type` attribute.
    pub fn ty(d: DType) -> AttrValue {
        AttrValue {
            value: Some(attr_value::Value::Type(d.code())),
        }
    }
    pub fn int(i: i64) -> AttrValue {
        AttrValue {
            value: Some(attr_value::Value::I(i)),
        }
    }
    pub fn float(f: f32) -> AttrValue {
        AttrValue {
            value: Some(attr_value::Value::F(f)),
        }
    }
    pub fn boolean(b: bool) -> AttrValue {
        AttrValue {
            value: Some(attr_value::Value::B(b)),
        }
    }
    pub fn string(s: &str) -> AttrValue {
        AttrValue {
            value: Some(attr_value::Value::S(s.as_bytes().to_vec().into())),
        }
    }
    pub fn list(l: attr_value::ListValue) -> AttrValue {
        AttrValue {
            value: Some(attr_value::Value::List(l)),
        }
    }

    /// A `list(type)` attribute.
    pub fn types(t: &[DType]) -> AttrValue {
        list(ListValue {
            r#type: t.iter().map(|d| d.code()).collect(),
            ..Default::default()
        })
    }

    /// A string vector.
    pub fn svec(v: &[&[u8]]) -> Tensor {
        let n = v.len() as i64;
        Tensor::strings(
            v.iter().map(|s| Bytes::copy_from_slice(s)).collect(),
            vec![n],
        )
        .unwrap()
    }

    /// The message of an `InvalidArgument` error; panics on anything else.
    pub fn err(r: Result<Vec<Tensor>>) -> String {
        match r {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    pub fn node(op: &str, attrs: &[(&str, AttrValue)]) -> NodeDef {
        NodeDef {
            name: format!("test_{op}"),
            op: op.to_string(),
            attr: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<HashMap<_, _>>(),
            ..Default::default()
        }
    }

    /// Builds `op`'s kernel once, as the executor does, so calls share
    /// state (a stateful random op's generator).
    pub fn kernel(op: &str, attrs: &[(&str, AttrValue)]) -> super::Compute {
        let n: NodeDef = node(op, attrs);
        (super::lookup(op).unwrap().build)(&NodeAttrs::of(&n)).unwrap()
    }

    /// The mean and variance of samples.
    pub fn mean_var(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n)
    }

    /// A float32 tensor's values, widened.
    pub fn f32s(t: &Tensor) -> Vec<f64> {
        t.to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect()
    }

    /// Builds `op`'s kernel for a node with `attrs` and calls it once.
    pub fn run(op: &str, attrs: &[(&str, AttrValue)], inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let node = node(op, attrs);
        let kernel = super::lookup(op).unwrap_or_else(|| panic!("no kernel {op}"));
        let compute = (kernel.build)(&NodeAttrs::of(&node))?;
        compute(inputs)
    }
}
