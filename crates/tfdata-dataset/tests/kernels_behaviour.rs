//! Behaviour of the built-in kernels that TensorFlow cannot serve as a
//! golden for: argument validation (every bad input is an
//! `InvalidArgument` naming the kernel), size guards against hostile image
//! headers, and the random kernels' determinism and coverage.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::path::PathBuf;

use bytes::Bytes;
use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::kernels::{self, ResizeMethod, Vocabulary};

fn fixture(file: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kernels")
        .join(file);
    std::fs::read(path).unwrap()
}

fn image(h: i64, w: i64, c: i64) -> Tensor {
    let values: Vec<u8> = (0..h * w * c).map(|i| (i * 7 % 251) as u8).collect();
    Tensor::from_slice(&values, vec![h, w, c]).unwrap()
}

/// The message of an `InvalidArgument`, checked to name `kernel`.
#[track_caller]
fn refused(result: Result<Tensor>, kernel: &str) -> String {
    match result {
        Err(Error::InvalidArgument(m)) => {
            assert!(m.starts_with(kernel), "{m:?} does not name {kernel}");
            m
        }
        other => panic!("{kernel}: expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn image_kernels_validate_rank_and_sizes() {
    let flat = Tensor::from_slice(&[1u8, 2, 3], vec![3]).unwrap();
    let empty = Tensor::from_slice::<u8>(&[], vec![0, 4, 3]).unwrap();
    let img = image(4, 6, 3);
    for bad in [&flat, &empty] {
        refused(kernels::resize(bad, 2, 2, ResizeMethod::Bilinear), "resize");
        refused(kernels::central_crop(bad, 0.5), "central_crop");
        refused(
            kernels::crop_to_bounding_box(bad, 0, 0, 1, 1),
            "crop_to_bounding_box",
        );
        refused(kernels::random_crop(bad, 1, 1, 0), "random_crop");
        refused(kernels::flip_left_right(bad), "flip_left_right");
        refused(kernels::flip_up_down(bad), "flip_up_down");
        refused(
            kernels::random_flip_left_right(bad, 0),
            "random_flip_left_right",
        );
        refused(
            kernels::per_image_standardization(bad),
            "per_image_standardization",
        );
    }
    refused(kernels::resize(&img, 0, 2, ResizeMethod::Nearest), "resize");
    refused(
        kernels::resize(&img, 2, -1, ResizeMethod::Bilinear),
        "resize",
    );
    let strings = Tensor::strings(vec![Bytes::new(); 4], vec![2, 2, 1]).unwrap();
    refused(
        kernels::resize(&strings, 2, 2, ResizeMethod::Nearest),
        "resize",
    );
    let bools = Tensor::from_slice(&[true; 4], vec![2, 2, 1]).unwrap();
    refused(
        kernels::resize(&bools, 2, 2, ResizeMethod::Bilinear),
        "resize",
    );
    for fraction in [0.0, -0.5, 1.5, f64::NAN] {
        refused(kernels::central_crop(&img, fraction), "central_crop");
    }
    assert_eq!(kernels::central_crop(&img, 1.0).unwrap(), img);
    for (oh, ow, th, tw, what) in [
        (-1, 0, 1, 1, "offset_height"),
        (0, -1, 1, 1, "offset_width"),
        (0, 0, 0, 1, "target_height"),
        (0, 0, 1, 0, "target_width"),
        (1, 0, 4, 1, "height must be >= target + offset"),
        (0, 2, 1, 5, "width must be >= target + offset"),
    ] {
        let m = refused(
            kernels::crop_to_bounding_box(&img, oh, ow, th, tw),
            "crop_to_bounding_box",
        );
        assert!(m.contains(what), "{m}");
    }
    refused(kernels::random_crop(&img, 5, 1, 0), "random_crop");
    refused(kernels::random_crop(&img, 1, 0, 0), "random_crop");
}

#[test]
fn numeric_kernels_validate_dtypes_and_parameters() {
    let img = image(2, 2, 3);
    let words = Tensor::strings(vec![Bytes::from("a")], vec![1]).unwrap();
    refused(kernels::cast(&words, DType::Float), "cast");
    refused(kernels::cast(&img, DType::String), "cast");
    refused(kernels::cast(&img, DType::Complex64), "cast");
    assert_eq!(kernels::cast(&img, DType::UInt8).unwrap(), img);
    refused(
        kernels::normalize(&img, &[0.0, 0.0], &[1.0, 1.0]),
        "normalize",
    );
    refused(kernels::normalize(&img, &[0.0], &[0.0]), "normalize");
    refused(kernels::normalize(&img, &[f32::NAN], &[1.0]), "normalize");
    refused(kernels::normalize(&words, &[0.0], &[1.0]), "normalize");
    let scalar = Tensor::scalar(3u8);
    refused(kernels::normalize(&scalar, &[0.0], &[1.0]), "normalize");
    // One mean and std for every channel.
    let one = kernels::normalize(&img, &[1.0], &[2.0]).unwrap();
    let three = kernels::normalize(&img, &[1.0; 3], &[2.0; 3]).unwrap();
    assert_eq!(one, three);
    refused(kernels::scale(&words, 1.0, 0.0), "scale");
    refused(kernels::one_hot(&img, -1, 1.0, 0.0), "one_hot");
    let floats = Tensor::vector(&[1.0f32]);
    refused(kernels::one_hot(&floats, 3, 1.0, 0.0), "one_hot");
}

#[test]
fn text_kernels_validate_inputs() {
    let batch = Tensor::strings(vec![Bytes::from("a b")], vec![1]).unwrap();
    refused(kernels::string_split(&batch, None), "string_split");
    refused(
        kernels::string_split(&Tensor::scalar(1i64), None),
        "string_split",
    );
    refused(kernels::lower(&Tensor::scalar(1i64)), "lower");
    let vocabulary = Vocabulary::from_tokens(vec![Bytes::from("a"), Bytes::new()]).unwrap();
    assert_eq!(vocabulary.get(b""), Some(1));
    refused(
        kernels::lookup(&Tensor::scalar(1i64), &vocabulary, -1),
        "lookup",
    );
    assert!(matches!(
        Vocabulary::from_tokens(vec![Bytes::from("a"), Bytes::from("a")]),
        Err(Error::FailedPrecondition(_))
    ));
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    assert!(matches!(
        Vocabulary::from_file(empty.to_str().unwrap()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(Vocabulary::from_file(dir.path().join("missing.txt").to_str().unwrap()).is_err());
}

#[test]
fn hostile_image_headers_are_refused_before_decoding() {
    // A JPEG whose frame header claims 65280 x 65280 pixels (libjpeg's
    // limit is 65500): TensorFlow refuses outputs of 2^29 samples or more,
    // and so does tfdata, before allocating them.
    let mut jpeg = fixture("jpeg_rgb420.jpg");
    let sof = jpeg
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("a baseline frame header");
    jpeg[sof + 5..sof + 9].copy_from_slice(&[0xFF, 0x00, 0xFF, 0x00]);
    let m = refused(
        kernels::decode_jpeg(&Tensor::scalar_string(Bytes::from(jpeg)), 0),
        "decode_jpeg",
    );
    assert!(m.contains("too large"), "{m}");

    // A PNG claiming 100000 x 100000 pixels (IHDR CRC fixed up).
    let mut png = fixture("png_rgb.png");
    png[16..24].copy_from_slice(&[0, 1, 0x86, 0xA0, 0, 1, 0x86, 0xA0]);
    let crc = crc32(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    let m = refused(
        kernels::decode_png(&Tensor::scalar_string(Bytes::from(png)), 0),
        "decode_png",
    );
    assert!(m.contains("too large"), "{m}");
}

/// CRC-32 (PNG's), bitwise.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn random_crop_is_deterministic_and_covers_every_offset() {
    let img = image(5, 7, 2);
    let mut offsets = BTreeSet::new();
    for seed in 0..400 {
        let crop = kernels::random_crop(&img, 3, 4, seed).unwrap();
        assert_eq!(crop, kernels::random_crop(&img, 3, 4, seed).unwrap());
        let offset = (0..=2)
            .flat_map(|oh| (0..=3).map(move |ow| (oh, ow)))
            .find(|&(oh, ow)| kernels::crop_to_bounding_box(&img, oh, ow, 3, 4).unwrap() == crop)
            .expect("a crop of the image");
        offsets.insert(offset);
    }
    assert_eq!(offsets.len(), 3 * 4, "{offsets:?}");
    // A full-size crop is the image.
    assert_eq!(kernels::random_crop(&img, 5, 7, 9).unwrap(), img);
    // A batch is cropped with one window.
    let batch = Tensor::from_slice(
        &[img.to_vec::<u8>().unwrap(), img.to_vec::<u8>().unwrap()].concat(),
        vec![2, 5, 7, 2],
    )
    .unwrap();
    let crop = kernels::random_crop(&batch, 2, 2, 5).unwrap();
    let v = crop.to_vec::<u8>().unwrap();
    assert_eq!(crop.shape(), [2, 2, 2, 2]);
    assert_eq!(v[..8], v[8..]);
}

#[test]
fn random_flips_are_fair_and_per_image() {
    let img = image(3, 4, 3);
    let flipped = kernels::flip_left_right(&img).unwrap();
    let upside_down = kernels::flip_up_down(&img).unwrap();
    let mut heads = 0;
    for seed in 0..1000 {
        let out = kernels::random_flip_left_right(&img, seed).unwrap();
        assert_eq!(out, kernels::random_flip_left_right(&img, seed).unwrap());
        if out == flipped {
            heads += 1;
        } else {
            assert_eq!(out, img);
        }
        let out = kernels::random_flip_up_down(&img, seed).unwrap();
        assert!(out == img || out == upside_down);
    }
    assert!((400..600).contains(&heads), "{heads} flips in 1000");
    // In a batch each image has its own coin.
    let mut values = vec![0u8; 64 * 2];
    for pair in values.chunks_mut(2) {
        pair[1] = 1;
    }
    let batch = Tensor::from_slice(&values, vec![64, 1, 2, 1]).unwrap();
    let out = kernels::random_flip_left_right(&batch, 11)
        .unwrap()
        .to_vec::<u8>()
        .unwrap();
    let flips = out.chunks(2).filter(|p| p == &[1, 0]).count();
    assert!(flips > 10 && flips < 54, "{flips} of 64");
}
