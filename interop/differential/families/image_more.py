"""More tf.image kernels: the older non-max suppressions (V1 with the IoU
threshold an attr, V2 without a score threshold) and
NonMaxSuppressionWithOverlaps (a similarity matrix instead of boxes), on
random boxes with ties, flipped and empty boxes, NaN and -inf scores, and
the errors; the resize gradients (bilinear, bicubic, nearest) for every
align_corners/half_pixel_centers combination, up and down, float32 and
float64 (and integer gradients for nearest), with their errors;
CropAndResizeGradImage (bilinear and nearest, boxes partly outside the
image, flipped, one-pixel crops, float32 and float64)."""

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


MODES = {"legacy": (False, False), "align_corners": (True, False), "half_pixel": (False, True)}


def resize_grad_cases(fam, rng):
    sizes = {"up": ((3, 4), (7, 9)), "down": ((9, 7), (4, 3)), "same": ((4, 5), (4, 5)),
             "to 1x1": ((5, 6), (1, 1)), "from 1x1": ((1, 1), (3, 2))}
    for sname, (orig, resized) in sizes.items():
        grads = rng.standard_normal((2,) + resized + (3,)).astype(np.float32)
        grads[0, 0, 0, 0] = np.nan if sname == "up" else grads[0, 0, 0, 0]
        g = tf.constant(grads)
        for mname, (align, half) in MODES.items():
            key = f"{sname}/{mname}"
            for dt in (tf.float32, tf.float64):
                o = tf.zeros((2,) + orig + (3,), dt)
                fam.add("ResizeBilinearGrad", lambda g, o, a=align, h=half: R.ResizeBilinearGrad(
                    grads=g, original_image=o, align_corners=a, half_pixel_centers=h),
                    [g, o], f"ResizeBilinearGrad/{key}/{dt.name}")
                fam.add("ResizeBicubicGrad", lambda g, o, a=align, h=half: R.ResizeBicubicGrad(
                    grads=g, original_image=o, align_corners=a, half_pixel_centers=h),
                    [g, o], f"ResizeBicubicGrad/{key}/{dt.name}")
            for dt in (tf.float32, tf.float64, tf.int32, tf.uint8):
                gg = tf.cast(g * 50.0, dt) if dt.is_integer else tf.cast(g, dt)
                fam.add("ResizeNearestNeighborGrad", lambda g, s, a=align, h=half:
                        R.ResizeNearestNeighborGrad(grads=g, size=s, align_corners=a,
                                                    half_pixel_centers=h),
                        [gg, tf.constant(orig)], f"ResizeNearestNeighborGrad/{key}/{dt.name}")
    g = tf.constant(rng.standard_normal((1, 4, 5, 2)).astype(np.float32))
    o = tf.zeros([1, 3, 3, 2])
    bil = lambda g, o: R.ResizeBilinearGrad(grads=g, original_image=o)  # noqa: E731
    bic = lambda g, o: R.ResizeBicubicGrad(grads=g, original_image=o)  # noqa: E731
    for name, args in {
        "grads 3-D": [g[0], o], "original 3-D": [g, o[0]],
        "empty original": [g, tf.zeros([1, 0, 3, 2])], "empty grads": [tf.zeros([1, 0, 5, 2]), o],
        "batch and channels from the gradient": [tf.concat([g, g], 0), tf.zeros([1, 3, 3, 1])],
        "empty batch": [g[:0], o],
    }.items():
        fam.add("ResizeBilinearGrad", bil, args, f"ResizeBilinearGrad/edge/{name}")
        fam.add("ResizeBicubicGrad", bic, args, f"ResizeBicubicGrad/edge/{name}")
    fam.add("ResizeBilinearGrad", lambda g, o: R.ResizeBilinearGrad(
        grads=g, original_image=o, align_corners=True, half_pixel_centers=True), [g, o],
        "ResizeBilinearGrad/error/align and half")
    nn = lambda g, s: R.ResizeNearestNeighborGrad(grads=g, size=s)  # noqa: E731
    for name, args in {"size 3 elements": [g, tf.constant([3, 3, 3])], "size 0": [g, tf.constant([0, 3])],
                       "grads 3-D": [g[0], tf.constant([3, 3])]}.items():
        fam.add("ResizeNearestNeighborGrad", nn, args, f"ResizeNearestNeighborGrad/error/{name}")


def crop_grad_cases(fam, rng):
    boxes = tf.constant([[0.0, 0.0, 1.0, 1.0], [0.2, 0.1, 0.9, 1.3], [0.8, 0.7, 0.1, 0.2],
                         [-0.5, -0.2, 0.4, 0.6], [0.3, 0.3, 0.3, 0.3], [0.1, 0.5, 0.6, 0.55]])
    idx = tf.constant([0, 1, 0, 1, 1, 0])
    for crop in ((3, 4), (1, 1), (5, 2)):
        grads = rng.standard_normal((6,) + crop + (3,)).astype(np.float32)
        g = tf.constant(grads)
        for method in ("bilinear", "nearest"):
            for dt in (tf.float32, tf.float64):
                fam.add("CropAndResizeGradImage", lambda g, b, i, s, m=method, t=dt:
                        R.CropAndResizeGradImage(grads=g, boxes=b, box_ind=i, image_size=s, T=t,
                                                 method=m),
                        [g, boxes, idx, tf.constant([2, 6, 7, 3])],
                        f"CropAndResizeGradImage/{crop}/{method}/{dt.name}")
    g = tf.ones([2, 3, 3, 2])
    b, i = boxes[:2], idx[:2]
    cg = lambda g, b, i, s: R.CropAndResizeGradImage(  # noqa: E731
        grads=g, boxes=b, box_ind=i, image_size=s, T=tf.float32)
    for name, args in {
        "no boxes": [tf.zeros([0, 3, 3, 2]), tf.zeros([0, 4]), tf.zeros([0], tf.int32),
                     tf.constant([2, 5, 5, 2])],
        "error/grads 3-D": [g[0], b, i, tf.constant([2, 5, 5, 2])],
        "error/depth": [g, b, i, tf.constant([2, 5, 5, 3])],
        "error/image_size of 3": [g, b, i, tf.constant([2, 5, 5])],
        "error/zero height": [g, b, i, tf.constant([2, 0, 5, 2])],
        "error/box count": [g, b[:1], i[:1], tf.constant([2, 5, 5, 2])],
        "error/boxes of 3 columns": [g, b[:, :3], i, tf.constant([2, 5, 5, 2])],
        "error/box_ind short": [g, b, i[:1], tf.constant([2, 5, 5, 2])],
        "error/empty crop": [tf.ones([2, 0, 3, 2]), b, i, tf.constant([2, 5, 5, 2])],
    }.items():
        fam.add("CropAndResizeGradImage", cg, args, f"CropAndResizeGradImage/{name}")


def family():
    fam = Family("image_more")
    rng = np.random.default_rng(33)
    nms_cases(fam, rng)
    resize_grad_cases(fam, rng)
    crop_grad_cases(fam, rng)
    return fam
