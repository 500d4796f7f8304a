"""Text-pipeline string kernels: StringNGrams (every padding mode, short
sequences, empty rows, bad splits), StringSplit v1, legacy
StringToHashBucket, the Unicode decoders and encoders on invalid UTF-8
with each errors mode, emoji and combining marks, StringFormat; then
tf.strings.ngrams and unicode_split as users call them, and a text
pipeline compared element by element."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops


def sorted_library(graph):
    """Orders a pipeline graph's function library by name: TensorFlow lists
    it in map order, which changes from run to run."""
    functions = sorted(graph.library.function, key=lambda f: f.signature.name)
    del graph.library.function[:]
    graph.library.function.extend(functions)

WORDS = [b"the", b"quick", b"", b"brown", b"fox", b"\xf0\x9f\x98\x80", b"e\xcc\x81", b"a b"]


def ngram_cases(fam):
    data = tf.constant(WORDS)
    splits = {"rows 3,0,5": [0, 3, 3, 8], "one row": [0, 8], "singletons": list(range(9)),
              "empty data": None, "empty splits": []}
    configs = [
        ("bigrams", dict(ngram_widths=[2], pad_width=0)),
        ("1-3 padded", dict(ngram_widths=[1, 2, 3], pad_width=-1)),
        ("3 pad 1", dict(ngram_widths=[3], pad_width=1)),
        ("5 pad 10", dict(ngram_widths=[5], pad_width=10)),
        ("4 preserve", dict(ngram_widths=[4], pad_width=0, preserve_short_sequences=True)),
        ("4 pad 1 preserve", dict(ngram_widths=[4], pad_width=1, preserve_short_sequences=True)),
        ("2,1 custom sep", dict(ngram_widths=[2, 1], pad_width=-1, separator="--")),
        ("empty pads", dict(ngram_widths=[2], pad_width=1, left_pad="", right_pad="")),
    ]
    for sname, sp in splits.items():
        for cname, cfg in configs:
            a = dict(dict(separator=" ", left_pad="<s>", right_pad="</s>",
                          preserve_short_sequences=False), **cfg)
            d = data if sp else tf.constant([], tf.string)
            s = tf.constant(sp if sp is not None else [0], tf.int64)
            fam.add("StringNGrams", lambda d, s, a=a: R.StringNGrams(data=d, data_splits=s, **a),
                    [d, s], f"StringNGrams/{sname}/{cname}")
    base = dict(separator=" ", left_pad="", right_pad="", pad_width=0,
                preserve_short_sequences=False)
    fam.add("StringNGrams", lambda d, s: R.StringNGrams(data=d, data_splits=s, ngram_widths=[2],
                                                        **base),
            [data, tf.constant([0, 3, 8], tf.int32)], "StringNGrams/int32 splits")
    for name, sp in (("first not 0", [1, 8]), ("decreasing", [0, 5, 3, 8]),
                     ("past end", [0, 9]), ("short of end", [0, 7]), ("matrix", [[0, 8]])):
        fam.add("StringNGrams", lambda d, s: R.StringNGrams(data=d, data_splits=s,
                                                            ngram_widths=[2], **base),
                [data, tf.constant(sp, tf.int64)], f"StringNGrams/error/{name}")
    fam.add("StringNGrams", lambda d, s: R.StringNGrams(data=d, data_splits=s, ngram_widths=[2],
                                                        **base),
            [tf.constant([WORDS]), tf.constant([0, 8], tf.int64)], "StringNGrams/error/data matrix")


def split_and_hash_cases(fam):
    lines = tf.constant([b"a b  c", b"", b"  ", b"x,y;z", b"\xf0\x9f\x98\x80 e\xcc\x81", b"one"])
    for delim in (" ", "", ",;", " ,"):
        for skip in (True, False):
            fam.add("StringSplit", lambda s, d, k=skip: R.StringSplit(input=s, delimiter=d,
                                                                       skip_empty=k),
                    [lines, tf.constant(delim)], f"StringSplit/{delim!r}/skip {skip}")
    fam.add("StringSplit", lambda s, d: R.StringSplit(input=s, delimiter=d),
            [tf.constant("a b"), tf.constant(" ")], "StringSplit/error/scalar input")
    fam.add("StringSplit", lambda s, d: R.StringSplit(input=s, delimiter=d),
            [lines, tf.constant([" "])], "StringSplit/error/delimiter vector")
    fam.add_function("tf.compat.v1.string_split", lambda s: tf.sparse.to_dense(
        tf.compat.v1.string_split(s, " ")), [lines])
    keys = tf.constant([b"", b"a", b"abcdefg", b"abcdefgh", b"abcdefghi", b"hello world",
                        b"\xff\xfe", "日本語".encode(), b"x" * 100])
    for buckets in (1, 2, 10, 1000, 2**31 - 1):
        fam.add("StringToHashBucket", lambda s, b=buckets: R.StringToHashBucket(
            string_tensor=s, num_buckets=b), [keys], f"StringToHashBucket/{buckets}")
    fam.add("StringToHashBucket", lambda s: R.StringToHashBucket(string_tensor=s, num_buckets=7),
            [tf.reshape(keys[:8], [2, 4])], "StringToHashBucket/matrix")


def family():
    fam = Family("strings_more")
    fam.normalize_graph = sorted_library
    ngram_cases(fam)
    split_and_hash_cases(fam)
    unicode_cases(fam)
    composites_and_pipeline(fam)
    format_cases(fam)
    script_cases(fam)
    return fam


BAD_UTF8 = [b"a\xffb", b"\xf0\x9f\x98", b"\xf0\x9f\x98a", b"\xe2\x82x", b"\xc0\xaf", b"\xed\xa0\x80",
            b"\xf4\x90\x80\x80", b"\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xfe", b"\xe0\x80\xaf",
            b"\xc2", b"ok\xf0\x9f"]
GOOD = [b"", b"hello", "héllo wörld".encode(), "😀👍🏽".encode(), "e\u0301a\u0308".encode(),
        "日本語".encode(), b"a\x01\x1fb\x7f", "\ufffd".encode(), "\U0010ffff".encode()]


def unicode_cases(fam):
    good = tf.constant(GOOD)
    bad = tf.constant(BAD_UTF8)
    for name, data in (("good", good), ("bad", bad), ("matrix", tf.reshape(good[:8], [2, 4])),
                       ("scalar", tf.constant("añ😀"))):
        for err in ("replace", "ignore", "strict"):
            for ctrl in (False, True):
                for rc in (0xFFFD, 0x3F):
                    if rc != 0xFFFD and (ctrl or name == "matrix"):
                        continue
                    a = dict(input_encoding="UTF-8", errors=err, replacement_char=rc,
                             replace_control_characters=ctrl)
                    key = f"{name}/{err}/controls {ctrl}/rc {rc:x}"
                    fam.add("UnicodeDecodeWithOffsets", lambda s, a=a: R.UnicodeDecodeWithOffsets(
                        input=s, **a), [data], f"UnicodeDecodeWithOffsets/{key}")
                    fam.add("UnicodeDecode", lambda s, a=a: R.UnicodeDecode(input=s, **a),
                            [data], f"UnicodeDecode/{key}")
                    for out in ("UTF-8", "UTF-16-BE", "UTF-32-BE"):
                        if out != "UTF-8" and (ctrl or rc != 0xFFFD):
                            continue
                        fam.add("UnicodeTranscode", lambda s, a=a, o=out: R.UnicodeTranscode(
                            input=s, output_encoding=o, **a), [data],
                            f"UnicodeTranscode/{key}/to {out}")
    fam.add("UnicodeDecode", lambda s: R.UnicodeDecode(input=s, input_encoding="UTF-8",
                                                       Tsplits=tf.int32), [good],
            "UnicodeDecode/int32 splits")
    for enc in ("UTF-16-BE", "UTF-32-BE"):
        encoded = tf.strings.unicode_transcode(good, "UTF-8", enc)
        odd = tf.constant([b"\x00A\xd8\x3d\xde\x00", b"\xd8\x3dA", b"\xdc\x00\x00B",
                           b"\xd8\x3d\x00C", b"\x00\x00\x00A\x00\x11\x00\x00",
                           b"\x00\x00\x00A\x00\x00", b"\x00\x00\xd8\x00\x00\x00\x00D", b"\x00"])
        for name, data in (("good", encoded), ("odd", odd)):
            for err in ("replace", "ignore", "strict"):
                fam.add("UnicodeDecodeWithOffsets", lambda s, e=enc, r=err:
                        R.UnicodeDecodeWithOffsets(input=s, input_encoding=e, errors=r),
                        [data], f"UnicodeDecodeWithOffsets/{enc}/{name}/{err}")
                fam.add("UnicodeTranscode", lambda s, e=enc, r=err: R.UnicodeTranscode(
                    input=s, input_encoding=e, output_encoding="UTF-8", errors=r), [data],
                    f"UnicodeTranscode/{enc} to UTF-8/{name}/{err}")
    fam.add("UnicodeDecodeWithOffsets", lambda s: R.UnicodeDecodeWithOffsets(
        input=s, input_encoding="ISO-8859-1"), [tf.constant([b"\xe9t\xe9", b"\x00\xff"])],
        "UnicodeDecodeWithOffsets/ISO-8859-1")
    cps = [[0x41, 0xE9, 0x1F600], [], [0xD800, 0x42], [0x110000, -1, 0x43], [0x301, 0x65, 0x0]]
    values = tf.constant([c for row in cps for c in row], tf.int32)
    splits = tf.constant(np.cumsum([0] + [len(r) for r in cps]), tf.int64)
    for out in ("UTF-8", "UTF-16-BE", "UTF-32-BE"):
        for err in ("replace", "ignore", "strict"):
            for rc in (0xFFFD, 0x2A):
                fam.add("UnicodeEncode", lambda v, s, o=out, e=err, r=rc: R.UnicodeEncode(
                    input_values=v, input_splits=s, output_encoding=o, errors=e,
                    replacement_char=r), [values, splits], f"UnicodeEncode/{out}/{err}/rc {rc:x}")
    for name, v, s in (("splits past end", values, [0, 3, 20]), ("splits start 1", values, [1, 5]),
                       ("splits decreasing", values, [0, 4, 2, 10]), ("no splits", values, [])):
        fam.add("UnicodeEncode", lambda v, s: R.UnicodeEncode(
            input_values=v, input_splits=s, output_encoding="UTF-8"),
            [v, tf.constant(s, tf.int64)], f"UnicodeEncode/error/{name}")
    for name, a in (("bad rc", dict(replacement_char=-2)), ("rc past unicode",
                                                              dict(replacement_char=0x110000))):
        fam.add("UnicodeDecode", lambda s, a=a: R.UnicodeDecode(input=s, input_encoding="UTF-8",
                                                                **a),
                [good], f"UnicodeDecode/error/{name}")
    # As users call them: ragged results as values and row splits.
    fam.add_function("tf.strings.unicode_split", lambda s: (lambda r: (r.values, r.row_splits))(
        tf.strings.unicode_split(s, "UTF-8")), [good])
    fam.add_function("tf.strings.unicode_split replace", lambda s: (lambda r: (
        r.values, r.row_splits))(tf.strings.unicode_split(s, "UTF-8", errors="replace")), [bad])
    fam.add_function("tf.strings.unicode_decode to_tensor", lambda s: tf.strings.unicode_decode(
        s, "UTF-8").to_tensor(default_value=-1), [good])
    fam.add_function("tf.strings.unicode_encode ragged", lambda v, s: tf.strings.unicode_encode(
        tf.RaggedTensor.from_row_splits(v, s), "UTF-8"), [values, splits])
    fam.add_function("tf.strings.unicode_decode_with_offsets", lambda s: (lambda c, o: (
        c.values, c.row_splits, o.values))(*tf.strings.unicode_decode_with_offsets(s, "UTF-8")),
        [good])


def composites_and_pipeline(fam):
    lines = tf.constant(["The quick brown fox!", "", "Jumps over... the LAZY dog",
                         "émoji 😀 and e\u0301 combining", "a", "x  y"])
    fam.add_function("tf.strings.ngrams ragged 2", lambda s: (lambda r: (r.values, r.row_splits))(
        tf.strings.ngrams(tf.strings.split(s), 2)), [lines])
    fam.add_function("tf.strings.ngrams ragged 1-3 padded", lambda s: (lambda r: (
        r.values, r.row_splits))(tf.strings.ngrams(tf.strings.split(s), (1, 2, 3),
                                                   separator="_", pad_values=("<", ">"),
                                                   padding_width=1)), [lines])
    fam.add_function("tf.strings.ngrams preserve short", lambda s: (lambda r: (
        r.values, r.row_splits))(tf.strings.ngrams(tf.strings.split(s), 4,
                                                   preserve_short_sequences=True)), [lines])
    fam.add_function("tf.strings.ngrams dense 1-D", lambda s: tf.strings.ngrams(
        tf.strings.split(s[0]), 3, pad_values="#"), [lines])
    fam.add_function("tf.strings.to_hash_bucket", lambda s: tf.strings.to_hash_bucket(s, 97),
                     [lines])

    def clean(s):
        s = tf.strings.lower(s)
        s = tf.strings.regex_replace(s, "[^a-z0-9 ]", " ")
        tokens = tf.strings.split(s)
        grams = tf.strings.ngrams(tokens, (1, 2), separator=" ")
        return (tf.strings.to_hash_bucket_fast(grams, 1000),
                tf.strings.to_hash_bucket(grams, 50))

    D = tf.data.Dataset
    fam.add_dataset("text pipeline: lower, clean, split, ngrams, hash, padded_batch",
                    D.from_tensor_slices(lines).map(clean).padded_batch(
                        4, padding_values=(tf.constant(-1, tf.int64), tf.constant(-1, tf.int64))))


def format_cases(fam):
    tensors = {
        "int scalar": tf.constant(3), "float": tf.constant(3.5), "1e20": tf.constant(1e20),
        "0.1": tf.constant(0.1), "1/3": tf.constant(1 / 3, tf.float32),
        "123456789": tf.constant(123456789.0), "1e-5": tf.constant(1.5e-5),
        "specials": tf.constant([1.0, 2.5, np.nan, np.inf, -np.inf, -0.0, -np.nan]),
        "double 1/3": tf.constant(1 / 3, tf.float64), "double 0.1": tf.constant(0.1, tf.float64),
        "bools": tf.constant([True, False]), "string": tf.constant("hi"),
        "strings": tf.constant(["a", "b c", 'q"\'\\', "\n\t\x01\xff"]),
        "3x4": tf.constant(np.arange(12).reshape(3, 4)), "30": tf.constant(np.arange(30)),
        "2x3x4": tf.constant(np.arange(24).reshape(2, 3, 4)), "empty": tf.constant([], tf.int32),
        "2x0": tf.constant(np.zeros((2, 0))), "int64": tf.constant(2**40, tf.int64),
        "uint8": tf.constant([255, 0], tf.uint8), "int8": tf.constant([-128, 5], tf.int8),
        "half": tf.constant([1.5, 0.1], tf.float16), "uint64": tf.constant([2**64 - 1], tf.uint64),
        "8x9 floats": tf.constant(np.linspace(-1, 1, 72).reshape(8, 9).astype(np.float32)),
    }
    for name, t in tensors.items():
        for summ in (3, 1, 0, -1):
            if summ in (1, 0) and name not in ("30", "3x4", "2x3x4", "8x9 floats", "strings"):
                continue
            fam.add("StringFormat", lambda x, s=summ: R.StringFormat(
                inputs=[x], template="<{}>", placeholder="{}", summarize=s), [t],
                f"StringFormat/{name}/summarize {summ}")
    fam.add("StringFormat", lambda a, b: R.StringFormat(inputs=[a, b], template="{} and {} %s",
                                                        placeholder="{}", summarize=3),
            [tf.constant(1), tf.constant([2.0])], "StringFormat/two")
    fam.add("StringFormat", lambda a: R.StringFormat(inputs=[a], template="x=%v;",
                                                     placeholder="%v", summarize=3),
            [tf.constant(1)], "StringFormat/placeholder %v")
    fam.add_function("tf.strings.format", lambda x, y: tf.strings.format(
        "loss {} at step {}", (x, y)), [tf.constant([0.25, 1e-3]), tf.constant(7)])


def script_cases(fam):
    # Scripts of Unicode 13 and before (TensorFlow's ICU), every plane,
    # combining marks (Inherited), Common, unassigned, surrogates, bad values.
    cps = [0x41, 0x3b1, 0x416, 0x5d0, 0x627, 0x915, 0x4e00, 0x3042, 0x30a2, 0xac00, 0x1f600,
           0x301, 0x30, 0x20, -1, 0x110000, 0xd800, 0xe000, 0x378, 0x10ffff, 0x1e900, 0x16fe4,
           0x0e01, 0x10a0, 0x1200, 0x13a0, 0x1780, 0x1820, 0x0f40, 0x10000, 0x1d400, 0x2f800,
           0xfeff, 0x200d, 0x64b, -2**31, 2**31 - 1]
    fam.add("UnicodeScript", lambda x: tf.raw_ops.UnicodeScript(input=x),
            [tf.constant(cps, tf.int32)], "UnicodeScript/assorted")
    fam.add("UnicodeScript", lambda x: tf.raw_ops.UnicodeScript(input=x),
            [tf.reshape(tf.range(0x0, 0x528, 3, tf.int32), [-1, 8])], "UnicodeScript/BMP sweep")
    fam.add("UnicodeScript", lambda x: tf.raw_ops.UnicodeScript(input=x),
            [tf.constant([0x1e290, 0x10f70, 0x873, 0x2ebf0, 0x11f00, 0x1e4d0], tf.int32)],
            "UnicodeScript/assigned after Unicode 13")
    fam.add_function("unicode_script of decoded text", lambda s: tf.strings.unicode_script(
        tf.strings.unicode_decode(s, "UTF-8")).flat_values, [tf.constant(GOOD)])
