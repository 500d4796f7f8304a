"""More tf.image kernels: the older non-max suppressions (V1 with the IoU
threshold an attr, V2 without a score threshold) and
NonMaxSuppressionWithOverlaps (a similarity matrix instead of boxes), on
random boxes with ties, flipped and empty boxes, NaN and -inf scores, and
the errors."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops


def boxes_and_scores(rng, n=30):
    centres = rng.random((n, 2), dtype=np.float32)
    sizes = rng.random((n, 2), dtype=np.float32) * 0.4
    boxes = np.concatenate([centres - sizes / 2, centres + sizes / 2], 1).astype(np.float32)
    boxes[3] = boxes[3][[2, 3, 0, 1]]  # flipped corners
    boxes[5] = [0.2, 0.2, 0.2, 0.6]  # no area
    scores = rng.random(n, dtype=np.float32)
    scores[7] = scores[8] = scores[9]  # ties
    scores[11] = np.nan
    scores[12] = -np.inf
    scores[13] = -3.0e38
    return tf.constant(boxes), tf.constant(scores)


def nms_cases(fam, rng):
    b, s = boxes_and_scores(rng)
    for max_out in (0, 4, 100):
        for iou in (0.0, 0.3, 0.5, 1.0):
            key = f"max {max_out}/iou {iou}"
            fam.add("NonMaxSuppression", lambda b, s, m, iou=iou: R.NonMaxSuppression(
                boxes=b, scores=s, max_output_size=m, iou_threshold=iou),
                [b, s, tf.constant(max_out)], f"NonMaxSuppression/{key}")
            fam.add("NonMaxSuppressionV2", lambda b, s, m, i: R.NonMaxSuppressionV2(
                boxes=b, scores=s, max_output_size=m, iou_threshold=i),
                [b, s, tf.constant(max_out), tf.constant(iou)], f"NonMaxSuppressionV2/{key}")
    fam.add("NonMaxSuppression", lambda b, s, m: R.NonMaxSuppression(
        boxes=b, scores=s, max_output_size=m), [b, s, tf.constant(10)],
        "NonMaxSuppression/default threshold")
    fam.add("NonMaxSuppressionV2", lambda b, s, m, i: R.NonMaxSuppressionV2(
        boxes=b, scores=s, max_output_size=m, iou_threshold=i),
        [tf.zeros([0, 4]), tf.zeros([0]), tf.constant(3), tf.constant(0.5)],
        "NonMaxSuppressionV2/no boxes")
    v2 = lambda b, s, m, i: R.NonMaxSuppressionV2(  # noqa: E731
        boxes=b, scores=s, max_output_size=m, iou_threshold=i)
    for name, args in {
        "boxes 3 cols": [b[:, :3], s, tf.constant(3), tf.constant(0.5)],
        "boxes 1-D": [tf.reshape(b, [-1]), s, tf.constant(3), tf.constant(0.5)],
        "scores short": [b, s[:-1], tf.constant(3), tf.constant(0.5)],
        "scores 2-D": [b, tf.reshape(s, [1, -1]), tf.constant(3), tf.constant(0.5)],
        "iou above 1": [b, s, tf.constant(3), tf.constant(1.5)],
        "iou negative": [b, s, tf.constant(3), tf.constant(-0.1)],
        "iou 1-D": [b, s, tf.constant(3), tf.constant([0.5])],
        "max_output_size 1-D": [b, s, tf.constant([3]), tf.constant(0.5)],
        "max_output_size negative": [b, s, tf.constant(-1), tf.constant(0.5)],
    }.items():
        fam.add("NonMaxSuppressionV2", v2, args, f"NonMaxSuppressionV2/error/{name}")
    fam.add("NonMaxSuppression", lambda b, s, m: R.NonMaxSuppression(
        boxes=b, scores=s, max_output_size=m, iou_threshold=1.5), [b, s, tf.constant(3)],
        "NonMaxSuppression/error/iou above 1")

    # WithOverlaps: an asymmetric matrix shows which of (candidate,
    # selected) is read.
    n = 12
    ov = rng.random((n, n), dtype=np.float32)
    ov[2, 5] = np.nan
    ov[4, 1] = np.inf
    sc = rng.random(n, dtype=np.float32)
    sc[3] = sc[6]
    ovs = lambda o, s, m, t, st: R.NonMaxSuppressionWithOverlaps(  # noqa: E731
        overlaps=o, scores=s, max_output_size=m, overlap_threshold=t, score_threshold=st)
    for max_out in (0, 3, 20):
        for thr in (-1.0, 0.0, 0.4, 0.7, 1.0, 2.0):
            for st in (-np.inf, 0.3):
                fam.add("NonMaxSuppressionWithOverlaps", ovs,
                        [tf.constant(ov), tf.constant(sc), tf.constant(max_out), tf.constant(thr),
                         tf.constant(st, tf.float32)],
                        f"NonMaxSuppressionWithOverlaps/max {max_out}/threshold {thr}/score {st}")
    fam.add("NonMaxSuppressionWithOverlaps", ovs,
            [tf.zeros([0, 0]), tf.zeros([0]), tf.constant(3), tf.constant(0.5), tf.constant(0.0)],
            "NonMaxSuppressionWithOverlaps/no boxes")
    o, s2 = tf.constant(ov), tf.constant(sc)
    for name, args in {
        "not square": [o[:3], s2[:3], tf.constant(3), tf.constant(0.5), tf.constant(0.0)],
        "1-D": [tf.reshape(o, [-1]), s2, tf.constant(3), tf.constant(0.5), tf.constant(0.0)],
        "scores short": [o, s2[:-1], tf.constant(3), tf.constant(0.5), tf.constant(0.0)],
        "threshold 1-D": [o, s2, tf.constant(3), tf.constant([0.5]), tf.constant(0.0)],
        "score threshold 1-D": [o, s2, tf.constant(3), tf.constant(0.5), tf.constant([0.0])],
        "max_output_size negative": [o, s2, tf.constant(-2), tf.constant(0.5), tf.constant(0.0)],
    }.items():
        fam.add("NonMaxSuppressionWithOverlaps", ovs, args,
                f"NonMaxSuppressionWithOverlaps/error/{name}")


def family():
    fam = Family("image_more")
    rng = np.random.default_rng(33)
    nms_cases(fam, rng)
    return fam
