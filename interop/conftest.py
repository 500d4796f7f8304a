"""Fixtures for the TensorFlow interop tests: our `tfdata` binary as a real process."""

import os
import re
import shutil
import signal
import subprocess
import threading

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tfdata_bin():
    path = os.environ.get("TFDATA_BIN", os.path.join(REPO, "target", "debug", "tfdata"))
    if not os.path.exists(path):
        raise RuntimeError(f"{path} not found: build it with `cargo build -p tfdata-cli` or set TFDATA_BIN")
    return path


class TfdataProcess:
    """A `tfdata` subcommand; its port comes from its first stdout line."""

    def __init__(self, *args):
        self.proc = subprocess.Popen(
            [tfdata_bin(), *args], stdout=subprocess.PIPE, stderr=None, text=True
        )
        line = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()))
        reader.start()
        reader.join(timeout=30)
        match = re.search(r"port (\d+)", line[0] if line else "")
        if not match:
            self.proc.kill()
            raise RuntimeError(f"tfdata {args} printed no port: {line!r}")
        self.port = int(match.group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise
        return self.proc.returncode


@pytest.fixture
def tfdata_dispatcher():
    started = []

    def start(*extra):
        d = TfdataProcess("dispatcher", "--port", "0", *extra)
        started.append(d)
        return d

    yield start
    for d in started:
        assert d.stop() == 0, "tfdata dispatcher did not exit cleanly"


@pytest.fixture
def work_dir(tmp_path):
    d = tmp_path / "work_dir"
    yield str(d)
    shutil.rmtree(d, ignore_errors=True)


def tensorflow_only(ds):
    """`ds` with its values unchanged, through an op tfdata workers do not
    run (`MatrixDeterminant`, adding 0): in a mixed cluster only TensorFlow
    workers get its tasks, which is what tests of capability routing need
    now that tfdata workers run plain TensorFlow graphs too."""
    import tensorflow as tf

    zero = lambda: tf.cast(tf.linalg.det([[0.0]]), tf.int64)  # noqa: E731
    return ds.map(lambda x: x + zero())
