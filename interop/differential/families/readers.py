"""The legacy readers (TextLineReaderV2, TFRecordReaderV2,
FixedLengthRecordReaderV2, WholeFileReaderV2, IdentityReaderV2) and their
verbs (ReaderReadV2, ReaderReadUpToV2, the counters, ReaderResetV2,
ReaderSerializeStateV2, ReaderRestoreStateV2), fed file names by the
FIFOQueueV2 ops, inside one traced function, and inside map functions of
pipelines (where they persist from element to element).

The files read are written by this module under
crates/tfdata-graph/tests/data/readers (committed); their paths are relative
to the crate, where the Rust test runs.

TensorFlow names a queue "_<a process-wide counter>_<node name>" in its
errors: the messages are kept from after the name."""

import gzip
import os
import re
import zlib

import tensorflow as tf

from harness import Family, in_crate

R = tf.raw_ops
DATA = "tests/data/readers"

TEXT = {
    "a.txt": "alpha\nbeta\r\ngamma",
    "b.txt": "one\n\nthree\n",
    "empty.txt": "",
    "header.csv": "name,value\nx,1\ny,2\n",
    "only_cr.txt": "a\r\n\r",
    "unicode.txt": "h\u00e9llo\n\u65e5\u672c\n",
}
FIXED = {
    # header 2, records of 3, footer 1
    "fixed.bin": b"HH" + b"abc" + b"\x00\xff\x01" + b"xyz" + b"F",
    "fixed_partial.bin": b"HH" + b"abc" + b"de" + b"F",
    "fixed_short.bin": b"H",
    "hops.bin": b"HH" + b"abcdefgh" + b"F",
    "hops.gz": gzip.compress(b"HH" + b"abcdefg" + b"F", mtime=0),
    "hops.zlib": zlib.compress(b"HH" + b"abcdefg" + b"F"),
    "tiny.gz": gzip.compress(b"HHa", mtime=0),
}
RECORDS = [b"first", b"", b"\x00\xff" * 40, b"last record"]


def path(name):
    return os.path.join(DATA, name)


def write_files():
    os.makedirs(DATA, exist_ok=True)
    for name, text in TEXT.items():
        with open(path(name), "w", newline="", encoding="utf-8") as f:
            f.write(text)
    for name, data in FIXED.items():
        with open(path(name), "wb") as f:
            f.write(data)
    for name, comp in [("records.tfrecord", ""), ("records.zlib", "ZLIB"),
                       ("records.gz", "GZIP")]:
        with tf.io.TFRecordWriter(path(name), options=comp or None) as w:
            for r in RECORDS:
                w.write(r)
    with open(path("records.tfrecord"), "rb") as f:
        good = f.read()
    with open(path("corrupt.tfrecord"), "wb") as f:
        f.write(good[:-3])


def family():
    with in_crate():
        return build()


def queue_of(files):
    q = R.FIFOQueueV2(component_types=[tf.string], shapes=[[]], capacity=-1)
    R.QueueEnqueueManyV2(handle=q, components=[files])
    R.QueueCloseV2(handle=q)
    return q


def reading(make, reads=0, up_to=(), counters=True, serialize=False):
    """fn(files): a queue of the files, closed; `reads` single reads, then a
    read_up_to for each count in `up_to`; then the counters."""
    def fn(files):
        q = queue_of(files)
        r = make()
        out = []
        for _ in range(reads):
            out.extend(R.ReaderReadV2(reader_handle=r, queue_handle=q))
        for n in up_to:
            out.extend(R.ReaderReadUpToV2(reader_handle=r, queue_handle=q,
                                          num_records=tf.constant(n, tf.int64)))
        if counters:
            out.append(R.ReaderNumRecordsProducedV2(reader_handle=r))
            out.append(R.ReaderNumWorkUnitsCompletedV2(reader_handle=r))
        if serialize:
            out.append(R.ReaderSerializeStateV2(reader_handle=r))
        return out
    return fn


def files(*names):
    return tf.constant([path(n) for n in names])


def text(skip=0):
    return lambda: R.TextLineReaderV2(skip_header_lines=skip)


def tfrecord(comp=""):
    return lambda: R.TFRecordReaderV2(compression_type=comp)


def fixed():
    return lambda: R.FixedLengthRecordReaderV2(header_bytes=2, record_bytes=3, footer_bytes=1)


def whole():
    return R.WholeFileReaderV2()


def identity():
    return R.IdentityReaderV2()


def build():
    write_files()
    fam = Family("readers")
    add = fam.add_function

    def case(case_id, fn, inputs):
        add(case_id, fn, inputs, traced=True)
        err = fam.cases[-1].get("error")
        if err and not err["message"]:
            # A message of several lines (a state's DebugString): its first.
            err["message"] = first_line_of_error(fn, inputs)
        if err:
            # The queue's name carries a process-wide counter.
            err["message"] = re.split(r"FIFOQueue '_\d+_[^']*' ", err["message"])[-1]

    # Text lines: keys "file:line", \r\n, a last line without \n, empty lines.
    case("text_read", reading(text(), reads=5), [files("a.txt", "b.txt")])
    case("text_read_up_to", reading(text(), up_to=[2, 5, 1, 0]),
         [files("a.txt", "b.txt", "unicode.txt")])
    case("text_skip_header", reading(text(1), up_to=[10, 10]), [files("header.csv", "b.txt")])
    case("text_skip_more_than_file", reading(text(5), reads=1),
         [files("header.csv", "a.txt")])
    case("text_empty_and_cr", reading(text(), up_to=[10]),
         [files("empty.txt", "only_cr.txt")])
    case("text_drained", reading(text(), reads=4), [files("a.txt")])
    case("text_missing_file", reading(text(), reads=1), [files("missing.txt")])
    case("text_serialize_unimplemented", reading(text(), reads=1, serialize=True),
         [files("a.txt")])
    case("text_no_files", reading(text(), up_to=[3]), [tf.constant([], tf.string)])

    # TFRecords: keys "file:offset", compressed and corrupt files.
    for comp, name in [("", "records.tfrecord"), ("ZLIB", "records.zlib"),
                       ("GZIP", "records.gz")]:
        case("tfrecord_%s" % (comp or "plain").lower(), reading(tfrecord(comp), up_to=[3, 3]),
             [files(name)])
    case("tfrecord_unknown_compression", reading(tfrecord("BAD"), up_to=[10]),
         [files("records.tfrecord")])
    case("tfrecord_two_files", reading(tfrecord(), reads=6),
         [files("records.tfrecord", "records.tfrecord")])
    case("tfrecord_truncated", reading(tfrecord(), up_to=[10]), [files("corrupt.tfrecord")])
    case("tfrecord_missing_file", reading(tfrecord(), reads=1), [files("nope.tfrecord")])

    # Fixed-length records: keys "file:index" after the header.
    case("fixed_read", reading(fixed(), reads=3), [files("fixed.bin")])
    case("fixed_up_to", reading(fixed(), up_to=[1, 5]), [files("fixed.bin", "fixed.bin")])
    case("fixed_partial_record", reading(fixed(), reads=2), [files("fixed_partial.bin")])
    case("fixed_shorter_than_header", reading(fixed(), reads=1), [files("fixed_short.bin")])
    case("fixed_missing_file", reading(fixed(), reads=1), [files("nope.bin")])

    def fixed_with(**kw):
        return lambda: R.FixedLengthRecordReaderV2(**kw)
    for hop in [1, 2, 3, 4, 5, 6, 9]:
        case("fixed_hop_%d" % hop,
             reading(fixed_with(header_bytes=2, record_bytes=3, footer_bytes=1, hop_bytes=hop),
                     up_to=[100]), [files("hops.bin", "fixed.bin")])
    case("fixed_record_0", reading(fixed_with(record_bytes=0), up_to=[5], reads=2),
         [files("fixed.bin")])
    case("fixed_record_0_hop", reading(fixed_with(record_bytes=0, hop_bytes=4), up_to=[10]),
         [files("fixed.bin")])
    case("fixed_footer_past_header", reading(fixed_with(header_bytes=3, record_bytes=1,
                                                       footer_bytes=20), reads=1),
         [files("fixed.bin")])
    for enc, name in [("GZIP", "hops.gz"), ("ZLIB", "hops.zlib"), ("NONE", "hops.bin")]:
        for hop in [0, 2]:
            case("fixed_%s_hop_%d" % (enc.lower(), hop),
                 reading(fixed_with(header_bytes=2, record_bytes=3, footer_bytes=1,
                                    hop_bytes=hop, encoding=enc), up_to=[100]), [files(name)])
    case("fixed_gzip_shorter_than_header",
         reading(fixed_with(header_bytes=20, record_bytes=3, encoding="GZIP"), reads=1),
         [files("hops.gz")])
    case("fixed_gzip_footer_past_body",
         reading(fixed_with(header_bytes=2, record_bytes=1, footer_bytes=5, encoding="GZIP"),
                 reads=1), [files("tiny.gz")])

    # Whole files and identity: one record per work item, serializable state.
    case("whole_read", reading(whole, reads=2, serialize=True),
         [files("a.txt", "empty.txt", "b.txt")])
    case("whole_up_to", reading(whole, up_to=[5, 5], serialize=True),
         [files("a.txt", "unicode.txt")])
    case("whole_missing_file", reading(whole, reads=1), [files("missing.txt")])
    case("identity_read", reading(identity, reads=2, serialize=True),
         [tf.constant(["w1", "", "\u00e9\"\n\x00"])])
    case("identity_up_to", reading(identity, up_to=[2, 1], serialize=True),
         [tf.constant(["a", "b", "c"])])
    case("identity_drained", reading(identity, reads=2), [tf.constant(["only"])])
    case("identity_serialize_fresh", reading(identity, serialize=True),
         [tf.constant([], tf.string)])

    def reset(fn_make):
        def fn(names):
            q = queue_of(names)
            r = fn_make()
            k, v = R.ReaderReadV2(reader_handle=r, queue_handle=q)
            with tf.control_dependencies([k, v]):
                R.ReaderResetV2(reader_handle=r)
            n = R.ReaderNumRecordsProducedV2(reader_handle=r)
            w = R.ReaderNumWorkUnitsCompletedV2(reader_handle=r)
            k2, v2 = R.ReaderReadV2(reader_handle=r, queue_handle=q)
            return k, v, n, w, k2, v2
        return fn
    case("text_reset", reset(text()), [files("a.txt", "b.txt")])
    case("identity_reset", reset(identity), [tf.constant(["a", "b"])])

    def restore(state, make=identity, then_read=True):
        def fn(names):
            q = queue_of(names)
            r = make()
            R.ReaderRestoreStateV2(reader_handle=r, state=tf.constant(state))
            out = [R.ReaderNumRecordsProducedV2(reader_handle=r),
                   R.ReaderNumWorkUnitsCompletedV2(reader_handle=r)]
            if then_read:
                out.extend(R.ReaderReadV2(reader_handle=r, queue_handle=q))
            out.append(R.ReaderSerializeStateV2(reader_handle=r))
            return out
        return fn

    def state(**kw):
        # ReaderBaseState, as TensorFlow serializes it.
        out = b""
        for tag, key in [(1, "work_started"), (2, "work_finished"), (3, "num_records_produced")]:
            v = kw.get(key, 0)
            if v:
                out += bytes([tag << 3]) + varint(v)
        w = kw.get("current_work", b"")
        if w:
            out += bytes([0x22]) + varint(len(w)) + w
        return out

    case("identity_restore", restore(state(work_started=3, work_finished=3,
                                           num_records_produced=7, current_work=b"old")),
         [tf.constant(["next"])])
    case("identity_restore_empty", restore(b""), [tf.constant(["x"])])
    case("identity_restore_garbage", restore(b"\xff\xff\"\n"),
         [tf.constant(["x"])])
    case("identity_restore_negative", restore(state(work_started=-1, current_work=b"a\tb")),
         [tf.constant(["x"])])
    case("identity_restore_inconsistent",
         restore(state(work_started=2, work_finished=1, num_records_produced=5)),
         [tf.constant(["x"])])
    case("whole_restore", restore(state(work_started=1, work_finished=1), make=whole),
         [files("b.txt")])
    case("text_restore_unimplemented", restore(b"", make=text(), then_read=False),
         [files("a.txt")])

    # Queues: size, dequeue, enqueue after close, reading a closed queue.
    def queue_ops(names):
        q = R.FIFOQueueV2(component_types=[tf.string], shapes=[[]], capacity=-1)
        R.QueueEnqueueManyV2(handle=q, components=[names])
        R.QueueEnqueueV2(handle=q, components=[tf.constant("single")])
        n1 = R.QueueSizeV2(handle=q)
        d = R.QueueDequeueV2(handle=q, component_types=[tf.string])[0]
        n2 = R.QueueSizeV2(handle=q)
        r = R.IdentityReaderV2()
        k, v = R.ReaderReadV2(reader_handle=r, queue_handle=q)
        return n1, d, n2, k, v, R.QueueSizeV2(handle=q)
    case("queue_ops", queue_ops, [tf.constant(["a", "b"])])

    def enqueue_after_close(names):
        q = queue_of(names)
        R.QueueEnqueueV2(handle=q, components=[tf.constant("late")])
        return R.QueueSizeV2(handle=q)
    case("queue_enqueue_after_close", enqueue_after_close, [tf.constant(["a"])])

    def dequeue_closed(names):
        q = queue_of(names)
        return R.QueueDequeueV2(handle=q, component_types=[tf.string])
    case("queue_dequeue_closed", dequeue_closed, [tf.constant([], tf.string)])

    def int_queue(names):
        q = R.FIFOQueueV2(component_types=[tf.int32], shapes=[[]], capacity=-1)
        R.QueueEnqueueManyV2(handle=q, components=[tf.constant([1, 2], tf.int32)])
        R.QueueCloseV2(handle=q)
        r = R.IdentityReaderV2()
        return R.ReaderReadV2(reader_handle=r, queue_handle=q)
    case("queue_not_strings", int_queue, [tf.constant(["a"])])

    def two_components(names):
        q = R.FIFOQueueV2(component_types=[tf.string, tf.string], shapes=[[], []],
                          capacity=-1)
        R.QueueEnqueueManyV2(handle=q, components=[names, names])
        R.QueueCloseV2(handle=q)
        r = R.IdentityReaderV2()
        return R.ReaderReadV2(reader_handle=r, queue_handle=q)
    case("queue_two_components", two_components, [tf.constant(["a"])])

    def one_element_tensors(names):
        q = R.FIFOQueueV2(component_types=[tf.string], shapes=[], capacity=-1)
        R.QueueEnqueueV2(handle=q, components=[names])
        R.QueueCloseV2(handle=q)
        return R.ReaderReadV2(reader_handle=R.IdentityReaderV2(), queue_handle=q)
    case("queue_element_not_scalar", one_element_tensors, [tf.constant(["a", "b"])])
    case("queue_element_one_of_rank_1", one_element_tensors, [tf.constant(["a"])])

    def enqueue_checked(types, shapes, comps, many=False):
        def fn(names):
            q = R.FIFOQueueV2(component_types=types, shapes=shapes, capacity=-1)
            op = R.QueueEnqueueManyV2 if many else R.QueueEnqueueV2
            # Constants made here: a tensor from outside would be captured.
            op(handle=q, components=[tf.constant(*c) if c is not None else names
                                     for c in comps])
            return R.QueueSizeV2(handle=q)
        return fn
    S = tf.string
    for case_id, args in [
            ("enqueue_wrong_dtype", ([S], [[]], [(1,)])),
            ("enqueue_too_many_components", ([S], [[]], [None, None])),
            ("enqueue_wrong_shape", ([S], [[]], [(["a"],)])),
            ("enqueue_shapeless_queue", ([S], [], [([["a", "b"]],)])),
            ("enqueue_many_wrong_shape", ([S], [[]], [([["a"]],)], True)),
            ("enqueue_many_batches_differ", ([S, S], [[], []], [(["a"],), (["a", "b"],)], True)),
            ("enqueue_many_shapeless", ([S], [], [([["a", "b"]],)], True)),
            ("enqueue_many_empty", ([S], [[]], [([], tf.string)], True)),
            ("enqueue_many_ints", ([tf.int32, S], [[2], []],
                                   [([[1, 2], [3, 4]], tf.int32), None], True))]:
        case(case_id, enqueue_checked(*args), [tf.constant(["x", "y"])])
    pipeline_cases(fam)
    return fam


def pipeline_cases(fam):
    # In a map function the queue and reader persist from element to
    # element of one iterator (TensorFlow's kernels keep their resource);
    # a fresh iterator starts with new ones (ours: see known_failures.txt).
    names = [path("a.txt"), path("b.txt"), path("a.txt")]

    def counting(name):
        q = R.FIFOQueueV2(component_types=[tf.string], shapes=[[]], capacity=-1)
        R.QueueEnqueueV2(handle=q, components=[name])
        r = R.WholeFileReaderV2()
        k, v = R.ReaderReadV2(reader_handle=r, queue_handle=q)
        return k, tf.strings.length(v), R.ReaderNumRecordsProducedV2(reader_handle=r)
    fam.add_dataset("map_reader_persists",
                    tf.data.Dataset.from_tensor_slices(names).map(counting), stateful=True)

    def lines(name):
        q = R.FIFOQueueV2(component_types=[tf.string], shapes=[[]], capacity=-1)
        R.QueueEnqueueV2(handle=q, components=[name])
        r = R.TextLineReaderV2()
        return R.ReaderReadUpToV2(reader_handle=r, queue_handle=q,
                                  num_records=tf.constant(10, tf.int64))
    fam.add_dataset("map_text_lines",
                    tf.data.Dataset.from_tensor_slices(names).map(lines))


def first_line_of_error(fn, inputs):
    try:
        tf.function(fn)(*inputs)
    except tf.errors.OpError as e:
        lines = e.message.split("\n")
        at = next(i for i, l in enumerate(lines) if l.strip().startswith("[["))
        block = lines[:at]
        while block and not block[-1].strip():
            block.pop()
        start = max(i for i, l in enumerate(block) if not l.strip()) + 1
        return block[start].split("goo.gle/debug")[0]
    raise AssertionError("expected an error")


def varint(v):
    v &= (1 << 64) - 1
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])
