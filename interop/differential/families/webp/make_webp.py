"""Writes the WebP files the image_codecs family decodes. TensorFlow's venv
has no WebP encoder, so they were written once with Pillow 13.0 (its
bundled libwebp) in a separate venv:

    python -m venv /tmp/pillowenv && /tmp/pillowenv/bin/pip install pillow numpy
    /tmp/pillowenv/bin/python make_webp.py

and are committed; the family reads them, so generation stays
deterministic whatever the encoder version."""

import numpy as np
from PIL import Image

rng = np.random.default_rng(5)
yy, xx = np.mgrid[0:21, 0:27]
smooth = np.stack([(xx * 9) % 256, (yy * 11) % 256, (xx + yy) * 5 % 256], -1).astype(np.uint8)
noise = rng.integers(0, 256, (13, 10, 3)).astype(np.uint8)
ramp = ((xx * 7 + yy * 3) % 256)[..., None].astype(np.uint8)
alpha = np.concatenate([smooth, ramp], -1)
Image.fromarray(smooth).save("lossy_smooth.webp", quality=80, method=4)
Image.fromarray(noise).save("lossy_noise.webp", quality=50, method=6)
Image.fromarray(noise[:1, :1]).save("lossy_1x1.webp", quality=90)
Image.fromarray(smooth[:9, :5]).save("lossy_odd.webp", quality=95)
Image.fromarray(alpha, "RGBA").save("lossy_alpha.webp", quality=70)
Image.fromarray(alpha, "RGBA").save("lossy_alpha_exact.webp", quality=70, exact=True,
                                    alpha_quality=40)
Image.fromarray(smooth).save("lossless_rgb.webp", lossless=True)
Image.fromarray(noise).save("lossless_noise.webp", lossless=True)
Image.fromarray(alpha, "RGBA").save("lossless_rgba.webp", lossless=True)
frames = [Image.fromarray(np.roll(alpha, k * 3, axis=1), "RGBA") for k in range(3)]
frames[0].save("anim.webp", save_all=True, append_images=frames[1:], duration=50, lossless=True)
frames[0].save("anim_lossy.webp", save_all=True, append_images=frames[1:], duration=50,
               quality=60)
# A moving, half-transparent square on a still background: sub-rectangles,
# blending and disposal as libwebp's encoder chooses them.
moving = []
for k in range(4):
    canvas = np.zeros((20, 24, 4), np.uint8)
    canvas[..., :3] = smooth[:20, :24]
    canvas[..., 3] = 255 if k % 2 else 128
    canvas[2 + k * 3:8 + k * 3, 3 + k * 4:11 + k * 4] = (250, 10, 10, 90 + k * 40)
    moving.append(Image.fromarray(canvas, "RGBA"))
moving[0].save("anim_moving.webp", save_all=True, append_images=moving[1:], duration=40,
               lossless=True, minimize_size=True)
moving[0].save("anim_moving_mixed.webp", save_all=True, append_images=moving[1:], duration=40,
               allow_mixed=True, quality=80, kmax=2)
opaque = [Image.fromarray(np.roll(smooth, k * 2, axis=0)) for k in range(3)]
opaque[0].save("anim_opaque.webp", save_all=True, append_images=opaque[1:], duration=30,
               quality=75)
