//! `Cast`, `Select` and `SelectV2`.
//!
//! Float-to-integer casts reproduce what TF 2.21's x86-64 CPU kernel
//! computes, including out-of-range values and NaN, which C++ leaves
//! undefined: Eigen converts full vector packets one way and the tail of the
//! tensor (and every element of a short one) another. To float32/float64
//! sources, int8, uint8, int16 and uint16 targets saturate in the packets
//! (blocks of 32 elements from float32, 16 from float64) and wrap through
//! int32 in the tail; uint32 targets go through a branch-free unsigned
//! conversion in packets of 8 and through int64 in the tail. int32 and int64
//! targets give the minimum for NaN and out-of-range values everywhere, and
//! uint64 the same branch-free conversion everywhere. These are the results
//! of the official AVX wheels; a TF build with other vector widths gives
//! other out-of-range results, in-range values agree everywhere.

use tfdata_core::{DType, Error, Result, Tensor};

use super::super::Compute;
use super::super::complex::{from_pairs, pairs, part_of};
use super::super::numeric::{
    Elem, Picker, Plan, broadcast_shape_opt, buffer, dispatch, expect_dtype, finish, invalid,
    out_elements, shape_str, unsupported, values, zeroed,
};
use crate::attrs::NodeAttrs;

/// A value on its way through a cast: integers (and bools) exactly, floats
/// widened to f64 (exact for float32).
#[derive(Clone, Copy)]
enum Val {
    Int(i128),
    Float(f64),
}

trait Source: Elem {
    fn val(self) -> Val;
}

trait Target: Elem {
    /// `packet`: the element is in the vectorized part of TF's loop.
    fn from_val(v: Val, packet: bool, truncate: bool) -> Self;
}

macro_rules! int_source {
    ($($t:ty),*) => {$(
        impl Source for $t {
            #[inline(always)]
            fn val(self) -> Val {
                Val::Int(self as i128)
            }
        }
    )*};
}
int_source!(i8, i16, i32, i64, u8, u16, u32, u64);

impl Source for bool {
    #[inline(always)]
    fn val(self) -> Val {
        Val::Int(i128::from(self))
    }
}

impl Source for f32 {
    #[inline(always)]
    fn val(self) -> Val {
        Val::Float(f64::from(self))
    }
}

impl Source for f64 {
    #[inline(always)]
    fn val(self) -> Val {
        Val::Float(self)
    }
}

/// x86's `cvttsd2si` to 32 bits: truncation, the minimum when out of range.
#[inline(always)]
fn cvtt32(f: f64) -> i32 {
    // NaN fails both comparisons.
    if f > -2_147_483_649.0 && f < 2_147_483_648.0 {
        f as i32
    } else {
        i32::MIN
    }
}

/// x86's `cvttsd2si` to 64 bits.
#[inline(always)]
fn cvtt64(f: f64) -> i64 {
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f) {
        f as i64
    } else {
        i64::MIN
    }
}

/// The compilers' branch-free float-to-uint64 conversion TF runs.
#[inline(always)]
fn to_u64(f: f64) -> u64 {
    let r = cvtt64(f);
    (if r < 0 {
        r | cvtt64(f - 9_223_372_036_854_775_808.0)
    } else {
        r
    }) as u64
}

/// Eigen's packet float-to-uint32 conversion.
#[inline(always)]
fn to_u32_packet(f: f64) -> u32 {
    let r = cvtt32(f);
    (if r < 0 {
        r | cvtt32(f - 2_147_483_648.0)
    } else {
        r
    }) as u32
}

macro_rules! small_int_target {
    ($($t:ty),*) => {$(
        impl Target for $t {
            #[inline(always)]
            fn from_val(v: Val, packet: bool, _: bool) -> Self {
                match v {
                    Val::Int(i) => i as $t,
                    Val::Float(f) if packet => {
                        cvtt32(f).clamp(<$t>::MIN as i32, <$t>::MAX as i32) as $t
                    }
                    Val::Float(f) => cvtt32(f) as $t,
                }
            }
        }
    )*};
}
small_int_target!(i8, u8, i16, u16);

impl Target for i32 {
    #[inline(always)]
    fn from_val(v: Val, _: bool, _: bool) -> Self {
        match v {
            Val::Int(i) => i as i32,
            Val::Float(f) => cvtt32(f),
        }
    }
}

impl Target for u32 {
    #[inline(always)]
    fn from_val(v: Val, packet: bool, _: bool) -> Self {
        match v {
            Val::Int(i) => i as u32,
            Val::Float(f) if packet => to_u32_packet(f),
            Val::Float(f) => cvtt64(f) as u32,
        }
    }
}

impl Target for i64 {
    #[inline(always)]
    fn from_val(v: Val, _: bool, _: bool) -> Self {
        match v {
            Val::Int(i) => i as i64,
            Val::Float(f) => cvtt64(f),
        }
    }
}

impl Target for u64 {
    #[inline(always)]
    fn from_val(v: Val, _: bool, _: bool) -> Self {
        match v {
            Val::Int(i) => i as u64,
            Val::Float(f) => to_u64(f),
        }
    }
}

impl Target for f32 {
    #[inline(always)]
    fn from_val(v: Val, _: bool, truncate: bool) -> Self {
        match v {
            Val::Int(i) => i as f32,
            // `Truncate` drops the mantissa bits float32 has no room for
            // (so beyond the float32 range is still infinity, as in TF).
            Val::Float(f) if truncate => (f64::from_bits(f.to_bits() & !0x1FFF_FFFF) as f32).ftz(),
            Val::Float(f) => (f as f32).ftz(),
        }
    }
}

impl Target for f64 {
    #[inline(always)]
    fn from_val(v: Val, _: bool, _: bool) -> Self {
        match v {
            Val::Int(i) => i as f64,
            Val::Float(f) => f,
        }
    }
}

impl Target for bool {
    #[inline(always)]
    fn from_val(v: Val, _: bool, _: bool) -> Self {
        match v {
            Val::Int(i) => i != 0,
            Val::Float(f) => f != 0.0,
        }
    }
}

/// Elements per vectorized block of TF's cast loop, where the packet and
/// scalar conversions differ (0: they agree).
fn block(src: DType, dst: DType) -> usize {
    use DType::*;
    match (src, dst) {
        (Float, Int8 | UInt8 | Int16 | UInt16) => 32,
        (Double, Int8 | UInt8 | Int16 | UInt16) => 16,
        (Float | Double, UInt32) => 8,
        _ => 0,
    }
}

fn cast_pair<S: Source, D: Target>(op: &str, x: &Tensor, truncate: bool) -> Result<Tensor> {
    let n = out_elements(op, D::DTYPE, x.shape())?;
    let b = block(S::DTYPE, D::DTYPE);
    let packets = n.checked_div(b).map_or(0, |blocks| blocks * b);
    let mut out = zeroed::<D>(n);
    let input = values::<S>(buffer(op, x)?);
    for (i, (slot, v)) in out.chunks_exact_mut(D::SIZE).zip(input).enumerate() {
        D::from_val(v.ftz().val(), i < packets, truncate).set(slot);
    }
    finish(D::DTYPE, x.shape().to_vec(), out)
}

fn cast_from<S: Source>(op: &str, dst: DType, x: &Tensor, truncate: bool) -> Result<Tensor> {
    dispatch!(
        dst,
        op,
        [
            Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Bool
        ],
        cast_pair[S](op, x, truncate)
    )
}

pub(super) fn build_cast(attrs: &NodeAttrs) -> Result<Compute> {
    let src = attrs.dtype("SrcT")?;
    let dst = attrs.dtype("DstT")?;
    let truncate = attrs.bool_or("Truncate", false)?;
    if src != dst && (part_of(src).is_some() || part_of(dst).is_some()) {
        for d in [src, dst] {
            if numeric_size(d).is_none() && part_of(d).is_none() {
                return Err(attrs.error(unsupported("Cast", d)));
            }
        }
        return Ok(Box::new(move |inputs| {
            let [x] = super::super::numeric::take::<1>("Cast", inputs)?;
            expect_dtype("Cast", &x, 0, src)?;
            Ok(vec![cast_complex(&x, dst)?])
        }));
    }
    if src != dst {
        if src == DType::String || dst == DType::String {
            return Err(Error::Unimplemented(format!(
                "Cast: Cast {src} to {dst} is not supported"
            )));
        }
        for d in [src, dst] {
            if numeric_size(d).is_none() {
                return Err(attrs.error(unsupported("Cast", d)));
            }
        }
    }
    Ok(Box::new(move |inputs| {
        let [x] = super::super::numeric::take::<1>("Cast", inputs)?;
        expect_dtype("Cast", &x, 0, src)?;
        if src == dst {
            return Ok(vec![x]);
        }
        Ok(vec![dispatch!(
            src,
            "Cast",
            [
                Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Bool
            ],
            cast_from("Cast", dst, &x, truncate)
        )?])
    }))
}

/// A cast to or from a complex dtype (not both real): a real value
/// becomes the real part (imaginary zero), a complex one keeps its real
/// part ("discards the imaginary part", as `tf.cast` warns; to bool too:
/// `0+1j` is false); between complex dtypes each part is converted.
fn cast_complex(x: &Tensor, dst: DType) -> Result<Tensor> {
    let op = "Cast";
    let src = x.dtype();
    let shape = x.shape().to_vec();
    match (part_of(src), part_of(dst)) {
        (Some(_), Some(_)) => {
            let b = buffer(op, x)?;
            if src == DType::Complex64 {
                from_pairs::<f64>(
                    shape,
                    pairs::<f32>(b).map(|(r, i)| (r.ftz().into(), i.ftz().into())),
                )
            } else {
                from_pairs::<f32>(
                    shape,
                    pairs::<f64>(b).map(|(r, i)| ((r as f32).ftz(), (i as f32).ftz())),
                )
            }
        }
        (None, Some(part)) => {
            let real = if src == part {
                x.clone()
            } else {
                cast_real(x, part)?
            };
            let b = buffer(op, &real)?;
            if part == DType::Float {
                from_pairs::<f32>(shape, values::<f32>(b).map(|r| (r, 0.0)))
            } else {
                from_pairs::<f64>(shape, values::<f64>(b).map(|r| (r, 0.0)))
            }
        }
        (Some(part), None) => {
            let b = buffer(op, x)?;
            let mut out = Vec::new();
            if part == DType::Float {
                pairs::<f32>(b).for_each(|(r, _)| r.put(&mut out));
            } else {
                pairs::<f64>(b).for_each(|(r, _)| r.put(&mut out));
            }
            let real = finish(part, shape, out)?;
            if dst == part {
                Ok(real)
            } else {
                cast_real(&real, dst)
            }
        }
        (None, None) => cast_real(x, dst),
    }
}

/// A cast between real dtypes (neither a string).
fn cast_real(x: &Tensor, dst: DType) -> Result<Tensor> {
    dispatch!(
        x.dtype(),
        "Cast",
        [
            Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Bool
        ],
        cast_from("Cast", dst, x, false)
    )
}

/// The dtypes casts convert between (besides the identity).
fn numeric_size(d: DType) -> Option<usize> {
    use DType::*;
    match d {
        Float | Double | Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 | Bool => {
            d.size()
        }
        _ => None,
    }
}

fn same_size(op: &str, t: &Tensor, e: &Tensor) -> Result<()> {
    if t.shape() != e.shape() {
        return Err(invalid(
            op,
            format!(
                "'then' and 'else' must have the same size.  but received: {} vs. {}",
                shape_str(t.shape()),
                shape_str(e.shape())
            ),
        ));
    }
    Ok(())
}

fn select_inputs(op: &str, inputs: Vec<Tensor>) -> Result<[Tensor; 3]> {
    let [c, t, e] = super::super::numeric::take::<3>(op, inputs)?;
    expect_dtype(op, &c, 0, DType::Bool)?;
    expect_dtype(op, &e, 2, t.dtype())?;
    if t.dtype() != DType::String && numeric_size(t.dtype()).is_none() {
        return Err(unsupported(op, t.dtype()));
    }
    Ok([c, t, e])
}

/// TF's original `Select`: a scalar condition picks a whole tensor, a vector
/// condition picks rows of a higher-rank `t`/`e`, otherwise all three have
/// one shape.
fn select(op: &str, inputs: Vec<Tensor>) -> Result<Tensor> {
    let [c, t, e] = select_inputs(op, inputs)?;
    let cond = buffer(op, &c)?;
    if c.shape().is_empty() {
        same_size(op, &t, &e)?;
        return Ok(if bool::get(cond) { t } else { e });
    }
    let n = out_elements(op, t.dtype(), t.shape())?;
    let mut picker = Picker::new(&t, &e, n);
    if c.shape().len() == 1 && t.shape().len() != 1 {
        let Some(&rows) = t.shape().first() else {
            return Err(invalid(
                op,
                format!(
                    "'then' must be at least a vector, but saw shape: {}",
                    shape_str(t.shape())
                ),
            ));
        };
        if c.shape() != [rows] {
            return Err(invalid(
                op,
                format!(
                    "Number of batches of 'then' must match size of 'cond', but saw: {rows} vs. {}",
                    c.num_elements()
                ),
            ));
        }
        same_size(op, &t, &e)?;
        let row = if rows > 0 { n / rows as usize } else { 0 };
        for (r, take_t) in values::<bool>(cond).enumerate() {
            for i in r * row..(r + 1) * row {
                picker.push(take_t, i);
            }
        }
    } else {
        for (i, other) in [(1, &t), (2, &e)] {
            if other.shape() != c.shape() {
                return Err(invalid(
                    op,
                    format!(
                        "Inputs to operation {op} of type Select must have the same size and \
                         shape.  Input 0: {} != input {i}: {}",
                        shape_str(c.shape()),
                        shape_str(other.shape())
                    ),
                ));
            }
        }
        for (i, take_t) in values::<bool>(cond).enumerate() {
            picker.push(take_t, i);
        }
    }
    picker.finish(t.dtype(), t.shape().to_vec())
}

/// `SelectV2`: the three inputs broadcast together.
fn select_v2(op: &str, inputs: Vec<Tensor>) -> Result<Tensor> {
    let [c, t, e] = select_inputs(op, inputs)?;
    let shape = broadcast_shape_opt(t.shape(), e.shape())
        .and_then(|te| broadcast_shape_opt(c.shape(), &te))
        .ok_or_else(|| {
            invalid(
                op,
                format!(
                    "condition {}, then {}, and else {} must be broadcastable",
                    shape_str(c.shape()),
                    shape_str(t.shape()),
                    shape_str(e.shape())
                ),
            )
        })?;
    let n = out_elements(op, t.dtype(), &shape)?;
    let cond = buffer(op, &c)?;
    let mut picker = Picker::new(&t, &e, n);
    if c.shape() == shape.as_slice() && t.shape() == c.shape() && e.shape() == c.shape() {
        for (i, take_t) in values::<bool>(cond).enumerate() {
            picker.push(take_t, i);
        }
    } else {
        Plan::new(&shape, [c.shape(), t.shape(), e.shape()]).walk(|[ci, ti, ei]| {
            let take_t = super::super::numeric::at::<bool>(cond, ci);
            picker.push(take_t, if take_t { ti } else { ei });
        });
    }
    picker.finish(t.dtype(), shape)
}

pub(super) fn build_select(attrs: &NodeAttrs, v2: bool) -> Result<Compute> {
    let want = super::super::numeric::attr_dtype(attrs, "T")?;
    let op = attrs.op.to_string();
    Ok(Box::new(move |inputs| {
        if let (Some(d), Some(t)) = (want, inputs.get(1)) {
            expect_dtype(&op, t, 1, d)?;
        }
        let out = if v2 {
            select_v2(&op, inputs)?
        } else {
            select(&op, inputs)?
        };
        Ok(vec![out])
    }))
}
