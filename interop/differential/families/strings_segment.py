"""UnsortedSegmentJoin: strings joined by segment in input order (empty segments empty),
int32 and int64 ids, ids over a prefix of the input's shape, long and unicode strings,
separators; shape, range and count errors. All exact."""

import tensorflow as tf

from harness import Family

R = tf.raw_ops


def family():
    fam = Family("strings_segment")

    def add(case_id, inputs, ids, num, sep=None):
        kw = {} if sep is None else {"separator": sep}
        f = lambda i, s, n: R.UnsortedSegmentJoin(inputs=i, segment_ids=s, num_segments=n, **kw)
        fam.add("UnsortedSegmentJoin", f, [inputs, ids, num], f"UnsortedSegmentJoin/{case_id}")

    words = tf.constant(["a", "bb", "", "ünï", "x" * 300, "🙂", "c"])
    add("basic", words, tf.constant([1, 0, 1, 3, 1, 0, 3]), tf.constant(5), ":")
    add("default separator", words, tf.constant([0, 0, 0, 0, 0, 0, 0]), tf.constant(1))
    add("long separator", words, tf.constant([2, 2, 2, 0, 0, 1, 2]), tf.constant(3), "-→-")
    for it in (tf.int32, tf.int64):
        add(f"{it.name} ids", words, tf.constant([1, 0, 1, 2, 1, 0, 2], it),
            tf.constant(3, it), ",")
    grid = tf.constant([["a", "b", "c"], ["d", "e", "f"]])
    add("rows", grid, tf.constant([1, 1]), tf.constant(2), ",")
    add("full shape", grid, tf.constant([[1, 0, 1], [0, 0, 2]]), tf.constant(3), "+")
    add("no segments", tf.constant([], tf.string), tf.constant([], tf.int32), tf.constant(0))
    add("empty input", tf.constant([], tf.string), tf.constant([], tf.int32), tf.constant(3))
    add("error/negative id", words, tf.constant([1, -1, 0, 0, 0, 0, 0]), tf.constant(3))
    add("error/id past the end", words, tf.constant([1, 3, 0, 0, 0, 0, 0]), tf.constant(3))
    add("error/shape prefix", grid, tf.constant([1, 1, 0]), tf.constant(2))
    add("error/negative count", words, tf.zeros([7], tf.int32), tf.constant(-1))
    add("error/count vector", words, tf.zeros([7], tf.int32), tf.constant([1]))
    add("error/scalar ids", tf.constant("a"), tf.constant(0), tf.constant(2))
    return fam
