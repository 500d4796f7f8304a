"""Shared fixtures: real servers on port 0, real gRPC over loopback.

Run with the package installed (``maturin develop`` or ``pip install .``):
``python -m pytest python/tests``. Tests that need TensorFlow run a script
under the interpreter named by ``TFDATA_TF_PYTHON`` (a venv with
``tensorflow-cpu==2.21.0``; ``.ci/run`` makes one) with this checkout's
``python/`` on its ``PYTHONPATH``, and skip with a reason when it is unset.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import tfdata
from tfdata.experimental import service

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def dispatcher():
    d = service.DispatchServer()
    yield d
    d.stop()


@pytest.fixture
def worker(dispatcher):
    w = service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher._address))
    yield w
    w.stop()


@pytest.fixture
def cluster(dispatcher, worker):
    """A dispatcher with one worker; yields the dispatcher."""
    return dispatcher


def wait_for(condition, timeout=10.0, what="condition"):
    """Polls `condition` until it is true (no fixed sleeps in tests)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def run_python(code: str, *, python: str = sys.executable, env=None, timeout=120, **kwargs):
    """Runs `code` in a fresh interpreter that imports this checkout's tfdata."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "python"), *filter(None, [full_env.get("PYTHONPATH")])]
    )
    full_env.update(env or {})
    return subprocess.run(
        [python, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def tensorflow_python() -> str:
    """The interpreter with TensorFlow 2.21, or a skip saying how to get one."""
    python = os.environ.get("TFDATA_TF_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip(
            "TensorFlow tests need TFDATA_TF_PYTHON, an interpreter with tensorflow-cpu==2.21.0 "
            "(.ci/run creates ~/.cache/tfdata-tf-2.21)"
        )
    return python


def _env(extra_path=()):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "python"), *map(str, extra_path), *filter(None, [env.get("PYTHONPATH")])]
    )
    return env


class TfdataPythonProcess:
    """``python -m tfdata <args>``; its port comes from its one stdout line."""

    def __init__(self, *args, cwd=None, extra_path=(), timeout=30):
        self.args = args
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tfdata", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=_env(extra_path),
        )
        lines = []
        reader = threading.Thread(target=lambda: lines.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=timeout)
        line = lines[0] if lines else ""
        match = re.fullmatch(r"tfdata (dispatcher|worker) listening on port (\d+)\n", line)
        if not match:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
            raise AssertionError(f"python -m tfdata {' '.join(args)} printed {line!r}; stderr:\n{err}")
        self.port = int(match.group(2))
        # Keep draining stderr so a chatty server never blocks on a full pipe.
        self.stderr_lines: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    @property
    def address(self) -> str:
        return f"localhost:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"python -m tfdata {' '.join(self.args)} ignored {sig!r}")
        return self.proc.returncode
