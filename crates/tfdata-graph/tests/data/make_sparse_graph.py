"""Writes sparse_elements.graph.pb: a pipeline whose elements are batches of
SparseTensors (VarLenFeature), as tf.data serializes it, for
tests/sparse_elements.rs. Run from the repository root with TensorFlow 2.21."""
import tensorflow as tf
from tensorflow.core.framework import graph_pb2
def ex(i):
    f = {"tok": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i))))}
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()
ds = tf.data.Dataset.from_tensor_slices([ex(i) for i in range(3)]).map(
    lambda s: tf.io.parse_single_example(s, {"tok": tf.io.VarLenFeature(tf.int64)})["tok"]).batch(2)
g = graph_pb2.GraphDef.FromString(ds._as_serialized_graph().numpy())
open("crates/tfdata-graph/tests/data/sparse_elements.graph.pb", "wb").write(g.SerializeToString(deterministic=True))
