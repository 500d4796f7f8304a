"""Lookup tables: HashTableV2 filled from tensors and from text files, read
by LookupTableFindV2 and LookupTableSizeV2, alone (traced functions of raw
ops) and as tf.lookup tables inside pipelines.

Text-file tables read vocabulary files this module writes under
crates/tfdata-graph/tests/data/lookup (committed); their paths are relative
to the crate, where the Rust test runs, so the module works from there."""

import os
import re

import numpy as np  # noqa: F401
import tensorflow as tf

from harness import Family, in_crate

R = tf.raw_ops
DATA = "tests/data/lookup"

FILES = {
    "vocab.txt": "the\nquick\nbrown\nfox\njumps\nover\nlazy\ndog\n",
    "columns.tsv": "apple\t3\t1.5\nbanana\t7\t-2.25\r\ncherry\t-1\t1e3\n",
    "spaces.txt": "red 10\ngreen 20\nblue 30\n",
    "empty_line.txt": "a\n\nb\n",
    "dup.txt": "x\ny\nx\n",
    "ints.txt": " 5 \n-7\n+3\n2147483648\n",
    "bad_int.txt": "1\n0x10\n",
    "floats.tsv": "a\t1.5\nb\t 2e3\nc\tinf\nd\t-0\ne\t.5\nf\t1e50\ng\t-infinity\nh\tnan\ni\t1e-50\n",
    "empty.txt": "",
    "no_newline.txt": "one\ntwo\r\nthree",
    "short_row.tsv": "a\t1\nb\n",
}

_counter = [0]


def fresh():
    """A shared_name of its own: TensorFlow's eager kernels otherwise share
    one table among all HashTableV2 calls of the same dtypes."""
    _counter[0] += 1
    return "lookup_case_%d" % _counter[0]


def s(*v):
    return tf.constant(list(v), tf.string)


def i64(*v):
    return tf.constant(list(v), tf.int64)


def family():
    with in_crate():
        return build()


def build():
    os.makedirs(DATA, exist_ok=True)
    for name, text in FILES.items():
        with open(os.path.join(DATA, name), "w", newline="") as f:
            f.write(text)
    fam = Family("lookup")
    fam.normalize_graph = stable_table_names
    add_function = fam.add_function

    def traced(case_id, fn, inputs):
        # Shape inference refuses some error cases of known shapes before
        # any kernel runs: those are traced for inputs of any shape.
        try:
            add_function(case_id, fn, inputs)
        except ValueError:
            fam.ids.discard(case_id)
            add_function(case_id, fn, inputs, unknown_shapes=True)
    fam.add_function = traced
    kv_cases(fam)
    text_cases(fam)
    pipeline_cases(fam)
    return fam


def stable_table_names(graph):
    """TensorFlow names a serialized table node "HashTableFromGraphDef/<k>/<a
    hash that changes from run to run>": the hash is dropped."""
    renames = {}
    for n in graph.node:
        m = re.fullmatch(r"(HashTableFromGraphDef/\d+)/\d+", n.name)
        if m:
            renames[n.name] = m.group(1)
            n.name = m.group(1)
    for n in graph.node:
        for i, inp in enumerate(n.input):
            ctl = inp.startswith("^")
            name, sep, port = inp.lstrip("^").partition(":")
            if name in renames:
                n.input[i] = ("^" if ctl else "") + renames[name] + sep + port


def kv_table(kd, vd, init="import"):
    """fn(keys, values, query, default): a table filled from keys/values,
    looked up, and its size."""
    name = fresh()

    def fn(keys, values, query, default):
        h = R.HashTableV2(key_dtype=kd, value_dtype=vd, shared_name=name)
        if init == "import":
            R.LookupTableImportV2(table_handle=h, keys=keys, values=values)
        else:
            R.InitializeTableV2(table_handle=h, keys=keys, values=values)
        return (R.LookupTableFindV2(table_handle=h, keys=query, default_value=default),
                R.LookupTableSizeV2(table_handle=h))
    return fn


def kv_cases(fam):
    pairs = {
        (tf.string, tf.int64): (s("a", "b", "c"), i64(1, 2, 3), s("c", "x", "a", ""), i64(-1)[0]),
        (tf.string, tf.int32): (s("a", "b"), tf.constant([5, -6], tf.int32), s("b", "z"),
                                tf.constant(0, tf.int32)),
        (tf.string, tf.string): (s("a", "b"), s("A", "B"), s("b", "a", "q"), tf.constant("?")),
        (tf.string, tf.float32): (s("a", "b"), tf.constant([0.5, -0.0]), s("b", "a", "q"),
                                  tf.constant(float("nan"))),
        (tf.string, tf.float64): (s("a"), tf.constant([1e300], tf.float64), s("a", "b"),
                                  tf.constant(-1.0, tf.float64)),
        (tf.string, tf.bool): (s("yes", "no"), tf.constant([True, False]), s("no", "yes", "x"),
                               tf.constant(True)),
        (tf.int64, tf.string): (i64(1, -5, 2**62), s("one", "minus five", "big"), i64(2**62, 0, -5),
                                tf.constant("unk")),
        (tf.int64, tf.int64): (i64(0, 1, 2), i64(10, 11, 12), i64(2, 2, 3, -1), i64(-1)[0]),
        (tf.int64, tf.int32): (i64(7), tf.constant([70], tf.int32), i64(7, 8), tf.constant(-1, tf.int32)),
        (tf.int64, tf.float32): (i64(7), tf.constant([7.5]), i64(8, 7), tf.constant(0.0)),
        (tf.int64, tf.float64): (i64(7), tf.constant([7.25], tf.float64), i64(7, 8),
                                 tf.constant(0.0, tf.float64)),
        (tf.int32, tf.string): (tf.constant([1, 2], tf.int32), s("x", "y"), tf.constant([2, 3], tf.int32),
                                tf.constant("")),
        (tf.int32, tf.int32): (tf.constant([-2**31, 2**31 - 1], tf.int32), tf.constant([1, 2], tf.int32),
                               tf.constant([2**31 - 1, 0, -2**31], tf.int32), tf.constant(9, tf.int32)),
        (tf.int32, tf.float32): (tf.constant([1], tf.int32), tf.constant([1.25]),
                                 tf.constant([1, 0], tf.int32), tf.constant(-1.0)),
        (tf.int32, tf.float64): (tf.constant([1], tf.int32), tf.constant([1.25], tf.float64),
                                 tf.constant([1, 0], tf.int32), tf.constant(-1.0, tf.float64)),
    }
    for (kd, vd), inputs in pairs.items():
        for init in ("import", "initialize"):
            fam.add_function(f"kv/{kd.name}->{vd.name}/{init}", kv_table(kd, vd, init), inputs)

    # Query shapes: scalar, matrix, empty; defaults per key.
    keys, vals = s("a", "b", "c"), i64(1, 2, 3)
    fam.add_function("kv/scalar query", kv_table(tf.string, tf.int64),
                     [keys, vals, tf.constant("b"), i64(-1)[0]])
    fam.add_function("kv/matrix query", kv_table(tf.string, tf.int64),
                     [keys, vals, tf.constant([["a", "x"], ["c", "c"]]), i64(-1)[0]])
    fam.add_function("kv/empty query", kv_table(tf.string, tf.int64),
                     [keys, vals, tf.constant([], tf.string), i64(-1)[0]])
    fam.add_function("kv/default per key", kv_table(tf.string, tf.int64),
                     [keys, vals, tf.constant([["a", "x"], ["y", "c"]]), tf.constant([[7, 8], [9, 10]], tf.int64)])
    fam.add_function("kv/error/default of another shape", kv_table(tf.string, tf.int64),
                     [keys, vals, tf.constant([["a", "x"], ["y", "c"]]), i64(7, 8)])
    fam.add_function("kv/error/default of another shape, scalar query", kv_table(tf.string, tf.int64),
                     [keys, vals, tf.constant("a"), i64(7)])
    fam.add_function("kv/empty table", kv_table(tf.string, tf.int64),
                     [tf.constant([], tf.string), i64(), s("a"), i64(-1)[0]])
    # Import takes any shape (values of the keys' shape); Initialize vectors.
    fam.add_function("kv/import of a matrix", kv_table(tf.int64, tf.int64),
                     [tf.constant([[1, 2], [3, 4]], tf.int64), tf.constant([[5, 6], [7, 8]], tf.int64),
                      i64(4, 1, 9), i64(0)[0]])
    fam.add_function("kv/error/import values of another shape", kv_table(tf.int64, tf.int64),
                     [i64(1, 2, 3), i64(1, 2), i64(1), i64(0)[0]])
    fam.add_function("kv/error/initialize of a matrix", kv_table(tf.int64, tf.int64, "initialize"),
                     [tf.constant([[1, 2, 3]], tf.int64), i64(1, 2, 3), i64(1), i64(0)[0]])
    fam.add_function("kv/error/initialize values of a matrix", kv_table(tf.int64, tf.int64, "initialize"),
                     [i64(1, 2, 3), tf.constant([[1, 2, 3]], tf.int64), i64(1), i64(0)[0]])
    fam.add_function("kv/error/initialize sizes differ", kv_table(tf.int64, tf.int64, "initialize"),
                     [i64(1, 2, 3), i64(1, 2), i64(1), i64(0)[0]])
    # Duplicates: the same value is fine, another is TensorFlow's error.
    fam.add_function("kv/duplicate key, same value", kv_table(tf.string, tf.int64),
                     [s("a", "b", "a"), i64(1, 2, 1), s("a", "b"), i64(-1)[0]])
    for kd, vd, k, v in [(tf.string, tf.int64, s("a", "b", "a"), i64(1, 2, 3)),
                         (tf.int64, tf.string, i64(3, 3), s("p", "q")),
                         (tf.int64, tf.float64, i64(3, 3), tf.constant([0.5, 0.25], tf.float64)),
                         (tf.string, tf.float32, s("a", "a"), tf.constant([float("nan")] * 2)),
                         (tf.int32, tf.float32, tf.constant([3, 3], tf.int32), tf.constant([1.5, 1e20])),
                         (tf.string, tf.bool, s("t", "t"), tf.constant([True, False]))]:
        for init in ("import", "initialize"):
            q = k[:1]
            d = tf.zeros([], vd) if vd != tf.string else tf.constant("")
            fam.add_function(f"kv/error/duplicate key/{kd.name}->{vd.name}/{init}",
                             kv_table(kd, vd, init), [k, v, q, d])

    # Wrong dtypes: TensorFlow's signature errors.
    def wrong_query(keys, values, query, default):
        h = R.HashTableV2(key_dtype=tf.string, value_dtype=tf.int64, shared_name=fresh())
        R.LookupTableImportV2(table_handle=h, keys=keys, values=values)
        return R.LookupTableFindV2(table_handle=h, keys=query, default_value=default)
    fam.add_function("kv/error/query of another dtype", wrong_query,
                     [keys, vals, tf.constant([1], tf.int32), i64(-1)[0]])
    fam.add_function("kv/error/default of another dtype", wrong_query,
                     [keys, vals, s("a"), tf.constant(-1, tf.int32)])

    def wrong_import(keys, values):
        h = R.HashTableV2(key_dtype=tf.int64, value_dtype=tf.int64, shared_name=fresh())
        R.LookupTableImportV2(table_handle=h, keys=keys, values=values)
        return R.LookupTableSizeV2(table_handle=h)
    fam.add_function("kv/error/import keys of another dtype", wrong_import,
                     [tf.constant([1], tf.int32), i64(1)])

    # Uninitialised: size 0, lookups refused.
    def uninitialised(query):
        h = R.HashTableV2(key_dtype=tf.string, value_dtype=tf.int64, shared_name=fresh())
        return R.LookupTableSizeV2(table_handle=h)
    fam.add_function("kv/uninitialised size", uninitialised, [s("a")])

    def uninitialised_find(query):
        h = R.HashTableV2(key_dtype=tf.string, value_dtype=tf.int64, shared_name=fresh())
        return R.LookupTableFindV2(table_handle=h, keys=query, default_value=tf.constant(-1, tf.int64))
    fam.add_function("kv/error/uninitialised find", uninitialised_find, [s("a")])

    # Initialised twice: as many entries is fine (TensorFlow compares
    # sizes only), another count is refused.
    def twice(k1, v1, k2, v2, query):
        h = R.HashTableV2(key_dtype=tf.string, value_dtype=tf.int64, shared_name=fresh())
        R.LookupTableImportV2(table_handle=h, keys=k1, values=v1)
        R.LookupTableImportV2(table_handle=h, keys=k2, values=v2)
        return (R.LookupTableFindV2(table_handle=h, keys=query, default_value=tf.constant(-1, tf.int64)),
                R.LookupTableSizeV2(table_handle=h))
    fam.add_function("kv/initialised twice, as many entries", twice,
                     [s("a", "b"), i64(1, 2), s("x", "y"), i64(8, 9), s("a", "x")])
    fam.add_function("kv/error/initialised twice, more entries", twice,
                     [s("a", "b"), i64(1, 2), s("x", "y", "z"), i64(7, 8, 9), s("a", "x")])
    # A failed initialisation keeps the entries before the failure.
    fam.add_function("kv/failed then initialised", twice,
                     [s("a", "b", "a"), i64(1, 2, 3), s("c"), i64(5), s("a", "b", "c")])


def text_table(kd, vd, ki, vi, vocab_size=-1, delimiter="\t", offset=0):
    name = fresh()

    def fn(path, query, default):
        h = R.HashTableV2(key_dtype=kd, value_dtype=vd, shared_name=name)
        R.InitializeTableFromTextFileV2(table_handle=h, filename=path, key_index=ki, value_index=vi,
                                        vocab_size=vocab_size, delimiter=delimiter, offset=offset)
        return (R.LookupTableFindV2(table_handle=h, keys=query, default_value=default),
                R.LookupTableSizeV2(table_handle=h))
    return fn


def text_cases(fam):
    def p(name):
        return tf.constant(f"{DATA}/{name}")
    m1 = i64(-1)[0]
    words = s("the", "fox", "dog", "cat", "")
    add = fam.add_function
    add("text/whole line -> line number", text_table(tf.string, tf.int64, -2, -1), [p("vocab.txt"), words, m1])
    add("text/offset", text_table(tf.string, tf.int64, -2, -1, offset=100), [p("vocab.txt"), words, m1])
    add("text/vocab_size truncates", text_table(tf.string, tf.int64, -2, -1, vocab_size=3),
        [p("vocab.txt"), words, m1])
    add("text/vocab_size exact", text_table(tf.string, tf.int64, -2, -1, vocab_size=8),
        [p("vocab.txt"), words, m1])
    add("text/error/vocab_size past the end", text_table(tf.string, tf.int64, -2, -1, vocab_size=9),
        [p("vocab.txt"), words, m1])
    add("text/line number -> whole line", text_table(tf.int64, tf.string, -1, -2),
        [p("vocab.txt"), i64(0, 3, 7, 8, -1), tf.constant("?")])
    add("text/columns, crlf", text_table(tf.string, tf.int64, 0, 1),
        [p("columns.tsv"), s("apple", "banana", "cherry", "date"), m1])
    add("text/columns, float values", text_table(tf.string, tf.float32, 0, 2),
        [p("columns.tsv"), s("apple", "banana", "cherry", "date"), tf.constant(0.0)])
    add("text/columns, int64 keys to strings", text_table(tf.int64, tf.string, 1, 0),
        [p("columns.tsv"), i64(3, 7, -1, 0), tf.constant("?")])
    add("text/columns, int32 values plus offset", text_table(tf.string, tf.int32, 0, 1, offset=5),
        [p("columns.tsv"), s("apple", "cherry"), tf.constant(0, tf.int32)])
    add("text/columns, string values", text_table(tf.string, tf.string, 0, 2),
        [p("columns.tsv"), s("apple", "cherry", "x"), tf.constant("?")])
    add("text/space delimiter", text_table(tf.string, tf.int64, 0, 1, delimiter=" "),
        [p("spaces.txt"), s("green", "blue", "red ", "x"), m1])
    add("text/floats", text_table(tf.string, tf.float32, 0, 1),
        [p("floats.tsv"), s("a", "b", "c", "d", "e", "f", "g", "h", "i", "z"), tf.constant(-1.0)])
    add("text/doubles", text_table(tf.string, tf.float64, 0, 1),
        [p("floats.tsv"), s("a", "b", "c", "d", "e", "f", "g", "h", "i", "z"), tf.constant(-1.0, tf.float64)])
    add("text/integers with spaces and signs", text_table(tf.int64, tf.int64, -2, -1),
        [p("ints.txt"), i64(5, -7, 3, 2147483648, 0), m1])
    add("text/error/int32 overflow", text_table(tf.int32, tf.int32, -2, -2),
        [p("ints.txt"), tf.constant([5], tf.int32), tf.constant(0, tf.int32)])
    add("text/int32 whole line plus offset", text_table(tf.string, tf.int32, -2, -2, offset=100, vocab_size=3),
        [p("ints.txt"), s(" 5 ", "-7", "+3"), tf.constant(0, tf.int32)])
    add("text/error/not an integer", text_table(tf.int64, tf.int64, -2, -1),
        [p("bad_int.txt"), i64(1), m1])
    add("text/last line unterminated", text_table(tf.string, tf.int64, -2, -1),
        [p("no_newline.txt"), s("one", "two", "three", "two\r"), m1])
    add("text/error/empty line", text_table(tf.string, tf.int64, -2, -1), [p("empty_line.txt"), words, m1])
    add("text/error/duplicate line", text_table(tf.string, tf.int64, -2, -1), [p("dup.txt"), words, m1])
    add("text/error/empty file", text_table(tf.string, tf.int64, -2, -1), [p("empty.txt"), words, m1])
    add("text/error/vocab_size 0", text_table(tf.string, tf.int64, -2, -1, vocab_size=0),
        [p("vocab.txt"), words, m1])
    add("text/error/too few columns", text_table(tf.string, tf.int64, 0, 1), [p("short_row.tsv"), words, m1])
    add("text/error/missing file", text_table(tf.string, tf.int64, -2, -1),
        [p("no_such_file.txt"), words, m1])
    add("text/error/empty file name", text_table(tf.string, tf.int64, -2, -1), [tf.constant(""), words, m1])
    add("text/error/file name not a scalar", text_table(tf.string, tf.int64, -2, -1),
        [tf.constant([f"{DATA}/vocab.txt"]), words, m1])
    add("text/error/line number key needs int64", text_table(tf.string, tf.int64, -1, -2),
        [p("ints.txt"), words, m1])
    add("text/error/line number value needs int64", text_table(tf.string, tf.int32, -2, -1),
        [p("vocab.txt"), words, tf.constant(0, tf.int32)])
    add("text/error/whole line value needs integer or string", text_table(tf.string, tf.float32, -2, -2),
        [p("vocab.txt"), words, tf.constant(0.0)])
    add("text/error/bool values from a column", text_table(tf.string, tf.bool, 0, 1, delimiter=" "),
        [p("spaces.txt"), s("red"), tf.constant(False)])
    add("text/error/delimiter of two bytes", text_table(tf.string, tf.int64, 0, 1, delimiter="  "),
        [p("spaces.txt"), s("red"), m1])


def pipeline_cases(fam):
    D = tf.data.Dataset
    vocab = f"{DATA}/vocab.txt"
    sentences = ["the quick brown fox", "jumps over the lazy dog", "a cat", "", "fox fox unknown words"]

    kv = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        s("the", "quick", "brown", "fox"), i64(0, 1, 2, 3)), default_value=-1)
    fam.add_dataset("pipeline/static hash table in map", D.from_tensor_slices(
        ["the", "fox", "cat", "quick", ""]).map(kv.lookup))
    fam.add_dataset("pipeline/table size in map", D.range(3).map(lambda i: i + kv.size()))
    fam.add_dataset("pipeline/parallel map", D.from_tensor_slices(sentences).map(
        lambda x: kv.lookup(tf.strings.split(x)), num_parallel_calls=2, deterministic=True))
    fam.add_dataset("pipeline/filter on a table", D.from_tensor_slices(
        ["the", "fox", "cat", "quick", "dog"]).filter(lambda w: kv.lookup(w) >= 0))

    ids = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        i64(10, 20, 30), s("ten", "twenty", "thirty")), default_value="other")
    fam.add_dataset("pipeline/int64 keys to strings", D.range(0, 40, 5).map(ids.lookup))

    vt = tf.lookup.StaticVocabularyTable(tf.lookup.TextFileInitializer(
        vocab, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
        tf.lookup.TextFileIndex.LINE_NUMBER), num_oov_buckets=3)
    fam.add_dataset("pipeline/vocabulary file with oov buckets", D.from_tensor_slices(sentences).map(
        lambda x: vt.lookup(tf.strings.split(x))))
    fam.add_dataset("pipeline/vocabulary file, padded batch", D.from_tensor_slices(sentences).map(
        lambda x: vt.lookup(tf.strings.split(x))).padded_batch(2))
    fam.add_dataset("pipeline/vocabulary file, text lines", D.from_tensor_slices(sentences).map(
        lambda x: tf.strings.split(x)).unbatch().map(vt.lookup).batch(4))

    hashed = tf.lookup.StaticVocabularyTable(tf.lookup.KeyValueTensorInitializer(
        i64(100, 200, 300), i64(0, 1, 2)), num_oov_buckets=5)
    fam.add_dataset("pipeline/vocabulary of int64 keys with oov buckets", D.range(95, 305, 5).map(hashed.lookup))

    tt = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
        f"{DATA}/columns.tsv", tf.string, 0, tf.int64, 1, delimiter="\t"), default_value=0)
    fam.add_dataset("pipeline/text file columns", D.from_tensor_slices(
        ["banana", "apple", "kiwi", "cherry"]).map(tt.lookup))

    fam.add_dataset("pipeline/table in a flat_map", D.from_tensor_slices(sentences).flat_map(
        lambda x: D.from_tensor_slices(tf.strings.split(x)).map(vt.lookup)))
    fam.add_dataset("pipeline/table in an interleave", D.from_tensor_slices(sentences[:3]).interleave(
        lambda x: D.from_tensor_slices(tf.strings.split(x)).map(kv.lookup), cycle_length=2))
    # Keras preprocessing layers with a fixed vocabulary: the same tables.
    import keras
    sl = keras.layers.StringLookup(vocabulary=["the", "quick", "fox"], num_oov_indices=2, mask_token="")
    fam.add_dataset("pipeline/keras StringLookup", D.from_tensor_slices(sentences).map(
        lambda x: sl(tf.strings.split(x))))
    il = keras.layers.IntegerLookup(vocabulary=tf.constant([10, 20, 30], tf.int64))
    fam.add_dataset("pipeline/keras IntegerLookup", D.range(0, 40, 5).map(il))
    inv = keras.layers.StringLookup(vocabulary=["the", "quick", "fox"], invert=True)
    fam.add_dataset("pipeline/keras StringLookup inverted", D.range(5).map(inv))
    fam.add_dataset("pipeline/two tables", D.from_tensor_slices(["the", "fox", "cat"]).map(
        lambda w: (kv.lookup(w), vt.lookup(w), tt.lookup(w))))
