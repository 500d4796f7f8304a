//! `AsString`, which TensorFlow implements with `printf`: the `fill`
//! attribute is really a printf flag (`' '`, `'+'`, `'-'`, `'0'`), so the
//! C formatting rules are reproduced here (`%f`, `%e`, `%g`, `%d`, `%s`).

use bytes::Bytes;
use tfdata_core::{DType, Result, Tensor};

use super::{bytes_or_empty, invalid};
use crate::attrs::NodeAttrs;
use crate::kernels::{Compute, check_size, expect_inputs};

const OP: &str = "AsString";

#[derive(Clone, Copy, Default)]
struct Flags {
    plus: bool,
    space: bool,
    left: bool,
    zero: bool,
}

#[derive(Clone, Copy)]
struct Spec {
    flags: Flags,
    width: usize,
    precision: Option<usize>,
    conv: u8,
}

/// TensorFlow's `DataTypeString` for its error messages.
fn tf_name(d: DType) -> &'static str {
    match d {
        DType::Float => "float",
        DType::Double => "double",
        DType::Half => "half",
        other => other.name(),
    }
}

pub(super) fn as_string(attrs: &NodeAttrs) -> Result<Compute> {
    let dtype = attrs.dtype("T")?;
    let precision = attrs.int_or("precision", -1)?;
    let scientific = attrs.bool_or("scientific", false)?;
    let shortest = attrs.bool_or("shortest", false)?;
    let width = attrs.int_or("width", -1)?;
    let fill = bytes_or_empty(attrs, "fill")?;
    if scientific && shortest {
        return Err(invalid(
            OP,
            "Cannot select both scientific and shortest notation",
        ));
    }
    if fill.len() > 1 {
        return Err(invalid(
            OP,
            format!(
                "Fill string must be one or fewer characters: {:?}",
                String::from_utf8_lossy(fill)
            ),
        ));
    }
    let mut flags = Flags::default();
    match fill.first() {
        None => {}
        Some(b' ') => flags.space = true,
        Some(b'+') => flags.plus = true,
        Some(b'-') => flags.left = true,
        Some(b'0') => flags.zero = true,
        Some(_) => {
            return Err(invalid(
                OP,
                format!(
                    "Fill argument not supported: \"{}\"",
                    String::from_utf8_lossy(fill)
                ),
            ));
        }
    }
    let float = matches!(
        dtype,
        DType::Float | DType::Double | DType::Half | DType::BFloat16
    );
    let integral = matches!(
        dtype,
        DType::Int8
            | DType::Int16
            | DType::Int32
            | DType::Int64
            | DType::UInt8
            | DType::UInt16
            | DType::UInt32
            | DType::UInt64
            | DType::Bool
            | DType::String
    );
    if !float && !integral {
        return Err(invalid(
            OP,
            format!("Type {} not supported.", tf_name(dtype)),
        ));
    }
    if !float {
        let name = tf_name(dtype);
        if precision > -1 {
            return Err(invalid(
                OP,
                format!("precision not supported for datatype {name}"),
            ));
        }
        if scientific {
            return Err(invalid(
                OP,
                format!("scientific not supported for datatype {name}"),
            ));
        }
        if shortest {
            return Err(invalid(
                OP,
                format!("shortest not supported for datatype {name}"),
            ));
        }
    }
    let spec = Spec {
        flags,
        width: width.clamp(0, 1 << 20) as usize,
        precision: (precision >= 0).then(|| precision.min(1 << 10) as usize),
        conv: match (float, scientific, shortest) {
            (false, ..) => b'd',
            (true, true, _) => b'e',
            (true, _, true) => b'g',
            _ => b'f',
        },
    };
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 1)?;
        let t = &inputs[0];
        if t.dtype() != dtype {
            return Err(invalid(
                OP,
                format!("expected a {dtype} input, got {}", t.dtype()),
            ));
        }
        check_size(OP, DType::String, t.num_elements())?;
        check_size(
            OP,
            DType::UInt8,
            t.num_elements().saturating_mul(spec.width as u64),
        )?;
        let out: Vec<Bytes> = match dtype {
            DType::String => t
                .string_values()?
                .iter()
                .map(|s| pad(spec, b"", s, false))
                .collect(),
            DType::Bool => t
                .to_vec::<bool>()?
                .iter()
                // TensorFlow writes bools without the width or fill.
                .map(|&b| Bytes::from_static(if b { b"true" } else { b"false" }))
                .collect(),
            _ if float => tfdata_dataset::kernels::cast(t, DType::Double)?
                .to_vec::<f64>()?
                .into_iter()
                .map(|v| format_float(spec, v))
                .collect(),
            _ => integers(t)?
                .into_iter()
                .map(|(neg, magnitude)| {
                    pad(
                        spec,
                        sign(spec, neg),
                        magnitude.to_string().as_bytes(),
                        true,
                    )
                })
                .collect(),
        };
        Ok(vec![Tensor::strings(out, t.shape().to_vec())?])
    }))
}

/// Integers as sign and magnitude (so `i64::MIN` prints).
fn integers(t: &Tensor) -> Result<Vec<(bool, u128)>> {
    let signed = |v: i128| (v < 0, v.unsigned_abs());
    Ok(match t.dtype() {
        DType::Int8 => t
            .to_vec::<i8>()?
            .into_iter()
            .map(|v| signed(v.into()))
            .collect(),
        DType::Int16 => t
            .to_vec::<i16>()?
            .into_iter()
            .map(|v| signed(v.into()))
            .collect(),
        DType::Int32 => t
            .to_vec::<i32>()?
            .into_iter()
            .map(|v| signed(v.into()))
            .collect(),
        DType::Int64 => t
            .to_vec::<i64>()?
            .into_iter()
            .map(|v| signed(v.into()))
            .collect(),
        DType::UInt8 => t
            .to_vec::<u8>()?
            .into_iter()
            .map(|v| signed(v.into()))
            .collect(),
        DType::UInt16 => t
            .to_vec::<u16>()?
            .into_iter()
            .map(|v| signed(v.into()))
            .collect(),
        DType::UInt32 => t
            .to_vec::<u32>()?
            .into_iter()
            .map(|v| signed(v.into()))
            .collect(),
        DType::UInt64 => t
            .to_vec::<u64>()?
            .into_iter()
            .map(|v| signed(v.into()))
            .collect(),
        other => {
            return Err(invalid(
                OP,
                format!("Type {} not supported.", tf_name(other)),
            ));
        }
    })
}

fn sign(spec: Spec, negative: bool) -> &'static [u8] {
    if negative {
        b"-"
    } else if spec.flags.plus {
        b"+"
    } else if spec.flags.space {
        b" "
    } else {
        b""
    }
}

/// `sign` and `body` padded to the width: zeros go between sign and body
/// (numbers only), spaces before or, left-justified, after.
fn pad(spec: Spec, sign: &[u8], body: &[u8], numeric: bool) -> Bytes {
    let len = sign.len() + body.len();
    let fill = spec.width.saturating_sub(len);
    let mut out = Vec::with_capacity(len + fill);
    if spec.flags.left {
        out.extend_from_slice(sign);
        out.extend_from_slice(body);
        out.resize(out.len() + fill, b' ');
    } else if spec.flags.zero && numeric {
        out.extend_from_slice(sign);
        out.resize(out.len() + fill, b'0');
        out.extend_from_slice(body);
    } else {
        out.resize(fill, b' ');
        out.extend_from_slice(sign);
        out.extend_from_slice(body);
    }
    Bytes::from(out)
}

/// `%.Pe` of a finite non-negative value: C's exponent form (`1.5e+02`).
fn exp_form(v: f64, precision: usize) -> (String, i32) {
    let s = format!("{v:.precision$e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    (format!("{mantissa}e{sign}{:02}", exp.unsigned_abs()), exp)
}

fn strip_zeros(s: &str) -> String {
    let (body, exp) = match s.find('e') {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let body = if body.contains('.') {
        body.trim_end_matches('0').trim_end_matches('.')
    } else {
        body
    };
    format!("{body}{exp}")
}

fn format_float(spec: Spec, v: f64) -> Bytes {
    let negative = v.is_sign_negative();
    let a = v.abs();
    let sign = sign(spec, negative);
    if !a.is_finite() {
        let body: &[u8] = if a.is_nan() { b"nan" } else { b"inf" };
        return pad(spec, sign, body, false);
    }
    let p = spec.precision.unwrap_or(6);
    let body = match spec.conv {
        b'e' => exp_form(a, p).0,
        b'g' => {
            let p = p.max(1);
            let (e_form, x) = exp_form(a, p - 1);
            if (x as i64) < p as i64 && x >= -4 {
                strip_zeros(&format!("{a:.*}", (p as i64 - 1 - x as i64) as usize))
            } else {
                strip_zeros(&e_form)
            }
        }
        _ => format!("{a:.p$}"),
    };
    pad(spec, sign, body.as_bytes(), true)
}
