"""The V1 reader ops, whose handles are reference-typed: WholeFileReader,
ReaderRead, ReaderReadUpTo, ReaderNumRecordsProduced,
ReaderNumWorkUnitsCompleted, ReaderReset, ReaderSerializeState and
ReaderRestoreState, fed file names by the V1 queue ops (FIFOQueue,
QueueEnqueue, QueueEnqueueMany, QueueClose).

A tf.function cannot trace a reference-typed op, but a dataset's map
function built in a tf.compat.v1 graph can hold them, and such a pipeline
serializes to a GraphDef a worker receives: each case is one, built in a
graph (harness `add_graph_dataset`), then run by TensorFlow from its
GraphDef. The queue and reader are made once and persist from element to
element, as in TensorFlow; each element's ops are ordered by control
dependencies.

The files read are the readers family's, under
crates/tfdata-graph/tests/data/readers (relative to the crate)."""

import tensorflow as tf

from harness import Family, in_crate

D = tf.data.Dataset
R = tf.raw_ops
DATA = "tests/data/readers"


def family():
    with in_crate():
        fam = Family("readers_v1")
        build(fam)
        return fam


def path(name):
    return f"{DATA}/{name}"


def names(*files):
    return tf.compat.v1.data.Dataset.from_tensor_slices([path(f) for f in files])


def queue():
    return R.FIFOQueue(component_types=[tf.string], shapes=[[]], capacity=100)


def counters(r, after):
    with tf.control_dependencies(after):
        return [R.ReaderNumRecordsProduced(reader_handle=r),
                R.ReaderNumWorkUnitsCompleted(reader_handle=r),
                R.ReaderSerializeState(reader_handle=r)]


def read_each(name):
    """Each element: its file enqueued, one read, the counters and state."""
    q, r = queue(), R.WholeFileReader()
    enq = R.QueueEnqueue(handle=q, components=[name])
    with tf.control_dependencies([enq]):
        k, v = R.ReaderRead(reader_handle=r, queue_handle=q)
    return [k, v] + counters(r, [k, v])


def read_up_to(n, per_element=2):
    """Each element: `per_element` copies of its file enqueued, then
    ReadUpTo(n) (at most what is queued, so no read waits)."""
    def fn(name):
        q, r = queue(), R.WholeFileReader()
        enq = R.QueueEnqueueMany(handle=q, components=[tf.fill([per_element], name)])
        with tf.control_dependencies([enq]):
            k, v = R.ReaderReadUpTo(reader_handle=r, queue_handle=q,
                                    num_records=tf.constant(n, tf.int64))
        return [k, v] + counters(r, [k, v])
    return fn


def read_then_reset(name):
    q, r = queue(), R.WholeFileReader()
    enq = R.QueueEnqueue(handle=q, components=[name])
    with tf.control_dependencies([enq]):
        k, v = R.ReaderRead(reader_handle=r, queue_handle=q)
    before = counters(r, [k, v])
    with tf.control_dependencies(before):
        reset = R.ReaderReset(reader_handle=r)
    return [k, v] + before + counters(r, [reset])


def restore(state):
    """Each element: one read, then `state` restored, then the counters."""
    def fn(name):
        q, r = queue(), R.WholeFileReader()
        enq = R.QueueEnqueue(handle=q, components=[name])
        with tf.control_dependencies([enq]):
            k, v = R.ReaderRead(reader_handle=r, queue_handle=q)
        with tf.control_dependencies([k, v]):
            done = R.ReaderRestoreState(reader_handle=r, state=state)
        return [k, v] + counters(r, [done])
    return fn


def base_state(started, finished, produced, work=b""):
    """A ReaderBaseState proto's bytes (fields 1-4, varints and bytes)."""
    def varint(v):
        out = b""
        while True:
            b = v & 0x7F
            v >>= 7
            if v:
                out += bytes([b | 0x80])
            else:
                return out + bytes([b])
    out = b""
    for field, v in [(1, started), (2, finished), (3, produced)]:
        if v:
            out += bytes([field << 3]) + varint(v)
    if work:
        out += bytes([(4 << 3) | 2]) + varint(len(work)) + work
    return out


def build(fam):
    fam.add_graph_dataset("WholeFileReader read per element", lambda: names(
        "a.txt", "b.txt", "empty.txt", "unicode.txt", "fixed.bin").map(read_each))
    fam.add_graph_dataset("WholeFileReader of a gzip file (bytes as they are)", lambda: names(
        "hops.gz", "records.tfrecord").map(read_each))
    fam.add_graph_dataset("WholeFileReader missing file", lambda: names(
        "a.txt", "no_such_file").map(read_each), error=True)
    for n, per in [(1, 2), (2, 2), (3, 3), (0, 1)]:
        fam.add_graph_dataset(f"ReaderReadUpTo {n} of {per} queued", lambda n=n, per=per: names(
            "a.txt", "b.txt", "empty.txt").map(read_up_to(n, per)))
    # (ReadUpTo of a negative count aborts TensorFlow's process: no case.)
    fam.add_graph_dataset("ReaderReset after each read", lambda: names(
        "a.txt", "b.txt", "unicode.txt").map(read_then_reset))

    def reset_between(name):
        """Two files queued, one read, a reset, then ReadUpTo(1): the reset
        forgets the counters, not the queue."""
        q, r = queue(), R.WholeFileReader()
        enq = R.QueueEnqueueMany(handle=q, components=[tf.stack([name, name])])
        with tf.control_dependencies([enq]):
            k, v = R.ReaderRead(reader_handle=r, queue_handle=q)
        with tf.control_dependencies([k, v]):
            reset = R.ReaderReset(reader_handle=r)
        with tf.control_dependencies([reset]):
            k2, v2 = R.ReaderReadUpTo(reader_handle=r, queue_handle=q,
                                      num_records=tf.constant(1, tf.int64))
        return [k, k2, v2] + counters(r, [k2, v2])

    fam.add_graph_dataset("ReaderReset between reads", lambda: names(
        "a.txt", "empty.txt").map(reset_between))

    def reset_fresh(name):
        """A reset before any read: the state is a fresh reader's."""
        r = R.WholeFileReader()
        reset = R.ReaderReset(reader_handle=r)
        return [name] + counters(r, [reset])

    fam.add_graph_dataset("ReaderReset of a fresh reader", lambda: names("a.txt").map(
        reset_fresh))
    for what, state in [
            ("a fresh state", base_state(0, 0, 0)),
            ("counters", base_state(5, 3, 7)),
            ("started before finished", base_state(2, 1, 4)),
            ("current work", base_state(1, 0, 0, b"tests/data/readers/a.txt")),
            ("finished after started", base_state(1, 2, 0)),
            ("negative produced", base_state(0, 0, -1 & (2**64 - 1))),
            ("garbage bytes", b"\xff\xff\xff"),
            ("empty bytes", b"")]:
        try:
            fam.add_graph_dataset(f"ReaderRestoreState {what}", lambda s=state: names(
                "a.txt", "b.txt").map(restore(tf.constant(s))))
        except (tf.errors.OpError, AssertionError):
            fam.ids.discard(f"ReaderRestoreState {what}")
            fam.add_graph_dataset(f"ReaderRestoreState {what}", lambda s=state: names(
                "a.txt", "b.txt").map(restore(tf.constant(s))), error=True)

    def round_trip(name):
        """A state serialized after a read, restored into the same reader
        after a second read: the counters are the first read's again."""
        q, r = queue(), R.WholeFileReader()
        enq = R.QueueEnqueueMany(handle=q, components=[tf.stack([name, name])])
        with tf.control_dependencies([enq]):
            k, v = R.ReaderRead(reader_handle=r, queue_handle=q)
        with tf.control_dependencies([k, v]):
            saved = R.ReaderSerializeState(reader_handle=r)
        with tf.control_dependencies([saved]):
            k2, v2 = R.ReaderRead(reader_handle=r, queue_handle=q)
        with tf.control_dependencies([k2, v2]):
            done = R.ReaderRestoreState(reader_handle=r, state=saved)
        return [k, k2, saved] + counters(r, [done])

    fam.add_graph_dataset("ReaderSerializeState round trip", lambda: names(
        "a.txt", "b.txt").map(round_trip))

    def closed(name):
        """The queue closed after two files: ReadUpTo(5) stops at its end."""
        q, r = queue(), R.WholeFileReader()
        enq = R.QueueEnqueueMany(handle=q, components=[tf.stack([name, name])])
        with tf.control_dependencies([enq]):
            close = R.QueueClose(handle=q)
        with tf.control_dependencies([close]):
            k, v = R.ReaderReadUpTo(reader_handle=r, queue_handle=q,
                                    num_records=tf.constant(5, tf.int64))
        return [k, v] + counters(r, [k, v])

    fam.add_graph_dataset("ReaderReadUpTo past a closed queue's end", lambda: names(
        "b.txt").map(closed))
