"""Elementwise math: unary and binary ops, comparisons, logic, bit ops, casts,
over edge values (±0, ±inf, NaN, subnormals, extremes, .5 ties, integer
limits) and broadcast shapes."""

import numpy as np
import tensorflow as tf

from harness import I32_MAX, I32_MIN, I64_MAX, I64_MIN, Family

R = tf.raw_ops

F_EDGE = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, 0.1, -7.25, 1e-8, 100.0,
          -100.0, 88.7, -103.0, 1e10, np.inf, -np.inf, np.nan]
F32_EXTRA = [3.4028235e38, -3.4028235e38]
F64_EXTRA = [1.7976931348623157e308, -1.7976931348623157e308]
# Subnormals and the smallest normals, in cases of their own: TensorFlow runs
# kernels with denormals flushed to zero (FTZ and DAZ, port::ScopedFlushDenormal),
# where our kernels compute with them (known_failures.txt).
SUBNORMAL = {tf.float32: [1e-45, -1e-45, 5.9e-39, 1.1754944e-38, -1.1754944e-38],
             tf.float64: [5e-324, -5e-324, 1e-310, 2.2250738585072014e-308,
                          -2.2250738585072014e-308]}
# Declared tolerances, in ulps, with the reason: Eigen's vectorised
# approximations of transcendental functions against the platform's libm,
# and float32 reciprocals (Eigen's estimate refined by one Newton step).
LIBM = "Eigen's polynomial approximation against the platform's libm"
TOLERANCE = {
    "Exp": (1, LIBM), "Expm1": (2, LIBM), "Log": (1, LIBM), "Log1p": (1, LIBM),
    "Sin": (1, LIBM), "Cos": (1, LIBM), "Tan": (1, LIBM), "Tanh": (3, LIBM),
    "Sigmoid": (3, LIBM), "Pow": (1, LIBM),
    "Reciprocal": (1, "Eigen's float32 reciprocal: an estimate refined by one Newton step"),
    "Inv": (1, "Eigen's float32 reciprocal: an estimate refined by one Newton step"),
    "Rsqrt": (2, "Eigen's float32 rsqrt: an estimate refined by one Newton step"),
}


# Between 0.0 and -0.0, TensorFlow's Maximum and Minimum return the second
# operand in Eigen's 8-wide packets and the first in the tail, so the sign of
# a zero depends on where the element sits; ours is always the first's.
ZERO_SIGN = {"Maximum", "Minimum"}


def tolerance(op, dt):
    if op in ZERO_SIGN and dt.is_floating:
        return "zero-sign:TensorFlow's sign of a zero depends on the element's SIMD lane"
    if op not in TOLERANCE:
        return "exact"
    n, why = TOLERANCE[op]
    return f"ulp:{n}:{why}"
INTS = {
    tf.int32: [0, 1, -1, 7, -7, 100, I32_MIN, I32_MAX, 3, -3],
    tf.int64: [0, 1, -1, 7, -7, 100, I64_MIN, I64_MAX, 3, -3],
    tf.uint8: [0, 1, 7, 100, 255, 3, 128, 254, 2, 9],
    tf.int8: [0, 1, -1, 7, -7, 100, -128, 127, 3, -3],
    tf.int16: [0, 1, -1, 7, -7, 100, -32768, 32767, 3, -3],
    tf.uint16: [0, 1, 7, 100, 65535, 3, 32768, 2, 9, 11],
    tf.uint32: [0, 1, 7, 100, 2**32 - 1, 3, 2**31, 2, 9, 11],
    tf.uint64: [0, 1, 7, 100, 2**64 - 1, 3, 2**63, 2, 9, 11],
}
FLOATS = (tf.float32, tf.float64)


def floats(dt):
    return tf.constant(F_EDGE + (F32_EXTRA if dt == tf.float32 else F64_EXTRA), dt)


# Unary ops: name -> (dtypes, tolerance or None for exact).
UNARY_FLOAT = ["Abs", "Neg", "Ceil", "Floor", "Rint", "Round", "Sign", "Square", "Sqrt", "Rsqrt",
               "Reciprocal", "Inv", "Exp", "Expm1", "Log", "Log1p", "Sin", "Cos", "Tan", "Tanh",
               "Sigmoid", "IsFinite", "IsInf", "IsNan"]
UNARY_INT = ["Abs", "Neg", "Sign", "Square"]
BINARY_FLOAT = ["Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "DivNoNan", "Maximum", "Minimum",
                "Pow", "FloorDiv", "FloorMod", "Mod", "SquaredDifference", "Equal", "NotEqual",
                "Less", "LessEqual", "Greater", "GreaterEqual"]
BINARY_INT = ["Add", "AddV2", "Sub", "Mul", "Div", "FloorDiv", "FloorMod", "TruncateDiv",
              "TruncateMod", "Mod", "Maximum", "Minimum", "Equal", "NotEqual", "Less", "LessEqual",
              "Greater", "GreaterEqual", "SquaredDifference", "Pow"]
BITWISE = ["BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift", "RightShift"]
# Ops whose keyword names are not x/y.
COMPARE = {"Equal", "NotEqual"}


def registered(add):
    """Runs `add`, skipping a dtype TensorFlow's op does not take (its
    signature refuses it when the case is traced)."""
    try:
        add()
    except TypeError as e:
        if "not in list of allowed values" not in str(e):
            raise


def unary(fam, op, x, case):
    tol = tolerance(op, x.dtype)
    registered(lambda: fam.add(op, lambda x, op=op: getattr(R, op)(x=x), [x], case, tol))


def binary(fam, op, x, y, case):
    tol = tolerance(op, x.dtype)
    registered(lambda: fam.add(op, lambda x, y, op=op: getattr(R, op)(x=x, y=y), [x, y], case,
                               tol))


def family():
    fam = Family("elementwise")
    for dt in FLOATS:
        x = floats(dt)
        for op in UNARY_FLOAT:
            unary(fam, op, x, f"{op}/{dt.name}")
        unary(fam, "Abs", tf.zeros([3, 0, 2], dt), f"Abs/{dt.name}/empty")
        # Every pair of edge values: a column against a row.
        col = tf.reshape(x, [-1, 1])
        row = tf.reshape(tf.constant([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -3.0, 1e-8, np.inf,
                                      -np.inf, np.nan, 7.0], dt), [1, -1])
        for op in BINARY_FLOAT:
            binary(fam, op, col, row, f"{op}/{dt.name}/grid")
        sub = tf.constant(SUBNORMAL[dt], dt)
        for op in UNARY_FLOAT:
            unary(fam, op, sub, f"{op}/{dt.name}/subnormal")
        for op in BINARY_FLOAT:
            binary(fam, op, tf.reshape(sub, [-1, 1]), row, f"{op}/{dt.name}/subnormal grid")
        binary(fam, "AddV2", tf.ones([2, 3], dt), tf.ones([4], dt), f"AddV2/{dt.name}/error/broadcast")
        binary(fam, "AddV2", tf.ones([0, 3], dt), tf.ones([1, 3], dt), f"AddV2/{dt.name}/empty")
        fam.add("AddN", lambda a, b, c: R.AddN(inputs=[a, b, c]), [x, x * 2, -x],
                f"AddN/{dt.name}")
        fam.add("ClipByValue",
                lambda t, lo, hi: R.ClipByValue(t=t, clip_value_min=lo, clip_value_max=hi),
                [x, tf.constant(-1.5, dt), tf.constant(2.0, dt)], f"ClipByValue/{dt.name}")
        fam.add("BiasAdd", lambda v, b: R.BiasAdd(value=v, bias=b),
                [tf.reshape(x[:20], [5, 4]), tf.constant([1.0, -2.0, np.inf, 0.5], dt)],
                f"BiasAdd/{dt.name}")
        cond = tf.constant([True, False] * 12 + [True], tf.bool)[: x.shape[0]]
        fam.add("SelectV2", lambda c, a, b: R.SelectV2(condition=c, t=a, e=b), [cond, x, -x],
                f"SelectV2/{dt.name}")
        fam.add("Select", lambda c, a, b: R.Select(condition=c, x=a, y=b), [cond, x, -x],
                f"Select/{dt.name}")
    for dt, vals in INTS.items():
        x = tf.constant(vals, dt)
        col, row = tf.reshape(x, [-1, 1]), tf.reshape(x, [1, -1])
        for op in UNARY_INT:
            if dt.is_unsigned and op in ("Abs", "Neg", "Sign"):
                continue
            unary(fam, op, x, f"{op}/{dt.name}")
        if dt in (tf.int32, tf.int64):
            for op in BINARY_INT:
                binary(fam, op, col, row, f"{op}/{dt.name}/grid")
        else:
            for op in ("Add", "Sub", "Mul", "Maximum", "Minimum", "Less", "Equal"):
                binary(fam, op, col, row, f"{op}/{dt.name}/grid")
        for op in BITWISE:
            amount = tf.reshape(tf.constant([0, 1, 3, 7, dt.size * 8 - 1, dt.size * 8, 200 % 128],
                                            dt if not dt.is_unsigned else dt), [1, -1])
            rhs = amount if op in ("LeftShift", "RightShift") else row
            binary(fam, op, col, rhs, f"{op}/{dt.name}/grid")
    # Integer division by zero: TensorFlow's error.
    for op in ("Div", "FloorDiv", "FloorMod", "TruncateDiv", "TruncateMod"):
        binary(fam, op, tf.constant([1, 2], tf.int32), tf.constant([1, 0], tf.int32),
               f"{op}/int32/error/by zero")
    # Logic.
    b = tf.constant([True, False, True, False])
    c = tf.constant([True, True, False, False])
    fam.add("LogicalAnd", lambda x, y: R.LogicalAnd(x=x, y=y), [b, c], "LogicalAnd")
    fam.add("LogicalOr", lambda x, y: R.LogicalOr(x=x, y=y), [b, c], "LogicalOr")
    fam.add("LogicalNot", lambda x: R.LogicalNot(x=x), [b], "LogicalNot")
    # Casts: every edge float to every integer type and back, and between ints.
    targets = [tf.int8, tf.uint8, tf.int16, tf.uint16, tf.int32, tf.int64, tf.uint32, tf.uint64,
               tf.float32, tf.float64, tf.bool]
    for src in FLOATS:
        finite = tf.constant([0.0, -0.0, 1.5, -1.5, 2.5, -2.5, 127.9, -128.9, 255.5, 1e3, -1e3,
                              65535.0], src)
        for dst in targets:
            fam.add("Cast", lambda x, dst=dst: R.Cast(x=x, DstT=dst), [finite],
                    f"Cast/{src.name}->{dst.name}")
    for src, vals in INTS.items():
        for dst in targets:
            registered(lambda: fam.add("Cast", lambda x, dst=dst: R.Cast(x=x, DstT=dst),
                                       [tf.constant(vals, src)], f"Cast/{src.name}->{dst.name}"))
    fam.add("Cast", lambda x: R.Cast(x=x, DstT=tf.int32), [tf.constant([True, False])],
            "Cast/bool->int32")
    fam.add("Cast", lambda x: R.Cast(x=x, DstT=tf.float32),
            [tf.constant([16777217, 2**62 + 1, -(2**31)], tf.int64)], "Cast/int64->float32/rounding")
    fam.add("Cast", lambda x: R.Cast(x=x, DstT=tf.float32),
            [tf.constant([1e39, -1e39, 1e-46, 3.4028235677973366e38, 0.1], tf.float64)],
            "Cast/float64->float32/rounding")
    return fam
