//! Matrix products: `MatMul`, `BatchMatMul` (equal batch dimensions),
//! `BatchMatMulV2` and `BatchMatMulV3` (numpy-broadcast batch dimensions;
//! V3 also multiplies int8/uint8 into int32), with TensorFlow 2.21's CPU
//! dtypes, shape checks and error messages.
//!
//! Each output element is one dot product taken in order along the inner
//! dimension, starting from zero; for floats each step is a fused
//! multiply-add with denormals flushed (TF's CPU build runs FTZ/DAZ and
//! Eigen's GEMM kernel uses FMA). That is Eigen's order for general matrix
//! products whose inner dimension fits one of its cache blocks, and those
//! agree bit for bit. Where Eigen takes another path (matrix-vector products
//! when a side is 1, inner dimensions of a few hundred split into blocks,
//! some batched shapes) its float sums are associated differently, and the
//! last bits can differ; the differential cases state the bound
//! (`docs/compatibility.md`). Integer products wrap and always agree.
//!
//! Refused: float16, bfloat16 and complex (TensorFlow has kernels for them;
//! tfdata's math has no such arithmetic).

use tfdata_core::{DType, Result, Tensor};

use super::numeric::{
    Elem, Plan, at, broadcast_shape_opt, buffer, dispatch, finish, invalid, out_elements,
    shape_str, unsupported,
};
use super::{Compute, KernelDef, OutputArgs, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "MatMul",
        outputs: product_output,
        build: |a| build(a, Kind::MatMul),
    },
    KernelDef {
        op: "SparseMatMul",
        outputs: product_output,
        build: |a| build(a, Kind::Sparse),
    },
    KernelDef {
        op: "BatchMatMul",
        outputs: one_output,
        build: |a| build(a, Kind::V1),
    },
    KernelDef {
        op: "BatchMatMulV2",
        outputs: one_output,
        build: |a| build(a, Kind::V2),
    },
    KernelDef {
        op: "BatchMatMulV3",
        outputs: one_output,
        build: |a| build(a, Kind::V3),
    },
];

fn product_output(_: &NodeAttrs) -> Result<OutputArgs> {
    Ok(vec![("product", 1)])
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Rank-2 operands only.
    MatMul,
    /// Equal ranks and batch dimensions.
    V1,
    /// Broadcast batch dimensions.
    V2,
    /// V2 with separate input and output dtypes.
    V3,
    /// `SparseMatMul`: MatMul of `Ta`, `Tb` into float; its sparsity hints
    /// only choose TF's algorithm (the sum's order: within the same bound).
    Sparse,
}

/// The multiply-accumulate of a dot product: fused and flushed for floats,
/// wrapping for integers; `mac_unfused` rounds the product first, as
/// Eigen's matrix-vector path does (`tf.image.rgb_to_grayscale`'s
/// `[pixels, 3] x [3, 1]` equals TensorFlow's bit for bit that way).
pub(super) trait Mac: Elem {
    fn mac(self, a: Self, b: Self) -> Self;
    fn mac_unfused(self, a: Self, b: Self) -> Self {
        self.mac(a, b)
    }
}

impl Mac for f32 {
    #[inline(always)]
    fn mac(self, a: f32, b: f32) -> f32 {
        a.mul_add(b, self).ftz()
    }
    #[inline(always)]
    fn mac_unfused(self, a: f32, b: f32) -> f32 {
        (self + a * b).ftz()
    }
}

impl Mac for f64 {
    #[inline(always)]
    fn mac(self, a: f64, b: f64) -> f64 {
        a.mul_add(b, self).ftz()
    }
    #[inline(always)]
    fn mac_unfused(self, a: f64, b: f64) -> f64 {
        (self + a * b).ftz()
    }
}

macro_rules! mac_int {
    ($($t:ty),*) => {$(
        impl Mac for $t {
            #[inline(always)]
            fn mac(self, a: $t, b: $t) -> $t {
                self.wrapping_add(a.wrapping_mul(b))
            }
        }
    )*};
}
mac_int!(i16, i32, i64);

/// An input element as the product's dtype (int8/uint8 into int32 for
/// `BatchMatMulV3`; every other kernel multiplies in its input dtype).
pub(super) trait Operand<O>: Elem {
    fn lift(self) -> O;
}

impl<T: Mac> Operand<T> for T {
    #[inline(always)]
    fn lift(self) -> T {
        self.ftz()
    }
}

impl Operand<i32> for i8 {
    fn lift(self) -> i32 {
        i32::from(self)
    }
}

impl Operand<i32> for u8 {
    fn lift(self) -> i32 {
        i32::from(self)
    }
}

struct Attrs {
    kind: Kind,
    /// Transpose (adjoint: for real dtypes the same) the first, second operand.
    adj: [bool; 2],
    /// The node's declared dtypes: `T` (or `Ta`, `Tb`) and `Tout`.
    inputs: [Option<DType>; 2],
    out: Option<DType>,
}

fn build(attrs: &NodeAttrs, kind: Kind) -> Result<Compute> {
    let (ka, kb) = match kind {
        Kind::MatMul | Kind::Sparse => ("transpose_a", "transpose_b"),
        _ => ("adj_x", "adj_y"),
    };
    let opt = |key: &str| -> Result<Option<DType>> {
        if attrs.has(key) {
            attrs.dtype(key).map(Some)
        } else {
            Ok(None)
        }
    };
    let (inputs, out) = if kind == Kind::V3 {
        ([opt("Ta")?, opt("Tb")?], opt("Tout")?)
    } else if kind == Kind::Sparse {
        ([opt("Ta")?, opt("Tb")?], Some(DType::Float))
    } else {
        let t = opt("T")?;
        ([t, t], t)
    };
    let a = Attrs {
        kind,
        adj: [attrs.bool_or(ka, false)?, attrs.bool_or(kb, false)?],
        inputs,
        out,
    };
    // Dtypes checked when the kernel is built, as TensorFlow finds no kernel.
    let op = attrs.op.to_string();
    for d in a.inputs.iter().flatten() {
        if !accepted(kind, *d) {
            return Err(attrs.error(unsupported(&op, *d)));
        }
    }
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 2)?;
        let (x, y) = (&inputs[0], &inputs[1]);
        Ok(vec![product(&op, &a, x, y)?])
    }))
}

/// The dtypes TensorFlow 2.21 registers a CPU kernel for (of those tfdata
/// has arithmetic for).
fn accepted(kind: Kind, d: DType) -> bool {
    use DType::*;
    match kind {
        Kind::MatMul | Kind::V1 => matches!(d, Float | Double | Int32 | Int64),
        Kind::Sparse => d == Float,
        Kind::V2 => matches!(d, Float | Double | Int16 | Int32 | Int64),
        Kind::V3 => matches!(d, Float | Double | Int16 | Int32 | Int64 | Int8 | UInt8),
    }
}

/// The product's shape: the batch dimensions, the pairs of operand batch
/// indices in output order, and `m`, `k`, `n`.
struct Layout {
    shape: Vec<i64>,
    pairs: Vec<(usize, usize)>,
    m: usize,
    k: usize,
    n: usize,
}

fn layout(op: &str, a: &Attrs, x: &[i64], y: &[i64]) -> Result<Layout> {
    let bad = |m: String| invalid(op, m);
    let (rx, ry) = (x.len(), y.len());
    // SparseMatMul's own words for its rank errors.
    if a.kind == Kind::Sparse {
        for (name, r) in [("a", rx), ("b", ry)] {
            if r != 2 {
                return Err(bad(format!("{name} is not a matrix")));
            }
        }
    }
    match a.kind {
        Kind::MatMul | Kind::V1 | Kind::Sparse => {
            if rx != ry {
                return Err(bad(format!(
                    "In[0] and In[1] has different ndims: {} vs. {}",
                    shape_str(x),
                    shape_str(y)
                )));
            }
            if matches!(a.kind, Kind::MatMul | Kind::Sparse) && rx != 2 {
                return Err(bad(format!("In[0] and In[1] ndims must be == 2: {rx}")));
            }
            if rx < 2 {
                return Err(bad(format!("In[0] and In[1] ndims must be >= 2: {rx}")));
            }
            for i in 0..rx - 2 {
                if x[i] != y[i] {
                    return Err(bad(format!(
                        "In[0].dim({i}) and In[1].dim({i}) must be the same: {} vs {}",
                        shape_str(x),
                        shape_str(y)
                    )));
                }
            }
        }
        Kind::V2 | Kind::V3 => {
            for (i, r) in [rx, ry].into_iter().enumerate() {
                if r < 2 {
                    return Err(bad(format!("In[{i}] ndims must be >= 2: {r}")));
                }
            }
        }
    }
    let (bx, mx) = x.split_at(rx - 2);
    let (by, my) = y.split_at(ry - 2);
    let batch = broadcast_shape_opt(bx, by).ok_or_else(|| {
        bad(format!(
            "In[0] and In[1] must have compatible batch dimensions: {} vs. {}",
            shape_str(x),
            shape_str(y)
        ))
    })?;
    let dim = |d: i64| usize::try_from(d).map_err(|_| bad(format!("bad shape {x:?}")));
    let (m, kx) = if a.adj[0] {
        (dim(mx[1])?, dim(mx[0])?)
    } else {
        (dim(mx[0])?, dim(mx[1])?)
    };
    let (ky, n) = if a.adj[1] {
        (dim(my[1])?, dim(my[0])?)
    } else {
        (dim(my[0])?, dim(my[1])?)
    };
    if kx != ky && a.kind == Kind::Sparse {
        return Err(bad(format!(
            "Matrix size incompatible: a: {}, b: {}",
            shape_str(x),
            shape_str(y)
        )));
    }
    if kx != ky {
        return Err(bad(format!(
            "Matrix size-incompatible: In[0]: {}, In[1]: {}",
            shape_str(x),
            shape_str(y)
        )));
    }
    let mut pairs = Vec::new();
    Plan::new(&batch, [bx, by]).walk(|[i, j]| pairs.push((i, j)));
    let mut shape = batch;
    shape.extend([m as i64, n as i64]);
    Ok(Layout {
        shape,
        pairs,
        m,
        k: kx,
        n,
    })
}

fn product(op: &str, a: &Attrs, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    for (i, (t, want)) in [x, y].into_iter().zip(a.inputs).enumerate() {
        if let Some(w) = want
            && t.dtype() != w
        {
            return Err(invalid(
                op,
                format!(
                    "input #{i}(zero-based) was expected to be a {w} tensor but is a {} tensor",
                    t.dtype()
                ),
            ));
        }
    }
    let out = match a.kind {
        Kind::V3 => a.out.unwrap_or(match x.dtype() {
            DType::Int8 | DType::UInt8 => DType::Int32,
            d => d,
        }),
        _ => x.dtype(),
    };
    use DType::*;
    match (x.dtype(), y.dtype(), out) {
        (Int8, Int8, Int32) => run::<i8, i8, i32>(op, a, x, y),
        (Int8, UInt8, Int32) => run::<i8, u8, i32>(op, a, x, y),
        (UInt8, Int8, Int32) => run::<u8, i8, i32>(op, a, x, y),
        (UInt8, UInt8, Int32) => run::<u8, u8, i32>(op, a, x, y),
        (dx, dy, dout) if dx == dy && dy == dout && accepted(a.kind, dx) => {
            dispatch!(
                dx,
                op,
                [Float, Double, Int16, Int32, Int64],
                same(op, a, x, y)
            )
        }
        (dx, dy, dout) if dx != dy || dx != dout => Err(invalid(
            op,
            format!("no kernel for {dx} x {dy} -> {dout} (TensorFlow registers none)"),
        )),
        (dx, ..) => Err(unsupported(op, dx)),
    }
}

fn same<T: Mac>(op: &str, a: &Attrs, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    run::<T, T, T>(op, a, x, y)
}

/// One operand's matrices repacked as `O`, each `rows x k` row-major (the
/// left operand's rows, the right operand's columns), so every dot product
/// reads two contiguous runs.
fn pack<A: Operand<O>, O: Mac>(
    b: &[u8],
    count: usize,
    rows: usize,
    k: usize,
    k_major: bool,
) -> Vec<O> {
    let mut out = Vec::with_capacity(count * rows * k);
    for mat in 0..count {
        let base = mat * rows * k;
        for r in 0..rows {
            for p in 0..k {
                // Stored [k, rows] when the inner dimension is the major one.
                let i = if k_major { p * rows + r } else { r * k + p };
                out.push(at::<A>(b, base + i).lift());
            }
        }
    }
    out
}

fn run<A: Operand<O>, B: Operand<O>, O: Mac>(
    op: &str,
    a: &Attrs,
    x: &Tensor,
    y: &Tensor,
) -> Result<Tensor> {
    let l = layout(op, a, x.shape(), y.shape())?;
    let total = out_elements(op, O::DTYPE, &l.shape)?;
    let (xb, yb) = (buffer(op, x)?, buffer(op, y)?);
    let (m, k, n) = (l.m, l.k, l.n);
    let mut out = vec![0u8; total * O::SIZE];
    // Nothing to compute, or all zeros (an empty inner dimension).
    if total == 0 || k == 0 {
        return finish(O::DTYPE, l.shape, out);
    }
    let matrices = |t: &Tensor, rows: usize| t.num_elements() as usize / (rows * k);
    // The left operand is [.., m, k] (or [.., k, m] transposed); its rows
    // are what we pack. The right is [.., k, n] (or [.., n, k]); we pack
    // its columns, which are rows when it is transposed.
    let lhs = pack::<A, O>(xb, matrices(x, m), m, k, a.adj[0]);
    let rhs = pack::<B, O>(yb, matrices(y, n), n, k, !a.adj[1]);
    let mut slots = out.chunks_exact_mut(O::SIZE);
    // A matrix times a vector: Eigen's GEMV, whose products are rounded
    // before they are added.
    let unfused = n == 1;
    for &(bi, bj) in &l.pairs {
        let lm = lhs.get(bi * m * k..(bi + 1) * m * k).unwrap_or(&[]);
        let rm = rhs.get(bj * n * k..(bj + 1) * n * k).unwrap_or(&[]);
        for row in lm.chunks_exact(k) {
            for col in rm.chunks_exact(k) {
                let v = if unfused {
                    row.iter()
                        .zip(col)
                        .fold(O::ZERO, |acc, (&p, &q)| acc.mac_unfused(p, q))
                } else {
                    row.iter()
                        .zip(col)
                        .fold(O::ZERO, |acc, (&p, &q)| acc.mac(p, q))
                };
                if let Some(slot) = slots.next() {
                    v.set(slot);
                }
            }
        }
    }
    finish(O::DTYPE, l.shape, out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{boolean, run, ty};
    use tfdata_core::{DType, Tensor};

    #[test]
    fn multiplies_and_transposes() {
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], vec![2, 3]).unwrap();
        let b = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0], vec![3, 2]).unwrap();
        let out = run("MatMul", &[("T", ty(DType::Float))], vec![a.clone(), b]).unwrap();
        assert_eq!(out[0].shape(), &[2, 2]);
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![4.0, 5.0, 10.0, 11.0]);
        let out = run(
            "MatMul",
            &[
                ("transpose_a", boolean(true)),
                ("transpose_b", boolean(true)),
            ],
            vec![a.clone(), a],
        );
        assert!(out.is_err(), "[3,2] x [3,2] is size-incompatible");
    }

    #[test]
    fn broadcasts_batches() {
        let x = Tensor::from_slice(&[1i32, 2, 3, 4], vec![1, 2, 2]).unwrap();
        let y =
            Tensor::from_slice(&[1i32, 0, 0, 1, 2, 0, 0, 2, 0, 1, 1, 0], vec![3, 2, 2]).unwrap();
        let out = run("BatchMatMulV2", &[], vec![x, y]).unwrap();
        assert_eq!(out[0].shape(), &[3, 2, 2]);
        assert_eq!(
            out[0].to_vec::<i32>().unwrap(),
            vec![1, 2, 3, 4, 2, 4, 6, 8, 2, 1, 4, 3]
        );
    }
}
