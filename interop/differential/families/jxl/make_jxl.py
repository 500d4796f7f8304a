"""Writes the JPEG XL files the image_codecs family decodes. TensorFlow's
venv has no JPEG XL encoder, so they were written once with Pillow 13.0 and
pillow-jxl-plugin 1.3 (libjxl) in a separate venv:

    python -m venv /tmp/pillowenv
    /tmp/pillowenv/bin/pip install pillow pillow-jxl-plugin numpy
    /tmp/pillowenv/bin/python make_jxl.py

and are committed; the family reads them."""

import numpy as np
import pillow_jxl  # noqa: F401  (registers the format)
from PIL import Image

rng = np.random.default_rng(7)
yy, xx = np.mgrid[0:21, 0:27]
smooth = np.stack([(xx * 9) % 256, (yy * 11) % 256, (xx + yy) * 5 % 256], -1).astype(np.uint8)
noise = rng.integers(0, 256, (13, 10, 3)).astype(np.uint8)
grey = rng.integers(0, 256, (9, 14)).astype(np.uint8)
alpha = np.concatenate([smooth, ((xx * 7 + yy * 3) % 256)[..., None].astype(np.uint8)], -1)
Image.fromarray(smooth).save("lossless_smooth.jxl", lossless=True)
Image.fromarray(noise).save("lossless_noise.jxl", lossless=True)
Image.fromarray(grey, "L").save("lossless_grey.jxl", lossless=True)
Image.fromarray(alpha, "RGBA").save("lossless_rgba.jxl", lossless=True)
Image.fromarray(smooth).save("lossy_smooth.jxl", quality=80)
Image.fromarray(noise).save("lossy_noise.jxl", quality=50)
Image.fromarray(alpha, "RGBA").save("lossy_rgba.jxl", quality=90)
