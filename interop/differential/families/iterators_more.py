"""Iterators beyond reading them, in function bodies: string handles
(IteratorToStringHandle, IteratorFromStringHandle{,V2}) found again while
the iterator lives, a node's own iterator (Iterator, IteratorV2,
OneShotIterator), with their type, shape, parse and device checks;
IteratorGetDevice; SerializeIterator and DeserializeIterator restoring a
position (into the same iterator, a new one over the same dataset, one over
the same pipeline built again); the seed generator and iteration counter
resources (AnonymousRandomSeedGenerator, DummyIterationCounter); and
multi-device iterators (AnonymousMultiDeviceIterator{,V3}, a node's own
MultiDeviceIterator, Init, GetNextFromShard dealing elements to shards in
turn, their string handles, DeleteMultiDeviceIterator).

A string handle's name holds the iterator's address (TensorFlow's too), so
cases return its fixed parts (device and container before it, the type's
hash and name after it) and match the name against its pattern. Reads of
one iterator through two handles are ordered with control dependencies:
TensorFlow orders stateful ops only per handle tensor."""

import tensorflow as tf
from tensorflow.core.framework import resource_handle_pb2

from harness import Family

D = tf.data.Dataset
I64 = tf.int64
DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"
# The string handle's bytes before the name (device and container fields
# and the name's tag) and after it (the type's hash and name).
HEAD = 57
TAIL = 49


def family():
    fam = Family("iterators_more")
    string_handles(fam)
    string_handle_errors(fam)
    devices(fam)
    saved_positions(fam)
    resources(fam)
    multi_device(fam)
    named_iterators(fam)
    one_shot(fam)
    # A message naming a live iterator holds its address: kept up to the
    # name, so regenerating gives the same bytes.
    for case in fam.cases:
        err = case.get("error")
        if err and "-at-0x" in err["message"]:
            err["message"] = err["message"].split("Resource-")[0] + "Resource-"
    return fam


def get(h, types=(I64,), shapes=((),)):
    return tf.raw_ops.IteratorGetNext(iterator=h, output_types=list(types),
                                      output_shapes=list(shapes))


def parts(h, tail=TAIL, pattern="Resource-[0-9]+-at-0x[0-9a-f]+"):
    """A string handle's fixed parts, and whether its name is TensorFlow's
    (`Resource-<id>-at-<address>` for an anonymous resource)."""
    n = tf.strings.length(h)
    name = tf.strings.substr(h, HEAD + 2, n - HEAD - 2 - tail)
    return (tf.strings.substr(h, 0, HEAD), tf.strings.substr(h, n - tail, tail),
            tf.strings.regex_full_match(name, pattern))


def string_handles(fam):
    def round_trip(v1, keep_alive=True):
        def fn(n):
            it = iter(D.range(n).map(lambda x: x * 10))
            h = tf.raw_ops.IteratorToStringHandle(resource_handle=it._iterator_resource)
            a = next(it)
            from_string = (tf.raw_ops.IteratorFromStringHandle if v1
                           else tf.raw_ops.IteratorFromStringHandleV2)
            with tf.control_dependencies([a]):
                h2 = from_string(string_handle=h, output_types=[I64], output_shapes=[[]])
                b = get(h2)[0]
            with tf.control_dependencies([b]):
                c = next(it)
            with tf.control_dependencies([c]):
                h3 = tf.raw_ops.IteratorToStringHandle(resource_handle=h2)
                d = get(h2)[0]
            if not keep_alive:
                return d
            # The iterator lives while `it`'s handle is used: read it last.
            with tf.control_dependencies([d]):
                e = it.get_next_as_optional().has_value()
            return (a, b, c, d, e, tf.equal(h, h3)) + parts(h)
        return fn

    fam.add_function("string handle round trip (V2): both handles read one iterator",
                     round_trip(False), [tf.constant(6, I64)], traced=True)
    fam.add_function("string handle round trip (IteratorFromStringHandle)",
                     round_trip(True), [tf.constant(6, I64)], traced=True)
    fam.add_function("string handle read past the end", round_trip(False),
                     [tf.constant(3, I64)], traced=True)
    fam.add_function("a handle from a string read after the iterator is freed",
                     round_trip(False, keep_alive=False), [tf.constant(6, I64)], traced=True)

    def declared(types, shapes):
        def fn(x):
            it = iter(D.from_tensor_slices((x, tf.strings.as_string(x))))
            h = tf.raw_ops.IteratorToStringHandle(resource_handle=it._iterator_resource)
            h2 = tf.raw_ops.IteratorFromStringHandleV2(string_handle=h, output_types=types,
                                                       output_shapes=shapes)
            with tf.control_dependencies([h2]):
                a = next(it)
            with tf.control_dependencies(list(a)):
                b = get(h2, [tf.float32, tf.string], [[], []])
            with tf.control_dependencies(list(b)):
                c = next(it)
            return tuple(a) + tuple(b) + tuple(c)
        return fn

    x = [tf.constant([1.5, -0.0, 3.0])]
    fam.add_function("string handle declaring the types and shapes",
                     declared([tf.float32, tf.string], [[], []]), x, traced=True)
    fam.add_function("string handle declaring unknown shapes",
                     declared([tf.float32, tf.string], [None, None]), x, traced=True)
    fam.add_function("string handle declaring a vector of unknown size for a scalar",
                     declared([tf.float32, tf.string], [[], [None]]), x, traced=True)
    fam.add_function("string handle declaring nothing", declared([], []), x, traced=True)
    fam.add_function("string handle declaring another type",
                     declared([tf.float32, tf.int32], [[], []]), x, traced=True)
    fam.add_function("string handle declaring another shape",
                     declared([tf.float32, tf.string], [[], [2]]), x, traced=True)
    fam.add_function("string handle declaring another number of components",
                     declared([tf.float32], [[]]), x, traced=True)


def crafted(device=DEVICE, container="Anonymous", name="Resource-0-at-0x1",
            hash_code=8918088204830721661):
    return resource_handle_pb2.ResourceHandleProto(
        device=device, container=container, name=name, hash_code=hash_code,
        maybe_type_name="N10tensorflow4data16IteratorResourceE").SerializeToString()


def string_handle_errors(fam):
    def read(v1):
        def fn(s):
            from_string = (tf.raw_ops.IteratorFromStringHandle if v1
                           else tf.raw_ops.IteratorFromStringHandleV2)
            h = from_string(string_handle=s, output_types=[I64], output_shapes=[[]])
            return get(h)[0]
        return fn

    for v1 in [False, True]:
        op = "IteratorFromStringHandle" if v1 else "IteratorFromStringHandleV2"
        fam.add_function(f"{op} of bytes that are no handle", read(v1),
                         [tf.constant(b"garbage\xff")], traced=True, unknown_shapes=True)
        fam.add_function(f"{op} of an empty string (no device)", read(v1),
                         [tf.constant("")], traced=True, unknown_shapes=True)
        fam.add_function(f"{op} of a vector", read(v1), [tf.constant(["a", "b"])],
                         traced=True, unknown_shapes=True)
        fam.add_function(f"{op} of a handle on another device", read(v1), [tf.constant(
            crafted(device="/job:worker/replica:0/task:1/device:CPU:0"))], traced=True,
            unknown_shapes=True)
        fam.add_function(f"{op} of a handle naming no iterator", read(v1),
                         [tf.constant(crafted(name="Resource-7-at-0xdead"))], traced=True,
                         unknown_shapes=True)
        fam.add_function(f"{op} of a handle in another container", read(v1),
                         [tf.constant(crafted(container="localhost", name="it"))],
                         traced=True, unknown_shapes=True)


def devices(fam):
    def device(bound):
        def fn(n):
            if bound:
                it = iter(D.range(n))
                h = it._iterator_resource
            else:
                h = tf.raw_ops.AnonymousIteratorV3(output_types=[I64], output_shapes=[[]])
            return (tf.raw_ops.IteratorGetDevice(resource=h),
                    tf.raw_ops.ExperimentalIteratorGetDevice(resource=h))
        return fn

    fam.add_function("IteratorGetDevice of a bound iterator", device(True),
                     [tf.constant(3, I64)], traced=True)
    fam.add_function("IteratorGetDevice of an unbound iterator", device(False),
                     [tf.constant(3, I64)], traced=True)

    def unbound_handle(n):
        h = tf.raw_ops.AnonymousIteratorV3(output_types=[I64], output_shapes=[[]])
        return parts(tf.raw_ops.IteratorToStringHandle(resource_handle=h))

    fam.add_function("string handle of an unbound iterator", unbound_handle,
                     [tf.constant(3, I64)], traced=True)


def ordered(*steps):
    """Runs each step (a function of nothing giving tensors) after the
    previous one's tensors, and returns them all."""
    out = []
    deps = []
    for step in steps:
        with tf.control_dependencies(deps):
            got = step()
        got = list(got) if isinstance(got, (list, tuple)) else [got]
        deps = [g for g in got if g is not None]
        out.extend(g for g in got if g is not None and g.dtype != tf.variant)
    return tuple(out)


def saved_positions(fam):
    def rewind(make):
        def fn(x):
            ds = make(x)
            it = iter(ds)
            h = it._iterator_resource
            saved = []

            def save():
                saved.append(tf.raw_ops.SerializeIterator(resource_handle=h))
                return saved[0]

            def restore():
                tf.raw_ops.DeserializeIterator(resource_handle=h, serialized=saved[0])
                return tf.constant(0)
            return ordered(lambda: next(it), save, lambda: next(it), lambda: next(it),
                           restore, lambda: next(it), lambda: next(it))
        return fn

    fam.add_function("SerializeIterator then DeserializeIterator rewinds a range",
                     rewind(lambda n: D.range(n)), [tf.constant(10, I64)], traced=True)
    fam.add_function("rewind a mapped, filtered, batched pipeline", rewind(
        lambda n: D.range(n).map(lambda x: x * x).filter(lambda x: x % 3 != 1).batch(2)),
        [tf.constant(30, I64)], traced=True)
    fam.add_function("rewind strings from tensor slices", rewind(
        lambda x: D.from_tensor_slices(x)), [tf.constant(["a", "", "\u00e9t\u00e9", "d", "e"])],
        traced=True)
    fam.add_function("rewind a repeated, zipped pipeline", rewind(
        lambda n: D.zip((D.range(n).repeat(), D.range(100, 100 + 2 * n)))),
        [tf.constant(3, I64)], traced=True)

    def into_new(rebuild):
        def fn(n):
            ds = D.range(n).map(lambda x: x + 100)
            plain = D.range(n)
            it = iter(ds if not rebuild else plain)
            h = it._iterator_resource
            saved = []
            target = tf.raw_ops.AnonymousIteratorV3(output_types=[I64], output_shapes=[[]])

            def save():
                saved.append(tf.raw_ops.SerializeIterator(resource_handle=h))
                return saved[0]

            def restore():
                again = D.range(n) if rebuild else ds
                tf.raw_ops.MakeIterator(dataset=again._variant_tensor, iterator=target)
                tf.raw_ops.DeserializeIterator(resource_handle=target, serialized=saved[0])
                return tf.constant(0)
            return ordered(lambda: next(it), lambda: next(it), save, lambda: next(it),
                           restore, lambda: get(target)[0], lambda: get(target)[0],
                           lambda: next(it))
        return fn

    fam.add_function("DeserializeIterator into a new iterator over the same dataset",
                     into_new(False), [tf.constant(8, I64)], traced=True)
    fam.add_function("DeserializeIterator into an iterator over the range built again",
                     into_new(True), [tf.constant(8, I64)], traced=True)

    def at_end(n):
        it = iter(D.range(n))
        h = it._iterator_resource
        saved = []

        def save():
            saved.append(tf.raw_ops.SerializeIterator(resource_handle=h))
            return saved[0]

        def restore():
            tf.raw_ops.DeserializeIterator(resource_handle=h, serialized=saved[0])
            return tf.constant(0)

        def last():
            o = it.get_next_as_optional()
            return o.has_value()
        return ordered(lambda: next(it), lambda: next(it), save, restore, last)

    fam.add_function("a position saved at the end restores to the end", at_end,
                     [tf.constant(2, I64)], traced=True)

    def unbound_save(n):
        h = tf.raw_ops.AnonymousIteratorV3(output_types=[I64], output_shapes=[[]])
        s = tf.raw_ops.SerializeIterator(resource_handle=h)
        tf.raw_ops.DeserializeIterator(resource_handle=h, serialized=s)
        return n

    fam.add_function("SerializeIterator of an unbound iterator", unbound_save,
                     [tf.constant(2, I64)], traced=True)

    def unbound_restore(n):
        it = iter(D.range(n))
        s = tf.raw_ops.SerializeIterator(resource_handle=it._iterator_resource)
        h = tf.raw_ops.AnonymousIteratorV3(output_types=[I64], output_shapes=[[]])
        tf.raw_ops.DeserializeIterator(resource_handle=h, serialized=s)
        return get(h)[0]

    fam.add_function("DeserializeIterator into an unbound iterator", unbound_restore,
                     [tf.constant(2, I64)], traced=True)

    def through_string(n):
        it = iter(D.range(n))
        h = tf.raw_ops.IteratorToStringHandle(resource_handle=it._iterator_resource)
        saved = []

        def save():
            h2 = tf.raw_ops.IteratorFromStringHandleV2(string_handle=h, output_types=[I64],
                                                       output_shapes=[[]])
            saved.append(tf.raw_ops.SerializeIterator(resource_handle=h2))
            return saved[0]

        def restore():
            tf.raw_ops.DeserializeIterator(resource_handle=it._iterator_resource,
                                           serialized=saved[0])
            return tf.constant(0)
        return ordered(lambda: next(it), save, lambda: next(it), restore, lambda: next(it))

    fam.add_function("SerializeIterator through a string handle", through_string,
                     [tf.constant(5, I64)], traced=True)


def resources(fam):
    def random_seed_generator(seed):
        h, d = tf.raw_ops.AnonymousRandomSeedGenerator(seed=seed, seed2=seed + 1)
        return seed

    fam.add_function("AnonymousRandomSeedGenerator (its kernel reads a missing input)",
                     random_seed_generator, [tf.constant(3, I64)], traced=True)
    fam.add_function("AnonymousRandomSeedGenerator unseeded", random_seed_generator,
                     [tf.constant(0, I64)], traced=True)

    def iteration_counter(n):
        c = tf.raw_ops.DummyIterationCounter()
        with tf.control_dependencies([c]):
            return tf.identity(n * 2)

    fam.add_function("DummyIterationCounter", iteration_counter, [tf.constant(4, I64)],
                     traced=True)


# A multi-device iterator's string handle after its name: the type's hash
# (10 bytes and its tag) and name (54 bytes, its tag and length).
MD_TAIL = 67
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


def multi_device(fam):
    def shard_reads(version, devices, reads, buf=1, make=lambda n: D.range(n),
                    types=(I64,), shapes=((),), reinit=None, delete=False):
        def fn(n):
            ds = make(n)
            deleter = None
            if version == 1:
                h, deleter = tf.raw_ops.AnonymousMultiDeviceIterator(
                    devices=devices, output_types=list(types), output_shapes=list(shapes))
            elif version == 3:
                h = tf.raw_ops.AnonymousMultiDeviceIteratorV3(
                    devices=devices, output_types=list(types), output_shapes=list(shapes))
            else:
                h = tf.raw_ops.MultiDeviceIterator(
                    devices=devices, shared_name="", container="", output_types=list(types),
                    output_shapes=list(shapes))
            inc = tf.raw_ops.MultiDeviceIteratorInit(dataset=ds._variant_tensor,
                                                     multi_device_iterator=h,
                                                     max_buffer_size=buf)
            out = [inc]
            deps = [inc]
            for k, shard in enumerate(reads):
                if reinit is not None and k == reinit:
                    with tf.control_dependencies(deps):
                        inc = tf.raw_ops.MultiDeviceIteratorInit(
                            dataset=make(n + 10)._variant_tensor, multi_device_iterator=h,
                            max_buffer_size=buf)
                    out.append(inc)
                    deps = [inc]
                with tf.control_dependencies(deps):
                    got = tf.raw_ops.MultiDeviceIteratorGetNextFromShard(
                        multi_device_iterator=h, shard_num=shard, incarnation_id=inc,
                        output_types=list(types), output_shapes=list(shapes))
                out.extend(got)
                deps = list(got)
            if delete:
                with tf.control_dependencies(deps):
                    tf.raw_ops.DeleteMultiDeviceIterator(multi_device_iterator=h, iterators=[],
                                                         deleter=deleter)
            return tuple(out)
        return fn

    n5 = [tf.constant(5, I64)]
    fam.add_function("multi-device iterator on one CPU reads the dataset in order",
                     shard_reads(3, ["/cpu:0"], [0, 0, 0]), n5, traced=True)
    fam.add_function("AnonymousMultiDeviceIterator, two shards in turn, deleted",
                     shard_reads(1, [CPU, CPU], [0, 1, 0, 1], delete=True), n5, traced=True)
    fam.add_function("two shards, one read ahead of the other",
                     shard_reads(3, [CPU, CPU], [0, 0, 1, 1]), n5, traced=True)
    fam.add_function("three shards, one read ahead within a buffer of 2",
                     shard_reads(3, [CPU] * 3, [2, 2, 0, 1, 1, 0, 0], buf=2),
                     [tf.constant(9, I64)], traced=True)
    fam.add_function("a node's own MultiDeviceIterator",
                     shard_reads(0, ["/cpu:0", "/cpu:0"], [1, 0, 1]), n5, traced=True)
    fam.add_function("multi-device iterator past the end",
                     shard_reads(3, ["/cpu:0"], [0, 0, 0]), [tf.constant(2, I64)], traced=True)
    fam.add_function("a shard past the end while the other has one left",
                     shard_reads(3, [CPU, CPU], [0, 1, 0, 1]), [tf.constant(3, I64)],
                     traced=True)
    fam.add_function("multi-device iterator initialised again (incarnation 2)",
                     shard_reads(3, [CPU, CPU], [0, 1, 1, 0], reinit=2), n5, traced=True)

    def tuples(x):
        return D.from_tensor_slices((x, tf.strings.as_string(x))).batch(2)

    fam.add_function("multi-device iterator of batched (float, string) pairs",
                     shard_reads(3, [CPU, CPU], [1, 0, 0], make=tuples,
                                 types=(tf.float32, tf.string), shapes=([None], [None])),
                     [tf.constant([1.5, -0.0, float("nan"), 4.0, 5.0])], traced=True)
    fam.add_function("multi-device iterator declaring another type",
                     shard_reads(3, [CPU], [0], types=(tf.int32,)), n5, traced=True)
    fam.add_function("multi-device iterator declaring another shape",
                     shard_reads(3, [CPU], [0], shapes=([2],)), n5, traced=True)

    def wrong_incarnation(n):
        h = tf.raw_ops.AnonymousMultiDeviceIteratorV3(devices=[CPU], output_types=[I64],
                                                      output_shapes=[[]])
        inc = tf.raw_ops.MultiDeviceIteratorInit(dataset=D.range(n)._variant_tensor,
                                                 multi_device_iterator=h, max_buffer_size=1)
        return tf.raw_ops.MultiDeviceIteratorGetNextFromShard(
            multi_device_iterator=h, shard_num=0, incarnation_id=inc + 1, output_types=[I64],
            output_shapes=[[]])

    fam.add_function("multi-device read naming another incarnation", wrong_incarnation, n5,
                     traced=True)

    def string_handle(named):
        def fn(n):
            if named:
                h = tf.raw_ops.MultiDeviceIterator(devices=[CPU, CPU], shared_name="",
                                                   container="", output_types=[I64],
                                                   output_shapes=[[]])
            else:
                h = tf.raw_ops.AnonymousMultiDeviceIteratorV3(
                    devices=[CPU, CPU], output_types=[I64], output_shapes=[[]])
            inc = tf.raw_ops.MultiDeviceIteratorInit(dataset=D.range(n)._variant_tensor,
                                                     multi_device_iterator=h,
                                                     max_buffer_size=1)
            s = tf.raw_ops.MultiDeviceIteratorToStringHandle(multi_device_iterator=h)
            h2 = tf.raw_ops.MultiDeviceIteratorFromStringHandle(
                string_handle=s, output_types=[I64], output_shapes=[[]])
            a = tf.raw_ops.MultiDeviceIteratorGetNextFromShard(
                multi_device_iterator=h2, shard_num=0, incarnation_id=inc, output_types=[I64],
                output_shapes=[[]])[0]
            with tf.control_dependencies([a]):
                b = tf.raw_ops.MultiDeviceIteratorGetNextFromShard(
                    multi_device_iterator=h, shard_num=1, incarnation_id=inc,
                    output_types=[I64], output_shapes=[[]])[0]
            with tf.control_dependencies([b]):
                s2 = tf.raw_ops.MultiDeviceIteratorToStringHandle(multi_device_iterator=h2)
                c = tf.raw_ops.MultiDeviceIteratorGetNextFromShard(
                    multi_device_iterator=h2, shard_num=0, incarnation_id=inc,
                    output_types=[I64], output_shapes=[[]])[0]
            with tf.control_dependencies([c]):
                d = tf.raw_ops.MultiDeviceIteratorGetNextFromShard(
                    multi_device_iterator=h, shard_num=1, incarnation_id=inc,
                    output_types=[I64], output_shapes=[[]])[0]
            pattern = ("_[0-9]+_MultiDeviceIterator" if named
                       else "Resource-[0-9]+-at-0x[0-9a-f]+")
            return (a, b, c, d, tf.equal(s, s2)) + parts(s, MD_TAIL, pattern)
        return fn

    fam.add_function("multi-device string handle round trip", string_handle(False), n5,
                     traced=True)
    fam.add_function("a node's own MultiDeviceIterator's string handle", string_handle(True),
                     n5, traced=True)

    def from_string(s):
        h = tf.raw_ops.MultiDeviceIteratorFromStringHandle(string_handle=s, output_types=[I64],
                                                           output_shapes=[[]])
        return tf.raw_ops.MultiDeviceIteratorGetNextFromShard(
            multi_device_iterator=h, shard_num=0, incarnation_id=1, output_types=[I64],
            output_shapes=[[]])

    fam.add_function("MultiDeviceIteratorFromStringHandle of bytes that are no handle",
                     from_string, [tf.constant(b"garbage\xff")], traced=True,
                     unknown_shapes=True)
    fam.add_function("MultiDeviceIteratorFromStringHandle of a vector", from_string,
                     [tf.constant(["a", "b"])], traced=True, unknown_shapes=True)
    fam.add_function("MultiDeviceIteratorFromStringHandle naming no iterator", from_string,
                     [tf.constant(crafted(name="nothing", hash_code=16662786403704826828))],
                     traced=True, unknown_shapes=True)


def named_iterators(fam):
    """A node's own iterator (`Iterator`, `IteratorV2` without a shared
    name), started by MakeIterator, read, named by a string handle."""
    def named(v1, make=True):
        def fn(n):
            op = tf.raw_ops.Iterator if v1 else tf.raw_ops.IteratorV2
            h = op(shared_name="", container="", output_types=[I64], output_shapes=[[]])
            if make:
                tf.raw_ops.MakeIterator(dataset=D.range(n).map(lambda x: x - 3)._variant_tensor,
                                        iterator=h)
            a = get(h)[0]
            s = tf.raw_ops.IteratorToStringHandle(resource_handle=h)
            with tf.control_dependencies([a]):
                h2 = tf.raw_ops.IteratorFromStringHandleV2(string_handle=s, output_types=[I64],
                                                           output_shapes=[[]])
                b = get(h2)[0]
            with tf.control_dependencies([b]):
                c = get(h)[0]
            pattern = "_[0-9]+_Iterator" if v1 else "_[0-9]+_IteratorV2"
            return (a, b, c) + parts(s, TAIL, pattern)
        return fn

    fam.add_function("IteratorV2 (a node's own iterator) and its string handle", named(False),
                     [tf.constant(5, I64)], traced=True)
    fam.add_function("Iterator (a node's own iterator) and its string handle", named(True),
                     [tf.constant(5, I64)], traced=True)
    fam.add_function("IteratorV2 read without MakeIterator", named(False, make=False),
                     [tf.constant(5, I64)], traced=True)
    fam.add_function("IteratorV2 read past the end", named(False), [tf.constant(2, I64)],
                     traced=True)


def one_shot(fam):
    """OneShotIterator: the iterator of the dataset its factory function
    makes, made when the node first runs."""
    def factory_of(make):
        return tf.function(lambda: make()._variant_tensor).get_concrete_function()

    def reads(make, n_reads, types=(I64,), shapes=((),)):
        def fn(k):
            h = tf.raw_ops.OneShotIterator(dataset_factory=factory_of(make),
                                           output_types=list(types), output_shapes=list(shapes))
            out = []
            deps = []
            for _ in range(n_reads):
                with tf.control_dependencies(deps):
                    got = get(h, types, shapes)
                out.extend(got)
                deps = list(got)
            with tf.control_dependencies(deps):
                s = tf.raw_ops.IteratorToStringHandle(resource_handle=h)
            return tuple(o + tf.cast(k, o.dtype) if o.dtype != tf.string else o for o in out) + \
                parts(s, TAIL, "_[0-9]+_OneShotIterator")
        return fn

    k = [tf.constant(100, I64)]
    fam.add_function("OneShotIterator over a mapped range",
                     reads(lambda: D.range(4).map(lambda x: x * 7), 3), k, traced=True)
    fam.add_function("OneShotIterator read past the end",
                     reads(lambda: D.range(2), 3), k, traced=True)
    fam.add_function("OneShotIterator of (float, string) pairs", reads(
        lambda: D.from_tensor_slices(([1.5, -0.0], ["a", "\u00e9"])), 2,
        types=(tf.float32, tf.string), shapes=((), ())), [tf.constant(1.0)], traced=True)
    fam.add_function("OneShotIterator declaring another type",
                     reads(lambda: D.range(2), 1, types=(tf.int32,)), [tf.constant(1, tf.int32)],
                     traced=True)
