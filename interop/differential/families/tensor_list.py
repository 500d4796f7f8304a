"""TensorList: tf.TensorArray inside tf.while_loop (and the other list ops)
as traced functions and inside map functions of pipelines, with the errors
users meet (an unset element of unknown shape, an index out of range, an
element of the wrong shape or dtype)."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
F = tf.float32


def accumulate(x):
    """The usual pattern: one value per step, stacked."""
    n = tf.shape(x)[0]
    ta = tf.TensorArray(F, size=n)

    def body(i, ta):
        return i + 1, ta.write(i, x[i] * 2.0 + tf.cast(i, F))

    _, ta = tf.while_loop(lambda i, ta: i < n, body, [0, ta])
    return ta.stack()


def running_sums(x):
    """Vectors per step, a carried state beside the array."""
    n = tf.shape(x)[0]
    ta = tf.TensorArray(F, size=n, element_shape=[x.shape[1]])

    def body(i, acc, ta):
        acc = acc + x[i]
        return i + 1, acc, ta.write(i, acc)

    _, _, ta = tf.while_loop(lambda i, a, ta: i < n, body, [0, tf.zeros_like(x[0]), ta])
    return ta.stack(), ta.size()


def dynamic(x):
    """A dynamic-size array grown in a Python for loop over tf.range."""
    ta = tf.TensorArray(tf.int64, size=0, dynamic_size=True)
    for i in tf.range(tf.shape(x)[0]):
        if x[i] > 0:
            ta = ta.write(ta.size(), tf.cast(x[i], tf.int64) * 10)
    return ta.stack()


def strings(x):
    ta = tf.TensorArray(tf.string, size=tf.shape(x)[0])
    for i in tf.range(tf.shape(x)[0]):
        ta = ta.write(i, tf.strings.join([x[i], "!"]))
    return ta.stack()


def unstack_read(x):
    ta = tf.TensorArray(F, size=tf.shape(x)[0]).unstack(x)
    out = tf.TensorArray(F, size=tf.shape(x)[0])
    for i in tf.range(tf.shape(x)[0]):
        out = out.write(i, ta.read(tf.shape(x)[0] - 1 - i) + 1.0)
    return out.stack()


def ragged_concat(x):
    ta = tf.TensorArray(F, size=3, infer_shape=False)
    ta = ta.write(0, x[:1]).write(1, x[1:4]).write(2, x[4:])
    return ta.concat()


def gather_scatter(x):
    ta = tf.TensorArray(F, size=4, element_shape=[2])
    ta = ta.scatter([3, 1], x)
    return ta.stack(), ta.gather([1, 3, 0])


def partly_written(x):
    ta = tf.TensorArray(F, size=4, element_shape=[3])
    ta = ta.write(2, x)
    return ta.stack(), ta.read(0)


def partly_written_unknown(x):
    ta = tf.TensorArray(F, size=3, infer_shape=False, element_shape=None)
    ta = ta.write(1, x)
    return ta.stack()


def unset_unknown(x):
    ta = tf.TensorArray(F, size=3, infer_shape=False, element_shape=None)
    return ta.read(1) + x


def read_out_of_range(x):
    ta = tf.TensorArray(F, size=2).unstack(x[:2])
    return ta.read(tf.shape(x)[0])


def raw_lists(x):
    """The list ops TensorArray does not emit, by hand."""
    shape = tf.constant([-1], tf.int32)
    l = R.EmptyTensorList(element_shape=shape, max_num_elements=-1, element_dtype=F)
    l = R.TensorListPushBack(input_handle=l, tensor=x)
    l = R.TensorListPushBack(input_handle=l, tensor=x * 3.0)
    l = R.TensorListPushBack(input_handle=l, tensor=x[:2])
    l, last = R.TensorListPopBack(input_handle=l, element_shape=shape, element_dtype=F)
    es = R.TensorListElementShape(input_handle=l, shape_type=tf.int32)
    l = R.TensorListResize(input_handle=l, size=3)
    n = R.TensorListLength(input_handle=l)
    stacked = R.TensorListStack(input_handle=l, element_shape=shape, element_dtype=F)
    return last, es, n, stacked


def set_wrong_shape(x):
    l = R.TensorListReserve(element_shape=tf.constant([2]), num_elements=3, element_dtype=F)
    l = R.TensorListSetItem(input_handle=l, index=0, item=x)
    return R.TensorListStack(input_handle=l, element_shape=-1, element_dtype=F)


def push_full(x):
    l = R.EmptyTensorList(element_shape=-1, max_num_elements=1, element_dtype=F)
    l = R.TensorListPushBack(input_handle=l, tensor=x)
    l = R.TensorListPushBack(input_handle=l, tensor=x)
    return R.TensorListLength(input_handle=l)


def pop_empty(x):
    l = R.EmptyTensorList(element_shape=-1, max_num_elements=-1, element_dtype=F)
    _, t = R.TensorListPopBack(input_handle=l, element_shape=-1, element_dtype=F)
    return t + x


def stack_ragged(x):
    l = R.TensorListFromTensor(tensor=tf.reshape(x, [2, -1]), element_shape=-1)
    l = R.TensorListPushBack(input_handle=l, tensor=x)
    return R.TensorListStack(input_handle=l, element_shape=-1, element_dtype=F)


def stack_empty_unknown(x):
    l = R.EmptyTensorList(element_shape=-1, max_num_elements=-1, element_dtype=F)
    return R.TensorListStack(input_handle=l, element_shape=-1, element_dtype=F), x


def reserve_negative(n):
    l = R.TensorListReserve(element_shape=-1, num_elements=n, element_dtype=F)
    return R.TensorListLength(input_handle=l)


def concat_leading(x):
    l = R.TensorListReserve(element_shape=tf.constant([-1, 2]), num_elements=3, element_dtype=F)
    l = R.TensorListSetItem(input_handle=l, index=1, item=tf.reshape(x, [-1, 2]))
    return R.TensorListConcatV2(input_handle=l, element_shape=tf.constant([-1, 2]),
                                leading_dims=tf.constant([1, 0, 2], tf.int64), element_dtype=F)


def from_rows(x):
    return R.TensorListFromTensor(tensor=x, element_shape=-1)


# (A wrong element_dtype or a rank-2 element_shape is refused while
# tracing, before a kernel runs.)
MORE_ERRORS = {
    "gather out of range": lambda x: R.TensorListGather(
        input_handle=from_rows(x), indices=[0, 9], element_shape=-1, element_dtype=F),
    "scatter count mismatch": lambda x: R.TensorListLength(input_handle=R.TensorListScatterIntoExistingList(
        input_handle=from_rows(x), tensor=x, indices=[0])),
    "from a scalar": lambda x: R.TensorListLength(input_handle=from_rows(x[0, 0])),
    "from a tensor of the wrong element shape": lambda x: R.TensorListLength(
        input_handle=R.TensorListFromTensor(tensor=x, element_shape=tf.constant([5]))),
    "resize negative": lambda x: R.TensorListLength(input_handle=R.TensorListResize(
        input_handle=from_rows(x), size=-1)),
    "concat of scalars": lambda x: R.TensorListConcatV2(
        input_handle=from_rows(x[0]), element_shape=-1, leading_dims=tf.constant([], tf.int64),
        element_dtype=F)[0],
    "stack with num_elements": lambda x: R.TensorListStack(
        input_handle=from_rows(x), element_shape=-1, element_dtype=F, num_elements=7),
    "stack with an incompatible element_shape": lambda x: R.TensorListStack(
        input_handle=from_rows(x), element_shape=tf.constant([4]), element_dtype=F),
    "gather of unset elements of unknown shape": lambda x: R.TensorListGather(
        input_handle=R.TensorListReserve(element_shape=-1, num_elements=2, element_dtype=F),
        indices=[1], element_shape=-1, element_dtype=F) + x[0, 0],
}

MORE = {
    "ElementShape int64 of a partial shape": lambda x: R.TensorListElementShape(
        input_handle=R.TensorListReserve(element_shape=tf.constant([3, -1], tf.int64),
                                         num_elements=1, element_dtype=F), shape_type=tf.int64),
    "GetItem ignores a mismatched element_shape for a set element": lambda x: R.TensorListGetItem(
        input_handle=from_rows(x), index=1, element_shape=tf.constant([7]), element_dtype=F),
    "scatter at the end grows the list": lambda x: R.TensorListStack(
        input_handle=R.TensorListScatterIntoExistingList(input_handle=from_rows(x), tensor=x[:1] * 9.0,
                                                         indices=[2]),
        element_shape=-1, element_dtype=F),
    "gather of nothing": lambda x: R.TensorListGather(
        input_handle=from_rows(x), indices=tf.constant([], tf.int32), element_shape=-1, element_dtype=F),
    "concat of an empty list of known shape": lambda x: R.TensorListConcatV2(
        input_handle=R.EmptyTensorList(element_shape=tf.constant([-1, 2]), max_num_elements=-1,
                                       element_dtype=F),
        element_shape=tf.constant([-1, 2]), leading_dims=tf.constant([], tf.int64), element_dtype=F),
    "pop of an unset element of known shape": lambda x: R.TensorListPopBack(
        input_handle=R.TensorListReserve(element_shape=tf.constant([2]), num_elements=2, element_dtype=F),
        element_shape=-1, element_dtype=F)[1] + x[0, :2],
}


def reserve(shape, n):
    return R.TensorListReserve(element_shape=tf.constant(shape) if shape != -1 else -1,
                               num_elements=n, element_dtype=F)


def set_item(l, i, v):
    return R.TensorListSetItem(input_handle=l, index=i, item=v)


def stack(l):
    return R.TensorListStack(input_handle=l, element_shape=-1, element_dtype=F)


def concat_v2(l, shape=-1, leading=()):
    return R.TensorListConcatV2(input_handle=l, element_shape=shape, element_dtype=F,
                                leading_dims=tf.constant(list(leading), tf.int64))


def split(x, shape, lengths):
    return R.TensorListSplit(tensor=x, element_shape=shape, lengths=tf.constant(lengths, tf.int64))


# The bulk ops: Concat (V1), Split, Scatter, ScatterV2, ConcatLists, and
# ConcatV2's leading dim taken from the element shape or the set elements.
BULK = {
    "Concat V1": lambda x: R.TensorListConcat(input_handle=from_rows(x), element_dtype=F),
    "Concat V1 of strings": lambda x: R.TensorListConcat(
        input_handle=from_rows(tf.constant([["a", "b"], ["", "d\u00e9"]])), element_dtype=tf.string),
    "Concat V1 infers the leading dim of unset elements": lambda x: R.TensorListConcat(
        input_handle=set_item(reserve([-1, 2], 3), 0, x), element_dtype=F),
    "Concat V1 ignores the first dim of its attr": lambda x: R.TensorListConcat(
        input_handle=set_item(reserve([-1, 2], 3), 1, x), element_dtype=F, element_shape=[5, 2]),
    "ConcatV2 takes the leading dim from the element shape": lambda x: concat_v2(reserve([2, 2], 2)),
    "ConcatV2 infers the leading dim of unset elements": lambda x: concat_v2(
        set_item(reserve([-1, 2], 3), 2, x), leading=[4]),
    "Split into ranges": lambda x: concat_v2(split(tf.reshape(tf.range(12.0), [6, 2]) + x[0, 0],
                                                    tf.constant([-1, 2]), [1, 0, 3, 2])),
    "Split then stack": lambda x: stack(split(tf.reshape(x, [4, 1]), -1, [2, 2])),
    "Split of nothing": lambda x: R.TensorListLength(input_handle=split(x[:0], -1, np.zeros([0], np.int64))),
    "Split of an empty tensor into empty ranges": lambda x: concat_v2(split(x[:0], -1, [0, 0])),
    "Scatter": lambda x: stack(R.TensorListScatter(tensor=x, indices=[3, 0], element_shape=tf.constant([2]))),
    "Scatter, repeated index: the last row wins": lambda x: stack(R.TensorListScatter(
        tensor=tf.concat([x, x * 5.0], 0), indices=[1, 1, 0, 1], element_shape=-1)),
    "Scatter of no rows": lambda x: R.TensorListLength(input_handle=R.TensorListScatter(
        tensor=x[:0], indices=tf.constant([], tf.int32), element_shape=-1)),
    "ScatterV2 with num_elements past the indices": lambda x: stack(R.TensorListScatterV2(
        tensor=x, indices=[3, 0], element_shape=tf.constant([2]), num_elements=6)),
    "ScatterV2 with num_elements -1": lambda x: stack(R.TensorListScatterV2(
        tensor=x, indices=[1, 0], element_shape=-1, num_elements=-1)),
    "ConcatLists": lambda x: stack(R.TensorListConcatLists(
        input_a=from_rows(x), input_b=from_rows(x * 2.0), element_dtype=F)),
    "ConcatLists keeps unset elements": lambda x: stack(R.TensorListConcatLists(
        input_a=reserve([2], 2), input_b=R.TensorListFromTensor(tensor=x, element_shape=tf.constant([2])),
        element_dtype=F)),
    "ConcatLists keeps input_a's max_num_elements": lambda x: R.TensorListLength(input_handle=R.TensorListConcatLists(
        input_a=R.EmptyTensorList(element_shape=-1, max_num_elements=1, element_dtype=F),
        input_b=from_rows(x), element_dtype=F)),
}

BULK_ERRORS = {
    "Concat V1 of unset elements": lambda x: R.TensorListConcat(
        input_handle=reserve([2, 2], 2), element_dtype=F, element_shape=[2, 2])[0],
    "Concat V1 of a list of a known shape, attr unknown": lambda x: R.TensorListConcat(
        input_handle=reserve([2, 2], 2), element_dtype=F)[0],
    "Concat V1 of an empty list": lambda x: R.TensorListConcat(
        input_handle=R.EmptyTensorList(element_shape=tf.constant([-1, 2]), max_num_elements=-1,
                                       element_dtype=F), element_dtype=F)[0],
    "Concat V1 of scalars": lambda x: R.TensorListConcat(input_handle=from_rows(x[0]), element_dtype=F)[0],
    "Concat V1 with a rank-0 element_shape": lambda x: R.TensorListConcat(
        input_handle=from_rows(x), element_dtype=F, element_shape=[])[0],
    "Concat V1 of vectors with a rank-2 element_shape": lambda x: R.TensorListConcat(
        input_handle=from_rows(x), element_dtype=F, element_shape=[None, 2])[0],
    "ConcatV2, first dim differs from the element shape's": lambda x: concat_v2(
        set_item(reserve([-1, 2], 3), 0, tf.ones([3, 2])), shape=tf.constant([2, 2]))[0],
    "ConcatV2, elements of different leading dims and too few leading_dims": lambda x: concat_v2(
        set_item(set_item(reserve([-1, 2], 3), 0, tf.ones([3, 2])), 1, x[:1]))[0],
    "Split with a negative length": lambda x: R.TensorListLength(input_handle=split(x, -1, [-1, 3])),
    "Split past the end": lambda x: R.TensorListLength(input_handle=split(x, -1, [1, 4])),
    "Split leaving rows": lambda x: R.TensorListLength(input_handle=split(x, -1, [1])),
    "Scatter with a negative index": lambda x: R.TensorListLength(input_handle=R.TensorListScatter(
        tensor=x, indices=[0, -1], element_shape=-1)),
    "Scatter with too few indices": lambda x: R.TensorListLength(input_handle=R.TensorListScatter(
        tensor=x, indices=[0], element_shape=-1)),
    "Scatter into an incompatible element shape": lambda x: R.TensorListLength(input_handle=R.TensorListScatter(
        tensor=x, indices=[0, 1], element_shape=tf.constant([3]))),
    "Scatter of a scalar": lambda x: R.TensorListLength(input_handle=R.TensorListScatter(
        tensor=x[0, 0], indices=[0, 1], element_shape=-1)),
    "ScatterV2 past num_elements": lambda x: R.TensorListLength(input_handle=R.TensorListScatterV2(
        tensor=x, indices=[0, 2], element_shape=-1, num_elements=2)),
    "ScatterV2 with num_elements below -1": lambda x: R.TensorListLength(input_handle=R.TensorListScatterV2(
        tensor=x, indices=[0, 1], element_shape=-1, num_elements=-2)),
    "ConcatLists of different element shapes": lambda x: R.TensorListLength(input_handle=R.TensorListConcatLists(
        input_a=R.TensorListFromTensor(tensor=x, element_shape=tf.constant([-1])),
        input_b=R.TensorListFromTensor(tensor=x, element_shape=tf.constant([2])), element_dtype=F)),
    "ConcatLists of a known and an unknown rank": lambda x: R.TensorListLength(input_handle=R.TensorListConcatLists(
        input_a=reserve([2], 1), input_b=from_rows(x), element_dtype=F)),
}


class Traced:
    """Cases run as traced functions (TensorLists), not eagerly."""

    def __init__(self, fam):
        self.fam = fam

    def add_function(self, *args, **kw):
        self.fam.add_function(*args, traced=True, **kw)


def family():
    fam = Family("tensor_list")
    fam_ds = fam
    fam = Traced(fam)
    rng = np.random.default_rng(7)
    x5 = tf.constant(rng.standard_normal(5), F)
    m = tf.constant(rng.standard_normal([4, 3]), F)
    fam.add_function("TensorArray in while_loop, scalars", accumulate, [x5])
    fam.add_function("TensorArray in while_loop, empty input", accumulate, [tf.zeros([0], F)])
    fam.add_function("TensorArray of running sums", running_sums, [m])
    fam.add_function("dynamic-size TensorArray in a for loop", dynamic,
                     [tf.constant([3, -1, 0, 7, 2], tf.int32)])
    fam.add_function("TensorArray of strings", strings, [tf.constant(["a", "bc", ""])])
    fam.add_function("unstack, read reversed", unstack_read, [m])
    fam.add_function("concat of ragged elements", ragged_concat, [tf.range(6.0)])
    fam.add_function("scatter and gather", gather_scatter, [tf.constant([[1.0, 2.0], [3.0, 4.0]])])
    fam.add_function("unset elements of a known shape read as zeros", partly_written,
                     [tf.constant([1.0, 2.0, 3.0])])
    fam.add_function("unset elements take the set one's shape", partly_written_unknown,
                     [tf.constant([1.0, 2.0])])
    fam.add_function("EmptyTensorList, PushBack, PopBack, Resize, ElementShape", raw_lists,
                     [tf.constant([1.0, 2.0, 3.0])])
    fam.add_function("ConcatV2 with leading_dims for unset elements", concat_leading,
                     [tf.constant([1.0, 2.0, 3.0, 4.0])])
    # Errors.
    fam.add_function("error: reading an unset element of unknown shape", unset_unknown,
                     [tf.constant(1.0)])
    fam.add_function("error: reading past the end", read_out_of_range, [x5])
    fam.add_function("error: setting an element of the wrong shape", set_wrong_shape,
                     [tf.constant([1.0, 2.0, 3.0])], unknown_shapes=True)
    fam.add_function("error: pushing into a full list", push_full, [tf.constant([1.0])])
    fam.add_function("error: popping an empty list", pop_empty, [tf.constant(1.0)])
    fam.add_function("error: stacking elements of different shapes", stack_ragged,
                     [tf.constant([1.0, 2.0, 3.0, 4.0])])
    fam.add_function("error: stacking an empty list of unknown shape", stack_empty_unknown,
                     [tf.constant(1.0)])
    fam.add_function("error: reserving a negative size", reserve_negative, [tf.constant(-1)])
    m2 = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    for name, f in MORE.items():
        fam.add_function(name, f, [m2])
    for name, f in MORE_ERRORS.items():
        fam.add_function("error: " + name, f, [m2], unknown_shapes=True)
    for name, f in BULK.items():
        fam.add_function(name, f, [m2])
    for name, f in BULK_ERRORS.items():
        fam.add_function("error: " + name, f, [m2], unknown_shapes=True)
    # Pipelines: TensorArrays in map functions.
    ds = tf.data.Dataset.range(1, 6).map(
        lambda n: accumulate(tf.range(tf.cast(n, F))))
    fam_ds.add_dataset("pipeline: map accumulating a TensorArray per element", ds)
    ds = (tf.data.Dataset.from_tensor_slices(tf.constant(rng.standard_normal([6, 4, 3]), F))
          .map(lambda x: running_sums(x)[0]).batch(4))
    fam_ds.add_dataset("pipeline: running sums per element, batched", ds)
    ds = tf.data.Dataset.from_tensor_slices(tf.constant([[1, -2, 3], [0, 0, 5], [-1, -1, -1]])).map(dynamic)
    fam_ds.add_dataset("pipeline: dynamic-size TensorArray", ds)
    return fam_ds
