"""tf.image augmentation: the colour kernels (AdjustHue, AdjustSaturation,
RGBToHSV, HSVToRGB) on edge images (empty, 1x1, grey, NaN and inf, ties),
with extreme deltas, and the composites users call (random and stateless
random hue, saturation, brightness, contrast with seeds, standardisation,
greyscale, dtype conversion) traced as functions."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops


def colour_images(rng):
    """Named float32 RGB images: random, ties, extremes, NaN and inf."""
    ties = np.array([[[0.5, 0.5, 0.5], [1, 1, 0], [0, 1, 1], [1, 0, 1], [0.3, 0.3, 0.9]],
                     [[0.9, 0.3, 0.3], [0.3, 0.9, 0.3], [0, 0, 0], [1, 1, 1], [0.2, 0.7, 0.7]]],
                    np.float32)
    odd = np.array([[[np.nan, 0.5, 0.2], [0.5, np.nan, 0.2], [0.5, 0.2, np.nan],
                     [np.inf, 0, 0], [-np.inf, 0.5, 1], [-0.5, 2.0, 0.25], [-0.0, 0.0, -0.0],
                     [1e-38, 3e-38, 2e-38], [np.nan, np.nan, np.nan], [0, np.inf, np.inf]]],
                   np.float32)
    return {
        "random": rng.random((3, 4, 3), dtype=np.float32),
        "batch": rng.random((2, 3, 5, 3), dtype=np.float32),
        "ties": ties,
        "odd": odd,
        "1x1": np.array([[[0.1, 0.6, 0.3]]], np.float32),
        "empty": np.zeros((0, 4, 3), np.float32),
    }


def family():
    fam = Family("image_augment")
    rng = np.random.default_rng(5)
    images = colour_images(rng)
    for name, img in images.items():
        for delta in (0.0, 0.25, -0.4, 0.5, 1.0, -1.0, 3.7):
            fam.add("AdjustHue", lambda x, d: R.AdjustHue(images=x, delta=d),
                    [img, tf.constant(delta, tf.float32)], f"AdjustHue/{name}/{delta}")
        for scale in (0.0, 0.5, 1.0, 1.7, 100.0, -1.0):
            fam.add("AdjustSaturation", lambda x, s: R.AdjustSaturation(images=x, scale=s),
                    [img, tf.constant(scale, tf.float32)], f"AdjustSaturation/{name}/{scale}")
        fam.add("RGBToHSV", lambda x: R.RGBToHSV(images=x), [img], f"RGBToHSV/{name}")
        hsv = tf.image.rgb_to_hsv(img)
        fam.add("HSVToRGB", lambda x: R.HSVToRGB(images=x), [hsv], f"HSVToRGB/{name}")
    fam.add("AdjustHue", lambda x, d: R.AdjustHue(images=x, delta=d),
            [images["random"], tf.constant(np.nan, tf.float32)], "AdjustHue/random/nan delta")
    fam.add("AdjustSaturation", lambda x, s: R.AdjustSaturation(images=x, scale=s),
            [images["random"], tf.constant(np.nan, tf.float32)],
            "AdjustSaturation/random/nan scale")
    hsv_odd = np.array([[0.0, 1, 1], [1.0, 1, 1], [1.5, 0.5, 0.5], [-0.3, 0.5, 0.8],
                        [0.99999994, 1, 1], [np.nan, 1, 1], [0.5, np.nan, 1], [0.5, 2, -1]],
                       np.float32)
    fam.add("HSVToRGB", lambda x: R.HSVToRGB(images=x), [hsv_odd], "HSVToRGB/out of range")
    f64 = rng.random((4, 3))
    fam.add("RGBToHSV", lambda x: R.RGBToHSV(images=x), [f64], "RGBToHSV/float64")
    fam.add("HSVToRGB", lambda x: R.HSVToRGB(images=x), [f64], "HSVToRGB/float64")
    # Errors: too few dims, 4 channels, a non-scalar delta.
    four = np.zeros((2, 2, 4), np.float32)
    fam.add("AdjustHue", lambda x, d: R.AdjustHue(images=x, delta=d),
            [four, tf.constant(0.1)], "AdjustHue/error/4 channels")
    fam.add("AdjustHue", lambda x, d: R.AdjustHue(images=x, delta=d),
            [np.zeros((2, 3), np.float32), tf.constant(0.1)], "AdjustHue/error/rank 2")
    fam.add("AdjustHue", lambda x, d: R.AdjustHue(images=x, delta=d),
            [images["1x1"], tf.constant([0.1, 0.2])], "AdjustHue/error/delta vector")
    fam.add("AdjustSaturation", lambda x, s: R.AdjustSaturation(images=x, scale=s),
            [four, tf.constant(0.1)], "AdjustSaturation/error/4 channels")
    fam.add("RGBToHSV", lambda x: R.RGBToHSV(images=x), [four], "RGBToHSV/error/4 channels")
    fam.add("HSVToRGB", lambda x: R.HSVToRGB(images=x), [tf.constant(0.5)],
            "HSVToRGB/error/scalar")
    colour_composites(fam, rng)
    return fam


def colour_composites(fam, rng):
    """The tf.image functions as users call them. Each stateful case has
    its own op seed: eager TensorFlow keeps one kernel (and its stream) per
    seed, and each case must start from the stream's beginning."""
    img = rng.random((5, 6, 3), dtype=np.float32)
    img_u8 = rng.integers(0, 256, (4, 7, 3)).astype(np.uint8)
    batch = rng.random((2, 3, 4, 3), dtype=np.float32)
    seed = iter(range(101, 200))
    for name, x in (("float32", img), ("uint8", img_u8), ("batch", batch)):
        fam.add_function(f"random_hue/{name}", lambda x, s=next(seed): tf.image.random_hue(
            x, 0.3, seed=s), [x])
        fam.add_function(f"random_saturation/{name}", lambda x, s=next(seed):
                         tf.image.random_saturation(x, 0.2, 1.8, seed=s), [x])
        fam.add_function(f"random_brightness/{name}", lambda x, s=next(seed):
                         tf.image.random_brightness(x, 0.4, seed=s), [x])
        fam.add_function(f"random_contrast/{name}", lambda x, s=next(seed):
                         tf.image.random_contrast(x, 0.3, 1.6, seed=s), [x],
                         tolerance="abs:1e-6:the mean in float64 against Eigen's float32 sum")
        for st in ((1, 2), (-7, 2**31 - 1)):
            fam.add_function(f"stateless_random_hue/{name}/{st}", lambda x, st=st:
                             tf.image.stateless_random_hue(x, 0.5, seed=st), [x])
            fam.add_function(f"stateless_random_saturation/{name}/{st}", lambda x, st=st:
                             tf.image.stateless_random_saturation(x, 0.0, 3.0, seed=st), [x])
            fam.add_function(f"stateless_random_contrast/{name}/{st}", lambda x, st=st:
                             tf.image.stateless_random_contrast(x, 0.2, 2.0, seed=st), [x],
                             tolerance="abs:1e-6:the mean in float64 against Eigen's float32 sum")
        fam.add_function(f"per_image_standardization/{name}",
                         tf.image.per_image_standardization, [x],
                         tolerance="abs:2e-6:Mean adds in input order, Eigen in vector lanes "
                         "(measured 4.8e-7 on these standardised values)")
        fam.add_function(f"rgb_to_grayscale/{name}", tf.image.rgb_to_grayscale, [x])
        fam.add_function(f"grayscale_to_rgb/{name}", lambda x: tf.image.grayscale_to_rgb(
            x[..., :1]), [x])
        fam.add_function(f"adjust_hue then saturation/{name}", lambda x: tf.image.adjust_saturation(
            tf.image.adjust_hue(x, -0.15), 1.3), [x])
        fam.add_function(f"hsv round trip/{name}", lambda x: tf.image.hsv_to_rgb(
            tf.image.rgb_to_hsv(tf.image.convert_image_dtype(x, tf.float32))), [x])
    # convert_image_dtype both ways, saturating, and between integer widths.
    f = np.array([[[-0.5, 0.0, 0.25], [0.5, 0.999, 1.0], [1.5, np.nan, 1e-7]]], np.float32)
    for dt in (tf.uint8, tf.int16, tf.int32, tf.float64, tf.uint16):
        for sat in (False, True):
            fam.add_function(f"convert_image_dtype/float32 to {dt.name}/saturate {sat}",
                             lambda x, dt=dt, sat=sat: tf.image.convert_image_dtype(
                                 x, dt, saturate=sat), [f[:, 1:2] if not sat else f])
    for dt in (tf.float32, tf.float64, tf.int32, tf.int8, tf.uint16):
        fam.add_function(f"convert_image_dtype/uint8 to {dt.name}",
                         lambda x, dt=dt: tf.image.convert_image_dtype(x, dt), [img_u8])
    fam.add_function("per_image_standardization/constant image",
                     tf.image.per_image_standardization, [np.full((2, 2, 3), 7, np.uint8)])
