//! Built-in functions, usable by name from any pipeline with no Rust code:
//! the stock `tfdata worker` runs them. Element-wise ones take an optional
//! `component` argument choosing the component they transform (a dictionary
//! key or a tuple position; default: the element's only component) and leave
//! the rest of the element as it is. Arguments are checked, and the output
//! structure computed, when the pipeline is validated.
//!
//! | name | arguments | does |
//! |---|---|---|
//! | `parse_example` | `features: {name: {dtype, shape?, default?, var_len?}}` | `tf.io.parse_single_example`; the element becomes the features dictionary |
//! | `decode_jpeg`, `decode_png`, `decode_image` | `channels` (0); `decode_jpeg`: `dct_method` ("", "INTEGER_FAST", "INTEGER_ACCURATE") | to `uint8 [h, w, c]` |
//! | `decode_and_crop_jpeg` | `crop_window: [y, x, h, w]`, `channels` (0), `dct_method` ("") | the window of a JPEG, decoding stopped after its last row |
//! | `resize` | `size: [h, w]`, `method` ("bilinear") | `tf.image.resize` |
//! | `decode_random_crop_jpeg` | `channels` (0), `dct_method` (""), `area_range` ([0.08, 1]), `aspect_ratio_range` ([3/4, 4/3]), `min_object_covered` (0.1), `max_attempts` (10), `seed` | an ImageNet-style random window (`sample_distorted_bounding_box` + `decode_and_crop_jpeg`) |
//! | `resize_normalize` | `size`, `mean`, `std` | bilinear `resize` then `normalize`, one pass, same bits (map fusion makes it from the two) |
//! | `decode_jpeg_resize` | `size`, `channels` (0), `dct_method` (""), `mean`, `std` (optional), `dtype` (`float32`, or `uint8`) | `decode_jpeg` then bilinear `resize` (then `normalize`, then `cast` to `dtype`), resized as decoded, same bits (map fusion makes it) |
//! | `central_crop` | `fraction` | |
//! | `crop_to_bounding_box` | `offset_height`, `offset_width`, `target_height`, `target_width` | |
//! | `random_crop` | `size: [h, w]`, `seed` | |
//! | `flip_left_right`, `flip_up_down` | | |
//! | `random_flip_left_right`, `random_flip_up_down` | `seed` | |
//! | `cast` | `dtype` | `tf.cast` |
//! | `normalize` | `mean: [..]`, `std: [..]` | `(x - mean) / std` per channel, float32 |
//! | `per_image_standardization` | | |
//! | `scale` | `factor`, `offset` (0) | `x * factor + offset`, float32 |
//! | `one_hot` | `depth`, `on_value` (1), `off_value` (0) | |
//! | `string_split` | `sep` (whitespace) | scalar string to a vector |
//! | `lower` | | |
//! | `lookup` | `vocabulary_file`, `default_value` (-1) | token to line number |
//! | `select` | `components: [..]` | keeps the listed components, as a tuple (one: the tensor itself) |
//! | `sleep` | `ms` (at most 10,000) | waits, then passes the element on: simulates I/O latency (tests, benchmarks) |
//!
//! Random ops draw a fresh seed per element from `seed` and a per-function
//! counter, so elements differ and a sequential pipeline is reproducible;
//! the random stream is not TensorFlow's.
//!
//! The built-in dataset functions (`tfrecord_dataset`, `text_line_dataset`)
//! live with the file sources they make, in [`crate::ops::files`];
//! [`crate::ops::resolve`] consults both before the registry.
//!
//! This module is the table of names and their arguments; [`elementwise`]
//! applies a kernel to the chosen component (and draws the random ones'
//! seeds), [`restructure`] holds the built-ins that change the element's
//! structure (`parse_example`, `select`).

mod elementwise;
mod restructure;
mod sleep;

use std::sync::{Arc, Mutex, OnceLock};

use tfdata_core::{DType, Error, Result};

use self::elementwise::{Seeds, elementwise};
use self::restructure::{parse_example, select};
use crate::attrs::{Attrs, FunctionRef};
use crate::functions::{PredicateFn, ResolvedMap};
use crate::kernels;
use crate::spec::{Shape, Structure, TensorSpec};

/// The built-in map function `f`, or `None` if `f` names no built-in.
pub fn map(f: &FunctionRef, input: Option<&Structure>) -> Option<Result<ResolvedMap>> {
    let name = f.name.as_str();
    let args = &f.args;
    Some(match name {
        "parse_example" => parse_example(args, input),
        "select" => select(args, input),
        "sleep" => sleep::sleep(args, input),
        "decode_jpeg" | "decode_png" | "decode_image" => {
            let channels = match channels(name, args) {
                Ok(c) => c,
                Err(e) => return Some(Err(e)),
            };
            // `dct_method` is `decode_jpeg`'s alone, as in TensorFlow.
            let dct = match args.str_or(name, "dct_method", "") {
                Ok(m) if name == "decode_jpeg" => kernels::DctMethod::from_tf(m),
                Ok(_) => Ok(kernels::DctMethod::default()),
                Err(e) => Err(e),
            };
            let dct = match dct {
                Ok(d) => d,
                Err(e) => return Some(Err(e)),
            };
            let kernel = match name {
                "decode_jpeg" => kernels::decode_jpeg,
                "decode_png" => kernels::decode_png,
                _ => kernels::decode_image,
            };
            let known: &[&str] = if name == "decode_jpeg" {
                &["channels", "dct_method"]
            } else {
                &["channels"]
            };
            let c = (channels > 0).then_some(i64::from(channels));
            let jpeg_op = name == "decode_jpeg";
            elementwise(
                name,
                args,
                known,
                input,
                move |t| {
                    if jpeg_op {
                        kernels::decode_jpeg_with(t, channels, dct)
                    } else {
                        kernel(t, channels)
                    }
                },
                move |_| {
                    Ok(TensorSpec::new(
                        DType::UInt8,
                        Shape(Some(vec![None, None, c])),
                    ))
                },
            )
        }
        "decode_and_crop_jpeg" => (|| {
            let channels = channels(name, args)?;
            let dct = kernels::DctMethod::from_tf(args.str_or(name, "dct_method", "")?)?;
            let window = args.ints(name, "crop_window")?;
            let c = (channels > 0).then_some(i64::from(channels));
            let (h, w) = match window.as_slice() {
                [_, _, h, w] => (Some(*h), Some(*w)),
                _ => (None, None),
            };
            elementwise(
                name,
                args,
                &["crop_window", "channels", "dct_method"],
                input,
                move |t| kernels::decode_and_crop_jpeg(t, &window, channels, dct),
                move |_| Ok(TensorSpec::new(DType::UInt8, Shape(Some(vec![h, w, c])))),
            )
        })(),
        "resize" => (|| {
            let size = size(name, args)?;
            let method = match args.str_or(name, "method", "bilinear")? {
                "bilinear" => kernels::ResizeMethod::Bilinear,
                "nearest" => kernels::ResizeMethod::Nearest,
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "resize: method must be \"bilinear\" or \"nearest\", got {other:?}"
                    )));
                }
            };
            elementwise(
                name,
                args,
                &["size", "method"],
                input,
                move |t| kernels::resize(t, size[0], size[1], method),
                move |s| {
                    let dtype = if method == kernels::ResizeMethod::Bilinear {
                        DType::Float
                    } else {
                        s.dtype
                    };
                    Ok(TensorSpec::new(
                        dtype,
                        replace_hw(&s.shape, Some(size[0]), Some(size[1])),
                    ))
                },
            )
        })(),
        "resize_normalize" => (|| {
            let size = size(name, args)?;
            let floats = |key| -> Result<Vec<f32>> {
                Ok(args
                    .floats(name, key)?
                    .into_iter()
                    .map(|v| v as f32)
                    .collect())
            };
            let (mean, std) = (floats("mean")?, floats("std")?);
            if mean.len() != std.len() || std.contains(&0.0) {
                return Err(Error::InvalidArgument(
                    "resize_normalize: mean and std must have the same length and std no zeros"
                        .into(),
                ));
            }
            elementwise(
                name,
                args,
                &["size", "mean", "std"],
                input,
                move |t| kernels::resize_normalize(t, size[0], size[1], &mean, &std),
                move |s| {
                    Ok(TensorSpec::new(
                        DType::Float,
                        replace_hw(&s.shape, Some(size[0]), Some(size[1])),
                    ))
                },
            )
        })(),
        "decode_random_crop_jpeg" => (|| {
            let channels = channels(name, args)?;
            let dct = kernels::DctMethod::from_tf(args.str_or(name, "dct_method", "")?)?;
            let defaults = kernels::CropSampling::default();
            let pair = |key, default: [f32; 2]| -> Result<[f32; 2]> {
                if args.get(key).is_none() {
                    return Ok(default);
                }
                match args.floats(name, key)?.as_slice() {
                    [a, b] => Ok([*a as f32, *b as f32]),
                    other => Err(Error::InvalidArgument(format!(
                        "{name}: {key} must be [min, max], got {other:?}"
                    ))),
                }
            };
            let sampling = kernels::CropSampling {
                area_range: pair("area_range", defaults.area_range)?,
                aspect_ratio_range: pair("aspect_ratio_range", defaults.aspect_ratio_range)?,
                min_object_covered: match args.get("min_object_covered") {
                    None => defaults.min_object_covered,
                    Some(_) => args.float(name, "min_object_covered")? as f32,
                },
                max_attempts: u32::try_from(args.int_or(
                    name,
                    "max_attempts",
                    i64::from(defaults.max_attempts),
                )?)
                .unwrap_or(0),
            };
            sampling.validate(name)?;
            let seeds = Seeds::new(name, args)?;
            let c = (channels > 0).then_some(i64::from(channels));
            elementwise(
                name,
                args,
                &[
                    "channels",
                    "dct_method",
                    "area_range",
                    "aspect_ratio_range",
                    "min_object_covered",
                    "max_attempts",
                    "seed",
                ],
                input,
                move |t| {
                    kernels::decode_random_crop_jpeg(t, channels, dct, &sampling, seeds.next())
                },
                move |_| {
                    Ok(TensorSpec::new(
                        DType::UInt8,
                        Shape(Some(vec![None, None, c])),
                    ))
                },
            )
        })(),
        "decode_jpeg_resize" => (|| {
            let size = size(name, args)?;
            let channels = channels(name, args)?;
            let dct = kernels::DctMethod::from_tf(args.str_or(name, "dct_method", "")?)?;
            let normalize = match (args.get("mean"), args.get("std")) {
                (None, None) => None,
                _ => {
                    let floats = |key| -> Result<Vec<f32>> {
                        Ok(args
                            .floats(name, key)?
                            .into_iter()
                            .map(|v| v as f32)
                            .collect())
                    };
                    Some((floats("mean")?, floats("std")?))
                }
            };
            let c = (channels > 0).then_some(i64::from(channels));
            let dtype = match args.get("dtype") {
                None => DType::Float,
                Some(_) => match dtype_arg(name, args, "dtype")? {
                    d @ (DType::Float | DType::UInt8) => d,
                    d => {
                        return Err(Error::InvalidArgument(format!(
                            "{name}: `dtype` must be float32 or uint8, not {d}"
                        )));
                    }
                },
            };
            elementwise(
                name,
                args,
                &["size", "channels", "dct_method", "mean", "std", "dtype"],
                input,
                move |t| {
                    let ms = normalize
                        .as_ref()
                        .map(|(m, s)| (m.as_slice(), s.as_slice()));
                    kernels::decode_jpeg_resize_as(t, channels, dct, size[0], size[1], ms, dtype)
                },
                move |_| {
                    Ok(TensorSpec::new(
                        dtype,
                        Shape(Some(vec![Some(size[0]), Some(size[1]), c])),
                    ))
                },
            )
        })(),
        "central_crop" => (|| {
            let fraction = args.float(name, "fraction")?;
            // TensorFlow's arithmetic: start = int((size - size * fraction) / 2).
            let crop = move |d: Option<i64>| {
                d.map(|d| {
                    let start = ((d as f64 - d as f64 * fraction) / 2.0) as i64;
                    d - 2 * start
                })
            };
            elementwise(
                name,
                args,
                &["fraction"],
                input,
                move |t| kernels::central_crop(t, fraction),
                move |s| {
                    let (h, w) = match &s.shape.0 {
                        Some(d) if d.len() >= 3 => (d[d.len() - 3], d[d.len() - 2]),
                        _ => (None, None),
                    };
                    Ok(TensorSpec::new(
                        s.dtype,
                        replace_hw(&s.shape, crop(h), crop(w)),
                    ))
                },
            )
        })(),
        "crop_to_bounding_box" => (|| {
            let (oh, ow) = (
                args.int(name, "offset_height")?,
                args.int(name, "offset_width")?,
            );
            let (th, tw) = (
                args.int(name, "target_height")?,
                args.int(name, "target_width")?,
            );
            elementwise(
                name,
                args,
                &[
                    "offset_height",
                    "offset_width",
                    "target_height",
                    "target_width",
                ],
                input,
                move |t| kernels::crop_to_bounding_box(t, oh, ow, th, tw),
                move |s| {
                    Ok(TensorSpec::new(
                        s.dtype,
                        replace_hw(&s.shape, Some(th), Some(tw)),
                    ))
                },
            )
        })(),
        "random_crop" => (|| {
            let size = size(name, args)?;
            let seeds = Seeds::new(name, args)?;
            elementwise(
                name,
                args,
                &["size", "seed"],
                input,
                move |t| kernels::random_crop(t, size[0], size[1], seeds.next()),
                move |s| {
                    Ok(TensorSpec::new(
                        s.dtype,
                        replace_hw(&s.shape, Some(size[0]), Some(size[1])),
                    ))
                },
            )
        })(),
        "flip_left_right" => elementwise(name, args, &[], input, kernels::flip_left_right, same),
        "flip_up_down" => elementwise(name, args, &[], input, kernels::flip_up_down, same),
        "random_flip_left_right" | "random_flip_up_down" => (|| {
            let seeds = Seeds::new(name, args)?;
            let kernel = if name == "random_flip_left_right" {
                kernels::random_flip_left_right
            } else {
                kernels::random_flip_up_down
            };
            elementwise(
                name,
                args,
                &["seed"],
                input,
                move |t| kernel(t, seeds.next()),
                same,
            )
        })(),
        "cast" => (|| {
            let dtype = dtype_arg(name, args, "dtype")?;
            elementwise(
                name,
                args,
                &["dtype"],
                input,
                move |t| kernels::cast(t, dtype),
                move |s| Ok(TensorSpec::new(dtype, s.shape.clone())),
            )
        })(),
        "normalize" => (|| {
            let mean: Vec<f32> = args
                .floats(name, "mean")?
                .into_iter()
                .map(|v| v as f32)
                .collect();
            let std: Vec<f32> = args
                .floats(name, "std")?
                .into_iter()
                .map(|v| v as f32)
                .collect();
            if mean.len() != std.len() || std.contains(&0.0) {
                return Err(Error::InvalidArgument(
                    "normalize: mean and std must have the same length and std no zeros".into(),
                ));
            }
            elementwise(
                name,
                args,
                &["mean", "std"],
                input,
                move |t| kernels::normalize(t, &mean, &std),
                float32,
            )
        })(),
        "per_image_standardization" => elementwise(
            name,
            args,
            &[],
            input,
            kernels::per_image_standardization,
            float32,
        ),
        "scale" => (|| {
            let factor = args.float(name, "factor")? as f32;
            let offset = args.float_or(name, "offset", 0.0)? as f32;
            elementwise(
                name,
                args,
                &["factor", "offset"],
                input,
                move |t| kernels::scale(t, factor, offset),
                float32,
            )
        })(),
        "one_hot" => (|| {
            let depth = args.int(name, "depth")?;
            if depth < 0 {
                return Err(Error::InvalidArgument(format!(
                    "one_hot: depth must be non-negative, got {depth}"
                )));
            }
            let on = args.float_or(name, "on_value", 1.0)? as f32;
            let off = args.float_or(name, "off_value", 0.0)? as f32;
            elementwise(
                name,
                args,
                &["depth", "on_value", "off_value"],
                input,
                move |t| kernels::one_hot(t, depth, on, off),
                move |s| {
                    Ok(TensorSpec::new(
                        DType::Float,
                        Shape(s.shape.0.as_ref().map(|d| {
                            let mut d = d.clone();
                            d.push(Some(depth));
                            d
                        })),
                    ))
                },
            )
        })(),
        "string_split" => (|| {
            let sep = match args.get("sep") {
                None => None,
                Some(_) => Some(args.str(name, "sep")?.to_string()),
            };
            elementwise(
                name,
                args,
                &["sep"],
                input,
                move |t| kernels::string_split(t, sep.as_deref()),
                |_| Ok(TensorSpec::new(DType::String, Shape(Some(vec![None])))),
            )
        })(),
        "lower" => elementwise(name, args, &[], input, kernels::lower, same),
        "lookup" => (|| {
            let path = args.str(name, "vocabulary_file")?.to_string();
            let default = args.int_or(name, "default_value", -1)?;
            let vocabulary = Arc::new(LazyVocabulary::new(path));
            elementwise(
                name,
                args,
                &["vocabulary_file", "default_value"],
                input,
                move |t| kernels::lookup(t, vocabulary.get()?, default),
                |s| Ok(TensorSpec::new(DType::Int64, s.shape.clone())),
            )
        })(),
        _ => return None,
    })
}

/// A vocabulary read on first use, on the pipeline's thread. Resolving a
/// pipeline (which the dispatcher does on its RPC path, to validate a
/// registration) must not read files, and the file may be in a store that
/// only workers reach. A failed read is tried again by the next element
/// (the first failure ends the iteration anyway).
struct LazyVocabulary {
    path: String,
    loaded: OnceLock<kernels::Vocabulary>,
    loading: Mutex<()>,
}

impl LazyVocabulary {
    fn new(path: String) -> Self {
        LazyVocabulary {
            path,
            loaded: OnceLock::new(),
            loading: Mutex::new(()),
        }
    }

    fn get(&self) -> Result<&kernels::Vocabulary> {
        if let Some(v) = self.loaded.get() {
            return Ok(v);
        }
        // One reader of the file at a time; the others then find it loaded.
        let _loading = self.loading.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = self.loaded.get() {
            return Ok(v);
        }
        let vocabulary = kernels::Vocabulary::from_file(&self.path)?;
        Ok(self.loaded.get_or_init(|| vocabulary))
    }
}

/// The built-in predicate `f`, if any (none yet).
pub fn predicate(_f: &FunctionRef, _input: Option<&Structure>) -> Option<Result<PredicateFn>> {
    None
}

fn same(s: &TensorSpec) -> Result<TensorSpec> {
    Ok(s.clone())
}

fn float32(s: &TensorSpec) -> Result<TensorSpec> {
    Ok(TensorSpec::new(DType::Float, s.shape.clone()))
}

/// An image shape with its height and width replaced (rank 3 or 4).
fn replace_hw(shape: &Shape, h: Option<i64>, w: Option<i64>) -> Shape {
    match &shape.0 {
        Some(d) if d.len() >= 3 => {
            let mut d = d.clone();
            let n = d.len();
            d[n - 3] = h;
            d[n - 2] = w;
            Shape(Some(d))
        }
        _ => Shape(None),
    }
}

/// Largest output image of `resize` / `random_crop`, in pixels, so a
/// pipeline cannot make a worker allocate without bound.
const MAX_IMAGE_PIXELS: i64 = 1 << 28;

fn size(name: &str, args: &Attrs) -> Result<[i64; 2]> {
    match args.ints(name, "size")?.as_slice() {
        [h, w] if *h > 0 && *w > 0 && h.saturating_mul(*w) <= MAX_IMAGE_PIXELS => Ok([*h, *w]),
        other => Err(Error::InvalidArgument(format!(
            "{name}: size must be [height, width] > 0 with at most {MAX_IMAGE_PIXELS} pixels, got {other:?}"
        ))),
    }
}

fn channels(name: &str, args: &Attrs) -> Result<u8> {
    let c = args.int_or(name, "channels", 0)?;
    u8::try_from(c)
        .ok()
        .filter(|c| *c <= 4)
        .ok_or_else(|| Error::InvalidArgument(format!("{name}: channels must be 0..=4, got {c}")))
}

fn dtype_arg(name: &str, args: &Attrs, key: &str) -> Result<DType> {
    let want = args.str(name, key)?;
    [
        DType::Float,
        DType::Double,
        DType::Int32,
        DType::UInt8,
        DType::Int16,
        DType::Int8,
        DType::Int64,
        DType::Bool,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Half,
        DType::BFloat16,
    ]
    .into_iter()
    .find(|d| {
        d.name() == want
            || (want == "float" && *d == DType::Float)
            || (want == "double" && *d == DType::Double)
    })
    .ok_or_else(|| Error::InvalidArgument(format!("{name}: unknown dtype {want:?}")))
}
