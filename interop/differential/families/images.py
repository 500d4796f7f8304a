"""tf.image kernels: decoding (JPEG, PNG, the dispatching DecodeImage),
resizing in every mode, crop-and-resize and contrast, on images TensorFlow
itself encoded, odd sizes, grey and RGBA, and the errors for bad bytes."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
BICUBIC = "abs:0.0003:bicubic weights and sums in another float order than TensorFlow's"


def family():
    fam = Family("images")
    rng = np.random.default_rng(11)
    # Smooth images compress like photos; noise is the hard case.
    yy, xx = np.mgrid[0:37, 0:53]
    smooth = np.stack([(xx * 4) % 256, (yy * 6) % 256, (xx + yy) * 2 % 256], -1).astype(np.uint8)
    noise = rng.integers(0, 256, (17, 23, 3)).astype(np.uint8)
    grey = rng.integers(0, 256, (9, 14, 1)).astype(np.uint8)
    rgba = rng.integers(0, 256, (8, 6, 4)).astype(np.uint8)
    jpegs = {
        "smooth q95": tf.io.encode_jpeg(smooth, quality=95),
        "smooth q50 420": tf.io.encode_jpeg(smooth, quality=50, chroma_downsampling=True),
        "noise q75 444": tf.io.encode_jpeg(noise, quality=75, chroma_downsampling=False),
        "grey": tf.io.encode_jpeg(grey, quality=90),
        "progressive": tf.io.encode_jpeg(smooth, quality=80, progressive=True),
    }
    for name, data in jpegs.items():
        for channels in (0, 1, 3):
            for dct in ("", "INTEGER_ACCURATE"):
                fam.add("DecodeJpeg", lambda d, c=channels, m=dct: R.DecodeJpeg(
                    contents=d, channels=c, dct_method=m), [data],
                    f"DecodeJpeg/{name}/channels {channels}/{dct or 'default'}")
        fam.add("DecodeImage", lambda d: R.DecodeImage(contents=d, channels=3), [data],
                f"DecodeImage/jpeg/{name}")
    fam.add("DecodeAndCropJpeg", lambda d, w: R.DecodeAndCropJpeg(contents=d, crop_window=w,
                                                                  channels=3),
            [jpegs["smooth q95"], tf.constant([3, 5, 20, 16])], "DecodeAndCropJpeg/window")
    fam.add("DecodeAndCropJpeg", lambda d, w: R.DecodeAndCropJpeg(contents=d, crop_window=w),
            [jpegs["smooth q95"], tf.constant([30, 5, 20, 16])], "DecodeAndCropJpeg/error/window")
    pngs = {"rgb": tf.io.encode_png(noise), "grey": tf.io.encode_png(grey),
            "rgba": tf.io.encode_png(rgba), "smooth c9": tf.io.encode_png(smooth, compression=9)}
    for name, data in pngs.items():
        for channels in (0, 1, 3, 4):
            fam.add("DecodePng", lambda d, c=channels: R.DecodePng(contents=d, channels=c),
                    [data], f"DecodePng/{name}/channels {channels}")
        fam.add("DecodeImage", lambda d: R.DecodeImage(contents=d, channels=0), [data],
                f"DecodeImage/png/{name}")
    for i, bad in enumerate([b"", b"\xff\xd8\xff", b"not an image", jpegs["grey"].numpy()[:60]]):
        fam.add("DecodeJpeg", lambda d: R.DecodeJpeg(contents=d), [tf.constant(bad)],
                f"DecodeJpeg/error/{i}")
        fam.add("DecodePng", lambda d: R.DecodePng(contents=d), [tf.constant(bad)],
                f"DecodePng/error/{i}")
        fam.add("DecodeImage", lambda d: R.DecodeImage(contents=d), [tf.constant(bad)],
                f"DecodeImage/error/{i}")
    # Resizing: uint8 and float inputs, up and down, odd ratios, every flag.
    images = {"uint8": tf.constant(noise[None]),
              "float32": tf.constant(rng.random((2, 7, 9, 3)).astype(np.float32))}
    for name, img in images.items():
        for size in ([4, 5], [14, 31], [7, 9], [1, 1]):
            for align, half in ((False, False), (True, False), (False, True)):
                flags = dict(align_corners=align, half_pixel_centers=half)
                key = f"{size}/align {align}/half {half}"
                fam.add("ResizeBilinear", lambda im, sz, f=flags: R.ResizeBilinear(
                    images=im, size=sz, **f), [img, tf.constant(size)],
                    f"ResizeBilinear/{name}/{key}")
                fam.add("ResizeNearestNeighbor", lambda im, sz, f=flags: R.ResizeNearestNeighbor(
                    images=im, size=sz, **f), [img, tf.constant(size)],
                    f"ResizeNearestNeighbor/{name}/{key}")
                fam.add("ResizeBicubic", lambda im, sz, f=flags: R.ResizeBicubic(
                    images=im, size=sz, **f), [img, tf.constant(size)],
                    f"ResizeBicubic/{name}/{key}", tolerance=BICUBIC)
    fam.add("ResizeBilinear", lambda im, sz: R.ResizeBilinear(images=im, size=sz),
            [images["float32"], tf.constant([0, 3])], "ResizeBilinear/error/zero size")
    boxes = tf.constant([[0.0, 0.0, 1.0, 1.0], [0.1, 0.2, 0.7, 0.9], [0.9, 0.8, 0.2, 0.1],
                         [-0.2, -0.1, 1.3, 1.1]], tf.float32)
    for method in ("bilinear", "nearest"):
        for name, img in images.items():
            fam.add("CropAndResize", lambda im, b, i, c, m=method: R.CropAndResize(
                image=im, boxes=b, box_ind=i, crop_size=c, method=m, extrapolation_value=-1.0),
                [img, boxes, tf.constant([0, 0, 0, 0], tf.int32), tf.constant([5, 6])],
                f"CropAndResize/{name}/{method}")
    fam.add("CropAndResize", lambda im, b, i, c: R.CropAndResize(image=im, boxes=b, box_ind=i,
                                                                crop_size=c),
            [images["float32"], boxes, tf.constant([0, 0, 0, 5], tf.int32), tf.constant([5, 6])],
            "CropAndResize/error/box index")
    for factor in (0.5, 1.0, 2.5, -1.0):
        fam.add("AdjustContrastv2", lambda im, f: R.AdjustContrastv2(images=im,
                                                                     contrast_factor=f),
                [images["float32"], tf.constant(factor)], f"AdjustContrastv2/{factor}",
                tolerance="abs:1e-6:the mean in float64 against Eigen's float32 sum")
    return fam
