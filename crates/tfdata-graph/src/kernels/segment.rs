//! Segment reductions along the first dimension: the sorted `Segment*` ops,
//! `UnsortedSegment*` and `SparseSegment*` (with their `WithNumSegments`
//! forms), with TensorFlow 2.21's CPU semantics, which differ between the
//! three families in ways graphs can see:
//!
//! - Sorted (`SegmentSum`, ...): ids must be increasing; the output has
//!   `last id + 1` rows; rows no id names get 0 (1 for `Prod`, and 0 for
//!   `Max`/`Min` too); a one-row segment is a copy (so -0.0, NaN and
//!   denormals come through), a longer one is reduced in row order from 0,
//!   1, -inf or +inf. Eigen reduces 8 float (4 double) columns at a time
//!   with `maxps`-style comparisons that skip NaN, and the remaining columns
//!   one by one with `std::max`, where a NaN is taken and then replaced by
//!   the next value: both are reproduced column by column.
//! - Unsorted: negative ids are dropped, ids past `num_segments` are
//!   errors; empty segments keep the initial value (`lowest()` for `Max`,
//!   not -inf); each row is combined in order with `std::max(row, acc)`.
//! - Sparse: rows gathered by `indices` are summed in TensorFlow's blocks
//!   (the first 2 to 9 rows, then eights, each block added left to right
//!   before joining the total); `Mean`/`SqrtN` of fewer than 10 rows
//!   multiply by `1/n` (`1/sqrt(n)`), of more divide at the end. A
//!   one-row segment is a copy.
//!
//! Refused: float16, bfloat16 and complex (no such arithmetic in tfdata).

use tfdata_core::{DType, Result, Tensor};

use super::numeric::{
    Num, at, buffer, dispatch, finish, index_values, invalid, out_elements, shape_str,
};
use super::{Compute, KernelDef, one_output};
use crate::attrs::NodeAttrs;

#[derive(Clone, Copy, PartialEq)]
enum Red {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
}

#[derive(Clone, Copy, PartialEq)]
enum Sparse {
    Sum,
    Mean,
    SqrtN,
}

macro_rules! sorted {
    ($op:literal, $r:expr) => {
        KernelDef {
            op: $op,
            outputs: one_output,
            build: |a| build(a, Family::Sorted($r)),
        }
    };
}
macro_rules! unsorted {
    ($op:literal, $r:expr) => {
        KernelDef {
            op: $op,
            outputs: one_output,
            build: |a| build(a, Family::Unsorted($r)),
        }
    };
}
macro_rules! sparse {
    ($op:literal, $r:expr, $n:expr) => {
        KernelDef {
            op: $op,
            outputs: one_output,
            build: |a| build(a, Family::Sparse($r, $n)),
        }
    };
}

pub(super) const KERNELS: &[KernelDef] = &[
    sorted!("SegmentSum", Red::Sum),
    sorted!("SegmentMean", Red::Mean),
    sorted!("SegmentMax", Red::Max),
    sorted!("SegmentMin", Red::Min),
    sorted!("SegmentProd", Red::Prod),
    unsorted!("UnsortedSegmentSum", Red::Sum),
    unsorted!("UnsortedSegmentMax", Red::Max),
    unsorted!("UnsortedSegmentMin", Red::Min),
    unsorted!("UnsortedSegmentProd", Red::Prod),
    sparse!("SparseSegmentSum", Sparse::Sum, false),
    sparse!("SparseSegmentMean", Sparse::Mean, false),
    sparse!("SparseSegmentSqrtN", Sparse::SqrtN, false),
    sparse!("SparseSegmentSumWithNumSegments", Sparse::Sum, true),
    sparse!("SparseSegmentMeanWithNumSegments", Sparse::Mean, true),
    sparse!("SparseSegmentSqrtNWithNumSegments", Sparse::SqrtN, true),
];

#[derive(Clone, Copy)]
enum Family {
    Sorted(Red),
    Unsorted(Red),
    /// The reduction, and whether `num_segments` is an input.
    Sparse(Sparse, bool),
}

/// What the segment reductions need beyond [`Num`].
trait Seg: Num {
    /// Eigen's packet width for this type in TensorFlow's AVX build (the
    /// columns reduced with packet max/min); 0 where it cannot matter.
    const LANES: usize;
    /// `T(n)` (wrapping for integers, as C++'s conversion).
    fn count(n: u64) -> Self;
    /// `self / d`; `None` for an integer division by zero.
    fn div(self, d: Self) -> Option<Self>;
}

macro_rules! seg_int {
    ($($t:ty),*) => {$(
        impl Seg for $t {
            const LANES: usize = 0;
            fn count(n: u64) -> Self {
                n as $t
            }
            fn div(self, d: Self) -> Option<Self> {
                (d != 0).then(|| self.wrapping_div(d))
            }
        }
    )*};
}
seg_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! seg_float {
    ($t:ty, $lanes:literal) => {
        impl Seg for $t {
            const LANES: usize = $lanes;
            fn count(n: u64) -> Self {
                n as $t
            }
            fn div(self, d: Self) -> Option<Self> {
                Some(self / d)
            }
        }
    };
}
seg_float!(f32, 8);
seg_float!(f64, 4);

fn build(attrs: &NodeAttrs, family: Family) -> Result<Compute> {
    let op = attrs.op.to_string();
    let floats_only = matches!(family, Family::Sparse(Sparse::Mean | Sparse::SqrtN, _));
    if attrs.has("T") {
        let d = attrs.dtype("T")?;
        if !accepted(d, floats_only) {
            return Err(attrs.error(super::numeric::unsupported(&op, d)));
        }
    }
    let arity = match family {
        Family::Sorted(_) => 2,
        Family::Unsorted(_) | Family::Sparse(_, false) => 3,
        Family::Sparse(_, true) => 4,
    };
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, arity)?;
        let d = inputs[0].dtype();
        if !accepted(d, floats_only) {
            return Err(super::numeric::unsupported(&op, d));
        }
        let out = dispatch!(
            d,
            &op,
            [
                Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
            ],
            run(&op, family, &inputs)
        )?;
        Ok(vec![out])
    }))
}

fn accepted(d: DType, floats_only: bool) -> bool {
    use DType::*;
    match d {
        Float | Double => true,
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => !floats_only,
        _ => false,
    }
}

fn run<T: Seg>(op: &str, family: Family, inputs: &[Tensor]) -> Result<Tensor> {
    match family {
        Family::Sorted(r) => sorted::<T>(op, r, &inputs[0], &inputs[1]),
        Family::Unsorted(r) => unsorted::<T>(op, r, &inputs[0], &inputs[1], &inputs[2]),
        Family::Sparse(r, _) => sparse::<T>(op, r, inputs),
    }
}

/// The data as `[rows, cols]` over its first dimension (TF refuses scalars).
fn rows_cols(op: &str, data: &Tensor) -> Result<(usize, usize)> {
    let Some((&first, rest)) = data.shape().split_first() else {
        return Err(invalid(op, "input must be at least rank 1"));
    };
    let cols = rest.iter().map(|&d| d.max(0) as usize).product();
    Ok((first.max(0) as usize, cols))
}

/// A freshly allocated output: `rows` rows of `cols` values of `T`.
struct Out<T> {
    vals: Vec<T>,
    cols: usize,
}

impl<T: Seg> Out<T> {
    fn new(op: &str, shape: &[i64], cols: usize, init: T) -> Result<Self> {
        let n = out_elements(op, T::DTYPE, shape)?;
        Ok(Out {
            vals: vec![init; n],
            cols,
        })
    }
    fn row(&mut self, r: usize) -> &mut [T] {
        let c = self.cols;
        self.vals.get_mut(r * c..(r + 1) * c).unwrap_or(&mut [])
    }
    fn finish(self, shape: Vec<i64>) -> Result<Tensor> {
        let mut out = vec![0u8; self.vals.len() * T::SIZE];
        for (slot, v) in out.chunks_exact_mut(T::SIZE).zip(self.vals) {
            v.set(slot);
        }
        finish(T::DTYPE, shape, out)
    }
}

/// Row `r` of `[rows, cols]` data, read lazily.
fn row_of<T: Seg>(b: &[u8], cols: usize, r: usize) -> impl Iterator<Item = T> + '_ {
    (r * cols..(r + 1) * cols).map(move |i| at::<T>(b, i))
}

/// The sorted reduction's combining step for column `c`: Eigen's packet
/// comparison (NaN in the row skipped) on the columns it vectorizes,
/// `std::max`/`std::min` (NaN taken) on the rest.
#[inline(always)]
fn sorted_step<T: Seg>(r: Red, packet: bool, acc: T, v: T) -> T {
    match r {
        Red::Sum | Red::Mean => acc.add(v).ftz(),
        Red::Prod => acc.mul(v).ftz(),
        Red::Max if packet => {
            if v > acc {
                v
            } else {
                acc
            }
        }
        Red::Min if packet => {
            if v < acc {
                v
            } else {
                acc
            }
        }
        Red::Max => {
            if v < acc {
                acc
            } else {
                v
            }
        }
        Red::Min => {
            if acc < v {
                acc
            } else {
                v
            }
        }
    }
}

fn sorted<T: Seg>(op: &str, r: Red, data: &Tensor, ids: &Tensor) -> Result<Tensor> {
    if ids.shape().len() != 1 {
        return Err(invalid(op, "segment_ids should be a vector."));
    }
    let (rows, cols) = rows_cols(op, data)?;
    let ids = index_values(op, "segment_ids", ids)?;
    if ids.len() != rows {
        return Err(invalid(
            op,
            "segment_ids should be the same size as dimension 0 of input.",
        ));
    }
    let out_rows = ids.last().map_or(0, |&l| l.saturating_add(1));
    if out_rows < 0 || (!ids.is_empty() && out_rows == 0) {
        return Err(invalid(op, "segment ids must be >= 0"));
    }
    let mut shape = data.shape().to_vec();
    shape[0] = out_rows;
    let gap = if r == Red::Prod { T::ONE } else { T::ZERO };
    let mut out = Out::new(op, &shape, cols, gap)?;
    let b = buffer(op, data)?;
    let packed = cols.checked_div(T::LANES).unwrap_or(0) * T::LANES;
    let mut start = 0;
    while start < ids.len() {
        let (id, end) = sorted_run(op, &ids, start, out_rows)?;
        let slot = out.row(id as usize);
        if end - start == 1 {
            for (o, v) in slot.iter_mut().zip(row_of::<T>(b, cols, start)) {
                *o = v;
            }
        } else {
            let init = match r {
                Red::Sum | Red::Mean => T::ZERO,
                Red::Prod => T::ONE,
                Red::Max => T::MAX_IDENTITY,
                Red::Min => T::MIN_IDENTITY,
            };
            slot.fill(init);
            for row in start..end {
                for (c, (o, v)) in slot.iter_mut().zip(row_of::<T>(b, cols, row)).enumerate() {
                    *o = sorted_step(r, c < packed, *o, v.ftz());
                }
            }
            if r == Red::Mean {
                let n = T::count((end - start) as u64);
                for o in slot.iter_mut() {
                    *o = o
                        .div(n)
                        .ok_or_else(|| invalid(op, "Integer division by zero"))?
                        .ftz();
                }
            }
        }
        start = end;
    }
    out.finish(shape)
}

fn unsorted<T: Seg>(op: &str, r: Red, data: &Tensor, ids: &Tensor, num: &Tensor) -> Result<Tensor> {
    if !num.shape().is_empty() {
        return Err(invalid(
            op,
            format!(
                "num_segments should be a scalar, not shape {}",
                shape_str(num.shape())
            ),
        ));
    }
    let id_rank = ids.shape().len();
    if !data.shape().starts_with(ids.shape()) {
        return Err(invalid(
            op,
            format!(
                "data.shape = {} does not start with segment_ids.shape = {}",
                shape_str(data.shape()),
                shape_str(ids.shape())
            ),
        ));
    }
    let segments = super::numeric::scalar_index(op, "num_segments", num)?;
    if segments < 0 {
        return Err(invalid(
            op,
            format!("Input num_segments == {segments} must not be negative."),
        ));
    }
    let inner = &data.shape()[id_rank..];
    let cols: usize = inner.iter().map(|&d| d.max(0) as usize).product();
    let mut shape = vec![segments];
    shape.extend_from_slice(inner);
    let init = match r {
        Red::Sum | Red::Mean => T::ZERO,
        Red::Prod => T::ONE,
        Red::Max => T::LOWEST,
        Red::Min => T::HIGHEST,
    };
    let mut out = Out::new(op, &shape, cols, init)?;
    if data.num_elements() == 0 {
        return out.finish(shape);
    }
    let b = buffer(op, data)?;
    let ids_v = index_values(op, "segment_ids", ids)?;
    for (i, &j) in ids_v.iter().enumerate() {
        if j < 0 {
            continue;
        }
        if j >= segments {
            return Err(invalid(
                op,
                format!(
                    "segment_ids{} = {j} is out of range [0, {segments})",
                    slice_debug(ids.shape(), i)
                ),
            ));
        }
        let slot = out.row(j as usize);
        for (o, v) in slot.iter_mut().zip(row_of::<T>(b, cols, i)) {
            let v = v.ftz();
            *o = match r {
                Red::Sum | Red::Mean => o.add(v).ftz(),
                Red::Prod => o.mul(v).ftz(),
                // std::max(row, acc) and std::min(row, acc).
                Red::Max => {
                    if v < *o {
                        *o
                    } else {
                        v
                    }
                }
                Red::Min => {
                    if *o < v {
                        *o
                    } else {
                        v
                    }
                }
            };
        }
    }
    out.finish(shape)
}

/// TensorFlow's `SliceDebugString`: flat index `i` of `shape` as `[a,b]`
/// (empty for a scalar).
fn slice_debug(shape: &[i64], mut i: usize) -> String {
    if shape.is_empty() {
        return String::new();
    }
    let mut coords = vec![0usize; shape.len()];
    for (c, &d) in coords.iter_mut().zip(shape).rev() {
        let d = d.max(1) as usize;
        *c = i % d;
        i /= d;
    }
    let parts: Vec<String> = coords.iter().map(usize::to_string).collect();
    format!("[{}]", parts.join(","))
}

fn sparse<T: Seg>(op: &str, r: Sparse, inputs: &[Tensor]) -> Result<Tensor> {
    let (data, indices, ids) = (&inputs[0], &inputs[1], &inputs[2]);
    let mut out_rows: Option<i64> = None;
    if let Some(num) = inputs.get(3) {
        if !num.shape().is_empty() {
            return Err(invalid(
                op,
                format!(
                    "num_segments should be a scalar, not shape {}",
                    shape_str(num.shape())
                ),
            ));
        }
        let n = super::numeric::scalar_index(op, "num_segments", num)?;
        if n < 0 {
            return Err(invalid(op, "segment ids must be >= 0"));
        }
        out_rows = Some(n);
    }
    if indices.shape().len() != 1 {
        return Err(invalid(op, "indices should be a vector."));
    }
    if ids.shape().len() != 1 {
        return Err(invalid(op, "segment_ids should be a vector."));
    }
    let idx = index_values(op, "indices", indices)?;
    let ids = index_values(op, "segment_ids", ids)?;
    if idx.len() != ids.len() {
        return Err(invalid(
            op,
            "segment_ids and indices should have same size.",
        ));
    }
    let (rows, cols) = rows_cols(op, data)?;
    let last_plus_one = ids.last().map_or(0, |&l| l.saturating_add(1));
    let out_rows = match out_rows {
        Some(n) if n < last_plus_one => {
            return Err(invalid(op, "segment ids must be < num_segments"));
        }
        Some(n) => n,
        None => last_plus_one,
    };
    if out_rows < 0 || (!ids.is_empty() && out_rows == 0) {
        return Err(invalid(op, "segment ids must be >= 0"));
    }
    let mut shape = data.shape().to_vec();
    shape[0] = out_rows;
    let mut out = Out::new(op, &shape, cols, T::ZERO)?;
    let b = buffer(op, data)?;
    let mut start = 0;
    while start < ids.len() {
        let (id, end) = sorted_run(op, &ids, start, out_rows)?;
        let rows_of = &idx[start..end];
        if let Some(k) = rows_of.iter().position(|&i| i < 0 || i as usize >= rows) {
            return Err(invalid(
                op,
                format!(
                    "Bad: indices[{}] == {} out of range [0, {rows})",
                    start + k,
                    rows_of[k]
                ),
            ));
        }
        sparse_reduce::<T>(r, b, cols, rows_of, out.row(id as usize));
        start = end;
    }
    out.finish(shape)
}

/// One sparse segment, in TensorFlow's blocks (see the module doc).
fn sparse_reduce<T: Seg>(r: Sparse, b: &[u8], cols: usize, rows: &[i64], slot: &mut [T]) {
    let num = rows.len();
    let row = |k: usize| rows[k] as usize;
    if num == 1 {
        for (o, v) in slot.iter_mut().zip(row_of::<T>(b, cols, row(0))) {
            *o = v;
        }
        return;
    }
    let first = match num & 7 {
        0 => 8,
        1 => 9,
        n => n,
    };
    let sqrt = || T::from_f64((num as f64).sqrt());
    let scale = match r {
        Sparse::Mean if num < 10 => T::ONE.div(T::count(num as u64)),
        Sparse::SqrtN if num < 10 => T::ONE.div(sqrt()),
        _ => Some(T::ONE),
    }
    .unwrap_or(T::ONE);
    for (c, o) in slot.iter_mut().enumerate() {
        let block = |from: usize, to: usize| {
            (from + 1..to).fold(at::<T>(b, row(from) * cols + c).ftz(), |s, k| {
                s.add(at::<T>(b, row(k) * cols + c).ftz()).ftz()
            })
        };
        let mut acc = block(0, first).mul(scale).ftz();
        let mut k = first;
        while k < num {
            acc = acc.add(block(k, k + 8)).ftz();
            k += 8;
        }
        if num >= 10 {
            let d = match r {
                Sparse::Sum => None,
                Sparse::Mean => Some(T::count(num as u64)),
                Sparse::SqrtN => Some(sqrt()),
            };
            if let Some(d) = d {
                acc = acc.div(d).unwrap_or(acc).ftz();
            }
        }
        *o = acc;
    }
}

/// The run of equal ids from `start` in sorted segment ids: its id and
/// where it ends, with TensorFlow's errors for a decrease or an id out of
/// `[0, out_rows)`.
fn sorted_run(op: &str, ids: &[i64], start: usize, out_rows: i64) -> Result<(i64, usize)> {
    let id = ids[start];
    let end = start + ids[start..].iter().take_while(|&&x| x == id).count();
    if let Some(&next) = ids.get(end)
        && next < id
    {
        return Err(invalid(op, "segment ids are not increasing"));
    }
    if id < 0 || id >= out_rows {
        return Err(invalid(
            op,
            format!(
                "Segment id {id} out of range [0, {out_rows}), possibly because \
                 'segment_ids' input is not sorted."
            ),
        ));
    }
    Ok((id, end))
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use tfdata_core::Tensor;

    #[test]
    fn sorted_unsorted_and_sparse() {
        let d = Tensor::vector(&[1.0f32, 2.0, 3.0, 4.0, 5.0]);
        let ids = Tensor::vector(&[0i32, 0, 2, 2, 3]);
        let out = run("SegmentSum", &[], vec![d.clone(), ids]).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![3.0, 0.0, 7.0, 5.0]);
        let ids = Tensor::vector(&[0i32, -1, 1, 0, 0]);
        let out = run(
            "UnsortedSegmentMax",
            &[],
            vec![d.clone(), ids, Tensor::scalar(3i32)],
        )
        .unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![5.0, 3.0, f32::MIN]);
        let out = run(
            "SparseSegmentMean",
            &[],
            vec![
                d,
                Tensor::vector(&[0i32, 1, 4]),
                Tensor::vector(&[0i32, 0, 2]),
            ],
        )
        .unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![1.5, 0.0, 5.0]);
    }

    #[test]
    fn bad_ids_are_errors() {
        let d = Tensor::vector(&[1i64, 2, 3]);
        assert!(
            run(
                "SegmentSum",
                &[],
                vec![d.clone(), Tensor::vector(&[1i32, 0, 0])]
            )
            .is_err()
        );
        assert!(
            run(
                "UnsortedSegmentSum",
                &[],
                vec![
                    d.clone(),
                    Tensor::vector(&[0i32, 3, 0]),
                    Tensor::scalar(3i64)
                ]
            )
            .is_err()
        );
        assert!(
            run(
                "SparseSegmentSum",
                &[],
                vec![d, Tensor::vector(&[0i32, 3]), Tensor::vector(&[0i32, 0])]
            )
            .is_err()
        );
    }
}
