"""Array ops: reshapes, slices, gathers, pads, concatenation, tiling,
transposes, where, broadcasting, over empty shapes, negative indices and
strings, with TensorFlow's errors for bad indices and shapes."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops


def family():
    fam = Family("shapes")
    x = tf.reshape(tf.range(24, dtype=tf.int32), [2, 3, 4])
    f = tf.reshape(tf.range(24, dtype=tf.float32) / 3, [2, 3, 4])
    s = tf.reshape(tf.constant([f"s{i}".encode() for i in range(24)]), [2, 3, 4])
    empty = tf.zeros([3, 0, 2], tf.float32)
    values = {"int32": x, "float32": f, "string": s}

    for name, v in values.items():
        for shape in ([24], [4, 6], [-1, 2], [2, -1, 3], [1, 24, 1]):
            fam.add("Reshape", lambda t, sh: R.Reshape(tensor=t, shape=sh),
                    [v, tf.constant(shape, tf.int32)], f"Reshape/{name}/{shape}")
        for perm in ([0, 1, 2], [2, 1, 0], [1, 0, 2], [0, 2, 1]):
            fam.add("Transpose", lambda t, p: R.Transpose(x=t, perm=p),
                    [v, tf.constant(perm, tf.int32)], f"Transpose/{name}/{perm}")
        for axis in (0, 1, -1):
            fam.add("ConcatV2", lambda a, b, ax: R.ConcatV2(values=[a, b], axis=ax),
                    [v, v, tf.constant(axis)], f"ConcatV2/{name}/{axis}")
            fam.add("Pack", lambda a, b, axis=axis: R.Pack(values=[a, b], axis=axis), [v, v],
                    f"Pack/{name}/{axis}")
            fam.add("Unpack", lambda a, axis=axis: R.Unpack(value=a, num=v.shape[axis], axis=axis),
                    [v], f"Unpack/{name}/{axis}")
            fam.add("ReverseV2", lambda t, a: R.ReverseV2(tensor=t, axis=a),
                    [v, tf.constant([axis], tf.int32)], f"ReverseV2/{name}/{axis}")
            fam.add("ExpandDims", lambda t, a: R.ExpandDims(input=t, axis=a),
                    [v, tf.constant(axis)], f"ExpandDims/{name}/{axis}")
        fam.add("Concat", lambda ax, a, b: R.Concat(concat_dim=ax, values=[a, b]),
                [tf.constant(1), v, v], f"Concat/{name}")
        for idx, axis in (([2, 0, 1, 2], 1), ([[1, 0], [0, 1]], 0), ([-1], 2), ([3], 2)):
            fam.add("GatherV2", lambda p, i, a: R.GatherV2(params=p, indices=i, axis=a),
                    [v, tf.constant(idx, tf.int64), tf.constant(axis)],
                    f"GatherV2/{name}/{idx}/{axis}")
        fam.add("GatherV2", lambda p, i, a: R.GatherV2(params=p, indices=i, axis=a, batch_dims=1),
                [v, tf.constant([[2, 0], [1, 1]], tf.int32), tf.constant(2)],
                f"GatherV2/{name}/batch_dims 1")
        fam.add("Gather", lambda p, i: R.Gather(params=p, indices=i),
                [v, tf.constant([1, 0, 1], tf.int32)], f"Gather/{name}")
        for begin, size in (([0, 1, 1], [2, 2, 3]), ([1, 0, 0], [-1, -1, -1]), ([0, 0, 4], [2, 3, 0])):
            fam.add("Slice", lambda t, b, sz: R.Slice(input=t, begin=b, size=sz),
                    [v, tf.constant(begin, tf.int32), tf.constant(size, tf.int32)],
                    f"Slice/{name}/{begin}/{size}")
        fam.add("Slice", lambda t, b, sz: R.Slice(input=t, begin=b, size=sz),
                [v, tf.constant([0, 2, 0], tf.int32), tf.constant([1, 2, 1], tf.int32)],
                f"Slice/{name}/error/past the end")
        for multiples in ([1, 1, 1], [2, 1, 3], [1, 0, 2]):
            fam.add("Tile", lambda t, m: R.Tile(input=t, multiples=m),
                    [v, tf.constant(multiples, tf.int32)], f"Tile/{name}/{multiples}")
        for n, axis in ((2, 0), (3, 1), (2, 2)):
            fam.add("Split", lambda a, t, n=n: R.Split(axis=a, value=t, num_split=n),
                    [tf.constant(axis), v], f"Split/{name}/{n}/{axis}")
        fam.add("SplitV", lambda t, sz, a: R.SplitV(value=t, size_splits=sz, axis=a, num_split=3),
                [v, tf.constant([1, -1, 2], tf.int32), tf.constant(2)], f"SplitV/{name}")
        fam.add("Split", lambda a, t: R.Split(axis=a, value=t, num_split=3),
                [tf.constant(2), v], f"Split/{name}/error/uneven")
        fam.add("Squeeze", lambda t: R.Squeeze(input=t, axis=[0, 2]),
                [tf.reshape(v, [1, 24, 1])], f"Squeeze/{name}/axes")
        fam.add("Squeeze", lambda t: R.Squeeze(input=t), [tf.reshape(v, [1, 4, 1, 6])],
                f"Squeeze/{name}/all")
        fam.add("Squeeze", lambda t: R.Squeeze(input=t, axis=[1]), [v],
                f"Squeeze/{name}/error/not 1")
        for pads in ([[0, 0], [1, 2], [0, 1]], [[1, 1], [0, 0], [2, 0]]):
            fam.add("Pad", lambda t, p: R.Pad(input=t, paddings=p),
                    [v, tf.constant(pads, tf.int32)], f"Pad/{name}/{pads}")
            for mode in ("REFLECT", "SYMMETRIC"):
                fam.add("MirrorPad", lambda t, p, mode=mode: R.MirrorPad(input=t, paddings=p,
                                                                         mode=mode),
                        [v, tf.constant(pads, tf.int64)], f"MirrorPad/{name}/{mode}/{pads}")
        fam.add("MirrorPad", lambda t, p: R.MirrorPad(input=t, paddings=p, mode="REFLECT"),
                [v, tf.constant([[0, 0], [3, 0], [0, 0]], tf.int32)],
                f"MirrorPad/{name}/error/too wide")
    fam.add("PadV2", lambda t, p, c: R.PadV2(input=t, paddings=p, constant_values=c),
            [f, tf.constant([[1, 0], [0, 1], [2, 2]]), tf.constant(-1.5)], "PadV2/float32")
    fam.add("PadV2", lambda t, p, c: R.PadV2(input=t, paddings=p, constant_values=c),
            [s, tf.constant([[1, 0], [0, 1], [0, 0]]), tf.constant(b"pad")], "PadV2/string")
    for begin, end, strides, masks in (
            ([0, 0, 0], [2, 3, 4], [1, 1, 1], {}),
            ([1, 2, 3], [0, 0, 0], [-1, -1, -1], {}),
            ([0, 1, 0], [0, 3, 4], [1, 2, 2], {"begin_mask": 1, "end_mask": 1}),
            ([0, -1, 0], [0, 0, 0], [1, 1, 1], {"shrink_axis_mask": 2, "end_mask": 5,
                                                 "begin_mask": 5}),
            ([0, 0], [1, 2], [1, 1], {"ellipsis_mask": 1}),
            ([0, 0, 0], [1, 1, 1], [1, 1, 1], {"new_axis_mask": 2}),
            ([-100, 0, 0], [100, 3, 4], [1, 1, 1], {}),
            ([0, 0, 0], [2, 3, 4], [1, 1, 0], {})):
        key = f"{begin}/{end}/{strides}/{sorted(masks.items())}"
        fam.add("StridedSlice", lambda t, b, e, st, masks=masks: R.StridedSlice(
            input=t, begin=b, end=e, strides=st, **masks),
            [x, tf.constant(begin, tf.int32), tf.constant(end, tf.int32),
             tf.constant(strides, tf.int32)], f"StridedSlice/{key}")
    # Where, broadcasting, fills and ranges.
    cond = tf.constant([[True, False, True], [False, False, True]])
    fam.add("Where", lambda c: R.Where(condition=c), [cond], "Where/bool")
    fam.add("Where", lambda c: R.Where(condition=c), [tf.constant([0.0, 1.5, np.nan, -0.0])],
            "Where/float32")
    fam.add("Where", lambda c: R.Where(condition=c), [tf.zeros([0, 2], tf.bool)], "Where/empty")
    fam.add("BroadcastTo", lambda t, sh: R.BroadcastTo(input=t, shape=sh),
            [tf.constant([[1], [2]]), tf.constant([3, 2, 4])], "BroadcastTo")
    fam.add("BroadcastTo", lambda t, sh: R.BroadcastTo(input=t, shape=sh),
            [tf.constant([1, 2, 3]), tf.constant([2, 2])], "BroadcastTo/error")
    fam.add("BroadcastArgs", lambda a, b: R.BroadcastArgs(s0=a, s1=b),
            [tf.constant([2, 1, 3]), tf.constant([4, 1])], "BroadcastArgs")
    fam.add("Fill", lambda d, v: R.Fill(dims=d, value=v),
            [tf.constant([2, 0, 3]), tf.constant(1.5)], "Fill/empty")
    fam.add("Fill", lambda d, v: R.Fill(dims=d, value=v),
            [tf.constant([2, 3], tf.int64), tf.constant(b"x")], "Fill/string")
    fam.add("Fill", lambda d, v: R.Fill(dims=d, value=v),
            [tf.constant([2, -3]), tf.constant(1)], "Fill/error/negative")
    for start, limit, delta, dt in ((0, 10, 3, tf.int32), (10, 0, -3, tf.int64),
                                    (0.5, 2.0, 0.25, tf.float32), (1.0, 0.0, 0.1, tf.float64),
                                    (0, 0, 1, tf.int32), (0, 10, 0, tf.int32)):
        fam.add("Range", lambda a, b, c: R.Range(start=a, limit=b, delta=c),
                [tf.constant(start, dt), tf.constant(limit, dt), tf.constant(delta, dt)],
                f"Range/{dt.name}/{start},{limit},{delta}")
    for op in ("Shape", "Size", "Rank"):
        for out in (tf.int32, tf.int64):
            if op == "Rank":
                fam.add(op, lambda t: R.Rank(input=t), [empty], f"{op}")
                break
            fam.add(op, lambda t, op=op, out=out: getattr(R, op)(input=t, out_type=out), [empty],
                    f"{op}/{out.name}")
    fam.add("ShapeN", lambda a, b: R.ShapeN(input=[a, b]), [f, empty], "ShapeN")
    fam.add("ZerosLike", lambda t: R.ZerosLike(x=t), [s], "ZerosLike/string")
    fam.add("OnesLike", lambda t: R.OnesLike(x=t), [f], "OnesLike/float32")
    fam.add("EnsureShape", lambda t: R.EnsureShape(input=t, shape=[2, None, 4]), [f],
            "EnsureShape/ok")
    fam.add("EnsureShape", lambda t: R.EnsureShape(input=t, shape=[2, 4]), [f],
            "EnsureShape/error")
    fam.add("CheckNumerics", lambda t: R.CheckNumerics(tensor=t, message="bad"), [f],
            "CheckNumerics/ok")
    fam.add("CheckNumerics", lambda t: R.CheckNumerics(tensor=t, message="bad value"),
            [tf.constant([1.0, np.nan])], "CheckNumerics/error/nan")
    fam.add("CheckNumerics", lambda t: R.CheckNumerics(tensor=t, message="bad value"),
            [tf.constant([1.0, -np.inf])], "CheckNumerics/error/inf")
    return fam
