"""Seeds flowing through pipelines."""

import numpy as np  # noqa: F401
import tensorflow as tf  # noqa: F401

from harness import (  # noqa: F401
    FLOATS, I32_MAX, I32_MIN, I64_MAX, I64_MIN, SEEDS32, SEEDS64, SHAPES, U64_MAX,
    Family, dname, seed_tensor)


def family():
    """Seeds flowing through pipelines: the ops above inside map functions."""
    fam = Family("pipelines_random")
    rng = np.random.default_rng(7)
    imgs = rng.random((3, 4, 5, 3), dtype=np.float32)
    D = tf.data.Dataset

    def bright_flip(x):
        x = tf.image.stateless_random_brightness(x, 0.2, seed=(1, 2))
        return tf.image.stateless_random_flip_left_right(x, seed=(3, 4))
    fam.add_dataset("stateless brightness+flip map", D.from_tensor_slices(imgs).map(bright_flip))
    fam.add_dataset("stateless uniform, per-element seed", D.range(5).map(
        lambda i: tf.random.stateless_uniform([3], seed=tf.stack([i, 7]))))
    fam.add_dataset("stateless uniform int32 range, per-element seed", D.range(6).map(
        lambda i: tf.random.stateless_uniform([2], seed=[i, i], minval=0, maxval=10,
                                              dtype=tf.int32)))
    fam.add_dataset("stateless flip of batches", D.from_tensor_slices(imgs).batch(2).map(
        lambda x: tf.image.stateless_random_flip_left_right(x, seed=(1, 2))))
    fam.add_dataset("seeded uniform in map", D.range(4).map(lambda i: tf.random.uniform([2], seed=5)),
                    stateful=True)
    fam.add_dataset("seeded uniform in map, repeated", D.range(3).map(
        lambda i: tf.random.uniform([2], seed=5)).repeat(2), stateful=True)
    fam.add_dataset("seeded truncated normal in map", D.range(3).map(
        lambda i: tf.random.truncated_normal([5], seed=3)), stateful=True)
    fam.add_dataset("seeded random_flip_left_right", D.from_tensor_slices(
        np.concatenate([imgs] * 4)).map(lambda x: tf.image.random_flip_left_right(x, seed=9)),
        stateful=True)
    return fam
