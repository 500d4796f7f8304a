//! Elementwise math: arithmetic with broadcasting, comparisons, logic,
//! bitwise ops and unary functions, with TensorFlow 2.21's CPU semantics and
//! dtype lists (each op accepts exactly the dtypes TF registers a CPU kernel
//! for; float16 and bfloat16 are refused: tfdata has no half-precision math).
//!
//! Differences from TensorFlow, all deliberate:
//! - Float transcendental functions (`Exp`, `Log`, `Tanh`, `Sigmoid`, ...)
//!   use Rust's libm where TF uses Eigen's vectorized approximations on most
//!   elements: measured against TF on float32, Tanh and Sigmoid differ by
//!   up to 3 ulp, Expm1 by 2, Exp/Log/Log1p/Sin/Cos/Rsqrt by 1, Sqrt and
//!   Tan not at all (the tests hold it to 4).
//!
//! Matched on purpose though surprising: `Round` on int32/int64 returns
//! zeros in TF 2.21 (the Python `tf.round` never emits it for integers).

use bytes::Bytes;
use tfdata_core::{DType, Result, Tensor};

use super::numeric::{
    Elem, Plan, attr_dtype, binary, binary_into_owned, binary_owned, broadcast_shape,
    broadcast_shape_opt, buffer, check_attr_dtype, dispatch, expect_dtype, finish, invalid,
    out_buf, out_elements, unary, unary_raw, unsupported, values,
};
use super::{Compute, KernelDef, y_output, z_output};
use crate::attrs::NodeAttrs;

mod convert;
mod ops;
mod sums_and_clip;

use ops::{Arith, Bits, Float};
use sums_and_clip::{add_n, build_add_n, build_bias_add, clip, sum_output};

/// A kernel body dispatched on its first input's dtype, with the dtypes it
/// accepts (checked against the node's `T` when the kernel is built).
pub(super) struct Typed {
    pub(super) types: &'static [DType],
    /// The inputs are the kernel's to take: an elementwise op may write its
    /// output over an input it owns (see `numeric::binary_owned`).
    pub(super) run: fn(&str, &mut Vec<Tensor>) -> Result<Tensor>,
}

/// `typed!([Float, ...], f, extra args)`: a [`Typed`] calling
/// `f::<T>(op, extra..., inputs)`.
macro_rules! typed {
    ([$($d:ident),* $(,)?], $f:ident $(, $extra:expr)*) => {
        Typed {
            types: &[$(DType::$d),*],
            run: {
                // A Vec, not a slice: kernels take their inputs out of it.
                #[allow(clippy::ptr_arg)]
                fn run(op: &str, v: &mut Vec<Tensor>) -> Result<Tensor> {
                    let dtype = v.first().map_or(DType::Bool, Tensor::dtype);
                    dispatch!(dtype, op, [$($d),*], $f(op, $($extra,)* v))
                }
                run
            },
        }
    };
}

/// Builds a [`Typed`] kernel of `arity` inputs for a node whose dtype
/// attribute is `attr`.
pub(super) fn build_typed(
    attrs: &NodeAttrs,
    attr: &str,
    arity: usize,
    kernel: &'static Typed,
) -> Result<Compute> {
    let want = attr_dtype(attrs, attr)?;
    if let Some(d) = want
        && !kernel.types.contains(&d)
    {
        return Err(attrs.error(unsupported(attrs.op, d)));
    }
    let op = attrs.op.to_string();
    Ok(Box::new(move |mut inputs| {
        super::expect_inputs(&op, &inputs, arity)?;
        if let Some(first) = inputs.first() {
            check_attr_dtype(&op, want, first, 0)?;
        }
        Ok(vec![(kernel.run)(&op, &mut inputs)?])
    }))
}

fn two<'a>(op: &str, v: &'a [Tensor]) -> Result<(&'a Tensor, &'a Tensor)> {
    match v {
        [x, y] => Ok((x, y)),
        _ => Err(invalid(op, format!("expected 2 inputs, got {}", v.len()))),
    }
}

/// The two inputs, taken out of `v` (left empty).
fn owned_pair(op: &str, v: &mut Vec<Tensor>) -> Result<[Tensor; 2]> {
    std::mem::take(v)
        .try_into()
        .map_err(|v: Vec<Tensor>| invalid(op, format!("expected 2 inputs, got {}", v.len())))
}

fn one<'a>(op: &str, v: &'a [Tensor]) -> Result<&'a Tensor> {
    match v {
        [x] => Ok(x),
        _ => Err(invalid(op, format!("expected 1 input, got {}", v.len()))),
    }
}

#[derive(Clone, Copy)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    FloorMod,
    TruncDiv,
    TruncMod,
    Max,
    Min,
    Pow,
    SqDiff,
}

fn arith<T: Arith>(op: &str, b: Bin, v: &mut Vec<Tensor>) -> Result<Tensor> {
    let (x, y) = two(op, v)?;
    expect_dtype(op, x, 0, T::DTYPE)?;
    expect_dtype(op, y, 1, T::DTYPE)?;
    let shape = broadcast_shape(op, x.shape(), y.shape())?;
    let nonempty = shape.iter().all(|&d| d > 0);
    if T::INTEGER && nonempty {
        let yb = buffer(op, y)?;
        let dividing = matches!(
            b,
            Bin::Div | Bin::FloorDiv | Bin::FloorMod | Bin::TruncDiv | Bin::TruncMod
        );
        // Every element of y is used when the output is not empty.
        if dividing && values::<T>(yb).any(|d| d == T::ZERO) {
            // TensorFlow's TruncateDiv/TruncateMod fail with this Internal
            // error (their functors have no zero check of their own).
            if matches!(op, "TruncateDiv" | "TruncateMod") {
                return Err(tfdata_core::Error::Internal(format!(
                    "{op}: Unexpected error in binary operator (only integer div and mod should \
                     have errors): Integer division by zero"
                )));
            }
            return Err(invalid(op, "Integer division by zero"));
        }
        if matches!(b, Bin::Pow) && values::<T>(yb).any(T::is_negative) {
            return Err(invalid(
                op,
                "Integers to negative integer powers are not allowed",
            ));
        }
    }
    let [x, y] = owned_pair(op, v)?;
    match b {
        Bin::Add => binary_into_owned(op, x, y, shape, T::add),
        Bin::Sub => binary_into_owned(op, x, y, shape, T::sub),
        Bin::Mul => binary_into_owned(op, x, y, shape, T::mul),
        Bin::Div => binary_into_owned(op, x, y, shape, T::div),
        Bin::FloorDiv => binary_into_owned(op, x, y, shape, T::floor_div),
        Bin::FloorMod => binary_into_owned(op, x, y, shape, T::floor_mod),
        Bin::TruncDiv => binary_into_owned(op, x, y, shape, T::trunc_div),
        Bin::TruncMod => binary_into_owned(op, x, y, shape, T::trunc_mod),
        // Between 0.0 and -0.0 TensorFlow's result depends on the element's
        // place (Eigen's 8-wide packets take the second operand, the tail the
        // first); ours is always the first.
        Bin::Max => binary_into_owned(op, x, y, shape, T::maximum),
        Bin::Min => binary_into_owned(op, x, y, shape, T::minimum),
        Bin::Pow => binary_into_owned(op, x, y, shape, T::pow),
        Bin::SqDiff => binary_into_owned(op, x, y, shape, |a: T, b: T| {
            let d = a.sub(b);
            d.mul(d)
        }),
    }
}

fn div_no_nan<T: Float>(op: &str, v: &[Tensor]) -> Result<Tensor> {
    let (x, y) = two(op, v)?;
    binary(
        op,
        x,
        y,
        |a: T, b: T| if b == T::ZERO { T::ZERO } else { a.div(b) },
    )
}

/// `Add` also concatenates strings (`AddV2` does not).
fn add_or_concat(op: &str, v: &mut Vec<Tensor>) -> Result<Tensor> {
    let (x, y) = two(op, v)?;
    if x.dtype() != DType::String {
        return (ADD.run)(op, v);
    }
    expect_dtype(op, y, 1, DType::String)?;
    let shape = broadcast_shape(op, x.shape(), y.shape())?;
    let n = out_elements(op, DType::String, &shape)?;
    let (xs, ys) = (x.string_values()?, y.string_values()?);
    let mut out = Vec::with_capacity(n);
    Plan::new(&shape, [x.shape(), y.shape()]).walk(|[i, j]| {
        let (a, b) = (
            xs.get(i).map_or(&[][..], |s| s),
            ys.get(j).map_or(&[][..], |s| s),
        );
        let mut s = Vec::with_capacity(a.len() + b.len());
        s.extend_from_slice(a);
        s.extend_from_slice(b);
        out.push(Bytes::from(s));
    });
    Tensor::strings(out, shape)
}

#[derive(Clone, Copy)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

fn compare<T: Elem>(op: &str, c: Cmp, v: &[Tensor]) -> Result<Tensor> {
    let (x, y) = two(op, v)?;
    match c {
        Cmp::Eq => binary(op, x, y, |a: T, b: T| a == b),
        Cmp::Ne => binary(op, x, y, |a: T, b: T| a != b),
        Cmp::Lt => binary(op, x, y, |a: T, b: T| a < b),
        Cmp::Le => binary(op, x, y, |a: T, b: T| a <= b),
        Cmp::Gt => binary(op, x, y, |a: T, b: T| a > b),
        Cmp::Ge => binary(op, x, y, |a: T, b: T| a >= b),
    }
}

fn equality(attrs: &NodeAttrs, equal: bool) -> Result<Compute> {
    let strict = attrs.bool_or("incompatible_shape_error", true)?;
    let want = attr_dtype(attrs, "T")?;
    let kernel: &'static Typed = if equal { &EQUAL } else { &NOT_EQUAL };
    let op = attrs.op.to_string();
    Ok(Box::new(move |mut inputs| {
        super::expect_inputs(&op, &inputs, 2)?;
        let (x, y) = two(&op, &inputs)?;
        check_attr_dtype(&op, want, x, 0)?;
        expect_dtype(&op, y, 1, x.dtype())?;
        let shape = match broadcast_shape_opt(x.shape(), y.shape()) {
            Some(shape) => shape,
            // With incompatible_shape_error=false, unbroadcastable shapes
            // are simply unequal: a scalar answer.
            None if !strict => return Ok(vec![Tensor::scalar(!equal)]),
            None => broadcast_shape(&op, x.shape(), y.shape())?,
        };
        if x.dtype() == DType::String {
            let n = out_elements(&op, DType::Bool, &shape)?;
            let (xs, ys) = (x.string_values()?, y.string_values()?);
            let mut out = out_buf::<bool>(n);
            Plan::new(&shape, [x.shape(), y.shape()])
                .walk(|[i, j]| ((xs.get(i) == ys.get(j)) == equal).put(&mut out));
            return Ok(vec![finish(DType::Bool, shape, out)?]);
        }
        Ok(vec![(kernel.run)(&op, &mut inputs)?])
    }))
}

fn logical(op: &str, and: bool, v: &[Tensor]) -> Result<Tensor> {
    let (x, y) = two(op, v)?;
    if and {
        binary(op, x, y, |a: bool, b: bool| a && b)
    } else {
        binary(op, x, y, |a: bool, b: bool| a || b)
    }
}

#[derive(Clone, Copy)]
enum BitOp {
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

fn bitwise<T: Bits>(op: &str, b: BitOp, v: &mut Vec<Tensor>) -> Result<Tensor> {
    let [x, y] = owned_pair(op, v)?;
    match b {
        BitOp::And => binary_owned(op, x, y, T::and),
        BitOp::Or => binary_owned(op, x, y, T::or),
        BitOp::Xor => binary_owned(op, x, y, T::xor),
        BitOp::Shl => binary_owned(op, x, y, |a: T, n: T| a.shl(n.shift_count())),
        BitOp::Shr => binary_owned(op, x, y, |a: T, n: T| a.shr(n.shift_count())),
    }
}

#[derive(Clone, Copy)]
enum Un {
    Neg,
    Abs,
    Sign,
    Square,
    Round,
}

fn arith_unary<T: Arith>(op: &str, u: Un, v: &[Tensor]) -> Result<Tensor> {
    let x = one(op, v)?;
    match u {
        Un::Neg => unary_raw(op, x, T::neg),
        Un::Abs => unary_raw(op, x, T::abs),
        Un::Sign => unary(op, x, T::sign),
        Un::Square => unary(op, x, |a: T| a.mul(a)),
        Un::Round => unary(op, x, T::round),
    }
}

#[derive(Clone, Copy)]
enum FUn {
    Sqrt,
    Rsqrt,
    Exp,
    Expm1,
    Log,
    Log1p,
    Sin,
    Cos,
    Tan,
    Tanh,
    Sigmoid,
    Floor,
    Ceil,
    Reciprocal,
}

fn float_unary<T: Float>(op: &str, u: FUn, v: &[Tensor]) -> Result<Tensor> {
    let x = one(op, v)?;
    match u {
        FUn::Sqrt => unary(op, x, T::sqrt),
        FUn::Rsqrt => unary(op, x, |a: T| T::ONE.div(a.sqrt())),
        FUn::Exp => unary(op, x, T::exp),
        FUn::Expm1 => unary(op, x, T::exp_m1),
        FUn::Log => unary(op, x, T::ln),
        FUn::Log1p => unary(op, x, T::ln_1p),
        FUn::Sin => unary(op, x, T::sin),
        FUn::Cos => unary(op, x, T::cos),
        FUn::Tan => unary(op, x, T::tan),
        FUn::Tanh => unary(op, x, T::tanh),
        FUn::Sigmoid => unary(op, x, |a: T| T::ONE.div(T::ONE.add(a.neg().exp()))),
        FUn::Floor => unary(op, x, T::floor),
        FUn::Ceil => unary(op, x, T::ceil),
        FUn::Reciprocal => unary(op, x, |a: T| T::ONE.div(a)),
    }
}

#[derive(Clone, Copy)]
enum Class {
    Nan,
    Inf,
    Finite,
}

fn classify<T: Float>(op: &str, c: Class, v: &[Tensor]) -> Result<Tensor> {
    let x = one(op, v)?;
    match c {
        Class::Nan => unary(op, x, T::is_nan),
        Class::Inf => unary(op, x, T::is_infinite),
        Class::Finite => unary(op, x, T::is_finite),
    }
}

fn logical_not(op: &str, v: &[Tensor]) -> Result<Tensor> {
    unary(op, one(op, v)?, |a: bool| !a)
}

static ADD: Typed = typed!(
    [Float, Double, Int8, Int16, Int32, Int64, UInt8],
    arith,
    Bin::Add
);
static ADD_OR_CONCAT: Typed = Typed {
    types: &[
        DType::Float,
        DType::Double,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::String,
    ],
    run: add_or_concat,
};
static ADD_V2: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    arith,
    Bin::Add
);
static SUB: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    arith,
    Bin::Sub
);
static MUL: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    arith,
    Bin::Mul
);
static DIV: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    arith,
    Bin::Div
);
static REAL_DIV: Typed = typed!([Float, Double], arith, Bin::Div);
static DIV_NO_NAN: Typed = typed!([Float, Double], div_no_nan);
static FLOOR_DIV: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    arith,
    Bin::FloorDiv
);
static FLOOR_MOD: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    arith,
    Bin::FloorMod
);
static TRUNC_DIV: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    arith,
    Bin::TruncDiv
);
static TRUNC_MOD: Typed = typed!([Float, Double, Int32, Int64], arith, Bin::TruncMod);
static MAXIMUM: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    arith,
    Bin::Max
);
static MINIMUM: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    arith,
    Bin::Min
);
static POW: Typed = typed!([Float, Double, Int8, Int16, Int32, Int64], arith, Bin::Pow);
static SQ_DIFF: Typed = typed!([Float, Double, Int32, Int64], arith, Bin::SqDiff);
static EQUAL: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Bool
    ],
    compare,
    Cmp::Eq
);
static NOT_EQUAL: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Bool
    ],
    compare,
    Cmp::Ne
);
static LESS: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    compare,
    Cmp::Lt
);
static LESS_EQUAL: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    compare,
    Cmp::Le
);
static GREATER: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    compare,
    Cmp::Gt
);
static GREATER_EQUAL: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    compare,
    Cmp::Ge
);
static LOGICAL_AND: Typed = Typed {
    types: &[DType::Bool],
    run: |op, v| logical(op, true, v),
};
static LOGICAL_OR: Typed = Typed {
    types: &[DType::Bool],
    run: |op, v| logical(op, false, v),
};
static LOGICAL_NOT: Typed = Typed {
    types: &[DType::Bool],
    run: |op, v| logical_not(op, v),
};
static BIT_AND: Typed = typed!(
    [Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
    bitwise,
    BitOp::And
);
static BIT_OR: Typed = typed!(
    [Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
    bitwise,
    BitOp::Or
);
static BIT_XOR: Typed = typed!(
    [Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
    bitwise,
    BitOp::Xor
);
static SHL: Typed = typed!(
    [Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
    bitwise,
    BitOp::Shl
);
static SHR: Typed = typed!(
    [Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
    bitwise,
    BitOp::Shr
);
static NEG: Typed = typed!(
    [Float, Double, Int8, Int16, Int32, Int64],
    arith_unary,
    Un::Neg
);
static ABS: Typed = typed!(
    [Float, Double, Int8, Int16, Int32, Int64],
    arith_unary,
    Un::Abs
);
static SIGN: Typed = typed!(
    [Float, Double, Int8, Int16, Int32, Int64],
    arith_unary,
    Un::Sign
);
static SQUARE: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    arith_unary,
    Un::Square
);
static ROUND: Typed = typed!([Float, Double, Int32, Int64], arith_unary, Un::Round);
static RINT: Typed = typed!([Float, Double], arith_unary, Un::Round);
static SQRT: Typed = typed!([Float, Double], float_unary, FUn::Sqrt);
static RSQRT: Typed = typed!([Float, Double], float_unary, FUn::Rsqrt);
static EXP: Typed = typed!([Float, Double], float_unary, FUn::Exp);
static EXPM1: Typed = typed!([Float, Double], float_unary, FUn::Expm1);
static LOG: Typed = typed!([Float, Double], float_unary, FUn::Log);
static LOG1P: Typed = typed!([Float, Double], float_unary, FUn::Log1p);
static SIN: Typed = typed!([Float, Double], float_unary, FUn::Sin);
static COS: Typed = typed!([Float, Double], float_unary, FUn::Cos);
static TAN: Typed = typed!([Float, Double], float_unary, FUn::Tan);
static TANH: Typed = typed!([Float, Double], float_unary, FUn::Tanh);
static SIGMOID: Typed = typed!([Float, Double], float_unary, FUn::Sigmoid);
static FLOOR: Typed = typed!([Float, Double], float_unary, FUn::Floor);
static CEIL: Typed = typed!([Float, Double], float_unary, FUn::Ceil);
static RECIPROCAL: Typed = typed!([Float, Double], float_unary, FUn::Reciprocal);
static IS_NAN: Typed = typed!([Float, Double], classify, Class::Nan);
static IS_INF: Typed = typed!([Float, Double], classify, Class::Inf);
static IS_FINITE: Typed = typed!([Float, Double], classify, Class::Finite);
static CLIP: Typed = typed!(
    [Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16],
    clip
);
static ADD_N: Typed = typed!(
    [
        Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ],
    add_n
);

/// A table entry for a [`Typed`] kernel whose dtype attribute is `T`.
macro_rules! entry {
    ($op:literal, $outputs:expr, $arity:literal, $kernel:expr) => {
        KernelDef {
            op: $op,
            outputs: $outputs,
            build: |a| build_typed(a, "T", $arity, &$kernel),
        }
    };
}

/// A binary op whose complex form `super::complex` computes.
macro_rules! complex_or {
    ($op:literal, $kernel:expr) => {
        KernelDef {
            op: $op,
            outputs: z_output,
            build: |a| match attr_dtype(a, "T")? {
                Some(DType::Complex64 | DType::Complex128) => super::complex::build_arith(a),
                _ => build_typed(a, "T", 2, &$kernel),
            },
        }
    };
}

pub(super) const KERNELS: &[KernelDef] = &[
    entry!("Add", z_output, 2, ADD_OR_CONCAT),
    complex_or!("AddV2", ADD_V2),
    complex_or!("Sub", SUB),
    complex_or!("Mul", MUL),
    entry!("Div", z_output, 2, DIV),
    entry!("RealDiv", z_output, 2, REAL_DIV),
    entry!("DivNoNan", z_output, 2, DIV_NO_NAN),
    entry!("FloorDiv", z_output, 2, FLOOR_DIV),
    entry!("FloorMod", z_output, 2, FLOOR_MOD),
    entry!("TruncateDiv", z_output, 2, TRUNC_DIV),
    entry!("TruncateMod", z_output, 2, TRUNC_MOD),
    entry!("Mod", z_output, 2, TRUNC_MOD),
    entry!("Maximum", z_output, 2, MAXIMUM),
    entry!("Minimum", z_output, 2, MINIMUM),
    entry!("Pow", z_output, 2, POW),
    entry!("SquaredDifference", z_output, 2, SQ_DIFF),
    KernelDef {
        op: "Equal",
        outputs: z_output,
        build: |a| equality(a, true),
    },
    KernelDef {
        op: "NotEqual",
        outputs: z_output,
        build: |a| equality(a, false),
    },
    entry!("Less", z_output, 2, LESS),
    entry!("LessEqual", z_output, 2, LESS_EQUAL),
    entry!("Greater", z_output, 2, GREATER),
    entry!("GreaterEqual", z_output, 2, GREATER_EQUAL),
    KernelDef {
        op: "LogicalAnd",
        outputs: z_output,
        build: |a| build_typed(a, "T", 2, &LOGICAL_AND),
    },
    KernelDef {
        op: "LogicalOr",
        outputs: z_output,
        build: |a| build_typed(a, "T", 2, &LOGICAL_OR),
    },
    KernelDef {
        op: "LogicalNot",
        outputs: y_output,
        build: |a| build_typed(a, "T", 1, &LOGICAL_NOT),
    },
    entry!("BitwiseAnd", z_output, 2, BIT_AND),
    entry!("BitwiseOr", z_output, 2, BIT_OR),
    entry!("BitwiseXor", z_output, 2, BIT_XOR),
    entry!("LeftShift", z_output, 2, SHL),
    entry!("RightShift", z_output, 2, SHR),
    entry!("Neg", y_output, 1, NEG),
    entry!("Abs", y_output, 1, ABS),
    entry!("Sign", y_output, 1, SIGN),
    entry!("Square", y_output, 1, SQUARE),
    entry!("Round", y_output, 1, ROUND),
    entry!("Rint", y_output, 1, RINT),
    entry!("Sqrt", y_output, 1, SQRT),
    entry!("Rsqrt", y_output, 1, RSQRT),
    entry!("Exp", y_output, 1, EXP),
    entry!("Expm1", y_output, 1, EXPM1),
    entry!("Log", y_output, 1, LOG),
    entry!("Log1p", y_output, 1, LOG1P),
    entry!("Sin", y_output, 1, SIN),
    entry!("Cos", y_output, 1, COS),
    entry!("Tan", y_output, 1, TAN),
    entry!("Tanh", y_output, 1, TANH),
    entry!("Sigmoid", y_output, 1, SIGMOID),
    entry!("Floor", y_output, 1, FLOOR),
    entry!("Ceil", y_output, 1, CEIL),
    entry!("Reciprocal", y_output, 1, RECIPROCAL),
    entry!("Inv", y_output, 1, RECIPROCAL),
    entry!("IsNan", y_output, 1, IS_NAN),
    entry!("IsInf", y_output, 1, IS_INF),
    entry!("IsFinite", y_output, 1, IS_FINITE),
    entry!("ClipByValue", super::one_output, 3, CLIP),
    KernelDef {
        op: "Cast",
        outputs: y_output,
        build: convert::build_cast,
    },
    KernelDef {
        op: "Select",
        outputs: super::one_output,
        build: |a| convert::build_select(a, false),
    },
    KernelDef {
        op: "SelectV2",
        outputs: super::one_output,
        build: |a| convert::build_select(a, true),
    },
    KernelDef {
        op: "AddN",
        outputs: sum_output,
        build: build_add_n,
    },
    KernelDef {
        op: "BiasAdd",
        outputs: super::one_output,
        build: build_bias_add,
    },
];

#[cfg(test)]
mod tests {
    use super::super::testing::{boolean, run, ty};
    use tfdata_core::{DType, Tensor};

    pub(super) fn t<T: tfdata_core::NativeType>(v: &[T], shape: &[i64]) -> Tensor {
        Tensor::from_slice(v, shape.to_vec()).unwrap()
    }

    pub(super) fn one(op: &str, inputs: Vec<Tensor>) -> Tensor {
        run(op, &[], inputs).unwrap().remove(0)
    }

    pub(super) fn err(op: &str, inputs: Vec<Tensor>) -> String {
        run(op, &[], inputs).unwrap_err().to_string()
    }

    // Expected values from TF 2.21 `tf.raw_ops`.
    #[test]
    fn broadcasting_matches_numpy() {
        let x = t(&[1i32, 2, 3], &[1, 3]);
        let y = t(&[1i32, 2], &[2, 1]);
        let z = one("AddV2", vec![x, y]);
        assert_eq!(z.shape(), &[2, 3]);
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![2, 3, 4, 3, 4, 5]);
        // [2,3,1] + [4,2,1,5] -> [4,2,3,5], all ones + ones.
        let z = one(
            "AddV2",
            vec![t(&[1i32; 6], &[2, 3, 1]), t(&[1i32; 40], &[4, 2, 1, 5])],
        );
        assert_eq!(z.shape(), &[4, 2, 3, 5]);
        assert!(z.to_vec::<i32>().unwrap().iter().all(|&v| v == 2));
        // A row vector against a matrix, and a middle broadcast.
        let m = t(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let z = one("Mul", vec![m.clone(), t(&[10.0f32, 100.0, 1000.0], &[3])]);
        assert_eq!(
            z.to_vec::<f32>().unwrap(),
            vec![10.0, 200.0, 3000.0, 40.0, 500.0, 6000.0]
        );
        let z = one(
            "Sub",
            vec![
                t(&[1i64, 2, 3, 4, 5, 6, 7, 8], &[2, 2, 2]),
                t(&[1i64, 10], &[2, 1]),
            ],
        );
        assert_eq!(z.to_vec::<i64>().unwrap(), vec![0, 1, -7, -6, 4, 5, -3, -2]);
        // Empty outputs.
        let z = one("AddV2", vec![t::<i32>(&[], &[2, 0]), t(&[1i32], &[1, 1])]);
        assert_eq!(z.shape(), &[2, 0]);
        assert!(
            err(
                "AddV2",
                vec![t::<i32>(&[], &[2, 0]), t(&[1i32; 6], &[2, 3])]
            )
            .contains("Incompatible shapes: [2,0] vs. [2,3]")
        );
        assert!(
            err("Add", vec![t(&[1i32, 2], &[2]), t(&[1i32, 2, 3], &[3])])
                .contains("Add: Incompatible shapes: [2] vs. [3]")
        );
        // Mixed dtypes are refused.
        assert!(err("AddV2", vec![t(&[1i32], &[1]), t(&[1i64], &[1])]).contains("int64"));
        // Overflow wraps.
        let z = one(
            "AddV2",
            vec![Tensor::scalar(i32::MAX), Tensor::scalar(1i32)],
        );
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![i32::MIN]);
    }

    fn buffer_ptr(t: &Tensor) -> *const u8 {
        match t.data() {
            tfdata_core::tensor::TensorData::Buffer(b) => b.as_ptr(),
            tfdata_core::tensor::TensorData::Strings(_) => std::ptr::null(),
        }
    }

    /// An input the kernel alone holds, with the output's dtype and shape,
    /// becomes the output (same buffer); an input held elsewhere is left as
    /// it was. Both ways give the same values, for every broadcast form the
    /// in-place path takes.
    #[test]
    fn owned_inputs_become_the_output_and_shared_ones_are_untouched() {
        let x = || {
            t(
                &(0..12).map(|v| v * 977 - 3000).collect::<Vec<i64>>(),
                &[3, 4],
            )
        };
        let ys = [
            t(&(0..12).map(|v| v % 5 + 1).collect::<Vec<i64>>(), &[3, 4]),
            Tensor::scalar(3i64),
            t(&[1i64, 2, 3, 4], &[4]),
            t(&[5i64, 6, 7], &[3, 1]),
        ];
        for op in [
            "AddV2",
            "Sub",
            "Mul",
            "Maximum",
            "BitwiseXor",
            "BitwiseAnd",
            "RightShift",
        ] {
            for y in &ys {
                let held = x();
                let fresh = one(op, vec![held.clone(), y.clone()]);
                assert_eq!(held, x(), "{op}: a shared input was written");
                assert_ne!(buffer_ptr(&fresh), buffer_ptr(&held), "{op}");
                let owned = x();
                let at = buffer_ptr(&owned);
                let reused = one(op, vec![owned, y.clone()]);
                assert_eq!(reused, fresh, "{op} with y of shape {:?}", y.shape());
                assert_eq!(
                    buffer_ptr(&reused),
                    at,
                    "{op}: the owned input was not reused"
                );
            }
            // A scalar first operand: the second input is written over.
            let y = t(&(0..12).map(|v| v % 5 + 1).collect::<Vec<i64>>(), &[3, 4]);
            let at = buffer_ptr(&y);
            let fresh = one(op, vec![Tensor::scalar(7i64), y.clone()]);
            let reused = one(op, vec![Tensor::scalar(7i64), y]);
            assert_eq!(reused, fresh, "{op}");
            assert_eq!(buffer_ptr(&reused), at, "{op}");
        }
        // A comparison changes the dtype: always a fresh output.
        let z = one("Less", vec![x(), Tensor::scalar(0i64)]);
        assert_eq!(z.dtype(), DType::Bool);
    }

    #[test]
    fn add_concatenates_strings() {
        let x = Tensor::strings(vec!["a".into(), "b".into()], vec![2]).unwrap();
        let z = one("Add", vec![x, Tensor::scalar_string("x")]);
        assert_eq!(z.string_values().unwrap(), &["ax", "bx"]);
        assert!(
            run(
                "AddV2",
                &[],
                vec![Tensor::scalar_string("a"), Tensor::scalar_string("b")]
            )
            .is_err()
        );
    }

    #[test]
    fn integer_division_rules() {
        let x = || t(&[7i32, -7, 7, -7], &[4]);
        let y = || t(&[2i32, 2, -2, -2], &[4]);
        let cases: [(&str, [i32; 4]); 6] = [
            ("Div", [3, -3, -3, 3]),
            ("FloorDiv", [3, -4, -4, 3]),
            ("FloorMod", [1, 1, -1, -1]),
            ("TruncateDiv", [3, -3, -3, 3]),
            ("TruncateMod", [1, -1, 1, -1]),
            ("Mod", [1, -1, 1, -1]),
        ];
        for (op, want) in cases {
            assert_eq!(
                one(op, vec![x(), y()]).to_vec::<i32>().unwrap(),
                want,
                "{op}"
            );
            let e = err(op, vec![t(&[7i32, 1], &[2]), t(&[0i32, 1], &[2])]);
            assert!(
                e.contains(op) && e.contains("Integer division by zero"),
                "{e}"
            );
            // MIN / -1 wraps, MIN % -1 is 0.
            let q = one(op, vec![t(&[i32::MIN], &[1]), t(&[-1i32], &[1])]);
            let want = if op.contains("Mod") { 0 } else { i32::MIN };
            assert_eq!(q.to_vec::<i32>().unwrap(), vec![want], "{op}");
        }
        // An empty output divides nothing.
        assert_eq!(
            one("Div", vec![t::<i32>(&[], &[0, 2]), t(&[0i32, 0], &[1, 2])]).shape(),
            &[0, 2]
        );
        assert_eq!(
            one(
                "FloorDiv",
                vec![t(&[-5i8, -128], &[2]), t(&[3i8, -1], &[2])]
            )
            .to_vec::<i8>()
            .unwrap(),
            vec![-2, -128]
        );
        assert_eq!(
            one(
                "FloorMod",
                vec![t(&[-5i8, -1], &[2]), t(&[3i8, -128], &[2])]
            )
            .to_vec::<i8>()
            .unwrap(),
            vec![1, -1]
        );
        assert_eq!(
            one("FloorDiv", vec![t(&[200u8], &[1]), t(&[3u8], &[1])])
                .to_vec::<u8>()
                .unwrap(),
            vec![66]
        );
        assert!(run("Mod", &[], vec![t(&[1u8], &[1]), t(&[1u8], &[1])]).is_err());
    }

    #[test]
    fn float_division_rules() {
        let x = || {
            t(
                &[7.5f32, -7.5, 7.5, -7.5, 1.0, 0.0, -1.0, f32::INFINITY, 5.0],
                &[9],
            )
        };
        let y = || {
            t(
                &[2.0f32, 2.0, -2.0, -2.0, 0.0, 0.0, 0.0, 3.0, f32::INFINITY],
                &[9],
            )
        };
        let nan = f32::NAN;
        let inf = f32::INFINITY;
        let cases: [(&str, [f32; 9]); 5] = [
            ("Div", [3.75, -3.75, -3.75, 3.75, inf, nan, -inf, inf, 0.0]),
            ("FloorDiv", [3.0, -4.0, -4.0, 3.0, inf, nan, -inf, inf, 0.0]),
            ("FloorMod", [1.5, 0.5, -0.5, -1.5, nan, nan, nan, nan, 5.0]),
            (
                "TruncateDiv",
                [3.0, -3.0, -3.0, 3.0, inf, nan, -inf, inf, 0.0],
            ),
            (
                "TruncateMod",
                [1.5, -1.5, 1.5, -1.5, nan, nan, nan, nan, 5.0],
            ),
        ];
        for (op, want) in cases {
            let got = one(op, vec![x(), y()]).to_vec::<f32>().unwrap();
            for (g, w) in got.iter().zip(want) {
                assert!(
                    g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                    "{op}: {got:?}"
                );
            }
        }
        let got = one(
            "FloorMod",
            vec![
                t(&[-5.0f32, 5.0, -5.0, 5.0, -0.0], &[5]),
                t(&[inf, -inf, -inf, inf, 3.0], &[5]),
            ],
        )
        .to_vec::<f32>()
        .unwrap();
        assert_eq!(got, vec![inf, -inf, -5.0, 5.0, -0.0]);
        assert!(got[4].is_sign_negative());
        let got = one(
            "DivNoNan",
            vec![
                t(&[1.0f32, -1.0, nan, inf, nan], &[5]),
                t(&[0.0f32, 0.0, 0.0, 2.0, nan], &[5]),
            ],
        )
        .to_vec::<f32>()
        .unwrap();
        assert_eq!(&got[..4], &[0.0, 0.0, 0.0, inf]);
        assert!(got[4].is_nan());
        assert!(
            run(
                "RealDiv",
                &[],
                vec![Tensor::scalar(1i32), Tensor::scalar(1i32)]
            )
            .is_err()
        );
    }

    #[test]
    fn max_min_propagate_nan_and_keep_the_first_zero() {
        let x = || t(&[f32::NAN, 1.0, f32::NAN, 0.0, -0.0], &[5]);
        let y = || t(&[1.0f32, f32::NAN, f32::NAN, -0.0, 0.0], &[5]);
        for op in ["Maximum", "Minimum"] {
            let z = one(op, vec![x(), y()]).to_vec::<f32>().unwrap();
            assert!(z[..3].iter().all(|v| v.is_nan()), "{op}");
            assert!(z[3].is_sign_positive() && z[4].is_sign_negative(), "{op}");
        }
        let z = one("Maximum", vec![t(&[3u8, 200], &[2]), Tensor::scalar(100u8)]);
        assert_eq!(z.to_vec::<u8>().unwrap(), vec![100, 200]);
    }

    #[test]
    fn pow_and_squared_difference() {
        let z = one(
            "Pow",
            vec![
                t(&[2i32, -2, 3, 0, 2], &[5]),
                t(&[10i32, 3, 0, 0, 31], &[5]),
            ],
        );
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![1024, -8, 1, 1, i32::MIN]);
        let z = one("Pow", vec![t(&[2i8, -2], &[2]), t(&[7i8, 7], &[2])]);
        assert_eq!(z.to_vec::<i8>().unwrap(), vec![-128, -128]);
        assert!(
            err("Pow", vec![t(&[1i32], &[1]), t(&[-1i32], &[1])])
                .contains("Integers to negative integer powers are not allowed")
        );
        let z = one(
            "Pow",
            vec![
                t(&[2.0f32, -2.0, 0.0, f32::NAN, 1.0], &[5]),
                t(&[0.5f32, 0.5, -1.0, 0.0, f32::NAN], &[5]),
            ],
        )
        .to_vec::<f32>()
        .unwrap();
        assert_eq!(z[0], std::f32::consts::SQRT_2);
        assert!(z[1].is_nan());
        assert_eq!(&z[2..], &[f32::INFINITY, 1.0, 1.0]);
        let z = one(
            "SquaredDifference",
            vec![t(&[1i32, 5], &[2]), t(&[4i32, 2], &[2])],
        );
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![9, 9]);
    }

    #[test]
    fn unary_ops() {
        let z = one("Neg", vec![t(&[i32::MIN, 5], &[2])]);
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![i32::MIN, -5]);
        let z = one("Abs", vec![t(&[i32::MIN, -5], &[2])]);
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![i32::MIN, 5]);
        let z = one(
            "Sign",
            vec![t(&[-3.0f32, 0.0, -0.0, f32::NAN, f32::INFINITY], &[5])],
        )
        .to_vec::<f32>()
        .unwrap();
        assert_eq!(z[..3], [-1.0, 0.0, 0.0]);
        assert!(z[2].is_sign_positive() && z[3].is_nan() && z[4] == 1.0);
        assert_eq!(
            one("Sign", vec![t(&[-3i64, 0, 5], &[3])])
                .to_vec::<i64>()
                .unwrap(),
            vec![-1, 0, 1]
        );
        assert_eq!(
            one("Square", vec![t(&[20u8, 200], &[2])])
                .to_vec::<u8>()
                .unwrap(),
            vec![144, 64]
        );
        assert!(run("Neg", &[], vec![Tensor::scalar(1u8)]).is_err());
        let x = [0.5f32, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, -0.2];
        for op in ["Round", "Rint"] {
            let z = one(op, vec![t(&x, &[9])]).to_vec::<f32>().unwrap();
            assert_eq!(
                z,
                vec![0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 2.0, 3.0, -0.0],
                "{op}"
            );
            assert!(z[8].is_sign_negative());
        }
        // TF 2.21's integer Round kernel returns zeros.
        assert_eq!(
            one("Round", vec![t(&[3i32, 4, -5], &[3])])
                .to_vec::<i32>()
                .unwrap(),
            vec![0, 0, 0]
        );
        let z = one("Reciprocal", vec![t(&[0.0f32, -0.0, 2.0], &[3])])
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(z, vec![f32::INFINITY, f32::NEG_INFINITY, 0.5]);
        let z = one("Rsqrt", vec![t(&[0.0f32, -1.0, 4.0], &[3])])
            .to_vec::<f32>()
            .unwrap();
        assert!(z[0] == f32::INFINITY && z[1].is_nan() && z[2] == 0.5);
        let z = one("Sqrt", vec![t(&[-0.0f32], &[1])])
            .to_vec::<f32>()
            .unwrap();
        assert!(z[0] == 0.0 && z[0].is_sign_negative());
        let z = one("Floor", vec![t(&[-0.5f32, 0.5], &[2])])
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(z, vec![-1.0, 0.0]);
        let z = one("Ceil", vec![t(&[-0.5f32, 0.5], &[2])])
            .to_vec::<f32>()
            .unwrap();
        assert!(z[0] == 0.0 && z[0].is_sign_negative() && z[1] == 1.0);
        let z = one("Log1p", vec![t(&[-1.0f32, -2.0], &[2])])
            .to_vec::<f32>()
            .unwrap();
        assert!(z[0] == f32::NEG_INFINITY && z[1].is_nan());
        let z = one("Sigmoid", vec![t(&[-100.0f32, 0.0, 100.0], &[3])])
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(z, vec![0.0, 0.5, 1.0]);
        let z = one("IsNan", vec![t(&[f32::NAN, 1.0, f32::INFINITY], &[3])]);
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![true, false, false]);
        let z = one("IsInf", vec![t(&[f32::NAN, 1.0, f32::NEG_INFINITY], &[3])]);
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![false, false, true]);
        let z = one(
            "IsFinite",
            vec![t(&[f64::NAN, 1.0, f64::NEG_INFINITY], &[3])],
        );
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![false, true, false]);
        assert!(err("Exp", vec![Tensor::scalar(1i32)]).contains("int32"));
        // Half precision is refused by name.
        let half = Tensor::new(
            DType::Half,
            vec![1],
            tfdata_core::tensor::TensorData::Buffer(vec![0, 60].into()),
        )
        .unwrap();
        assert!(err("Exp", vec![half]).contains("float16"));
    }

    #[test]
    fn comparisons_and_logic() {
        let z = one(
            "Equal",
            vec![t(&[f32::NAN, 1.0], &[2]), t(&[f32::NAN, 1.0], &[2])],
        );
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![false, true]);
        let z = one(
            "NotEqual",
            vec![t(&[f32::NAN, 1.0], &[2]), t(&[f32::NAN, 1.0], &[2])],
        );
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![true, false]);
        let lax = [("incompatible_shape_error", boolean(false))];
        let z = run(
            "Equal",
            &lax,
            vec![t(&[1i32, 2], &[2]), t(&[1i32, 2, 3], &[3])],
        )
        .unwrap()
        .remove(0);
        assert_eq!(
            (z.shape(), z.to_vec::<bool>().unwrap()),
            (&[][..], vec![false])
        );
        let z = run(
            "NotEqual",
            &lax,
            vec![t(&[1i32, 2], &[2]), t(&[1i32, 2, 3], &[3])],
        )
        .unwrap()
        .remove(0);
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![true]);
        let z = run(
            "Equal",
            &lax,
            vec![t(&[1i32, 2], &[1, 2]), t(&[1i32], &[1])],
        )
        .unwrap()
        .remove(0);
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![true, false]);
        assert!(
            err("Equal", vec![t(&[1i32, 2], &[2]), t(&[1i32, 2, 3], &[3])])
                .contains("Incompatible shapes: [2] vs. [3]")
        );
        let s = Tensor::strings(vec!["a".into(), "b".into()], vec![2]).unwrap();
        let z = one("Equal", vec![s.clone(), Tensor::scalar_string("a")]);
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![true, false]);
        let z = one("NotEqual", vec![s, Tensor::scalar_string("a")]);
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![false, true]);
        let z = one("Equal", vec![t(&[true, false], &[2]), Tensor::scalar(true)]);
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![true, false]);
        let z = one(
            "Less",
            vec![t(&[f32::NAN, 1.0], &[2]), t(&[1.0f32, f32::NAN], &[2])],
        );
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![false, false]);
        let z = one(
            "GreaterEqual",
            vec![t(&[1u64, 5, 9], &[3]), Tensor::scalar(5u64)],
        );
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![false, true, true]);
        assert!(
            run(
                "Less",
                &[],
                vec![Tensor::scalar(true), Tensor::scalar(false)]
            )
            .is_err()
        );
        let z = one(
            "LogicalAnd",
            vec![t(&[true, false], &[2]), Tensor::scalar(true)],
        );
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![true, false]);
        let z = one(
            "LogicalOr",
            vec![t(&[true, false], &[2]), Tensor::scalar(false)],
        );
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![true, false]);
        let z = one("LogicalNot", vec![t(&[true, false], &[2])]);
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![false, true]);
    }

    #[test]
    fn bitwise_and_shifts_clamp_like_tf() {
        let z = one(
            "LeftShift",
            vec![
                t(&[1i32, 1, 1, 1, -1], &[5]),
                t(&[3i32, 31, 32, -1, 100], &[5]),
            ],
        );
        assert_eq!(
            z.to_vec::<i32>().unwrap(),
            vec![8, i32::MIN, i32::MIN, 1, i32::MIN]
        );
        let z = one(
            "RightShift",
            vec![
                t(&[-16i32, 16, -16, 16, -1], &[5]),
                t(&[2i32, 31, 32, -1, 100], &[5]),
            ],
        );
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![-4, 0, -1, 16, -1]);
        let z = one("LeftShift", vec![t(&[1u8, 255], &[2]), t(&[7u8, 8], &[2])]);
        assert_eq!(z.to_vec::<u8>().unwrap(), vec![128, 128]);
        let z = one(
            "RightShift",
            vec![t(&[-128i8, 64], &[2]), t(&[9i8, -3], &[2])],
        );
        assert_eq!(z.to_vec::<i8>().unwrap(), vec![-1, 64]);
        let z = one(
            "BitwiseXor",
            vec![t(&[0b1100u16], &[1]), t(&[0b1010u16], &[1])],
        );
        assert_eq!(z.to_vec::<u16>().unwrap(), vec![0b0110]);
        let z = one("BitwiseAnd", vec![t(&[-1i64], &[1]), t(&[6i64], &[1])]);
        assert_eq!(z.to_vec::<i64>().unwrap(), vec![6]);
        let z = one("BitwiseOr", vec![t(&[1u32], &[1]), t(&[6u32], &[1])]);
        assert_eq!(z.to_vec::<u32>().unwrap(), vec![7]);
        assert!(
            run(
                "BitwiseAnd",
                &[],
                vec![Tensor::scalar(1.0f32), Tensor::scalar(1.0f32)]
            )
            .is_err()
        );
    }

    fn cast(x: Tensor, dst: DType) -> Tensor {
        let attrs = [("SrcT", ty(x.dtype())), ("DstT", ty(dst))];
        run("Cast", &attrs, vec![x]).unwrap().remove(0)
    }

    #[test]
    fn casts_follow_tf_on_x86() {
        let nan = f32::NAN;
        let fv = [
            nan,
            f32::INFINITY,
            f32::NEG_INFINITY,
            3e9,
            -3e9,
            -2.7,
            -1.0,
            1e20,
            -1e20,
            4294967296.0,
            5e9,
            2147483648.0,
        ];
        // One element at a time is TF's scalar path.
        let scalar = |dst| -> Vec<i64> {
            fv.iter()
                .map(|&v| {
                    let c = cast(Tensor::scalar(v), dst);
                    match dst {
                        DType::UInt8 => i64::from(c.to_vec::<u8>().unwrap()[0]),
                        DType::UInt32 => i64::from(c.to_vec::<u32>().unwrap()[0]),
                        DType::Int32 => i64::from(c.to_vec::<i32>().unwrap()[0]),
                        _ => c.to_vec::<i64>().unwrap()[0],
                    }
                })
                .collect()
        };
        let m = i64::from(i32::MIN);
        assert_eq!(
            scalar(DType::Int32),
            vec![m, m, m, m, m, -2, -1, m, m, m, m, m]
        );
        let l = i64::MIN;
        assert_eq!(
            scalar(DType::Int64),
            vec![
                l,
                l,
                l,
                3_000_000_000,
                -3_000_000_000,
                -2,
                -1,
                l,
                l,
                4294967296,
                5_000_000_000,
                2147483648
            ]
        );
        assert_eq!(
            scalar(DType::UInt8),
            vec![0, 0, 0, 0, 0, 254, 255, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            scalar(DType::UInt32),
            vec![
                0,
                0,
                0,
                3_000_000_000,
                1294967296,
                4294967294,
                4294967295,
                0,
                0,
                0,
                705032704,
                2147483648
            ]
        );
        let u = cast(t(&fv, &[12]), DType::UInt64).to_vec::<u64>().unwrap();
        let h = 1u64 << 63;
        assert_eq!(
            u,
            vec![
                h,
                h,
                h,
                3_000_000_000,
                18446744070709551616,
                18446744073709551614,
                u64::MAX,
                h,
                h,
                4294967296,
                5_000_000_000,
                2147483648
            ]
        );
        // Whole packets saturate (u8: 32 floats), the tail wraps.
        let z = cast(t(&[-1.0f32; 37], &[37]), DType::UInt8)
            .to_vec::<u8>()
            .unwrap();
        assert!(z[..32].iter().all(|&v| v == 0) && z[32..].iter().all(|&v| v == 255));
        let z = cast(t(&[300.0f64; 17], &[17]), DType::UInt8)
            .to_vec::<u8>()
            .unwrap();
        assert!(z[..16].iter().all(|&v| v == 255) && z[16] == 44);
        let z = cast(t(&[nan; 32], &[32]), DType::Int8)
            .to_vec::<i8>()
            .unwrap();
        assert!(z.iter().all(|&v| v == -128));
        let packet: Vec<u32> = fv
            .iter()
            .map(|&v| {
                cast(t(&[v; 8], &[8]), DType::UInt32)
                    .to_vec::<u32>()
                    .unwrap()[0]
            })
            .collect();
        let p = 2147483648u32;
        assert_eq!(
            packet,
            vec![
                p,
                p,
                p,
                3_000_000_000,
                p,
                4294967294,
                4294967295,
                p,
                p,
                p,
                p,
                p
            ]
        );
        let z = cast(t(&[40000.0f32; 32], &[32]), DType::Int16)
            .to_vec::<i16>()
            .unwrap();
        assert!(z.iter().all(|&v| v == i16::MAX));
        let z = cast(Tensor::scalar(40000.0f32), DType::Int16)
            .to_vec::<i16>()
            .unwrap();
        assert_eq!(z, vec![-25536]);
        // Integer casts wrap, to float they round to nearest, to bool test != 0.
        let z = cast(
            t(&[-1i64, 300, -129, 70000, (1 << 40) + 5], &[5]),
            DType::UInt8,
        );
        assert_eq!(z.to_vec::<u8>().unwrap(), vec![255, 44, 127, 112, 5]);
        let z = cast(t(&[i64::MAX, (1 << 24) + 1], &[2]), DType::Float);
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![9.223372e18, 16777216.0]);
        let z = cast(t(&[-1i64, 300, 0], &[3]), DType::Bool);
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![true, true, false]);
        let z = cast(t(&[nan, 0.0, -0.0], &[3]), DType::Bool);
        assert_eq!(z.to_vec::<bool>().unwrap(), vec![true, false, false]);
        let z = cast(t(&[true, false], &[2]), DType::Float);
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![1.0, 0.0]);
        // float64 -> float32 rounds to nearest, or toward zero with Truncate.
        let x = t(
            &[
                1.0000001f64,
                1e300,
                -1e300,
                3.4028235677973366e38,
                1.0000001788139343,
            ],
            &[5],
        );
        assert_eq!(
            cast(x.clone(), DType::Float).to_vec::<f32>().unwrap(),
            vec![
                1.0000001,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::INFINITY,
                1.0000002
            ]
        );
        let attrs = [
            ("SrcT", ty(DType::Double)),
            ("DstT", ty(DType::Float)),
            ("Truncate", boolean(true)),
        ];
        let z = run("Cast", &attrs, vec![x]).unwrap().remove(0);
        assert_eq!(
            z.to_vec::<f32>().unwrap(),
            vec![1.0, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, 1.0000001]
        );
    }

    #[test]
    fn cast_refusals() {
        let attrs = [("SrcT", ty(DType::Int32)), ("DstT", ty(DType::String))];
        assert!(
            run("Cast", &attrs, vec![Tensor::scalar(1i32)])
                .unwrap_err()
                .to_string()
                .contains("Cast int32 to string is not supported")
        );
        let attrs = [("SrcT", ty(DType::String)), ("DstT", ty(DType::String))];
        assert_eq!(
            run("Cast", &attrs, vec![Tensor::scalar_string("1")]).unwrap()[0],
            Tensor::scalar_string("1")
        );
        let attrs = [("SrcT", ty(DType::Float)), ("DstT", ty(DType::Half))];
        assert!(
            run("Cast", &attrs, vec![Tensor::scalar(1.0f32)])
                .unwrap_err()
                .to_string()
                .contains("float16")
        );
        let attrs = [("SrcT", ty(DType::Float)), ("DstT", ty(DType::Int32))];
        assert!(run("Cast", &attrs, vec![Tensor::scalar(1.0f64)]).is_err());
        assert!(run("Cast", &[], vec![Tensor::scalar(1.0f64)]).is_err());
    }

    #[test]
    fn select_and_select_v2() {
        let c = t(&[true, false], &[2]);
        let z = one(
            "Select",
            vec![c.clone(), t(&[1i32, 2], &[2]), t(&[3i32, 4], &[2])],
        );
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![1, 4]);
        let z = one(
            "Select",
            vec![
                c.clone(),
                t(&[1i32, 2, 5, 6], &[2, 2]),
                t(&[3i32, 4, 7, 8], &[2, 2]),
            ],
        );
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![1, 2, 7, 8]);
        let z = one(
            "Select",
            vec![
                Tensor::scalar(true),
                t(&[1i32, 2], &[2]),
                t(&[3i32, 4], &[2]),
            ],
        );
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![1, 2]);
        let e = err(
            "Select",
            vec![
                t(&[true, false, true], &[3]),
                t(&[1i32; 4], &[2, 2]),
                t(&[1i32; 4], &[2, 2]),
            ],
        );
        assert!(
            e.contains("Number of batches of 'then' must match size of 'cond', but saw: 2 vs. 3"),
            "{e}"
        );
        let e = err(
            "Select",
            vec![c.clone(), t(&[1i32; 4], &[2, 2]), t(&[1i32; 2], &[1, 2])],
        );
        assert!(
            e.contains("'then' and 'else' must have the same size.  but received: [2,2] vs. [1,2]"),
            "{e}"
        );
        let e = err(
            "Select",
            vec![
                t(&[true, false], &[1, 2]),
                t(&[1i32; 4], &[2, 2]),
                t(&[1i32; 4], &[2, 2]),
            ],
        );
        assert!(e.contains("Input 0: [1,2] != input 1: [2,2]"), "{e}");
        let e = err(
            "Select",
            vec![c.clone(), Tensor::scalar(1i32), Tensor::scalar(2i32)],
        );
        assert!(
            e.contains("'then' must be at least a vector, but saw shape: []"),
            "{e}"
        );
        let s = |v: &[&str]| {
            Tensor::strings(
                v.iter()
                    .map(|s| bytes::Bytes::from(s.to_string()))
                    .collect(),
                vec![v.len() as i64],
            )
            .unwrap()
        };
        let z = one("Select", vec![c.clone(), s(&["a", "b"]), s(&["c", "d"])]);
        assert_eq!(z.string_values().unwrap(), &["a", "d"]);

        let z = one(
            "SelectV2",
            vec![
                t(&[true, false], &[2, 1]),
                t(&[1i32, 2, 3], &[3]),
                Tensor::scalar(0i32),
            ],
        );
        assert_eq!(z.shape(), &[2, 3]);
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![1, 2, 3, 0, 0, 0]);
        let e = err(
            "SelectV2",
            vec![c.clone(), t(&[1i32, 2, 3], &[3]), Tensor::scalar(0i32)],
        );
        assert!(
            e.contains("condition [2], then [3], and else [] must be broadcastable"),
            "{e}"
        );
        let e = err(
            "SelectV2",
            vec![c.clone(), t(&[1i32, 2], &[2]), Tensor::scalar(0.0f32)],
        );
        assert!(
            e.contains(
                "input #2(zero-based) was expected to be a int32 tensor but is a float32 tensor"
            ),
            "{e}"
        );
        let z = one(
            "SelectV2",
            vec![c, s(&["a", "b"]), Tensor::scalar_string("z")],
        );
        assert_eq!(z.string_values().unwrap(), &["a", "z"]);
    }

    #[test]
    fn denormals_are_flushed_like_tf() {
        let d = || Tensor::scalar(1e-40f32);
        let zero = || Tensor::scalar(0.0f32);
        assert_eq!(
            one("Mul", vec![d(), Tensor::scalar(1.0f32)])
                .to_vec::<f32>()
                .unwrap(),
            vec![0.0]
        );
        assert_eq!(
            one("Equal", vec![d(), zero()]).to_vec::<bool>().unwrap(),
            vec![true]
        );
        assert_eq!(
            one("Less", vec![zero(), d()]).to_vec::<bool>().unwrap(),
            vec![false]
        );
        assert_eq!(one("Sqrt", vec![d()]).to_vec::<f32>().unwrap(), vec![0.0]);
        assert_eq!(one("Neg", vec![d()]).to_vec::<f32>().unwrap(), vec![-1e-40]);
        assert_eq!(one("Abs", vec![d()]).to_vec::<f32>().unwrap(), vec![1e-40]);
        let z = one(
            "Mul",
            vec![Tensor::scalar(1e-20f32), Tensor::scalar(1e-20f32)],
        );
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0]);
        assert_eq!(cast(d(), DType::Double).to_vec::<f64>().unwrap(), vec![0.0]);
        assert_eq!(
            cast(d(), DType::Bool).to_vec::<bool>().unwrap(),
            vec![false]
        );
        assert_eq!(
            cast(Tensor::scalar(1e-40f64), DType::Float)
                .to_vec::<f32>()
                .unwrap(),
            vec![0.0]
        );
        let z = one("SelectV2", vec![Tensor::scalar(true), d(), zero()]);
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![1e-40]);
    }

    // TF 2.21's float32 outputs (bit patterns) on 32 inputs, so Eigen's
    // vectorized path: x = linspace(-9.7, 9.3, 32), xp = linspace(0.01, 50.3, 32).
    const X: [u32; 32] = [
        3239785267, 3239142592, 3238499916, 3237711793, 3236426441, 3235141090, 3233855739,
        3232570388, 3231285037, 3229999685, 3227814588, 3225243886, 3222673183, 3218979490,
        3213838085, 3204556496, 1037697870, 1060644772, 1068140399, 1073281804, 1076082516,
        1078653219, 1081223921, 1082962528, 1084247879, 1085533230, 1086818581, 1088103933,
        1089389284, 1090596838, 1091239513, 1091882189,
    ];
    const XP: [u32; 32] = [
        1008981770, 1070656981, 1079003646, 1083969161, 1087371282, 1090646222, 1092347283,
        1094048344, 1095749405, 1097450466, 1099029587, 1099880118, 1100730648, 1101581179,
        1102431709, 1103282239, 1104132770, 1104983300, 1105833831, 1106684361, 1107415574,
        1107840839, 1108266104, 1108691369, 1109116635, 1109541900, 1109967165, 1110392430,
        1110817696, 1111242961, 1111668226, 1112093491,
    ];
    const TF: &[(&str, bool, [u32; 32])] = &[
        (
            "Exp",
            false,
            [
                947946837, 955070634, 962260472, 969542739, 976910321, 984356627, 991875593,
                999461616, 1007109525, 1014607538, 1021734399, 1028958551, 1036272496, 1043669305,
                1051142591, 1058686456, 1066295459, 1073964576, 1081247913, 1088410900, 1095668391,
                1103013104, 1110438309, 1117937802, 1125505852, 1133137174, 1140803092, 1147901704,
                1155099779, 1162389661, 1169764253, 1177217046,
            ],
        ),
        (
            "Expm1",
            false,
            [
                3212835836, 3212834966, 3212833361, 3212830398, 3212824930, 3212814836, 3212796206,
                3212761818, 3212698346, 3212581189, 3212364944, 3211965803, 3211229074, 3209869234,
                3207359264, 3201004560, 1038486062, 1065798720, 1077053609, 1086313748, 1094619815,
                1102488816, 1110176165, 1117806730, 1125440316, 1133104406, 1140770324, 1147885320,
                1155091587, 1162385565, 1169762204, 1177216021,
            ],
        ),
        (
            "Log",
            true,
            [
                3230883214, 1056627868, 1066863531, 1070256223, 1072665174, 1074138140, 1074901991,
                1075547931, 1076107541, 1076601200, 1077042827, 1077442352, 1077807108, 1078142666,
                1078453355, 1078742609, 1079013196, 1079267379, 1079507034, 1079733733, 1079948805,
                1080153384, 1080348447, 1080534840, 1080713301, 1080884478, 1081048942, 1081207199,
                1081359702, 1081506854, 1081649018, 1081786520,
            ],
        ),
        (
            "Log1p",
            true,
            [
                1008928438, 1064813695, 1069111153, 1071820900, 1073803790, 1074625192, 1075311775,
                1075901618, 1076418648, 1076878880, 1077293568, 1077670921, 1078017109, 1078336887,
                1078634004, 1078911458, 1079171694, 1079416720, 1079648219, 1079867607, 1080076088,
                1080274695, 1080464320, 1080645742, 1080819643, 1080986618, 1081147200, 1081301859,
                1081451019, 1081595056, 1081734309, 1081869089,
            ],
        ),
        (
            "Sin",
            false,
            [
                1049306159, 3198787615, 3209712196, 3212836416, 3209853266, 3199249198, 1048833190,
                1061437182, 1065293517, 1063064052, 1054156191, 3191529769, 3208053098, 3212618649,
                3211156108, 3203947534, 1037670901, 1059630500, 1064878159, 1064191226, 1057819772,
                3169885011, 3206109557, 3212008166, 3212100920, 3206354056, 3175305177, 1057561648,
                1064076177, 1064948065, 1059859917, 1040114141,
            ],
        ),
        (
            "Cos",
            false,
            [
                3212205452, 3211889380, 3205810694, 3153034826, 1058126450, 1064322795, 1064786722,
                1059349346, 1034722757, 3204519631, 3211313931, 3212555106, 3207791321, 3190070928,
                1054825952, 1063247193, 1065258246, 1061196341, 1047655434, 3199941278, 3210060636,
                3212829626, 3209493720, 3198086365, 1050016446, 1061823647, 1065334132, 1062744031,
                1053027875, 3193941479, 3208475291, 3212706427,
            ],
        ),
        (
            "Tan",
            false,
            [
                3197146414, 1051969346, 1068709591, 1124651404, 3216563837, 3200006836, 1049135323,
                1066978898, 1094526958, 3218814077, 3203034434, 1044255317, 1065540397, 1086617295,
                3221487872, 3205366126, 1037752085, 1063271619, 1082366119, 3223512289, 3207136349,
                1022408169, 1061126886, 1078198314, 3226527289, 3209096794, 3175319754, 1059216445,
                1075479385, 3230594351, 3211307566, 3187699857,
            ],
        ),
        (
            "Tanh",
            false,
            [
                3212836864, 3212836864, 3212836864, 3212836860, 3212836847, 3212836806, 3212836667,
                3212836194, 3212834576, 3212829072, 3212810336, 3212746657, 3212531514, 3211818859,
                3209604639, 3203346862, 1037644146, 1058919314, 1063168824, 1064681143, 1065153116,
                1065294234, 1065335881, 1065348126, 1065351721, 1065352777, 1065353086, 1065353178,
                1065353206, 1065353216, 1065353216, 1065353216,
            ],
        ),
        (
            "Sigmoid",
            false,
            [
                947946321, 955068878, 962257476, 969537638, 976901632, 984341836, 991850429,
                999418838, 1007036933, 1014361917, 1021321240, 1028270665, 1035147671, 1041885175,
                1048316354, 1052804721, 1057410677, 1059858089, 1061850367, 1063254690, 1064147159,
                1064677547, 1064980273, 1065149085, 1065242003, 1065292780, 1065320419, 1065335431,
                1065343576, 1065347992, 1065350385, 1065351682,
            ],
        ),
        (
            "Sqrt",
            true,
            [
                1036831949, 1067681881, 1072097890, 1074615674, 1076045839, 1077306092, 1078445592,
                1079493562, 1080469050, 1081385294, 1082191182, 1082603337, 1082997156, 1083374889,
                1083738359, 1084089069, 1084428275, 1084757041, 1085076275, 1085386760, 1085689180,
                1085984131, 1086272141, 1086553678, 1086829161, 1087098962, 1087363421, 1087622842,
                1087877504, 1088127658, 1088373535, 1088615349,
            ],
        ),
        (
            "Rsqrt",
            true,
            [
                1092616192, 1061707837, 1057875866, 1055381792, 1053349504, 1051961754, 1050936967,
                1050140295, 1049497992, 1048965885, 1048455374, 1047680664, 1047004882, 1046408619,
                1045877411, 1045400230, 1044968496, 1044575427, 1044215573, 1043884509, 1043578586,
                1043294778, 1043030542, 1042783727, 1042552499, 1042335284, 1042130722, 1041937629,
                1041754972, 1041581845, 1041417446, 1041261066,
            ],
        ),
    ];

    /// The largest distance in ulps between two finite float32s.
    fn ulps(a: f32, b: f32) -> u32 {
        let key = |v: f32| {
            let b = v.to_bits() as i32;
            if b < 0 { i32::MIN - b } else { b }
        };
        key(a).abs_diff(key(b))
    }

    #[test]
    fn transcendentals_stay_within_a_few_ulps_of_tf() {
        let mut worst = Vec::new();
        for (op, positive, want) in TF {
            let x: Vec<f32> = (if *positive { XP } else { X })
                .iter()
                .map(|&b| f32::from_bits(b))
                .collect();
            let got = one(op, vec![t(&x, &[32])]).to_vec::<f32>().unwrap();
            let max = got
                .iter()
                .zip(want)
                .map(|(&g, &w)| ulps(g, f32::from_bits(w)))
                .max()
                .unwrap();
            worst.push((*op, max));
        }
        // Measured: Tanh and Sigmoid 3 ulp (Eigen's rational
        // approximations), Expm1 2, the others 0-1.
        for (op, max) in &worst {
            assert!(*max <= 4, "{op}: {max} ulp from TF ({worst:?})");
        }
        eprintln!("ulp distance from TF 2.21: {worst:?}");
    }

    #[test]
    fn node_dtype_attribute_is_checked() {
        let attrs = [("T", ty(DType::Int64))];
        assert!(
            run(
                "AddV2",
                &attrs,
                vec![Tensor::scalar(1i32), Tensor::scalar(1i32)]
            )
            .is_err()
        );
        let attrs = [("T", ty(DType::String))];
        let node = super::super::testing::node("AddV2", &attrs);
        let k = super::super::lookup("AddV2").unwrap();
        assert!((k.build)(&crate::attrs::NodeAttrs::of(&node)).is_err());
        assert!(run("AddV2", &[], vec![Tensor::scalar(1i32)]).is_err());
    }
}
