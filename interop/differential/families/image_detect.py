"""tf.image detection ops: CombinedNonMaxSuppression on random boxes (one box
set shared by all classes, and a box per class), with tied scores (within a
class and across classes, enough candidates that the final sort takes its
introsort path), NaN and -inf scores, boxes outside [0, 1] with and without
clipping, pad_per_class both ways, small and large limits, and the errors;
CropAndResizeGradBoxes (boxes partly outside the image, flipped, one-row,
one-column and one-pixel crops, float, integer and half images, errors);
ScaleAndTranslateGrad (every kernel, antialias on and off, down, up, with
translations, identity, an empty original, errors);
ImageProjectiveTransformV2/V3 (identity, rotation, zoom with a transform per
image, perspective, far shifts, a vanishing line, NaN; both interpolations,
every fill mode, float32/float64/uint8/int32, a one-pixel image, errors);
ExtractGlimpse/V2 with zero noise (normalised, pixel and far offsets, centred
or not, glimpses inside, across the edge, larger than the image, empty),
the random-noise modes where the glimpse stays inside the image, errors;
DecodeBmp (8/24/32-bit, bottom-up and top-down, wide headers, every
channels value, truncated and foreign files)."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops


def combined_nms_cases(fam, rng):
    def op(pad, clip):
        return lambda b, s, m, t, i, st: R.CombinedNonMaxSuppression(
            boxes=b, scores=s, max_output_size_per_class=m, max_total_size=t,
            iou_threshold=i, score_threshold=st, pad_per_class=pad, clip_boxes=clip)

    batch, n, classes = 2, 16, 3
    for q in (1, classes):
        centres = rng.random((batch, n, q, 2), dtype=np.float32) * 1.2 - 0.1
        sizes = rng.random((batch, n, q, 2), dtype=np.float32) * 0.5
        boxes = np.concatenate([centres - sizes / 2, centres + sizes / 2], -1)
        boxes[0, 3] = boxes[0, 3][:, [2, 3, 0, 1]]  # flipped corners
        boxes[0, 5] = [0.2, 0.2, 0.2, 0.6]  # no area
        boxes[1, 2, 0] = [np.nan, 0.1, 0.5, 0.5]
        # Scores quantised to tenths: many ties, in a class and across them.
        scores = np.round(rng.random((batch, n, classes), dtype=np.float32) * 10) / 10
        scores = scores.astype(np.float32)
        scores[0, 11, 0] = np.nan
        scores[0, 12, 1] = -np.inf
        b, s = tf.constant(boxes.astype(np.float32)), tf.constant(scores)
        for pad in (False, True):
            for clip in (True, False):
                for per_class, total in ((2, 5), (10, 100), (100, 7)):
                    for iou, score in ((0.5, 0.0), (0.3, 0.45), (1.0, -np.inf)):
                        key = (f"q {q}/pad {pad}/clip {clip}/max {per_class} {total}"
                               f"/iou {iou}/score {score}")
                        fam.add("CombinedNonMaxSuppression", op(pad, clip),
                                [b, s, tf.constant(per_class), tf.constant(total),
                                 tf.constant(iou), tf.constant(np.float32(score))],
                                f"CombinedNonMaxSuppression/{key}")
    # All scores tied across many classes: the final order is libstdc++'s.
    b = tf.constant(rng.random((1, 40, 1, 4), dtype=np.float32))
    s = tf.fill([1, 40, 6], 0.5)
    fam.add("CombinedNonMaxSuppression", op(False, True),
            [b, s, tf.constant(40), tf.constant(300), tf.constant(1.0), tf.constant(0.0)],
            "CombinedNonMaxSuppression/all tied")
    fam.add("CombinedNonMaxSuppression", op(False, True),
            [tf.zeros([2, 0, 1, 4]), tf.zeros([2, 0, 3]), tf.constant(3), tf.constant(4),
             tf.constant(0.5), tf.constant(0.0)], "CombinedNonMaxSuppression/no boxes")
    fam.add("CombinedNonMaxSuppression", op(True, True),
            [tf.zeros([2, 0, 1, 4]), tf.zeros([2, 0, 3]), tf.constant(3), tf.constant(4),
             tf.constant(0.5), tf.constant(0.0)], "CombinedNonMaxSuppression/no boxes padded")
    b = tf.constant(rng.random((2, 5, 1, 4), dtype=np.float32))
    s = tf.constant(rng.random((2, 5, 3), dtype=np.float32))
    one = lambda x: tf.constant(x)  # noqa: E731
    for name, args in {
        "boxes 3-D": [b[:, :, 0], s, one(3), one(4), one(0.5), one(0.0)],
        "q not 1 or classes": [tf.concat([b, b], 2), s, one(3), one(4), one(0.5), one(0.0)],
        "boxes 3 columns": [b[..., :3], s, one(3), one(4), one(0.5), one(0.0)],
        "scores count": [b, s[:, :4], one(3), one(4), one(0.5), one(0.0)],
        "batch": [b, s[:1], one(3), one(4), one(0.5), one(0.0)],
        "per class 1-D": [b, s, one([3]), one(4), one(0.5), one(0.0)],
        "per class zero": [b, s, one(0), one(4), one(0.5), one(0.0)],
        "total 1-D": [b, s, one(3), one([4]), one(0.5), one(0.0)],
        "total negative": [b, s, one(3), one(-1), one(0.5), one(0.0)],
        "iou 1-D": [b, s, one(3), one(4), one([0.5]), one(0.0)],
        "iou above 1": [b, s, one(3), one(4), one(1.5), one(0.0)],
        "iou NaN": [b, s, one(3), one(4), one(np.float32(np.nan)), one(0.0)],
        "score 1-D": [b, s, one(3), one(4), one(0.5), one([0.0])],
    }.items():
        fam.add("CombinedNonMaxSuppression", op(False, True), args,
                f"CombinedNonMaxSuppression/error/{name}")


def crop_grad_boxes_cases(fam, rng):
    op = lambda g, im, b, i: R.CropAndResizeGradBoxes(  # noqa: E731
        grads=g, image=im, boxes=b, box_ind=i)
    boxes = np.array([[0.1, 0.2, 0.8, 0.9], [-0.2, 0.3, 1.1, 0.7], [0.9, 0.8, 0.1, 0.05],
                      [0.5, 0.5, 0.5, 0.5], [0.0, 0.0, 1.0, 1.0], [0.33, 0.21, 0.47, 0.96]],
                     np.float32)
    idx = tf.constant([0, 1, 1, 0, 1, 0], tf.int32)
    for dt in (tf.float32, tf.float64, tf.uint8, tf.int32, tf.float16):
        image = tf.cast(rng.random((2, 6, 7, 3)) * 200 - (0 if dt == tf.uint8 else 60), dt)
        for crop in ((3, 4), (1, 5), (4, 1), (1, 1), (6, 7)):
            g = tf.constant(rng.standard_normal((6, *crop, 3)).astype(np.float32))
            fam.add("CropAndResizeGradBoxes", op, [g, image, tf.constant(boxes), idx],
                    f"CropAndResizeGradBoxes/{crop}/{dt.name}")
    image = tf.constant(rng.random((2, 5, 5, 2), dtype=np.float32))
    g = tf.ones([2, 3, 3, 2])
    b, i = tf.constant(boxes[:2]), idx[:2]
    for name, args in {
        "one-pixel image": [g, image[:, :1, :1], b, i],
        "no boxes": [tf.zeros([0, 3, 3, 2]), image, tf.zeros([0, 4]), tf.zeros([0], tf.int32)],
        "error/grads 3-D": [g[0], image, b, i],
        "error/empty crop": [tf.ones([2, 0, 3, 2]), image, b, i],
        "error/image 3-D": [g, image[0], b, i],
        "error/empty image": [g, image[:, :0], b, i],
        "error/depth": [g, image[..., :1], b, i],
        "error/box count": [g, image, b[:1], i[:1]],
        "error/boxes of 3 columns": [g, image, b[:, :3], i],
        "error/box_ind short": [g, image, b, i[:1]],
        "error/box_ind 2-D": [g, image, b, tf.reshape(i, [2, 1])],
    }.items():
        fam.add("CropAndResizeGradBoxes", op, args, f"CropAndResizeGradBoxes/{name}")


def scale_grad_cases(fam, rng):
    def op(kernel, aa):
        return lambda g, im, s, t: R.ScaleAndTranslateGrad(
            grads=g, original_image=im, scale=s, translation=t, kernel_type=kernel,
            antialias=aa)

    image = tf.constant(rng.random((1, 7, 6, 2), dtype=np.float32))
    kernels = ("lanczos1", "lanczos3", "lanczos5", "gaussian", "box", "triangle",
               "keyscubic", "mitchellcubic")
    for kernel in kernels:
        for aa in (True, False):
            for out, scale, trans in (((3, 4), (0.45, 0.7), (0.0, 0.0)),
                                      ((14, 9), (2.0, 1.5), (0.0, 0.0)),
                                      ((5, 8), (0.8, 1.3), (0.7, -1.2)),
                                      ((7, 6), (1.0, 1.0), (0.0, 0.0))):
                g = tf.constant(rng.standard_normal((1, *out, 2)).astype(np.float32))
                fam.add("ScaleAndTranslateGrad", op(kernel, aa),
                        [g, image, tf.constant(scale, tf.float32),
                         tf.constant(trans, tf.float32)],
                        f"ScaleAndTranslateGrad/{kernel}/aa {aa}/{out}/{scale}/{trans}")
    g = tf.ones([1, 3, 4, 2])
    one = lambda x: tf.constant(x, tf.float32)  # noqa: E731
    f = op("lanczos3", True)
    for name, args in {
        "empty original": [g, image[:, :0], one([0.5, 0.5]), one([0.0, 0.0])],
        "far translation": [g, image, one([0.5, 0.5]), one([40.0, -40.0])],
        "error/grads 3-D": [g[0], image, one([0.5, 0.5]), one([0.0, 0.0])],
        "error/original 3-D": [g, image[0], one([0.5, 0.5]), one([0.0, 0.0])],
        "error/scale zero": [g, image, one([0.0, 0.5]), one([0.0, 0.0])],
        "error/scale of 3": [g, image, one([0.5, 0.5, 0.5]), one([0.0, 0.0])],
        "error/translation 2-D": [g, image, one([0.5, 0.5]), one([[0.0, 0.0]])],
    }.items():
        fam.add("ScaleAndTranslateGrad", f, args, f"ScaleAndTranslateGrad/{name}")


def projective_cases(fam, rng):
    def v3(interp, mode):
        return lambda im, t, s, f: R.ImageProjectiveTransformV3(
            images=im, transforms=t, output_shape=s, fill_value=f, interpolation=interp,
            fill_mode=mode)

    def v2(interp, mode):
        return lambda im, t, s: R.ImageProjectiveTransformV2(
            images=im, transforms=t, output_shape=s, interpolation=interp, fill_mode=mode)

    c, s_ = np.cos(0.6), np.sin(0.6)
    transforms = {
        "identity": [[1, 0, 0, 0, 1, 0, 0, 0]],
        "rotate": [[c, -s_, 2.5, s_, c, -1.5, 0, 0]],
        "zoom out and shift": [[2.3, 0.1, -4.2, -0.2, 1.7, -3.1, 0, 0],
                               [0.4, 0.0, 1.3, 0.0, 0.45, 0.7, 0, 0]],
        "perspective": [[1.1, 0.2, -1.0, 0.1, 0.9, 0.5, 0.02, -0.03]],
        "far": [[1, 0, 37.5, 0, 1, -41.25, 0, 0]],
        "vanishing": [[1, 0, 0, 0, 1, 0, -0.25, 0]],
        "nan": [[np.nan, 0, 0, 0, 1, 0, 0, 0]],
    }
    floats = tf.constant((rng.random((2, 7, 6, 2)) * 100 - 30).astype(np.float32))
    images = {"float32": floats, "float64": tf.cast(floats, tf.float64) / 3,
              "uint8": tf.cast(tf.abs(floats) * 2, tf.uint8), "int32": tf.cast(floats, tf.int32)}
    for name, t in transforms.items():
        t = tf.constant(t, tf.float32)
        for interp in ("NEAREST", "BILINEAR"):
            for mode in ("REFLECT", "WRAP", "CONSTANT", "NEAREST"):
                for dt, im in images.items():
                    if dt not in ("float32", "uint8") and name not in ("rotate", "perspective"):
                        continue
                    for size in ((9, 4),) if name != "identity" else ((7, 6),):
                        fill = 3.0 if dt != "uint8" else 9.0
                        fam.add("ImageProjectiveTransformV3", v3(interp, mode),
                                [im, t, tf.constant(size), tf.constant(fill)],
                                f"ImageProjectiveTransformV3/{name}/{interp}/{mode}/{dt}/{size}")
                fam.add("ImageProjectiveTransformV2", v2(interp, mode),
                        [floats, t, tf.constant([6, 8])],
                        f"ImageProjectiveTransformV2/{name}/{interp}/{mode}")
    one_px = floats[:, :1, :1]
    f = v3("BILINEAR", "REFLECT")
    for mode in ("REFLECT", "WRAP"):
        fam.add("ImageProjectiveTransformV3", v3("BILINEAR", mode),
                [one_px, tf.constant(transforms["rotate"], tf.float32), tf.constant([3, 3]),
                 tf.constant(1.0)], f"ImageProjectiveTransformV3/one pixel/{mode}")
    t = tf.constant(transforms["rotate"], tf.float32)
    for name, args in {
        "error/images 3-D": [floats[0], t, tf.constant([3, 3]), tf.constant(0.0)],
        "error/transform 1-D": [floats, t[0], tf.constant([3, 3]), tf.constant(0.0)],
        "error/transform of 7": [floats, t[:, :7], tf.constant([3, 3]), tf.constant(0.0)],
        "error/transform count": [floats, tf.ones([3, 8]), tf.constant([3, 3]),
                                  tf.constant(0.0)],
        "error/shape of 1": [floats, t, tf.constant([3]), tf.constant(0.0)],
        "error/shape 2-D": [floats, t, tf.constant([[3, 3]]), tf.constant(0.0)],
        "error/shape zero": [floats, t, tf.constant([0, 3]), tf.constant(0.0)],
        "error/shape negative": [floats, t, tf.constant([3, -3]), tf.constant(0.0)],
        "error/fill 1-D": [floats, t, tf.constant([3, 3]), tf.constant([0.0])],
    }.items():
        fam.add("ImageProjectiveTransformV3", f, args, f"ImageProjectiveTransformV3/{name}")


def glimpse_cases(fam, rng):
    def op(v2, centered, normalized, noise, uniform=False):
        raw = R.ExtractGlimpseV2 if v2 else R.ExtractGlimpse
        return lambda im, s, o: raw(input=im, size=s, offsets=o, centered=centered,
                                    normalized=normalized, uniform_noise=uniform, noise=noise)

    image = tf.constant(rng.random((3, 6, 5, 1), dtype=np.float32))
    offsets = {
        "normalized": [[0.1, -0.3], [0.9, 0.9], [-1.2, 0.5]],
        "pixels": [[2.0, 3.5], [-2.7, 6.2], [7.9, -0.4]],
        "far": [[40.0, -50.0], [-1e6, 1e6], [4.5, 4.5]],
    }
    for v2 in (False, True):
        name = "ExtractGlimpseV2" if v2 else "ExtractGlimpse"
        for key, o in offsets.items():
            for centered in (True, False):
                for normalized in (True, False):
                    for size in ((3, 4), (1, 1), (8, 7), (0, 3)):
                        fam.add(name, op(v2, centered, normalized, "zero"),
                                [image, tf.constant(size), tf.constant(o, tf.float32)],
                                f"{name}/{key}/centered {centered}/normalized {normalized}/{size}")
        # Random noise modes where the glimpse stays inside (no noise drawn).
        inside = tf.constant([[0.0, 0.0], [0.1, -0.1], [-0.2, 0.2]], tf.float32)
        for noise, uniform in (("uniform", False), ("gaussian", False), ("", True), ("", False)):
            fam.add(name, op(v2, True, True, noise, uniform),
                    [image, tf.constant([3, 3]), inside],
                    f"{name}/inside/noise {noise!r} uniform {uniform}")
    f = op(True, True, True, "zero")
    o = tf.constant(offsets["normalized"], tf.float32)
    for key, args in {
        "empty image": [image[:, :0], tf.constant([2, 2]), o],
        "error/input 3-D": [image[0], tf.constant([2, 2]), o],
        "error/size of 1": [image, tf.constant([2]), o],
        "error/size 2-D": [image, tf.constant([[2, 2]]), o],
        "error/size negative": [image, tf.constant([2, -1]), o],
        "error/offsets 1-D": [image, tf.constant([2, 2]), o[0]],
        "error/offsets batch": [image, tf.constant([2, 2]), o[:2]],
        "error/offsets of 1": [image, tf.constant([2, 2]), o[:, :1]],
    }.items():
        fam.add("ExtractGlimpseV2", f, args, f"ExtractGlimpseV2/{key}")


def bmp(w, h, bpp, header=54, compression=0, data=None, trim=0):
    import struct
    row = (bpp // 8 * w + 3) // 4 * 4
    if data is None:
        data = bytes((i * 7 + 3) % 256 for i in range(row * abs(h)))
    head = b"BM" + struct.pack("<IHHI", header + len(data), 0, 0, header)
    head += struct.pack("<IiiHHIIiiII", 40, w, h, 1, bpp, compression, len(data), 0, 0, 0, 0)
    blob = head + b"\0" * (header - len(head)) + data
    return blob[:len(blob) - trim] if trim else blob


def bmp_cases(fam):
    op = lambda ch: lambda c: R.DecodeBmp(contents=c, channels=ch)  # noqa: E731
    files = {
        "24-bit": bmp(5, 3, 24), "32-bit": bmp(3, 4, 32), "8-bit": bmp(6, 2, 8),
        "top down": bmp(5, -3, 24), "wide header": bmp(2, 2, 24, header=70),
        "bitfields": bmp(3, 2, 32, compression=3), "one pixel": bmp(1, 1, 24),
        "error/truncated": bmp(5, 3, 24, trim=5), "error/16-bit": bmp(3, 2, 16),
        "error/zero width": bmp(0, 2, 24), "error/zero height": bmp(3, 0, 24),
        "error/short": bmp(3, 2, 24)[:20], "error/not an image": b"hello, world" * 4,
        "error/png": tf.io.encode_png(tf.zeros([2, 2, 3], tf.uint8)).numpy(),
        "error/jpeg": tf.io.encode_jpeg(tf.zeros([2, 2, 3], tf.uint8)).numpy(),
        "error/gif": b"GIF89a" + b"\0" * 40,
    }
    for name, blob in files.items():
        for ch in (0, 1, 3, 4):
            if ch and name.startswith("error/") and name != "error/truncated":
                continue
            fam.add("DecodeBmp", op(ch), [tf.constant(blob)], f"DecodeBmp/{name}/channels {ch}")
    fam.add("DecodeBmp", op(0), [tf.constant([files["24-bit"]])], "DecodeBmp/error/vector")


def family():
    fam = Family("image_detect")
    rng = np.random.default_rng(34)
    combined_nms_cases(fam, rng)
    crop_grad_boxes_cases(fam, rng)
    scale_grad_cases(fam, rng)
    projective_cases(fam, rng)
    glimpse_cases(fam, rng)
    bmp_cases(fam)
    return fam
