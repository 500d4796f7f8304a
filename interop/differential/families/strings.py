"""tf.strings kernels over the strings users feed them: empty, NUL inside,
invalid UTF-8, emoji, combining marks, the dotted capital I, long ones."""

import numpy as np
import tensorflow as tf

from harness import I32_MAX, I32_MIN, I64_MAX, I64_MIN, Family

R = tf.raw_ops

TEXT = [
    b"", b"a", b"Hello, World", b"  padded\t\n", b"\x00inside\x00", b"\xff\xfe bad utf-8",
    "émoji 😀 ok".encode(), "İstanbul".encode(), "e\u0301 combining".encode(),
    b"MiXeD CaSe 123", "ΑΒΓ straße".encode(), b"x" * 300,
]
NUMBERS = [
    b"0", b"-0", b"12", b" 12", b"12 ", b"+7", b"1e5", b"1.5e-3", b"0x10", b"inf", b"-inf",
    b"nan", b"NaN", b"1e400", b"-1e400", b"2147483647", b"2147483648", b"-2147483649",
    b"9223372036854775807", b"9223372036854775808", b"3.4028235e38", b"1e-50", b"",
    b"abc", b"1,5", b"\x001",
]


def strings(values, shape=None):
    t = tf.constant(values, tf.string)
    return t if shape is None else tf.reshape(t, shape)


def family():
    fam = Family("strings")
    text = strings(TEXT)
    grid = strings(TEXT, [3, 4])
    empty = strings([], [0])

    # --- length, case, strip ------------------------------------------------
    for unit in ("BYTE", "UTF8_CHAR"):
        for name, x in (("text", text), ("grid", grid), ("empty", empty)):
            fam.add("StringLength", lambda x, unit=unit: R.StringLength(input=x, unit=unit),
                    [x], f"StringLength/{unit}/{name}")
    for op in ("StringLower", "StringUpper"):
        for enc in ("", "utf-8"):
            # TensorFlow's utf-8 case mapping stops at a NUL (it hands ICU
            # the C string): those strings are their own cases.
            for name, x in (("text", strings([t for t in TEXT if b"\x00" not in t])),
                            ("nul", strings([b"ab\x00CD"])), ("empty", empty)):
                fam.add(op, lambda x, op=op, enc=enc: getattr(R, op)(input=x, encoding=enc),
                        [x], f"{op}/{enc or 'ascii'}/{name}")
    fam.add("StringStrip", lambda x: R.StringStrip(input=x), [text], "StringStrip/text")
    fam.add("StringStrip", lambda x: R.StringStrip(input=x),
            [strings([b" \t\n\v\f\r x y \r\n", b"\xc2\xa0nbsp\xc2\xa0", b"   "])],
            "StringStrip/whitespace kinds")

    # --- joins -----------------------------------------------------------
    for sep in ("", ", ", "\x00"):
        fam.add("StringJoin", lambda a, b, sep=sep: R.StringJoin(inputs=[a, b], separator=sep),
                [text, strings(TEXT[::-1])], f"StringJoin/vectors/{sep!r}")
    fam.add("StringJoin", lambda a, b: R.StringJoin(inputs=[a, b], separator="-"),
            [strings(b"prefix"), grid], "StringJoin/scalar and grid")
    fam.add("StringJoin", lambda a, b: R.StringJoin(inputs=[a, b], separator="-"),
            [text, strings(TEXT[:3])], "StringJoin/error/shapes")
    for axes, keep in (([0], False), ([1], False), ([1], True), ([0, 1], False), ([-1], False),
                       ([], False)):
        fam.add("ReduceJoin",
                lambda x, i, keep=keep: R.ReduceJoin(inputs=x, reduction_indices=i,
                                                     keep_dims=keep, separator="|"),
                [grid, tf.constant(axes, tf.int32)], f"ReduceJoin/{axes}/keep {keep}")
    fam.add("ReduceJoin",
            lambda x, i: R.ReduceJoin(inputs=x, reduction_indices=i, separator="|"),
            [grid, tf.constant([2], tf.int32)], "ReduceJoin/error/axis")
    fam.add("ReduceJoin",
            lambda x, i: R.ReduceJoin(inputs=x, reduction_indices=i, separator="|"),
            [strings([], [0, 3]), tf.constant([0], tf.int32)], "ReduceJoin/empty axis")

    # --- substrings and splits ------------------------------------------
    for unit in ("BYTE", "UTF8_CHAR"):
        for pos, ln in ((0, 3), (2, 100), (-3, 2), (0, 0), (1, -1)):
            x = strings(["hello", "émoji 😀", "İİİ", "ab"])
            fam.add("Substr", lambda x, p, n, unit=unit: R.Substr(input=x, pos=p, len=n, unit=unit),
                    [x, tf.constant(pos, tf.int32), tf.constant(ln, tf.int32)],
                    f"Substr/{unit}/{pos},{ln}")
        fam.add("Substr", lambda x, p, n, unit=unit: R.Substr(input=x, pos=p, len=n, unit=unit),
                [strings(["hello", "hi"]), tf.constant(3, tf.int32), tf.constant(1, tf.int32)],
                f"Substr/{unit}/error/pos past the end")
        fam.add("Substr", lambda x, p, n, unit=unit: R.Substr(input=x, pos=p, len=n, unit=unit),
                [strings(["hello", "world"]), tf.constant([1, 2], tf.int64),
                 tf.constant([2, 3], tf.int64)], f"Substr/{unit}/elementwise")
    for sep, maxsplit in (("", -1), (" ", -1), (",", -1), (",", 1), ("ab", -1), (" ", 0)):
        x = strings(["a b  c", " lead and trail ", "a,b,,c", "", "abXabYab", "one"])
        fam.add("StringSplitV2",
                lambda x, s, m=maxsplit: R.StringSplitV2(input=x, sep=s, maxsplit=m),
                [x, strings(sep.encode())], f"StringSplitV2/{sep!r}/{maxsplit}")

    # --- hashing ---------------------------------------------------------
    for n in (1, 7, 1000, I64_MAX):
        fam.add("StringToHashBucketFast",
                lambda x, n=n: R.StringToHashBucketFast(input=x, num_buckets=n), [text],
                f"StringToHashBucketFast/{n}")
        fam.add("StringToHashBucketStrong",
                lambda x, n=n: R.StringToHashBucketStrong(input=x, num_buckets=n, key=[1, 2]),
                [text], f"StringToHashBucketStrong/{n}")
    fam.add("StringToHashBucketStrong",
            lambda x: R.StringToHashBucketStrong(input=x, num_buckets=10,
                                                 key=[I64_MAX, I64_MIN]),
            [text], "StringToHashBucketStrong/wide key")

    # --- numbers and text ---------------------------------------------
    for dt in (tf.float32, tf.float64, tf.int32, tf.int64):
        for i, s in enumerate(NUMBERS):
            fam.add("StringToNumber", lambda x, dt=dt: R.StringToNumber(string_tensor=x, out_type=dt),
                    [strings([s])], f"StringToNumber/{dt.name}/{i} {s!r}")
    floats = tf.constant([0.0, -0.0, 1.5, -2.25, 1e10, 1e-7, 3.14159265, np.inf, -np.inf, np.nan,
                          123456789.0, 1 / 3], tf.float32)
    for kw in ({}, {"precision": 3}, {"scientific": True}, {"shortest": True},
               {"width": 12}, {"width": 8, "fill": "0"}, {"precision": 0},
               {"scientific": True, "precision": 2}):
        key = ",".join(f"{k}={v}" for k, v in kw.items()) or "default"
        for dt in (tf.float32, tf.float64):
            fam.add("AsString", lambda x, kw=kw: R.AsString(input=x, **kw), [tf.cast(floats, dt)],
                    f"AsString/{dt.name}/{key}")
    for dt, vals in ((tf.int32, [0, -1, I32_MIN, I32_MAX, 42]),
                     (tf.int64, [0, -1, I64_MIN, I64_MAX, 42]),
                     (tf.uint8, [0, 255, 7]), (tf.int8, [-128, 127, 0]), (tf.bool, [True, False])):
        for kw in ({}, {"width": 6}, {"width": 6, "fill": "0"}):
            key = ",".join(f"{k}={v}" for k, v in kw.items()) or "default"
            fam.add("AsString", lambda x, kw=kw: R.AsString(input=x, **kw),
                    [tf.constant(vals, dt)], f"AsString/{dt.name}/{key}")
    fam.add("AsString", lambda x: R.AsString(input=x, fill="ab"), [tf.constant([1])],
            "AsString/error/fill")
    fam.add("AsString", lambda x: R.AsString(input=x, precision=3), [tf.constant([1])],
            "AsString/error/precision on int")

    # --- base64 and raw bytes -------------------------------------------
    for pad in (False, True):
        fam.add("EncodeBase64", lambda x, pad=pad: R.EncodeBase64(input=x, pad=pad), [text],
                f"EncodeBase64/pad {pad}")
    fam.add("DecodeBase64", lambda x: R.DecodeBase64(input=x),
            [strings([b"", b"aGVsbG8", b"aGVsbG8=", b"_-8", b"AAEC"])], "DecodeBase64/valid")
    for i, bad in enumerate([b"a", b"ab$d", b"aGVsbG8==x", b"a==="]):
        fam.add("DecodeBase64", lambda x: R.DecodeBase64(input=x), [strings([bad])],
                f"DecodeBase64/invalid/{i}")
    raw = strings([bytes(range(8)), bytes(range(8, 16))])
    for dt in (tf.uint8, tf.int16, tf.int32, tf.int64, tf.float32, tf.float64, tf.uint16):
        for le in (True, False):
            fam.add("DecodeRaw", lambda x, dt=dt, le=le: R.DecodeRaw(bytes=x, out_type=dt,
                                                                 little_endian=le),
                    [raw], f"DecodeRaw/{dt.name}/le {le}")
    fam.add("DecodeRaw", lambda x: R.DecodeRaw(bytes=x, out_type=tf.int32),
            [strings([b"abc", b"abcd"])], "DecodeRaw/error/length")
    fam.add("DecodeRaw", lambda x: R.DecodeRaw(bytes=x, out_type=tf.int32),
            [strings([b"abcd", b"abcdefgh"])], "DecodeRaw/error/different lengths")

    # --- regexes -----------------------------------------------------------
    corpus = strings(["abc123", "ABC", "", "a.b", "émoji 😀", "line\nbreak", "aaa"])
    for pattern in ("[a-z]+[0-9]*", "a*", ".*", "(?i)abc", "\\d+", "é.*", "a.b", "\\p{L}+",
                    "[", "a{2,}"):
        fam.add("RegexFullMatch", lambda x, p: R.RegexFullMatch(input=x, pattern=p),
                [corpus, strings(pattern.encode())], f"RegexFullMatch/{pattern}")
        fam.add("StaticRegexFullMatch",
                lambda x, p=pattern: R.StaticRegexFullMatch(input=x, pattern=p),
                [corpus], f"StaticRegexFullMatch/{pattern}")
    for pattern, rewrite in (("[0-9]", "#"), ("a", ""), ("(\\w+)", "<\\1>"), ("", "-"),
                             ("^", "> "), ("\\s+", " "), ("(", "x")):
        for glob in (True, False):
            fam.add("RegexReplace",
                    lambda x, p, r, g=glob: R.RegexReplace(input=x, pattern=p, rewrite=r,
                                                          replace_global=g),
                    [corpus, strings(pattern.encode()), strings(rewrite.encode())],
                    f"RegexReplace/{pattern}/{rewrite}/global {glob}")
            fam.add("StaticRegexReplace",
                    lambda x, p=pattern, r=rewrite, g=glob: R.StaticRegexReplace(
                        input=x, pattern=p, rewrite=r, replace_global=g),
                    [corpus], f"StaticRegexReplace/{pattern}/{rewrite}/global {glob}")
    return fam
