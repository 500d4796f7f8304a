"""TensorFlow 2.21 clients reading pipelines served by our stock `tfdata worker`s."""

import json
import subprocess

import tensorflow as tf

from conftest import TfdataProcess, tfdata_bin

service = tf.data.experimental.service


def register(port, pipeline, tmp_path, *extra):
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(pipeline))
    out = subprocess.run(
        [tfdata_bin(), "register", "--service", f"grpc://localhost:{port}", "--pipeline", str(path), *extra],
        check=True, capture_output=True, text=True, timeout=60,
    )
    return out.stdout.strip()


def tfdata_worker(port):
    return TfdataProcess("worker", "--dispatcher-address", f"localhost:{port}")


def test_from_dataset_id_without_element_spec(tfdata_dispatcher, tmp_path):
    d = tfdata_dispatcher()
    worker = tfdata_worker(d.port)
    pipeline = {"op": "batch", "batch_size": 3, "drop_remainder": True,
                "input": {"op": "range", "stop": 10}}
    dataset_id = register(d.port, pipeline, tmp_path)
    # The element spec comes from the dispatcher, in TensorFlow's encoding.
    ds = service.from_dataset_id("parallel_epochs", f"grpc://localhost:{d.port}", dataset_id)
    assert ds.element_spec == tf.TensorSpec(shape=(3,), dtype=tf.int64)
    got = [list(x) for x in ds.as_numpy_iterator()]
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert worker.stop() == 0


def test_uncompressed_strings_and_dicts(tfdata_dispatcher, tmp_path):
    d = tfdata_dispatcher()
    worker = tfdata_worker(d.port)
    pipeline = {
        "compress": False,
        "pipeline": {
            "op": "from_tensor_slices",
            "names": ["id", "word"],
            "components": [
                {"dtype": "int64", "values": [1, 2, 3]},
                {"dtype": "string", "values": ["alpha", "", "gamma"]},
            ],
        },
    }
    dataset_id = register(d.port, pipeline, tmp_path, "--dataset-id", "words")
    assert dataset_id == "words"
    ds = service.from_dataset_id("parallel_epochs", f"grpc://localhost:{d.port}", "words")
    got = [(int(e["id"]), e["word"].decode()) for e in ds.as_numpy_iterator()]
    assert got == [(1, "alpha"), (2, ""), (3, "gamma")]
    assert worker.stop() == 0


def test_a_bad_pipeline_is_refused_at_registration(tfdata_dispatcher, tmp_path):
    d = tfdata_dispatcher()
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"op": "batch", "input": {"op": "range", "stop": 3}}))
    out = subprocess.run(
        [tfdata_bin(), "register", "--service", f"grpc://localhost:{d.port}", "--pipeline", str(path)],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode != 0
    assert "batch_size" in out.stderr
