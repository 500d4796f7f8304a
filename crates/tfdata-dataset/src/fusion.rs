//! Map-function fusion: consecutive built-in map functions that one joint
//! kernel does with the same bits, rewritten into that kernel's built-in
//! (`decode_jpeg` → `resize` → `normalize` → `cast(uint8)` into `decode_jpeg_resize`,
//! `resize` → `normalize` into `resize_normalize`; see [`crate::kernels`]).
//! `ops::map` applies it inside a chain of fused parallel maps.

use crate::attrs::{Attr, Attrs, FunctionRef};

/// Consecutive map functions that run as one, with the same bits: a
/// bilinear `resize` then `normalize` becomes `resize_normalize` (one pass,
/// no resized image in between); `decode_jpeg` then either becomes
/// `decode_jpeg_resize` (no decoded image in between), which absorbs a
/// following `normalize` and a `cast` to `uint8` too (no float32 image). Only functions of the same component fuse.
/// Used by map fusion (`ops::map`), which already runs consecutive parallel
/// maps as one stage; anything else is left as it is.
pub fn fuse(functions: Vec<FunctionRef>) -> Vec<FunctionRef> {
    let mut out: Vec<FunctionRef> = Vec::with_capacity(functions.len());
    for f in functions {
        if let Some(prev) = out.last()
            && let Some(fused) = fuse_pair(prev, &f)
        {
            out.pop();
            out.push(fused);
            continue;
        }
        out.push(f);
    }
    out
}

/// The one function doing `first` then `second`, if there is one.
fn fuse_pair(first: &FunctionRef, second: &FunctionRef) -> Option<FunctionRef> {
    let component = |f: &FunctionRef| f.args.get("component").cloned();
    if first.inline.is_some() || second.inline.is_some() || component(first) != component(second) {
        return None;
    }
    let bilinear = |f: &FunctionRef| {
        f.args
            .get("method")
            .is_none_or(|m| matches!(m, Attr::Str(s) if s == "bilinear"))
    };
    let normalized = |f: &FunctionRef| f.args.get("mean").is_some();
    let cast = |f: &FunctionRef| f.args.get("dtype").is_some();
    // Only the cast back to bytes: the one the fused kernel does in place.
    let to_uint8 =
        |f: &FunctionRef| matches!(f.args.get("dtype"), Some(Attr::Str(s)) if s == "uint8");
    let (name, from_first, from_second): (&str, &[&str], &[&str]) =
        match (first.name.as_str(), second.name.as_str()) {
            ("resize", "normalize") if bilinear(first) => {
                ("resize_normalize", &["size"], &["mean", "std"])
            }
            ("decode_jpeg", "resize") if bilinear(second) => {
                ("decode_jpeg_resize", &["channels", "dct_method"], &["size"])
            }
            ("decode_jpeg", "resize_normalize") => (
                "decode_jpeg_resize",
                &["channels", "dct_method"],
                &["size", "mean", "std"],
            ),
            ("decode_jpeg_resize", "normalize") if !normalized(first) && !cast(first) => (
                "decode_jpeg_resize",
                &["channels", "dct_method", "size"],
                &["mean", "std"],
            ),
            ("decode_jpeg_resize", "cast") if !cast(first) && to_uint8(second) => (
                "decode_jpeg_resize",
                &["channels", "dct_method", "size", "mean", "std"],
                &["dtype"],
            ),
            _ => return None,
        };
    let mut args = Attrs::new();
    if let Some(c) = component(first) {
        args = args.with("component", c);
    }
    for (f, keys) in [(first, from_first), (second, from_second)] {
        for &key in keys {
            if let Some(v) = f.args.get(key) {
                args = args.with(key, v.clone());
            }
        }
    }
    Some(FunctionRef::with_args(name, args))
}
