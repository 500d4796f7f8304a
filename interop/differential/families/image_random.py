"""tf.image's random ops and the stateless ones they are built of."""

import numpy as np  # noqa: F401
import tensorflow as tf  # noqa: F401

from harness import (  # noqa: F401
    FLOATS, I32_MAX, I32_MIN, I64_MAX, I64_MIN, SEEDS32, SEEDS64, SHAPES, U64_MAX,
    Family, dname, seed_tensor)


def family():
    fam = Family("image_random")
    rng = np.random.default_rng(33)

    def bright_flip(delta, s1, s2):
        def f(x):
            x = tf.image.stateless_random_brightness(x, delta, seed=s1)
            return tf.image.stateless_random_flip_left_right(x, seed=s2)
        return f

    # The pipeline: brightness then left-right flip, seeded.
    for i, (delta, s1, s2) in enumerate([(0.2, (1, 2), (3, 4)), (0.5, (0, 0), (0, 1)),
                                         (0.1, (-5, 17), (42, -42))]):
        img = rng.random((4, 5, 3), dtype=np.float32)
        fam.add_function(f"brightness+flip/{i}/delta {delta}/seeds {s1} {s2}",
                         bright_flip(delta, s1, s2), [img])
    # A batch (rank 4: per-image flips by rounding), with NaN, inf and -0.0.
    img = rng.random((3, 2, 4, 1), dtype=np.float32)
    img[0, 0, 0, 0] = np.nan
    img[1, 1, 2, 0] = -np.inf
    img[2, 0, 1, 0] = -0.0
    for s2 in ((1, 1), (2, 3)):
        fam.add_function(f"flip batch/seed {s2}",
                         lambda x, s2=s2: tf.image.stateless_random_flip_left_right(x, seed=s2),
                         [img])
    fam.add_function("brightness/float64", lambda x: tf.image.stateless_random_brightness(
        x, 0.25, seed=(11, 12)), [rng.random((2, 2, 3))])
    # The Python layers over the stateless ops: seed splitting and folding
    # (full-range ints), ranges, moments, crops.
    seed = tf.constant([1, 2], tf.int64)
    fam.add_function("tf.random.split(seed, 3)", lambda s: tf.random.split(s, 3), [seed])
    fam.add_function("tf.random.fold_in(seed, 3)", lambda s: tf.random.fold_in(s, 3), [seed])
    fam.add_function("stateless_uniform int64 full range", lambda s: tf.random.stateless_uniform(
        [5], seed=s, minval=None, maxval=None, dtype=tf.int64), [seed])
    fam.add_function("stateless_uniform float [-3, 7)", lambda s: tf.random.stateless_uniform(
        [6], seed=s, minval=-3.0, maxval=7.0), [seed])
    fam.add_function("stateless_normal mean 2 stddev 3", lambda s: tf.random.stateless_normal(
        [7], seed=s, mean=2.0, stddev=3.0), [seed])
    fam.add_function("stateless_truncated_normal float64", lambda s: tf.random.stateless_truncated_normal(
        [5], seed=s, dtype=tf.float64), [seed])
    fam.add_function("stateless_random_crop", lambda x: tf.image.stateless_random_crop(
        x, [3, 2, 3], seed=(5, 9)), [rng.random((6, 5, 3), dtype=np.float32)])
    fam.add_function("flip up-down/seed 4,5", lambda x: tf.image.stateless_random_flip_up_down(
        x, seed=(4, 5)), [rng.random((3, 2, 1), dtype=np.float32)])
    return fam
