//! Golden tests: tfdata's built-in kernels against TensorFlow 2.21, on
//! fixtures written by `fixtures/kernels/generate.py` (see there for the
//! files). `<case>.pb` files are TensorProtos of TensorFlow's inputs and
//! outputs.
//!
//! Everything is compared bit for bit (dtype, shape and the little-endian
//! bytes, so NaN payloads too) except:
//! * `per_image_standardization`, whose float32 reductions TensorFlow sums
//!   in Eigen's order: within [`STANDARDIZATION_TOLERANCE`].

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::PathBuf;

use bytes::Bytes;
use prost::Message;
use tfdata_core::element::tensor_from_proto;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Tensor};
use tfdata_dataset::kernels::{self, ResizeMethod, Vocabulary};
use tfdata_proto::tensorflow::TensorProto;

/// Absolute tolerance for `per_image_standardization` (outputs are O(1)).
const STANDARDIZATION_TOLERANCE: f32 = 1e-5;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernels")
}

/// The TensorProto fixture `<name>.pb`.
fn tensor(name: &str) -> Tensor {
    let path = dir().join(format!("{name}.pb"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    tensor_from_proto(&TensorProto::decode(bytes.as_slice()).unwrap()).unwrap()
}

/// A raw fixture file as a scalar string tensor.
fn raw(file: &str) -> Tensor {
    let path = dir().join(file);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tensor::scalar_string(Bytes::from(bytes))
}

/// The message of an `InvalidArgument` error (anything else fails).
#[track_caller]
fn message<T: std::fmt::Debug>(r: tfdata_core::Result<T>) -> String {
    match r {
        Err(Error::InvalidArgument(m)) => m,
        other => panic!("{other:?}"),
    }
}

/// Fixture names (without `.pb`) matching `prefix*suffix`, sorted.
fn cases(prefix: &str, contains: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter_map(|f| f.strip_suffix(".pb").map(str::to_string))
        .filter(|f| f.starts_with(prefix) && f.contains(contains))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no fixtures {prefix}*{contains}*");
    names
}

fn bytes_of(t: &Tensor) -> &[u8] {
    match t.data() {
        TensorData::Buffer(b) => b,
        TensorData::Strings(_) => panic!("not a numeric tensor"),
    }
}

/// Same dtype, shape and values, bit for bit.
#[track_caller]
fn assert_same(actual: &Tensor, expected: &Tensor, what: &str) {
    assert_eq!(actual.dtype(), expected.dtype(), "{what}: dtype");
    assert_eq!(actual.shape(), expected.shape(), "{what}: shape");
    match (actual.data(), expected.data()) {
        (TensorData::Strings(a), TensorData::Strings(e)) => assert_eq!(a, e, "{what}: strings"),
        (TensorData::Buffer(a), TensorData::Buffer(e)) => {
            if a != e {
                let size = expected.dtype().size().unwrap();
                let first = a
                    .chunks(size)
                    .zip(e.chunks(size))
                    .position(|(x, y)| x != y)
                    .unwrap();
                panic!("{what}: values differ, first at element {first}: {actual} vs {expected}");
            }
        }
        _ => panic!("{what}: different kinds of data"),
    }
}

/// Largest absolute difference between two float32 tensors of equal shape.
#[track_caller]
fn max_f32_diff(actual: &Tensor, expected: &Tensor, what: &str) -> f32 {
    assert_eq!(actual.dtype(), DType::Float, "{what}: dtype");
    assert_eq!(actual.shape(), expected.shape(), "{what}: shape");
    let (a, e) = (
        actual.to_vec::<f32>().unwrap(),
        expected.to_vec::<f32>().unwrap(),
    );
    a.iter()
        .zip(&e)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn decode_jpeg_matches_tensorflow() {
    // Both decode with libjpeg-turbo set up the same way: bit for bit.
    let plain = cases("jpeg_", ".c");
    for name in plain
        .iter()
        .filter(|n| !n.contains(".accurate") && !n.contains(".crop"))
    {
        let (image, channels) = name.split_once(".c").unwrap();
        let channels: u8 = channels.parse().unwrap();
        let contents = raw(&format!("{image}.jpg"));
        let actual = kernels::decode_jpeg(&contents, channels).unwrap();
        assert_same(&actual, &tensor(name), name);
        // decode_image and decode_png decode JPEGs the same way.
        assert_same(
            &kernels::decode_image(&contents, channels).unwrap(),
            &actual,
            name,
        );
        assert_same(
            &kernels::decode_png(&contents, channels).unwrap(),
            &actual,
            name,
        );
    }
    // The grayscale channel is decoded from luma alone, like libjpeg: the
    // tfdata decodes of one JPEG at 1 and 3 channels agree on gray images.
    let gray = raw("jpeg_gray.jpg");
    let one = kernels::decode_jpeg(&gray, 1).unwrap();
    let three = kernels::decode_jpeg(&gray, 3).unwrap();
    let replicated: Vec<u8> = bytes_of(&one).iter().flat_map(|&g| [g, g, g]).collect();
    assert_eq!(bytes_of(&three), replicated.as_slice());
}

#[test]
fn decode_jpeg_dct_methods_match_tensorflow() {
    let accurate = kernels::DctMethod::from_tf("INTEGER_ACCURATE").unwrap();
    let mut differ = 0;
    for name in cases("jpeg_", ".accurate.c0") {
        let image = name.strip_suffix(".accurate.c0").unwrap();
        let contents = raw(&format!("{image}.jpg"));
        let actual = kernels::decode_jpeg_with(&contents, 0, accurate).unwrap();
        assert_same(&actual, &tensor(&name), &name);
        if actual != kernels::decode_jpeg(&contents, 0).unwrap() {
            differ += 1;
        }
    }
    // The two IDCTs really are different (so the option is honoured).
    assert!(differ >= 4, "only {differ} images differ between the IDCTs");
    let m = message(kernels::DctMethod::from_tf("FLOAT").map(|_| ()));
    assert!(m.contains("dct_method must be one of"), "{m}");
}

#[test]
fn decode_and_crop_jpeg_matches_tensorflow() {
    let fast = kernels::DctMethod::default();
    let accurate = kernels::DctMethod::from_tf("INTEGER_ACCURATE").unwrap();
    let cases = [
        ("jpeg_noise.crop", "jpeg_noise", [5, 7, 30, 41], 3, fast),
        ("jpeg_odd.crop", "jpeg_odd", [1, 2, 11, 14], 0, fast),
        ("jpeg_gray.crop", "jpeg_gray", [0, 0, 24, 9], 3, fast),
        (
            "jpeg_progressive.crop",
            "jpeg_progressive",
            [20, 30, 4, 2],
            1,
            fast,
        ),
        ("jpeg_ycck.crop", "jpeg_ycck", [2, 3, 10, 12], 0, fast),
        (
            "jpeg_rgb420.crop.accurate",
            "jpeg_rgb420",
            [3, 5, 16, 20],
            3,
            accurate,
        ),
    ];
    for (name, image, window, channels, dct) in cases {
        let contents = raw(&format!("{image}.jpg"));
        let actual = kernels::decode_and_crop_jpeg(&contents, &window, channels, dct)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = tensor(name);
        assert_eq!(actual.shape(), expected.shape(), "{name}: shape");
        // TensorFlow's cropped decode (libjpeg-turbo's `jpeg_crop_scanline`)
        // upsamples chroma at the window's right edge as at an image edge,
        // so its last column may differ from its own whole decode by a
        // level or two; tfdata's is the whole decode's. Everything else is
        // bit for bit.
        let (a, e) = (bytes_of(&actual), bytes_of(&expected));
        let row = (window[3] * actual.shape()[2]) as usize;
        let last_column = row - actual.shape()[2] as usize;
        for (i, (x, y)) in a.iter().zip(e).enumerate() {
            let limit = if i % row >= last_column { 2 } else { 0 };
            assert!(x.abs_diff(*y) <= limit, "{name}: sample {i}: {x} vs {y}");
        }
        // The same pixels as a whole decode, cropped.
        let whole = kernels::decode_jpeg_with(&contents, channels, dct).unwrap();
        let [y, x, h, w] = window;
        assert_same(
            &actual,
            &kernels::crop_to_bounding_box(&whole, y, x, h, w).unwrap(),
            name,
        );
    }
    // Windows TensorFlow refuses (the image is 24 x 32), and non-JPEG input.
    let jpeg = raw("jpeg_rgb420.jpg");
    for window in [
        vec![0, 0, 25, 32],
        vec![0, 1, 24, 32],
        vec![-1, 0, 4, 4],
        vec![0, 0, 0, 4],
        vec![0, 0, 4],
    ] {
        let m = message(kernels::decode_and_crop_jpeg(&jpeg, &window, 3, fast));
        assert!(m.starts_with("decode_and_crop_jpeg: "), "{window:?}: {m}");
        assert!(
            m.contains("crop window") || m.contains("crop_window"),
            "{window:?}: {m}"
        );
    }
    let m = message(kernels::decode_and_crop_jpeg(
        &raw("png_rgb.png"),
        &[0, 0, 1, 1],
        3,
        fast,
    ));
    assert!(
        m.contains("Trying to decode PNG format using a wrong op"),
        "{m}"
    );
}

#[test]
fn decode_png_matches_tensorflow() {
    for name in cases("png_", ".c") {
        let (image, channels) = name.split_once(".c").unwrap();
        let channels: u8 = channels.parse().unwrap();
        let contents = raw(&format!("{image}.png"));
        let actual =
            kernels::decode_png(&contents, channels).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_same(&actual, &tensor(&name), &name);
        assert_same(
            &kernels::decode_image(&contents, channels).unwrap(),
            &actual,
            &name,
        );
        if channels != 4 {
            assert_same(
                &kernels::decode_jpeg(&contents, channels).unwrap(),
                &actual,
                &name,
            );
        }
    }
    // decode_jpeg decodes PNGs, even with 4 channels.
    assert_same(
        &kernels::decode_jpeg(&raw("png_rgb.png"), 0).unwrap(),
        &tensor("png_rgb.decode_jpeg"),
        "decode_jpeg of a PNG",
    );
    assert_same(
        &kernels::decode_jpeg(&raw("png_rgba.png"), 4).unwrap(),
        &tensor("png_rgba.decode_jpeg_c4"),
        "decode_jpeg of a PNG, 4 channels",
    );
}

#[test]
fn decode_bmp_matches_tensorflow() {
    for name in cases("bmp_", ".c") {
        let (image, channels) = name.split_once(".c").unwrap();
        let channels: u8 = channels.parse().unwrap();
        let contents = raw(&format!("{image}.bmp"));
        let actual =
            kernels::decode_image(&contents, channels).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_same(&actual, &tensor(&name), &name);
        // Only decode_image reads BMP, as in TensorFlow.
        for op in [kernels::decode_jpeg, kernels::decode_png] {
            let err = op(&contents, channels).unwrap_err();
            assert!(err.to_string().contains("wrong op"), "{name}: {err}");
        }
    }
    let err = kernels::decode_image(&raw("bmp_24.bmp"), 1).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
fn corrupt_images_are_refused_like_tensorflow() {
    let mut bad: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.starts_with("bad_"))
        .collect();
    bad.sort();
    assert!(bad.len() >= 8);
    for file in bad {
        let contents = raw(&file);
        for op in [
            kernels::decode_jpeg,
            kernels::decode_png,
            kernels::decode_image,
        ] {
            for channels in [0, 1, 3] {
                match op(&contents, channels) {
                    Err(Error::InvalidArgument(message)) => {
                        assert!(message.starts_with("decode_"), "{file}: {message}")
                    }
                    other => panic!("{file} (channels {channels}): {other:?}"),
                }
            }
        }
    }
    // Every prefix of a JPEG and a PNG is refused, never a panic.
    for file in [
        "jpeg_progressive.jpg",
        "jpeg_rgb420.jpg",
        "png_interlaced.png",
    ] {
        let full = std::fs::read(dir().join(file)).unwrap();
        for len in (0..full.len()).step_by(7) {
            let prefix = Tensor::scalar_string(Bytes::copy_from_slice(&full[..len]));
            assert!(
                kernels::decode_image(&prefix, 3).is_err(),
                "{file}[..{len}]"
            );
        }
        // And flipped bytes never panic (the result may be Ok: libjpeg also
        // decodes corrupt entropy-coded data).
        for at in (0..full.len()).step_by(5) {
            let mut corrupt = full.clone();
            corrupt[at] ^= 0x5A;
            let _ = kernels::decode_image(&Tensor::scalar_string(Bytes::from(corrupt)), 0);
        }
    }
}

#[test]
fn decode_validates_its_arguments() {
    let jpeg = raw("jpeg_rgb420.jpg");
    assert!(message(kernels::decode_jpeg(&jpeg, 4)).contains("JPEG does not support 4 channels"));
    assert!(message(kernels::decode_png(&jpeg, 2)).contains("`channels` must be 0, 1, 3 or 4"));
    assert!(message(kernels::decode_image(&Tensor::scalar_string(""), 0)).contains("empty"));
    let batch = Tensor::strings(vec![Bytes::new()], vec![1]).unwrap();
    assert!(message(kernels::decode_jpeg(&batch, 0)).contains("scalar"));
    assert!(message(kernels::decode_png(&Tensor::scalar(1u8), 0)).contains("scalar string"));
    // libjpeg (so TensorFlow) cannot convert CMYK to grayscale.
    for file in [
        "jpeg_cmyk_adobe.jpg",
        "jpeg_cmyk_plain.jpg",
        "jpeg_ycck.jpg",
    ] {
        let m = message(kernels::decode_jpeg(&raw(file), 1));
        assert!(m.contains("Unsupported color conversion"), "{m}");
    }
    let gif = Tensor::scalar_string("GIF89a....");
    assert!(matches!(
        kernels::decode_image(&gif, 0),
        Err(Error::Unimplemented(_))
    ));
}

#[test]
fn resize_matches_tensorflow() {
    for name in cases("", ".resize_") {
        let (input, op) = name.split_once(".resize_").unwrap();
        let (method, size) = op.split_once('_').unwrap();
        let (h, w) = size.split_once('x').unwrap();
        let method = match method {
            "bilinear" => ResizeMethod::Bilinear,
            _ => ResizeMethod::Nearest,
        };
        let actual = kernels::resize(
            &tensor(input),
            h.parse().unwrap(),
            w.parse().unwrap(),
            method,
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_same(&actual, &tensor(&name), &name);
    }
}

#[test]
fn crops_and_flips_match_tensorflow() {
    for input in ["image_u8", "batch_f32"] {
        let image = tensor(input);
        assert_same(
            &kernels::flip_left_right(&image).unwrap(),
            &tensor(&format!("{input}.flip_left_right")),
            "flip_left_right",
        );
        assert_same(
            &kernels::flip_up_down(&image).unwrap(),
            &tensor(&format!("{input}.flip_up_down")),
            "flip_up_down",
        );
    }
    let image = tensor("image_u8");
    for fraction in ["0.5", "0.33"] {
        assert_same(
            &kernels::central_crop(&image, fraction.parse().unwrap()).unwrap(),
            &tensor(&format!("image_u8.central_crop_{fraction}")),
            fraction,
        );
    }
    assert_same(
        &kernels::central_crop(&tensor("batch_f32"), 0.7).unwrap(),
        &tensor("batch_f32.central_crop_0.7"),
        "central_crop batch",
    );
    assert_same(
        &kernels::crop_to_bounding_box(&image, 3, 5, 10, 12).unwrap(),
        &tensor("image_u8.crop_3_5_10_12"),
        "crop_to_bounding_box",
    );
    assert_same(
        &kernels::crop_to_bounding_box(&tensor("batch_f32"), 1, 2, 7, 8).unwrap(),
        &tensor("batch_f32.crop_1_2_7_8"),
        "crop_to_bounding_box batch",
    );
}

fn dtype(name: &str) -> DType {
    match name {
        "uint8" => DType::UInt8,
        "int8" => DType::Int8,
        "uint16" => DType::UInt16,
        "int16" => DType::Int16,
        "uint32" => DType::UInt32,
        "int32" => DType::Int32,
        "uint64" => DType::UInt64,
        "int64" => DType::Int64,
        "bool" => DType::Bool,
        "float16" => DType::Half,
        "bfloat16" => DType::BFloat16,
        "float32" => DType::Float,
        "float64" => DType::Double,
        other => panic!("unknown dtype {other}"),
    }
}

#[test]
fn cast_matches_tensorflow() {
    for input in [
        "cast_f32_specials",
        "cast_i64",
        "cast_f64",
        "cast_bool",
        "cast_f16",
    ] {
        let source = tensor(input);
        for name in cases(&format!("{input}."), "") {
            let target = dtype(name.rsplit_once('.').unwrap().1);
            let actual = kernels::cast(&source, target).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_same(&actual, &tensor(&name), &name);
        }
    }
}

#[test]
fn normalisation_matches_tensorflow() {
    let image = tensor("image_u8");
    assert_same(
        &kernels::normalize(&image, &[123.675, 116.28, 103.53], &[58.395, 57.12, 57.375]).unwrap(),
        &tensor("image_u8.normalize"),
        "normalize uint8",
    );
    assert_same(
        &kernels::normalize(&tensor("batch_f32"), &[10.0, -3.0], &[2.5, 0.3]).unwrap(),
        &tensor("batch_f32.normalize"),
        "normalize float32",
    );
    assert_same(
        &kernels::scale(&image, 1.0 / 255.0, 0.0).unwrap(),
        &tensor("image_u8.scale"),
        "scale",
    );
    assert_same(
        &kernels::scale(&image, 2.0 / 255.0, -1.0).unwrap(),
        &tensor("image_u8.scale_offset"),
        "scale with offset",
    );
    for input in ["image_u8", "batch_f32", "uniform_u8"] {
        let name = format!("{input}.per_image_standardization");
        let actual = kernels::per_image_standardization(&tensor(input)).unwrap();
        let diff = max_f32_diff(&actual, &tensor(&name), &name);
        println!("{name}: max abs difference {diff:e}");
        assert!(diff <= STANDARDIZATION_TOLERANCE, "{name}: {diff}");
    }
}

#[test]
fn one_hot_matches_tensorflow() {
    assert_same(
        &kernels::one_hot(&tensor("one_hot_i32"), 3, 1.0, 0.0).unwrap(),
        &tensor("one_hot_i32.depth3"),
        "one_hot int32",
    );
    assert_same(
        &kernels::one_hot(&tensor("one_hot_i64"), 4, 5.0, -1.0).unwrap(),
        &tensor("one_hot_i64.depth4_on5_off-1"),
        "one_hot int64",
    );
    assert_same(
        &kernels::one_hot(&tensor("one_hot_u8"), 10, 1.0, 0.0).unwrap(),
        &tensor("one_hot_u8.depth10"),
        "one_hot uint8 scalar",
    );
}

#[test]
fn text_kernels_match_tensorflow() {
    let text = tensor("text");
    let words = kernels::string_split(&text, None).unwrap();
    assert_same(&words, &tensor("text.split"), "split on whitespace");
    assert_same(
        &kernels::string_split(&tensor("csv"), Some(",")).unwrap(),
        &tensor("csv.split_comma"),
        "split on a separator",
    );
    assert_same(
        &kernels::string_split(&Tensor::scalar_string("x<>y<><>z"), Some("<>")).unwrap(),
        &tensor("csv.split_long_sep"),
        "split on a long separator",
    );
    assert_same(
        &kernels::lower(&tensor("mixed")).unwrap(),
        &tensor("mixed.lower"),
        "lower",
    );
    let vocabulary = Vocabulary::from_file(dir().join("vocab.txt").to_str().unwrap()).unwrap();
    assert_eq!(vocabulary.len(), 8);
    let tokens = kernels::lower(&words).unwrap();
    assert_same(
        &kernels::lookup(&tokens, &vocabulary, -1).unwrap(),
        &tensor("text.lookup"),
        "lookup",
    );
    assert_same(
        &kernels::lookup(&tensor("tokens2d"), &vocabulary, 7).unwrap(),
        &tensor("tokens2d.lookup_default7"),
        "lookup 2-D with a default",
    );
}

#[test]
fn decode_jpeg_resize_is_the_separate_kernels_bit_for_bit() {
    let accurate = kernels::DctMethod::from_tf("INTEGER_ACCURATE").unwrap();
    let mean_std: (&[f32], &[f32]) = (&[127.5], &[127.5]);
    for image in [
        "jpeg_rgb420.jpg",
        "jpeg_odd.jpg",
        "jpeg_noise.jpg",
        "jpeg_gray.jpg",
        "jpeg_progressive.jpg",
        "jpeg_ycck.jpg",
        "png_rgb.png",
    ] {
        let contents = raw(image);
        for (channels, dct) in [(0, kernels::DctMethod::default()), (3, accurate)] {
            // Shrinking, enlarging, one axis each way, and the same size.
            let whole = kernels::decode_jpeg_with(&contents, channels, dct).unwrap();
            let (h, w) = (whole.shape()[0], whole.shape()[1]);
            for (oh, ow) in [(7, 9), (50, 61), (h / 2, w * 2), (h, w)] {
                let what = format!("{image} c{channels} {dct:?} -> {oh}x{ow}");
                let resized = kernels::resize(&whole, oh, ow, ResizeMethod::Bilinear).unwrap();
                let fused =
                    kernels::decode_jpeg_resize(&contents, channels, dct, oh, ow, None).unwrap();
                assert_same(&fused, &resized, &what);
                let normalized = kernels::normalize(&resized, mean_std.0, mean_std.1).unwrap();
                let fused =
                    kernels::decode_jpeg_resize(&contents, channels, dct, oh, ow, Some(mean_std))
                        .unwrap();
                assert_same(&fused, &normalized, &what);
                // Cast back to bytes as the rows are resized (map fusion of a
                // following `cast(uint8)`), normalised or not.
                for (post, then) in [(None, &resized), (Some(mean_std), &normalized)] {
                    let bytes = kernels::decode_jpeg_resize_as(
                        &contents,
                        channels,
                        dct,
                        oh,
                        ow,
                        post,
                        DType::UInt8,
                    )
                    .unwrap();
                    let cast = kernels::cast(then, DType::UInt8).unwrap();
                    assert_eq!(bytes.dtype(), DType::UInt8, "{what}");
                    assert_same(&bytes, &cast, &format!("{what} uint8"));
                }
            }
        }
    }
    // Errors are the separate kernels'.
    let bad = raw("bad_jpeg_truncated.bin");
    let m = message(kernels::decode_jpeg_resize(
        &bad,
        3,
        kernels::DctMethod::default(),
        4,
        4,
        None,
    ));
    assert!(m.starts_with("decode_jpeg: "), "{m}");
    let m = message(kernels::decode_jpeg_resize(
        &raw("jpeg_rgb420.jpg"),
        3,
        kernels::DctMethod::default(),
        4,
        4,
        Some((&[1.0, 2.0], &[1.0, 1.0])),
    ));
    assert!(m.starts_with("normalize: "), "{m}");
    let m = message(kernels::decode_jpeg_resize_as(
        &raw("jpeg_rgb420.jpg"),
        3,
        kernels::DctMethod::default(),
        4,
        4,
        None,
        DType::Int32,
    ));
    assert!(m.contains("`dtype` must be float32 or uint8"), "{m}");
}

#[test]
fn decode_random_crop_jpeg_is_decode_and_crop_of_a_sampled_window() {
    let fast = kernels::DctMethod::default();
    let sampling = kernels::CropSampling::default();
    let jpeg = raw("jpeg_noise.jpg");
    let mut sizes = std::collections::BTreeSet::new();
    for seed in 0..20 {
        let crop = kernels::decode_random_crop_jpeg(&jpeg, 3, fast, &sampling, seed).unwrap();
        let [y, x, h, w] = kernels::sample_crop_window(48, 64, &sampling, seed);
        let window = [y, x, h, w].map(|v| v as i64);
        let expected = kernels::decode_and_crop_jpeg(&jpeg, &window, 3, fast).unwrap();
        assert_same(&crop, &expected, &format!("seed {seed}"));
        sizes.insert(crop.shape().to_vec());
    }
    // Different seeds, different windows.
    assert!(sizes.len() > 10, "{sizes:?}");
    let m = message(kernels::decode_random_crop_jpeg(
        &raw("png_rgb.png"),
        3,
        fast,
        &sampling,
        0,
    ));
    assert!(m.contains("not a JPEG"), "{m}");
}
