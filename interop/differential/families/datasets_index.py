"""Dataset ops that read their input by index: the global shuffle
(`GlobalShuffleDataset`, a permutation of all the input's indices keyed by
the seeds) over the inputs TensorFlow can read by index (sources, map,
batch with drop_remainder, take, skip, shard, concatenate, zip, finite
repeat, prefetch, cache, another global shuffle), and the pipelines it
refuses."""

import numpy as np
import tensorflow as tf
from tensorflow.python.data.experimental.ops import global_shuffle_op

from harness import Family, set_input

D = tf.data.Dataset


def gs(ds, seed=42, reshuffle=False):
    return global_shuffle_op._global_shuffle(ds, seed=seed, reshuffle_each_iteration=reshuffle)


def global_shuffles(fam):
    r = D.range(20)
    fam.add_dataset("GlobalShuffleDataset/range", gs(r))
    fam.add_dataset("GlobalShuffleDataset/range seed 5", gs(r, seed=5))
    fam.add_dataset("GlobalShuffleDataset/negative seed", gs(r, seed=-(2**62)))
    fam.add_dataset("GlobalShuffleDataset/one element", gs(D.range(1)))
    fam.add_dataset("GlobalShuffleDataset/two elements", gs(D.range(2), seed=3))
    fam.add_dataset("GlobalShuffleDataset/range step", gs(D.range(-30, 30, 7)))
    fam.add_dataset("GlobalShuffleDataset/int32 range", gs(D.range(9, output_type=tf.int32)))
    # Past 2^16 elements the permutation works on wider blocks.
    fam.add_dataset("GlobalShuffleDataset/70000 elements, first 40",
                    gs(D.range(70000), seed=11).take(40))
    fam.add_dataset("GlobalShuffleDataset/reshuffles", gs(r, reshuffle=True), iterators=1)
    fam.add_dataset("GlobalShuffleDataset/reshuffles each epoch",
                    gs(D.range(6), seed=7, reshuffle=True).repeat(4), iterators=1)
    fam.add_dataset("GlobalShuffleDataset/fixed each epoch",
                    gs(D.range(6), seed=7).repeat(3))
    fam.add_dataset("GlobalShuffleDataset/map", gs(r.map(lambda x: x * x - 3)))
    fam.add_dataset("GlobalShuffleDataset/parallel map",
                    gs(r.map(lambda x: (x, tf.strings.as_string(x)), num_parallel_calls=2)))
    fam.add_dataset("GlobalShuffleDataset/batch drop remainder",
                    gs(r.batch(3, drop_remainder=True), seed=9))
    fam.add_dataset("GlobalShuffleDataset/take", gs(r.take(13)))
    fam.add_dataset("GlobalShuffleDataset/skip", gs(r.skip(4)))
    fam.add_dataset("GlobalShuffleDataset/shard", gs(r.shard(3, 1)))
    fam.add_dataset("GlobalShuffleDataset/concatenate",
                    gs(r.concatenate(D.range(100, 105))))
    fam.add_dataset("GlobalShuffleDataset/zip", gs(D.zip(r, r.map(lambda x: -x))))
    fam.add_dataset("GlobalShuffleDataset/repeat", gs(D.range(5).repeat(3), seed=1))
    fam.add_dataset("GlobalShuffleDataset/prefetch cache", gs(r.cache().prefetch(2)))
    fam.add_dataset("GlobalShuffleDataset/floats",
                    gs(D.from_tensor_slices(np.array(
                        [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, 3.5, -2.25],
                        np.float32))))
    fam.add_dataset("GlobalShuffleDataset/strings",
                    gs(D.from_tensor_slices(["", "a", "héllo", "🙂" * 20, "x" * 300, "\0b"])))
    fam.add_dataset("GlobalShuffleDataset/tensor", gs(D.from_tensors([1, 2, 3])))
    fam.add_dataset("GlobalShuffleDataset/of a global shuffle", gs(gs(r), seed=6))
    fam.add_dataset("GlobalShuffleDataset/then batch", gs(r).batch(6))
    fam.add_dataset("GlobalShuffleDataset/then map",
                    gs(r).map(lambda x: tf.cast(x, tf.float32) / 3))


def refusals(fam):
    def batch_keeps_remainder(graph):
        set_input(graph, "BatchDatasetV2", 2, False)
    fam.add_dataset_error("GlobalShuffleDataset/batch keeping remainder",
                          gs(D.range(10).batch(3, drop_remainder=True)), batch_keeps_remainder)

    def repeat_forever(graph):
        set_input(graph, "RepeatDataset", 1, -1)
    fam.add_dataset_error("GlobalShuffleDataset/repeat forever",
                          gs(D.range(4).repeat(2)), repeat_forever)

    def batch_of_repeat_forever(graph):
        set_input(graph, "RepeatDataset", 1, -1)
        set_input(graph, "BatchDatasetV2", 2, False)
    # The refusal nearest the global shuffle is the one reported.
    fam.add_dataset_error("GlobalShuffleDataset/first refusal wins",
                          gs(D.range(4).repeat(2).batch(2, drop_remainder=True)),
                          batch_of_repeat_forever)


def family():
    fam = Family("datasets_index")
    global_shuffles(fam)
    refusals(fam)
    return fam
