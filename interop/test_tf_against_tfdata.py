"""Real TensorFlow 2.21 workers and clients against our `tfdata dispatcher`."""

import collections

import tensorflow as tf

service = tf.data.experimental.service


def tf_workers(port, n):
    return [service.WorkerServer(service.WorkerConfig(dispatcher_address=f"localhost:{port}")) for _ in range(n)]


def read(port, dataset, **kwargs):
    ds = dataset.apply(
        service.distribute(processing_mode="parallel_epochs", service=f"grpc://localhost:{port}", **kwargs)
    )
    return [int(x) for x in ds.as_numpy_iterator()]


def test_protocol_version_is_nine():
    assert tf.__version__ == "2.21.0", tf.__version__


def test_one_tf_worker_reads_range_in_order(tfdata_dispatcher):
    d = tfdata_dispatcher()
    workers = tf_workers(d.port, 1)
    assert read(d.port, tf.data.Dataset.range(10)) == list(range(10))
    for w in workers:
        w.stop()


def test_two_tf_workers_yield_every_element_twice(tfdata_dispatcher):
    d = tfdata_dispatcher()
    workers = tf_workers(d.port, 2)
    values = read(d.port, tf.data.Dataset.range(10))
    assert sorted(values) == sorted(list(range(10)) * 2)
    for w in workers:
        w.stop()


def test_uncompressed_elements_and_a_second_epoch(tfdata_dispatcher):
    d = tfdata_dispatcher()
    workers = tf_workers(d.port, 1)
    ds = tf.data.Dataset.range(6).map(lambda x: (x * 2, tf.strings.as_string(x))).apply(
        service.distribute(processing_mode="parallel_epochs", service=f"grpc://localhost:{d.port}", compression=None)
    )
    for _ in range(2):  # each iteration is a new repetition of the job
        got = [(int(a), b.decode()) for a, b in ds.as_numpy_iterator()]
        assert got == [(2 * i, str(i)) for i in range(6)]
    for w in workers:
        w.stop()


def test_tf_workers_read_datasets_from_our_work_dir(tfdata_dispatcher, work_dir):
    # With a work_dir, tasks carry a path to <work_dir>/datasets/<id>, a
    # TFRecord file we wrote; TensorFlow's workers read it directly.
    d = tfdata_dispatcher("--work-dir", work_dir)
    workers = tf_workers(d.port, 1)
    assert read(d.port, tf.data.Dataset.range(5)) == list(range(5))
    for w in workers:
        w.stop()


def test_register_dataset_and_from_dataset_id(tfdata_dispatcher):
    d = tfdata_dispatcher()
    workers = tf_workers(d.port, 1)
    target = f"grpc://localhost:{d.port}"
    dataset_id = service.register_dataset(target, tf.data.Dataset.range(4))
    ds = service.from_dataset_id(
        processing_mode="parallel_epochs", service=target, dataset_id=dataset_id,
        element_spec=tf.TensorSpec(shape=(), dtype=tf.int64))
    assert [int(x) for x in ds.as_numpy_iterator()] == [0, 1, 2, 3]
    for w in workers:
        w.stop()


def test_shared_job_name_between_two_tf_readers(tfdata_dispatcher):
    d = tfdata_dispatcher()
    workers = tf_workers(d.port, 1)
    make = lambda: tf.data.Dataset.range(20).apply(service.distribute(
        processing_mode="parallel_epochs", service=f"grpc://localhost:{d.port}", job_name="shared"))
    a, b = iter(make()), iter(make())
    values = []
    exhausted = set()
    while len(exhausted) < 2:
        for name, it in (("a", a), ("b", b)):
            if name in exhausted:
                continue
            try:
                values.append(int(next(it)))
            except StopIteration:
                exhausted.add(name)
    assert collections.Counter(values) == collections.Counter(range(20))
    for w in workers:
        w.stop()


def test_coordinated_reads_of_tf_consumers(tfdata_dispatcher):
    import threading

    d = tfdata_dispatcher()
    workers = tf_workers(d.port, 2)
    results = {}

    def consume(index):
        ds = tf.data.Dataset.range(1000000).repeat().apply(service.distribute(
            processing_mode="parallel_epochs", service=f"grpc://localhost:{d.port}",
            job_name="coordinated", consumer_index=index, num_consumers=2))
        it = iter(ds)
        results[index] = [int(next(it)) for _ in range(40)]

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(results[0]) == 40 and len(results[1]) == 40
    # Step k of both consumers comes from the same worker's round.
    assert all(b == a + 1 for a, b in zip(results[0], results[1])), results
    for w in workers:
        w.stop()


def test_distributed_epoch_over_tensorflow_graphs(tfdata_dispatcher, tmp_path):
    d = tfdata_dispatcher()
    workers = tf_workers(d.port, 2)
    target = f"grpc://localhost:{d.port}"

    def read_dynamic(ds):
        ds = ds.apply(service.distribute(processing_mode="distributed_epoch", service=target))
        return sorted(x.tolist() if hasattr(x, "tolist") else x for x in ds.as_numpy_iterator())

    # RangeDataset: the splits are the range's values.
    assert read_dynamic(tf.data.Dataset.range(5, 45, 2).map(lambda x: x * 10)) == [x * 10 for x in range(5, 45, 2)]
    # TensorSliceDataset: slice indices.
    assert read_dynamic(tf.data.Dataset.from_tensor_slices([7, 8, 9, 10])) == [7, 8, 9, 10]
    # TFRecordDataset over file names, and list_files.
    for i in range(3):
        with tf.io.TFRecordWriter(str(tmp_path / f"f{i}.tfrecord")) as w:
            for j in range(4):
                w.write(f"{i}-{j}".encode())
    files = [str(tmp_path / f"f{i}.tfrecord") for i in range(3)]
    expected = sorted(f"{i}-{j}".encode() for i in range(3) for j in range(4))
    assert read_dynamic(tf.data.TFRecordDataset(files)) == expected
    assert read_dynamic(tf.data.Dataset.list_files(str(tmp_path / "*.tfrecord"), shuffle=False)
                        .interleave(tf.data.TFRecordDataset)) == expected
    for w in workers:
        w.stop()


def test_from_tensors_repeated_is_split_once_per_repetition(tfdata_dispatcher):
    """TensorDataset is one split, as in TensorFlow's own dispatcher:
    `from_tensors(x).repeat(3)` gives x three times in distributed_epoch."""
    d = tfdata_dispatcher()
    workers = tf_workers(d.port, 2)
    ds = tf.data.Dataset.from_tensors(7).repeat(3).apply(
        service.distribute(processing_mode="distributed_epoch", service=f"grpc://localhost:{d.port}"))
    assert [x.item() for x in ds.as_numpy_iterator()] == [7, 7, 7]
    for w in workers:
        w.stop()


def test_unsplittable_tensorflow_sources_are_refused_naming_the_op(tfdata_dispatcher, tmp_path):
    """A source TensorFlow's own dispatcher cannot split either ("Cannot create split
    providers for dataset of type CSVDatasetV2")."""
    import pytest

    d = tfdata_dispatcher()
    workers = tf_workers(d.port, 1)
    path = tmp_path / "x.csv"
    path.write_text("1,2\n3,4\n")
    ds = tf.data.experimental.CsvDataset(str(path), [tf.int64, tf.int64]).apply(
        service.distribute(processing_mode="distributed_epoch", service=f"grpc://localhost:{d.port}"))
    with pytest.raises(tf.errors.OpError, match="CSVDatasetV2"):
        list(ds.as_numpy_iterator())
    for w in workers:
        w.stop()


def test_static_sharding_of_tf_workers_listed_in_worker_addresses(tfdata_dispatcher):
    import socket

    def free_port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    ports = [free_port(), free_port()]
    d = tfdata_dispatcher("--worker-addresses", ",".join(f"localhost:{p}" for p in ports))
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=f"localhost:{d.port}", port=p))
               for p in ports]
    ds = tf.data.Dataset.range(20).apply(service.distribute(
        processing_mode=service.ShardingPolicy.DATA, service=f"grpc://localhost:{d.port}"))
    assert sorted(int(x) for x in ds.as_numpy_iterator()) == list(range(20))
    for w in workers:
        w.stop()
