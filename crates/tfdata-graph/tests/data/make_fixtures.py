"""Generates the image fixtures of tfdata-graph's image kernel tests, and
TensorFlow 2.21's decodes of them (`*.tf.bin`: raw uint8 HWC).

Run with TensorFlow 2.21: python make_fixtures.py
"""
import numpy as np
import tensorflow as tf

h, w = 24, 32
y, x = np.mgrid[0:h, 0:w]
rgb = np.stack([x * 8, y * 10, (x + y) * 4], axis=-1).astype(np.uint8)
jpeg = tf.io.encode_jpeg(rgb, quality=90).numpy()
open("gradient.jpg", "wb").write(jpeg)
open("gradient.jpg.tf.bin", "wb").write(tf.io.decode_jpeg(jpeg, channels=3).numpy().tobytes())
crop = tf.raw_ops.DecodeAndCropJpeg(contents=jpeg, crop_window=[3, 5, 10, 12], channels=3)
open("gradient.crop.tf.bin", "wb").write(crop.numpy().tobytes())
rgba = np.concatenate([rgb[:8, :8], np.full((8, 8, 1), 200, np.uint8)], axis=-1)
png = tf.io.encode_png(rgba).numpy()
open("small.png", "wb").write(png)
