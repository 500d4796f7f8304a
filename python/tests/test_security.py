"""Transport security from Python (docs/security.md): TLS servers configured
with the configs' keywords and ``python -m tfdata`` flags or variables,
readers configured by the ``TFDATA_*`` environment variables alone, and the
clear refusals of readers with the wrong settings. Certificates are made by
``openssl`` at test time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import pytest

import tfdata
from tfdata import errors
from tfdata.experimental import service

from conftest import REPO, wait_for

TOKEN = "python-test-token"
SECURITY_VARS = [
    "TFDATA_TLS_CA",
    "TFDATA_TLS_CERT",
    "TFDATA_TLS_KEY",
    "TFDATA_TLS_CLIENT_CERT",
    "TFDATA_TLS_CLIENT_KEY",
    "TFDATA_TLS_REQUIRE_CLIENT_CERT",
    "TFDATA_AUTH_TOKEN",
    "TFDATA_AUTH_TOKEN_FILE",
]


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


class Pki:
    """A CA and certificates it signs for localhost and 127.0.0.1, as PEM files."""

    def __init__(self, directory, name="tfdata test CA"):
        if shutil.which("openssl") is None:
            pytest.skip("these tests make their certificates with the openssl command, not found")
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", f"/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=self.dir)
        self.ca = str(self.dir / "ca.pem")

    def issue(self, name):
        """``(cert, key)`` paths of a new certificate, for servers and clients."""
        (self.dir / f"{name}.ext").write_text(
            "basicConstraints=CA:FALSE\n"
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
            "extendedKeyUsage=serverAuth,clientAuth\n"
        )
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=self.dir)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
                 cwd=self.dir)
        return str(self.dir / f"{name}.pem"), str(self.dir / f"{name}.key")


@pytest.fixture
def pki(tmp_path):
    return Pki(tmp_path / "pki")


@pytest.fixture
def clean_env(monkeypatch):
    for var in SECURITY_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _tls(pki, name, **extra):
    cert, key = pki.issue(name)
    return dict(tls_cert=cert, tls_key=key, tls_ca=pki.ca, **extra)


@pytest.fixture
def tls_cluster(pki, clean_env, tmp_path):
    """A TLS dispatcher (token by keyword) and worker (token by file); yields the dispatcher."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    d = service.DispatchServer(service.DispatcherConfig(**_tls(pki, "dispatcher", auth_token=TOKEN)))
    w = service.WorkerServer(service.WorkerConfig(
        dispatcher_address=d._address, **_tls(pki, "worker", auth_token_file=str(token_file))))
    wait_for(lambda: d._num_workers() == 1, what="the TLS worker to register")
    yield d
    w.stop()
    d.stop()


def _read(dispatcher, n=10):
    ds = tfdata.Dataset.range(n).apply(
        service.distribute(processing_mode="parallel_epochs", service=dispatcher.target))
    return sorted(int(v) for v in ds.as_numpy_iterator())


def test_a_reader_configured_by_environment_reads_from_tls_servers(tls_cluster, pki, clean_env):
    clean_env.setenv("TFDATA_TLS_CA", pki.ca)
    clean_env.setenv("TFDATA_AUTH_TOKEN", TOKEN)
    assert _read(tls_cluster) == list(range(10))


def test_readers_with_the_wrong_settings_are_refused_with_the_reason(tls_cluster, pki, clean_env, tmp_path):
    clean_env.setenv("TFDATA_TLS_CA", pki.ca)
    with pytest.raises(errors.UnauthenticatedError, match="missing bearer token"):
        _read(tls_cluster)
    clean_env.setenv("TFDATA_AUTH_TOKEN", "guessed")
    with pytest.raises(errors.UnauthenticatedError, match="wrong bearer token"):
        _read(tls_cluster)
    other = Pki(tmp_path / "other", name="another CA")
    clean_env.setenv("TFDATA_AUTH_TOKEN", TOKEN)
    clean_env.setenv("TFDATA_TLS_CA", other.ca)
    with pytest.raises(errors.UnauthenticatedError, match="not signed by a CA in"):
        _read(tls_cluster)
    clean_env.delenv("TFDATA_TLS_CA")
    with pytest.raises(errors.UnauthenticatedError, match="requires TLS"):
        _read(tls_cluster)


def test_incomplete_settings_are_invalid_arguments(pki, clean_env):
    cert, key = pki.issue("lonely")
    with pytest.raises(errors.InvalidArgumentError, match="--tls-ca"):
        service.DispatchServer(service.DispatcherConfig(tls_cert=cert, tls_key=key))
    with pytest.raises(errors.InvalidArgumentError, match="--tls-cert"):
        service.DispatchServer(service.DispatcherConfig(tls_ca=pki.ca))
    with pytest.raises(TypeError, match="tls_ca"):
        service.DispatcherConfig(tls_ca=5)
    config = service.WorkerConfig("localhost:1", auth_token=TOKEN)
    assert TOKEN not in repr(config)
    assert "tls_require_client_cert" in service.WorkerConfig.__doc__


def test_python_m_tfdata_worker_takes_its_settings_from_the_environment(tls_cluster, pki, clean_env):
    cert, key = pki.issue("standalone")
    env = {k: v for k, v in os.environ.items() if k not in SECURITY_VARS}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), *filter(None, [env.get("PYTHONPATH")])])
    env.update(TFDATA_TLS_CERT=cert, TFDATA_TLS_KEY=key, TFDATA_TLS_CA=pki.ca, TFDATA_AUTH_TOKEN=TOKEN)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfdata", "worker", "--dispatcher-address", tls_cluster._address],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = []
        reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=30)
        assert lines and "listening on port" in lines[0], proc.stderr.read() if proc.poll() is not None else lines
        wait_for(lambda: tls_cluster._num_workers() == 2, what="the standalone TLS worker to register")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
