"""The sources PyTorch and JAX teams' data is in (issue 32), read from files
that the real libraries wrote: pyarrow's Parquet writer here; each test
compares tfdata's rows with what that library reads back. Locally in order,
and through the service exactly once in distributed_epoch, also after a
worker process is SIGKILLed mid-file and after a reader restores a
checkpoint. Damaged files raise errors naming the file."""

from __future__ import annotations

import collections
import datetime
import signal

import numpy as np
import pytest

import tfdata
from tfdata import errors
from tfdata.experimental import service

from conftest import TfdataPythonProcess, wait_for

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _py(value):
    """A tfdata value as plain Python, to compare with pyarrow's rows."""
    if isinstance(value, np.ndarray):
        return [_py(v) for v in value.tolist()] if value.dtype == object else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _rows(ds):
    return [{k: _py(v) for k, v in e.items()} for e in ds]


@pytest.fixture
def users_table():
    """A table as users have them: ids, floats, text as a dictionary
    column, binary, booleans, timestamps, a fixed-size list, a list of
    varying length and a column with nulls; written in several row groups."""
    n = 1000
    ids = np.arange(n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "score": pa.array(ids / 4.0, pa.float32()),
            "label": pa.array([f"class-{i % 7}" for i in range(n)]).dictionary_encode(),
            "blob": pa.array([bytes([i % 256, 0, 255]) for i in range(n)], pa.binary()),
            "keep": pa.array([i % 3 == 0 for i in range(n)]),
            "at": pa.array([datetime.datetime(2026, 1, 1) + datetime.timedelta(seconds=int(i)) for i in ids],
                           pa.timestamp("ms")),
            "xy": pa.array([[float(i), float(-i)] for i in range(n)], pa.list_(pa.float64(), 2)),
            "tokens": pa.array([list(range(i % 5)) for i in range(n)], pa.list_(pa.int32())),
            "maybe": pa.array([None if i % 10 == 0 else i for i in range(n)], pa.int64()),
        }
    )


@pytest.fixture
def parquet_file(tmp_path, users_table):
    path = tmp_path / "users.parquet"
    pq.write_table(users_table, path, row_group_size=128)
    assert pq.ParquetFile(path).metadata.num_row_groups == 8
    return path


def test_parquet_rows_are_what_pyarrow_reads(parquet_file):
    ds = tfdata.ParquetDataset(parquet_file, null_values={"maybe": -1})
    got = _rows(ds)
    # pyarrow's own reading of the file, row by row; strings arrive as
    # bytes (TensorFlow's strings), timestamps as int64 in the column's unit.
    table = pq.read_table(parquet_file)
    want = table.to_pylist()
    at = table.column("at").cast(pa.int64()).to_pylist()
    for r, t in zip(want, at):
        r["label"] = r["label"].encode()
        r["at"] = t
        r["maybe"] = -1 if r["maybe"] is None else r["maybe"]
    assert len(got) == 1000
    assert got == want
    spec = ds.element_spec
    assert spec["xy"].shape == (2,) and spec["tokens"].shape == (None,)
    assert spec["id"].shape == ()


def test_parquet_batches_come_from_whole_columns_and_match_the_rows(parquet_file):
    rows = _rows(tfdata.ParquetDataset(parquet_file, columns=["id", "tokens", "label"], padding_values={"tokens": -7}))
    batches = list(tfdata.ParquetDataset(parquet_file, columns=["id", "tokens", "label"], batch_size=50,
                                         padding_values={"tokens": -7}))
    assert all(len(b["id"]) <= 50 for b in batches)
    # A batch never spans row groups (128 rows each): 50, 50, 28, ...
    assert [len(b["id"]) for b in batches[:4]] == [50, 50, 28, 50]
    flat = []
    for b in batches:
        for i in range(len(b["id"])):
            tokens = [t for t in b["tokens"][i].tolist() if t != -7]
            flat.append({"id": int(b["id"][i]), "tokens": tokens, "label": b["label"][i]})
    assert flat == [{"id": r["id"], "tokens": r["tokens"], "label": r["label"]} for r in rows]
    assert set(batches[0]) == {"id", "tokens", "label"}  # projection


def test_parquet_filters_prune_row_groups_and_match_pyarrows(parquet_file):
    for f in [
        ("id", ">=", 900),
        [("id", ">=", 100), ("id", "<", 130), ("keep", "==", True)],
        [[("id", "<", 5)], [("label", "==", "class-3"), ("id", ">", 990)]],
        ("id", "in", [3, 500, 999, 5000]),
    ]:
        got = [r["id"] for r in _rows(tfdata.ParquetDataset(parquet_file, columns=["id"], filter=f))]
        # pyarrow takes a single predicate only inside a list.
        pyarrow_filters = [f] if isinstance(f, tuple) else f
        want = pq.read_table(parquet_file, columns=["id"], filters=pyarrow_filters).column("id").to_pylist()
        assert got == want, f
    with pytest.raises(errors.InvalidArgumentError, match="nope"):
        list(tfdata.ParquetDataset(parquet_file, filter=("nope", "==", 1)))


def test_parquet_null_and_ragged_columns_without_declared_values_raise_naming_the_column(parquet_file):
    with pytest.raises(errors.InvalidArgumentError, match="column maybe has nulls"):
        list(tfdata.ParquetDataset(parquet_file, columns=["maybe"]))
    with pytest.raises(errors.InvalidArgumentError, match="column tokens"):
        list(tfdata.ParquetDataset(parquet_file, columns=["tokens"], batch_size=8))


def test_as_arrow_iterator_gives_pyarrow_the_same_columns(parquet_file):
    ds = tfdata.ParquetDataset(parquet_file, columns=["id", "score", "label", "xy"], batch_size=100)
    batches = list(ds.as_arrow_iterator(strings="utf8"))
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    got = pa.Table.from_batches(batches)
    want = pq.read_table(parquet_file, columns=["id", "score", "label", "xy"])
    assert got.column("id").to_pylist() == want.column("id").to_pylist()
    assert got.column("score").to_pylist() == want.column("score").to_pylist()
    assert got.column("label").to_pylist() == want.column("label").cast(pa.string()).to_pylist()
    assert got.column("xy").to_pylist() == want.column("xy").to_pylist()
    assert got.schema.field("label").type == pa.string()
    binary = next(iter(ds.as_arrow_iterator()))
    assert binary.schema.field("label").type == pa.binary()
    # pandas takes them as they are.
    pd = pytest.importorskip("pandas")
    assert isinstance(batches[0].to_pandas(), pd.DataFrame)
    with pytest.raises(errors.InvalidArgumentError, match="batch_size"):
        next(iter(tfdata.ParquetDataset(parquet_file, columns=["id"]).as_arrow_iterator()))


def test_damaged_parquet_files_raise_errors_naming_the_file(tmp_path, parquet_file):
    data = parquet_file.read_bytes()
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(data[: len(data) - 20])
    bad_magic = tmp_path / "bad-magic.parquet"
    bad_magic.write_bytes(data[:-4] + b"XXXX")
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    for bad in (truncated, bad_magic, empty):
        with pytest.raises(errors.OpError) as e:
            list(tfdata.ParquetDataset(bad))
        assert str(bad) in str(e.value), e.value
    other = tmp_path / "other-schema.parquet"
    pq.write_table(pa.table({"id": pa.array(["a", "b"])}), other)
    with pytest.raises(errors.InvalidArgumentError, match="other-schema.parquet") as e:
        list(tfdata.ParquetDataset([parquet_file, other], columns=["id"]))
    assert "same schema" in str(e.value)
    with pytest.raises(errors.OpError, match="missing.parquet"):
        list(tfdata.ParquetDataset(tmp_path / "missing.parquet"))
    with pytest.raises(ValueError, match="batch_size"):
        tfdata.ParquetDataset(parquet_file, batch_size=0)


# ---- Through the service ----


@pytest.fixture
def many_row_groups(tmp_path):
    """3 files of 20 row groups of 250 rows: values 0..15000."""
    paths = []
    for f in range(3):
        values = np.arange(f * 5000, (f + 1) * 5000, dtype=np.int64)
        path = tmp_path / f"part-{f}.parquet"
        pq.write_table(pa.table({"v": values, "text": [str(v) for v in values]}), path, row_group_size=250)
        paths.append(str(path))
    return paths


def _values(ds):
    out = []
    for e in ds:
        v = e["v"]
        out.extend(np.atleast_1d(v).tolist())
    return out


def test_distributed_epoch_reads_each_row_once_one_split_per_row_group(dispatcher, many_row_groups):
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher._address)) for _ in range(2)]
    try:
        for batch_size in (None, 64):
            ds = tfdata.ParquetDataset(many_row_groups, columns=["v"], batch_size=batch_size).apply(
                service.distribute("distributed_epoch", dispatcher.target)
            )
            assert collections.Counter(_values(ds)) == {v: 1 for v in range(15000)}
    finally:
        for w in workers:
            w.stop()


def test_a_worker_killed_mid_row_group_loses_and_repeats_nothing(dispatcher, many_row_groups):
    # Worker processes; one is SIGKILLed while it is in the middle of row
    # groups (one element per row: positions inside a row group matter).
    # TensorFlow's default timeouts: the dead worker is noticed by its
    # refused port, not by the 10-minute worker_timeout.
    workers = [
        TfdataPythonProcess("worker", "--dispatcher-address", dispatcher._address) for _ in range(2)
    ]
    try:
        wait_for(lambda: dispatcher._num_workers() >= 2, what="two workers")
        ds = tfdata.ParquetDataset(many_row_groups, columns=["v"]).apply(
            service.distribute("distributed_epoch", dispatcher.target)
        )
        seen = []
        it = iter(ds)
        for e in it:
            seen.append(int(e["v"]))
            if len(seen) == 4000:
                workers[0].stop(signal.SIGKILL)
        assert len(seen) > 4000
        counts = collections.Counter(seen)
        assert [v for v in range(15000) if counts[v] == 0] == []
        assert {v: c for v, c in counts.items() if c > 1} == {}
    finally:
        for w in workers:
            w.stop(signal.SIGKILL)


def test_a_reader_restored_from_a_checkpoint_mid_row_group_reads_the_rest_once(dispatcher, many_row_groups):
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher._address)) for _ in range(2)]
    try:
        ds = tfdata.ParquetDataset(many_row_groups, columns=["v"], batch_size=32).apply(
            service.distribute("distributed_epoch", dispatcher.target)
        )
        consumed, state = [], None
        for n in (37, 101, 55):
            it = iter(ds)
            if state is not None:
                it.restore(state)
            for _ in range(n):
                consumed.extend(next(it)["v"].tolist())
            state = it.checkpoint()
            next(it)  # read after the checkpoint: lost with the trainer, comes again
        it = iter(ds)
        it.restore(state)
        for b in it:
            consumed.extend(b["v"].tolist())
        assert collections.Counter(consumed) == {v: 1 for v in range(15000)}
    finally:
        for w in workers:
            w.stop()


def test_distributed_datasets_give_arrow_batches_too(cluster, many_row_groups):
    ds = tfdata.ParquetDataset(many_row_groups[:1], columns=["v", "text"], batch_size=500).apply(
        service.distribute("parallel_epochs", cluster.target)
    )
    table = pa.Table.from_batches(list(ds.as_arrow_iterator(strings="utf8")))
    assert table.num_rows == 5000
    assert sorted(table.column("v").to_pylist()) == list(range(5000))
    assert table.schema.field("text").type == pa.string()


# ---- WebDataset: shards written by webdataset's TarWriter ----


@pytest.fixture
def shards(tmp_path):
    """4 shards of 50 samples written by webdataset.TarWriter: a JPEG-like
    payload, a class, a caption and a JSON document per sample."""
    wds = pytest.importorskip("webdataset")
    for s in range(4):
        with wds.TarWriter(str(tmp_path / f"shard-{s:06d}.tar")) as w:
            for i in range(50):
                n = s * 50 + i
                w.write({
                    "__key__": f"sample{n:06d}",
                    "jpg": bytes([0xFF, 0xD8]) + n.to_bytes(4, "little"),
                    "cls": n % 10,
                    "txt": f"caption {n}",
                    "json": {"n": n},
                })
    return str(tmp_path / "shard-{000000..000003}.tar")


def test_webdataset_samples_are_what_webdataset_reads(shards):
    wds = pytest.importorskip("webdataset")
    theirs = list(wds.WebDataset(shards, shardshuffle=False))
    ours = list(tfdata.WebDataset(shards))
    assert len(ours) == len(theirs) == 200
    for a, b in zip(ours, theirs):
        assert a["__key__"] == b["__key__"].encode()
        assert a["__url__"] == b["__url__"].encode()
        assert a["jpg"] == b["jpg"]
        assert a["txt"] == b["txt"]
        assert a["json"] == b["json"]
        # cls is webdataset's int decoder's field: int64 here.
        assert int(a["cls"]) == int(b["cls"])
        assert a["cls"].dtype == np.int64
    only = list(tfdata.WebDataset(shards, fields=["jpg", "cls"]))
    assert set(only[0]) == {"jpg", "cls", "__key__", "__url__"}


def test_damaged_shards_name_the_shard_and_offset_or_are_skipped(tmp_path, shards):
    first = tmp_path / "shard-000000.tar"
    data = first.read_bytes()
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[: len(data) // 2 + 100])  # mid-member
    with pytest.raises(errors.DataLossError) as e:
        list(tfdata.WebDataset(str(cut)))
    assert "cut.tar" in str(e.value) and "offset" in str(e.value), e.value
    # Skipping: what came before the damage is kept.
    kept = list(tfdata.WebDataset(str(cut), on_error="skip"))
    assert 0 < len(kept) < 50
    assert [int(k["cls"]) for k in kept] == [n % 10 for n in range(len(kept))]
    with pytest.raises(errors.InvalidArgumentError, match="nope"):
        list(tfdata.WebDataset(shards, fields=["jpg", "nope"]))
    with pytest.raises(ValueError, match="on_error"):
        tfdata.WebDataset(shards, on_error="ignore")


def test_webdataset_in_distributed_epoch_exactly_once_with_a_worker_killed_mid_shard(dispatcher, shards):
    workers = [TfdataPythonProcess("worker", "--dispatcher-address", dispatcher._address) for _ in range(2)]
    try:
        wait_for(lambda: dispatcher._num_workers() >= 2, what="two workers")
        ds = tfdata.WebDataset(shards, fields=["cls"]).apply(
            service.distribute("distributed_epoch", dispatcher.target)
        )
        keys = []
        for e in ds:
            keys.append(e["__key__"])
            if len(keys) == 60:
                workers[0].stop(signal.SIGKILL)
        assert collections.Counter(keys) == {f"sample{n:06d}".encode(): 1 for n in range(200)}
    finally:
        for w in workers:
            w.stop(signal.SIGKILL)


def test_webdataset_restored_from_a_checkpoint_mid_shard(dispatcher, shards):
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher._address)) for _ in range(2)]
    try:
        ds = tfdata.WebDataset(shards, fields=["cls"]).batch(3).apply(
            service.distribute("distributed_epoch", dispatcher.target)
        )
        consumed, state = [], None
        for n in (7, 20, 11):
            it = iter(ds)
            if state is not None:
                it.restore(state)
            for _ in range(n):
                consumed.extend(next(it)["__key__"].tolist())
            state = it.checkpoint()
            next(it)
        it = iter(ds)
        it.restore(state)
        for b in it:
            consumed.extend(b["__key__"].tolist())
        assert collections.Counter(consumed) == {f"sample{n:06d}".encode(): 1 for n in range(200)}
    finally:
        for w in workers:
            w.stop()


# ---- ArrayRecord: files written by Google's array_record writer ----


def test_array_record_files_read_as_the_array_record_reader_reads_them():
    import json
    from conftest import REPO

    fixtures = REPO / "crates" / "tfdata-dataset" / "testdata" / "array_record"
    expected = json.loads((fixtures / "expected.json").read_text())
    for name in ("default", "group_size_10", "snappy", "uncompressed", "brotli"):
        got = [bytes(r) for r in tfdata.ArrayRecordDataset(fixtures / f"{name}.array_record")]
        assert got == [bytes.fromhex(r) for r in expected[name]["records"]], name
    with pytest.raises(errors.UnimplementedError, match="transposed"):
        list(tfdata.ArrayRecordDataset(fixtures / "transposed.array_record"))


# ---- Arrow IPC files (pyarrow) and Hugging Face datasets (datasets) ----


def test_arrow_files_and_streams_written_by_pyarrow(tmp_path, users_table):
    table = users_table.select(["id", "score", "label", "xy", "tokens"])
    stream = tmp_path / "t.arrows"
    with pa.ipc.new_stream(stream, table.schema) as w:
        for batch in table.to_batches(max_chunksize=300):
            w.write_batch(batch)
    file = tmp_path / "t.arrow"
    with pa.ipc.new_file(file, table.schema) as w:
        for batch in table.to_batches(max_chunksize=300):
            w.write_batch(batch)
    feather = tmp_path / "t.feather"
    import pyarrow.feather

    pyarrow.feather.write_feather(table, feather)  # LZ4-compressed by default
    want = table.to_pylist()
    for r in want:
        r["label"] = r["label"].encode()
    for path in (stream, file, feather):
        assert _rows(tfdata.ArrowDataset(path)) == want, path
    batches = list(tfdata.ArrowDataset(file, columns=["id"], batch_size=128))
    assert np.concatenate([b["id"] for b in batches]).tolist() == list(range(1000))
    bad = tmp_path / "bad.arrow"
    bad.write_bytes(file.read_bytes()[:-300])
    with pytest.raises(errors.OpError, match="bad.arrow"):
        list(tfdata.ArrowDataset(bad))


@pytest.fixture
def jpeg_bytes():
    from conftest import REPO

    fixtures = REPO / "crates" / "tfdata-dataset" / "tests" / "fixtures" / "kernels"
    return [(fixtures / name).read_bytes() for name in ("jpeg_rgb420.jpg", "jpeg_noise.jpg", "jpeg_odd.jpg")]


def _hf_dataset(jpeg_bytes, n):
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({
        "image": datasets.Image(),
        "label": datasets.ClassLabel(names=["cat", "dog", "bird"]),
        "caption": datasets.Value("string"),
        "scores": datasets.Sequence(datasets.Value("float32"), length=2),
    })
    return datasets.Dataset.from_dict(
        {
            "image": [{"bytes": jpeg_bytes[i % 3], "path": None} for i in range(n)],
            "label": [i % 3 for i in range(n)],
            "caption": [f"picture {i}" for i in range(n)],
            "scores": [[i / 2, -i / 2] for i in range(n)],
        },
        features=features,
    )


def test_a_save_to_disk_folder_reads_as_datasets_reads_it(tmp_path, jpeg_bytes):
    datasets = pytest.importorskip("datasets")
    _hf_dataset(jpeg_bytes, 40).save_to_disk(tmp_path / "saved", num_shards=2)
    theirs = datasets.load_from_disk(str(tmp_path / "saved")).cast_column("image", datasets.Image(decode=False))
    ours = list(tfdata.HuggingFaceDataset(tmp_path / "saved"))
    assert len(ours) == len(theirs) == 40
    for a, b in zip(ours, theirs):
        assert a["image"] == b["image"]["bytes"]  # Image: the encoded bytes
        assert a["label"] == b["label"] and a["label"].dtype == np.int64  # ClassLabel: int64
        assert a["caption"] == b["caption"].encode()
        assert a["scores"].tolist() == pytest.approx(b["scores"])
    # The image bytes are what decode_jpeg takes.
    decoded = tfdata.HuggingFaceDataset(tmp_path / "saved", columns=["image"]).map(
        tfdata.functions.decode_jpeg(channels=3, component="image")
    )
    first = next(iter(decoded))["image"]
    assert first.dtype == np.uint8 and first.ndim == 3 and first.shape[2] == 3


def test_dataset_dicts_and_hub_snapshots_by_split(tmp_path, jpeg_bytes):
    datasets = pytest.importorskip("datasets")
    full = _hf_dataset(jpeg_bytes, 30)
    dd = datasets.DatasetDict({"train": full.select(range(20)), "test": full.select(range(20, 30))})
    dd.save_to_disk(tmp_path / "dict")
    assert len(list(tfdata.HuggingFaceDataset(tmp_path / "dict", split="test"))) == 10
    with pytest.raises(errors.OpError, match="train") as e:
        list(tfdata.HuggingFaceDataset(tmp_path / "dict"))
    assert "test" in str(e.value)
    # A Hub snapshot's Parquet layout.
    (tmp_path / "hub" / "data").mkdir(parents=True)
    dd["train"].to_parquet(str(tmp_path / "hub" / "data" / "train-00000-of-00001.parquet"))
    rows = list(tfdata.HuggingFaceDataset(tmp_path / "hub", split="train", columns=["label", "image"]))
    assert [int(r["label"]) for r in rows] == [i % 3 for i in range(20)]
    assert rows[4]["image"] == jpeg_bytes[1]
    with pytest.raises(errors.OpError, match="save_to_disk"):
        list(tfdata.HuggingFaceDataset(tmp_path / "nothing-here"))


def test_a_hugging_face_dataset_exactly_once_with_a_worker_killed(dispatcher, tmp_path, jpeg_bytes):
    _hf_dataset(jpeg_bytes, 6000).save_to_disk(tmp_path / "big", num_shards=3)
    workers = [TfdataPythonProcess("worker", "--dispatcher-address", dispatcher._address) for _ in range(2)]
    try:
        wait_for(lambda: dispatcher._num_workers() >= 2, what="two workers")
        ds = tfdata.HuggingFaceDataset(tmp_path / "big", columns=["caption"]).apply(
            service.distribute("distributed_epoch", dispatcher.target)
        )
        seen = []
        for e in ds:
            seen.append(e["caption"])
            if len(seen) == 1500:
                workers[0].stop(signal.SIGKILL)
        assert collections.Counter(seen) == {f"picture {i}".encode(): 1 for i in range(6000)}
    finally:
        for w in workers:
            w.stop(signal.SIGKILL)
