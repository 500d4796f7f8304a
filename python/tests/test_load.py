"""``tfdata.Dataset.load`` on distributed snapshots that TensorFlow 2.21's
``distributed_save`` wrote (``crates/tfdata-dataset/tests/fixtures/snapshots``,
made by the ``generate.py`` there), and against TensorFlow's own ``load``
when ``TFDATA_TF_PYTHON`` names an interpreter with TensorFlow."""

from __future__ import annotations

import shutil

import pytest

import tfdata
from tfdata import errors
from conftest import REPO
from test_tensorflow import run_tf

FIXTURES = REPO / "crates" / "tfdata-dataset" / "tests" / "fixtures" / "snapshots"


def expected(name):
    """What TensorFlow's load read from a fixture (its ``expected.txt``)."""
    out = []
    for line in (FIXTURES / name / "expected.txt").read_text().splitlines():
        x, s, f = line.split(" ")
        out.append((int(x), bytes.fromhex(s), [float(v) for v in f.split(",")]))
    return sorted(out)


def as_values(ds):
    return sorted((int(x), bytes(s), f.tolist()) for x, s, f in ds.as_numpy_iterator())


@pytest.mark.parametrize("name", ["none", "gzip", "zlib", "snappy"])
def test_reads_tensorflow_snapshots(name):
    ds = tfdata.Dataset.load(str(FIXTURES / name))
    assert ds.element_spec == (
        tfdata.TensorSpec((), "int64"),
        tfdata.TensorSpec((), "string"),
        tfdata.TensorSpec((2,), "float32"),
    )
    assert ds.cardinality() == 40
    assert as_values(ds) == expected(name)
    # Given the spec and compression it has: the same.
    same = tfdata.Dataset.load(FIXTURES / name, element_spec=ds.element_spec,
                               compression={"none": "", "gzip": "GZIP", "zlib": "ZLIB", "snappy": "SNAPPY"}[name])
    assert as_values(same) == expected(name)


def test_load_refuses_what_it_cannot_read(tmp_path):
    with pytest.raises(errors.NotFoundError, match="snapshot"):
        tfdata.Dataset.load(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="The save job failed to write it.*INVALID_ARGUMENT"):
        tfdata.Dataset.load(str(FIXTURES / "error"))
    with pytest.raises(ValueError, match="compression"):
        tfdata.Dataset.load(str(FIXTURES / "snappy"), compression="GZIP")
    with pytest.raises(ValueError, match="element_spec"):
        tfdata.Dataset.load(str(FIXTURES / "snappy"), element_spec=tfdata.TensorSpec((), "int64"))
    with pytest.raises(NotImplementedError, match="reader_func"):
        tfdata.Dataset.load(str(FIXTURES / "snappy"), reader_func=lambda d: d)
    # A damaged chunk is data loss naming the chunk.
    copy = tmp_path / "damaged"
    shutil.copytree(FIXTURES / "gzip", copy)
    chunk = copy / "chunks" / "chunk_0_1_20"
    chunk.write_bytes(chunk.read_bytes()[:-9])
    with pytest.raises(errors.DataLossError, match="chunk_0_1_20"):
        list(tfdata.Dataset.load(str(copy)).as_numpy_iterator())


def test_load_waits_for_a_snapshot_to_appear(tmp_path):
    import threading

    path = tmp_path / "later"
    result = {}

    def load():
        result["values"] = as_values(tfdata.Dataset.load(str(path), wait=True))

    reader = threading.Thread(target=load)
    reader.start()
    shutil.copytree(FIXTURES / "snappy", path)
    reader.join(timeout=60)
    assert not reader.is_alive()
    assert result["values"] == expected("snappy")


def test_load_matches_tensorflow():
    got = run_tf(
        f"""
fixtures = {str(FIXTURES)!r}
out = {{}}
for name in ["none", "gzip", "zlib", "snappy"]:
    path = os.path.join(fixtures, name)
    theirs = tf.data.Dataset.load(path)
    ours = tfdata.Dataset.load(path)
    def values(ds):
        return sorted([int(x), s.hex(), f.tolist()] for x, s, f in ds.as_numpy_iterator())
    out[name] = {{
        "same": values(theirs) == values(ours),
        "n": len(values(ours)),
    }}
result(out)
"""
    )
    for name in ["none", "gzip", "zlib", "snappy"]:
        assert got[name] == {"same": True, "n": 40}, (name, got[name])
