"""tf.image augmentation: the colour kernels (AdjustHue, AdjustSaturation,
RGBToHSV, HSVToRGB) on edge images (empty, 1x1, grey, NaN and inf, ties),
with extreme deltas, and the composites users call (random and stateless
random hue, saturation, brightness, contrast with seeds, standardisation,
greyscale, dtype conversion) traced as functions."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops


def sorted_library(graph):
    """Orders a pipeline graph's function library by name: TensorFlow lists
    it in map order, which changes from run to run."""
    functions = sorted(graph.library.function, key=lambda f: f.signature.name)
    del graph.library.function[:]
    graph.library.function.extend(functions)


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
    fam.normalize_graph = sorted_library
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
    geometry(fam, rng)
    pipelines(fam, rng)
    area_and_shape(fam, rng)
    scale_cases(fam, rng)
    nms_cases(fam, rng)
    draw_cases(fam, rng)
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


def geometry(fam, rng):
    """SampleDistortedBoundingBox in every form: seeded stateful runs (a
    kernel's successive draws), stateless seeds, attribute corners and the
    errors; then the crop as users write it (the op, then a slice)."""
    box = tf.constant([[[0.1, 0.2, 0.7, 0.9]]], tf.float32)
    boxes = tf.constant([[[0.0, 0.0, 1.0, 1.0], [0.3, 0.3, 0.4, 0.35], [0.5, 0.1, 0.95, 0.6]]],
                        tf.float32)
    none = tf.zeros([1, 0, 4], tf.float32)
    configs = [
        ("default", dict()),
        ("inception", dict(aspect_ratio_range=[3 / 4, 4 / 3], area_range=[0.08, 1.0],
                           max_attempts=10)),
        ("wide aspect", dict(aspect_ratio_range=[0.1, 10.0], area_range=[0.01, 1.0])),
        ("square half", dict(aspect_ratio_range=[1.0, 1.0], area_range=[0.5, 0.5])),
        ("whole", dict(area_range=[1.0, 1.0])),
        ("tiny area", dict(area_range=[0.001, 0.002], max_attempts=3)),
        ("one attempt", dict(max_attempts=1)),
    ]
    sizes = [("37x53", [37, 53, 3]), ("1x1", [1, 1, 3]), ("480x640", [480, 640, 3]),
             ("5x1000", [5, 1000, 1]), ("0x0", [0, 0, 3])]
    seed = iter(range(1, 10**6))
    for cname, cfg in configs:
        for sname, size in sizes:
            for covered in ((0.0, 0.1, 0.7) if cname in ("default", "inception") else (0.1,)):
                for bname, b in (("box", box), ("boxes", boxes), ("none", none)):
                    if bname != "box" and (covered != 0.1 or sname not in ("37x53", "480x640")):
                        continue
                    s1, s2 = next(seed), next(seed)
                    attrs = dict(cfg, use_image_if_no_bounding_boxes=True)
                    key = f"{cname}/{sname}/covered {covered}/{bname}"
                    fam.add("SampleDistortedBoundingBoxV2",
                            lambda sz, bb, mc, a=attrs, s1=s1, s2=s2:
                            R.SampleDistortedBoundingBoxV2(image_size=sz, bounding_boxes=bb,
                                                           min_object_covered=mc, seed=s1,
                                                           seed2=s2, **a),
                            [tf.constant(size, tf.int32), b, tf.constant(covered)],
                            f"SampleDistortedBoundingBoxV2/{key}", calls=3)
                    for st in ((s1, s2), (-s1, 2**31 - 1)):
                        fam.add("StatelessSampleDistortedBoundingBox",
                                lambda sz, bb, mc, sd, a=attrs:
                                R.StatelessSampleDistortedBoundingBox(
                                    image_size=sz, bounding_boxes=bb, min_object_covered=mc,
                                    seed=sd, **a),
                                [tf.constant(size, tf.int32), b, tf.constant(covered),
                                 tf.constant(st, tf.int32)],
                                f"StatelessSampleDistortedBoundingBox/{key}/seed {st}")
    for dt in (tf.uint8, tf.int16, tf.int64):
        fam.add("StatelessSampleDistortedBoundingBox",
                lambda sz, bb, mc, sd: R.StatelessSampleDistortedBoundingBox(
                    image_size=sz, bounding_boxes=bb, min_object_covered=mc, seed=sd),
                [tf.constant([120, 77, 3], dt), box, tf.constant(0.1),
                 tf.constant([5, 6], tf.int64)],
                f"StatelessSampleDistortedBoundingBox/image_size {dt.name}")
    fam.add("SampleDistortedBoundingBox", lambda sz, bb: R.SampleDistortedBoundingBox(
        image_size=sz, bounding_boxes=bb, seed=4, seed2=9, min_object_covered=0.3),
        [tf.constant([64, 48, 3]), boxes], "SampleDistortedBoundingBox/v1", calls=3)
    bad = [
        ("coordinate above 1", [64, 48, 3], [[[0.1, 0.2, 1.5, 0.9]]], 0.1, {}),
        ("coordinate nan", [64, 48, 3], [[[np.nan, 0.2, 0.5, 0.9]]], 0.1, {}),
        ("boxes rank 2", [64, 48, 3], [[0.1, 0.2, 0.5, 0.9]], 0.1, {}),
        ("boxes of 3", [64, 48, 3], [[[0.1, 0.2, 0.5]]], 0.1, {}),
        ("no boxes", [64, 48, 3], np.zeros((1, 0, 4)), 0.1, {}),
        ("negative covered", [64, 48, 3], [[[0.1, 0.2, 0.5, 0.9]]], -0.5, {}),
        ("image_size of 2", [64, 48], [[[0.1, 0.2, 0.5, 0.9]]], 0.1, {}),
        ("negative height", [-4, 48, 3], [[[0.1, 0.2, 0.5, 0.9]]], 0.1, {}),
        ("area above 1", [64, 48, 3], [[[0.1, 0.2, 0.5, 0.9]]], 0.1,
         dict(area_range=[0.5, 1.5])),
        ("zero aspect", [64, 48, 3], [[[0.1, 0.2, 0.5, 0.9]]], 0.1,
         dict(aspect_ratio_range=[0.0, 1.0])),
    ]
    for name, size, b, covered, attrs in bad:
        fam.add("StatelessSampleDistortedBoundingBox",
                lambda sz, bb, mc, sd, a=attrs: R.StatelessSampleDistortedBoundingBox(
                    image_size=sz, bounding_boxes=bb, min_object_covered=mc, seed=sd, **a),
                [tf.constant(size, tf.int32), tf.constant(b, tf.float32),
                 tf.constant(covered), tf.constant([1, 2])],
                f"StatelessSampleDistortedBoundingBox/error/{name}")
    img = rng.integers(0, 256, (41, 57, 3)).astype(np.uint8)

    def inception_crop(x, s):
        box = tf.constant([[[0.1, 0.2, 0.7, 0.9]]], tf.float32)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.shape(x), box, min_object_covered=0.1, aspect_ratio_range=[3 / 4, 4 / 3],
            area_range=[0.08, 1.0], max_attempts=10, seed=s)
        return tf.slice(x, begin, size)

    for s in (7, 8, 9):
        fam.add_function(f"sample_distorted_bounding_box then slice/seed {s}",
                         lambda x, s=s: inception_crop(x, s), [img])
        fam.add_function(f"stateless_sample_distorted_bounding_box then slice/seed {s}",
                         lambda x, s=s: tf.slice(x, *tf.image.stateless_sample_distorted_bounding_box(
                             tf.shape(x), tf.constant([[[0.1, 0.2, 0.7, 0.9]]]), seed=[s, -s], min_object_covered=0.5,
                             use_image_if_no_bounding_boxes=True)[:2]), [img])


def pipelines(fam, rng):
    """The Inception training pipeline over TensorFlow-encoded JPEGs:
    decode, sample_distorted_bounding_box crop, resize, random flip,
    normalise; seeded stateful, and stateless with per-element seeds."""
    yy, xx = np.mgrid[0:45, 0:61]
    imgs = [np.stack([(xx * k) % 256, (yy * 5) % 256, (xx + yy * k) % 256], -1).astype(np.uint8)
            for k in (3, 4, 7)] + [rng.integers(0, 256, (45, 61, 3)).astype(np.uint8)]
    jpegs = tf.stack([tf.io.encode_jpeg(i, quality=90) for i in imgs])
    boxes = np.array([[[0.1, 0.1, 0.9, 0.8]]], np.float32)
    mean = tf.constant([0.485, 0.456, 0.406])
    std = tf.constant([0.229, 0.224, 0.225])
    D = tf.data.Dataset

    def stateful(data):
        image = tf.io.decode_jpeg(data, channels=3)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.shape(image), boxes, min_object_covered=0.1, aspect_ratio_range=[3 / 4, 4 / 3],
            area_range=[0.08, 1.0], max_attempts=10, use_image_if_no_bounding_boxes=True,
            seed=17)
        image = tf.slice(image, begin, size)
        image = tf.image.resize(image, [12, 12])
        image = tf.image.random_flip_left_right(image, seed=23)
        return (image / 255.0 - mean) / std

    def stateless(i, data):
        seed = tf.stack([i, tf.constant(42, tf.int64)])
        image = tf.io.decode_jpeg(data, channels=3)
        begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
            tf.shape(image), boxes, seed=seed, min_object_covered=0.1,
            area_range=[0.08, 1.0])
        image = tf.slice(image, begin, size)
        image = tf.image.resize(image, [12, 12])
        image = tf.image.stateless_random_flip_left_right(image, seed=seed + 1)
        image = tf.image.stateless_random_hue(image / 255.0, 0.1, seed=seed + 2)
        return (image - mean) / std

    fam.add_dataset("inception crop pipeline, seeded", D.from_tensor_slices(jpegs).repeat(2)
                    .map(stateful), stateful=True)
    fam.add_dataset("inception crop pipeline, stateless", D.from_tensor_slices(jpegs).repeat(2)
                    .enumerate().map(stateless).batch(3))


def area_and_shape(fam, rng):
    """ResizeArea up, down and odd ratios on uint8 and float images, the
    antialiased-free tf.image.resize(method="area"), and ExtractJpegShape."""
    images = {"uint8": rng.integers(0, 256, (2, 7, 9, 3)).astype(np.uint8),
              "float32 grey": rng.random((1, 11, 6, 1), dtype=np.float32),
              "int16 rgba": rng.integers(-300, 300, (1, 5, 5, 4)).astype(np.int16),
              "float64": rng.random((1, 4, 6, 2))}
    for name, img in images.items():
        for size in ([3, 4], [7, 9], [14, 5], [1, 1], [5, 13], [2, 8]):
            for align in (False, True):
                fam.add("ResizeArea", lambda x, s, a=align: R.ResizeArea(
                    images=x, size=s, align_corners=a), [img, tf.constant(size)],
                    f"ResizeArea/{name}/{size}/align {align}")
    fam.add("ResizeArea", lambda x, s: R.ResizeArea(images=x, size=s),
            [images["uint8"], tf.constant([0, 3])], "ResizeArea/error/zero size")
    fam.add("ResizeArea", lambda x, s: R.ResizeArea(images=x, size=s),
            [images["uint8"][0], tf.constant([2, 3])], "ResizeArea/error/rank 3")
    fam.add_function("tf.image.resize area", lambda x: tf.image.resize(
        x, [4, 5], method="area"), [images["uint8"][0]])
    yy, xx = np.mgrid[0:19, 0:23]
    smooth = np.stack([xx * 9 % 256, yy * 7 % 256, (xx + yy) % 256], -1).astype(np.uint8)
    jpegs = {"rgb": tf.io.encode_jpeg(smooth), "grey": tf.io.encode_jpeg(smooth[..., :1]),
             "progressive": tf.io.encode_jpeg(smooth, progressive=True)}
    for name, data in jpegs.items():
        for dt in (tf.int32, tf.int64):
            fam.add("ExtractJpegShape", lambda d, dt=dt: R.ExtractJpegShape(
                contents=d, output_type=dt), [data], f"ExtractJpegShape/{name}/{dt.name}")
    raw = jpegs["rgb"].numpy()
    for name, bad in (("empty", b""), ("png", tf.io.encode_png(smooth).numpy()),
                      ("header only", raw[:20]), ("cut before scan", raw[:raw.find(b"\xff\xda")]),
                      ("cut in scan", raw[:len(raw) // 2])):
        fam.add("ExtractJpegShape", lambda d: R.ExtractJpegShape(contents=d),
                [tf.constant(bad)], f"ExtractJpegShape/{name}")


def scale_cases(fam, rng):
    """ScaleAndTranslate: every kernel, antialias on and off, down and up,
    translations, uint8 and float images; tf.image.resize as users call it."""
    images = {"uint8": rng.integers(0, 256, (1, 7, 9, 3)).astype(np.uint8),
              "float32": rng.random((2, 6, 5, 1), dtype=np.float32)}
    kernels = ["lanczos1", "lanczos3", "lanczos5", "gaussian", "box", "triangle", "keyscubic",
               "mitchellcubic"]
    for name, img in images.items():
        h, w = img.shape[1:3]
        for kernel in kernels:
            for size in ([4, 5], [h + 3, w * 2 - 1], [h, w]):
                for aa in (True, False):
                    if not aa and size == [h, w]:
                        continue
                    scale = [size[0] / h, size[1] / w]
                    fam.add("ScaleAndTranslate", lambda x, s, sc, t, k=kernel, a=aa:
                            R.ScaleAndTranslate(images=x, size=s, scale=sc, translation=t,
                                                kernel_type=k, antialias=a),
                            [img, tf.constant(size, tf.int32), tf.constant(scale, tf.float32),
                             tf.constant([0.0, 0.0])],
                            f"ScaleAndTranslate/{name}/{kernel}/{size}/antialias {aa}")
        fam.add("ScaleAndTranslate", lambda x, s, sc, t: R.ScaleAndTranslate(
            images=x, size=s, scale=sc, translation=t, kernel_type="lanczos3"),
            [img, tf.constant([7, 7]), tf.constant([0.7, 1.3]), tf.constant([1.5, -2.25])],
            f"ScaleAndTranslate/{name}/translated")
    fam.add("ScaleAndTranslate", lambda x, s, sc, t: R.ScaleAndTranslate(
        images=x, size=s, scale=sc, translation=t),
        [images["float32"], tf.constant([3, 3]), tf.constant([0.0, 1.0]), tf.constant([0.0, 0.0])],
        "ScaleAndTranslate/error/zero scale")
    img = rng.random((11, 17, 3), dtype=np.float32)
    for method in ("bilinear", "bicubic", "area", "lanczos3", "lanczos5", "gaussian",
                   "mitchellcubic"):
        for aa in (True, False):
            if not aa and method in ("bilinear", "bicubic", "area"):
                continue
            fam.add_function(f"tf.image.resize {method} antialias {aa} down",
                             lambda x, m=method, a=aa: tf.image.resize(x, [5, 7], method=m,
                                                                       antialias=a), [img])
            fam.add_function(f"tf.image.resize {method} antialias {aa} up",
                             lambda x, m=method, a=aa: tf.image.resize(x, [13, 21], method=m,
                                                                       antialias=a), [img])


def nms_cases(fam, rng):
    """Non-max suppression V3/V4/V5: hard and soft, thresholds, ties,
    flipped and empty boxes, padding, and the errors."""
    n = 40
    centres = rng.random((n, 2), dtype=np.float32)
    sizes = rng.random((n, 2), dtype=np.float32) * 0.4
    boxes = np.concatenate([centres - sizes / 2, centres + sizes / 2], 1).astype(np.float32)
    boxes[3] = boxes[3][[2, 3, 0, 1]]  # flipped corners
    boxes[5] = [0.2, 0.2, 0.2, 0.6]  # no area
    scores = rng.random(n, dtype=np.float32)
    scores[7] = scores[8] = scores[9]  # ties
    scores[11] = np.nan
    b, s = tf.constant(boxes), tf.constant(scores)
    for max_out in (0, 5, 100):
        for iou in (0.0, 0.3, 0.5, 1.0):
            for st in (-np.inf, 0.4):
                key = f"max {max_out}/iou {iou}/score {st}"
                fam.add("NonMaxSuppressionV3", lambda b, s, m, i, t: R.NonMaxSuppressionV3(
                    boxes=b, scores=s, max_output_size=m, iou_threshold=i, score_threshold=t),
                    [b, s, tf.constant(max_out), tf.constant(iou), tf.constant(st, tf.float32)],
                    f"NonMaxSuppressionV3/{key}")
                fam.add("NonMaxSuppressionV4", lambda b, s, m, i, t: R.NonMaxSuppressionV4(
                    boxes=b, scores=s, max_output_size=m, iou_threshold=i, score_threshold=t,
                    pad_to_max_output_size=True),
                    [b, s, tf.constant(max_out), tf.constant(iou), tf.constant(st, tf.float32)],
                    f"NonMaxSuppressionV4/padded/{key}")
                for sigma in (0.0, 0.5):
                    fam.add("NonMaxSuppressionV5", lambda b, s, m, i, t, g:
                            R.NonMaxSuppressionV5(boxes=b, scores=s, max_output_size=m,
                                                  iou_threshold=i, score_threshold=t,
                                                  soft_nms_sigma=g),
                            [b, s, tf.constant(max_out), tf.constant(iou),
                             tf.constant(st, tf.float32), tf.constant(sigma)],
                            f"NonMaxSuppressionV5/{key}/sigma {sigma}")
    args = lambda b, s: [b, s, tf.constant(5), tf.constant(0.5), tf.constant(0.0)]  # noqa: E731
    for name, bb, ss in (("boxes 3 cols", b[:, :3], s), ("scores short", b, s[:-1]),
                         ("boxes 1-D", tf.reshape(b, [-1]), s)):
        fam.add("NonMaxSuppressionV3", lambda b, s, m, i, t: R.NonMaxSuppressionV3(
            boxes=b, scores=s, max_output_size=m, iou_threshold=i, score_threshold=t),
            args(bb, ss), f"NonMaxSuppressionV3/error/{name}")
    fam.add("NonMaxSuppressionV3", lambda b, s, m, i, t: R.NonMaxSuppressionV3(
        boxes=b, scores=s, max_output_size=m, iou_threshold=i, score_threshold=t),
        [b, s, tf.constant(5), tf.constant(1.5), tf.constant(0.0)],
        "NonMaxSuppressionV3/error/iou above 1")
    fam.add("NonMaxSuppressionV3", lambda b, s, m, i, t: R.NonMaxSuppressionV3(
        boxes=b, scores=s, max_output_size=m, iou_threshold=i, score_threshold=t),
        [tf.zeros([0, 4]), tf.zeros([0]), tf.constant(5), tf.constant(0.5), tf.constant(0.0)],
        "NonMaxSuppressionV3/no boxes")
    fam.add_function("tf.image.non_max_suppression", lambda b, s: tf.image.
                     non_max_suppression(b, s, 10, 0.5), [b, s])
    fam.add_function("tf.image.non_max_suppression_with_scores", lambda b, s: tf.image.
                     non_max_suppression_with_scores(b, s, 10, 0.5, 0.1, 0.3), [b, s])


def draw_cases(fam, rng):
    """DrawBoundingBoxes(V2): default and given colours, grey/RGB/RGBA,
    boxes partly or wholly outside, inverted, NaN, and the errors."""
    boxes = tf.constant([[[0.1, 0.1, 0.5, 0.6], [0.0, 0.0, 1.0, 1.0], [-0.2, 0.3, 0.4, 1.5],
                          [0.6, 0.6, 0.2, 0.9], [1.2, 0.1, 1.5, 0.5], [np.nan, 0.1, 0.5, 0.5],
                          [0.3, 0.3, 0.3, 0.3]] + [[0.05 * k, 0.02 * k, 0.9, 0.95]
                                                   for k in range(6)]] * 2, tf.float32)
    for depth in (1, 3, 4):
        img = rng.random((2, 9, 11, depth), dtype=np.float32)
        fam.add("DrawBoundingBoxes", lambda x, b: R.DrawBoundingBoxes(images=x, boxes=b),
                [img, boxes], f"DrawBoundingBoxes/depth {depth}")
        for name, colors in (("none", np.zeros((0, 4), np.float32)),
                             ("two", np.array([[0.1, 0.2, 0.3, 0.4], [0.9, 0.8, 0.7, 0.6]],
                                              np.float32)),
                             ("five channels", rng.random((3, 5), dtype=np.float32))):
            fam.add("DrawBoundingBoxesV2", lambda x, b, c: R.DrawBoundingBoxesV2(
                images=x, boxes=b, colors=c), [img, boxes, colors],
                f"DrawBoundingBoxesV2/depth {depth}/colors {name}")
    img = rng.random((2, 9, 11, 3), dtype=np.float32)
    fam.add("DrawBoundingBoxesV2", lambda x, b, c: R.DrawBoundingBoxesV2(images=x, boxes=b,
                                                                           colors=c),
            [img, boxes, np.ones((2, 2), np.float32)], "DrawBoundingBoxesV2/error/few channels")
    fam.add("DrawBoundingBoxesV2", lambda x, b, c: R.DrawBoundingBoxesV2(images=x, boxes=b,
                                                                           colors=c),
            [img, boxes[:1], np.ones((2, 4), np.float32)], "DrawBoundingBoxesV2/error/batch")
    fam.add_function("tf.image.draw_bounding_boxes", lambda x, b: tf.image.draw_bounding_boxes(
        x, b, [[1.0, 0.0, 0.0]]), [img, boxes])
