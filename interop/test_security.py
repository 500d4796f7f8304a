"""What TensorFlow 2.21 can do against tfdata's transport security
(docs/security.md), checked with TensorFlow itself and with grpcio, the gRPC
library TensorFlow's wheel depends on:

* TensorFlow's tf.data service has no TLS credentials: its only protocol is
  plaintext ``grpc``;
* our TLS port and bearer token are standard gRPC: grpcio's TLS channel with
  the CA and ``authorization`` metadata is served; without the token it gets
  UNAUTHENTICATED, and a plaintext channel (what TensorFlow opens) is refused.
"""

import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import TfdataProcess

TOKEN = "interop-test-token"
GET_VERSION = "/tensorflow.data.DispatcherService/GetVersion"


def test_tensorflow_has_only_plaintext_grpc_credentials():
    # In an interpreter of its own: this failing constructor crashes a
    # pytest process (it does not crash a plain one).
    script = textwrap.dedent('''
        import tensorflow as tf
        service = tf.data.experimental.service
        try:
            service.DispatchServer(service.DispatcherConfig(protocol="grpc+ssl"))
        except RuntimeError as e:
            print(e)
    ''')
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert re.search(r"No credentials factory .* grpc\+ssl.*\[ grpc \]", result.stdout), (
        result.stdout, result.stderr[-2000:])


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture
def tls_dispatcher(tmp_path):
    """A `tfdata dispatcher` with TLS (certificate for localhost) and a token; yields (port, CA PEM)."""
    if shutil.which("openssl") is None:
        pytest.skip("this test makes its certificates with the openssl command, not found")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=interop CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=tmp_path)
    (tmp_path / "server.ext").write_text(
        "basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
        "extendedKeyUsage=serverAuth,clientAuth\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=tmp_path)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
             cwd=tmp_path)
    (tmp_path / "token").write_text(TOKEN + "\n")
    process = TfdataProcess(
        "dispatcher", "--port", "0",
        "--tls-cert", str(tmp_path / "server.pem"), "--tls-key", str(tmp_path / "server.key"),
        "--tls-ca", str(tmp_path / "ca.pem"), "--auth-token-file", str(tmp_path / "token"))
    try:
        yield process.port, (tmp_path / "ca.pem").read_bytes()
    finally:
        assert process.stop() == 0


# Run in an interpreter of its own, so no test process loads TensorFlow and
# grpcio's extension together.
GRPC_CLIENT = textwrap.dedent('''
    import sys
    import grpc

    target, ca_path, token = sys.argv[1:4]
    ca = open(ca_path, "rb").read()

    def get_version(channel, metadata=None, timeout=10):
        call = channel.unary_unary(GET_VERSION, request_serializer=None, response_deserializer=None)
        return call(b"", metadata=metadata, timeout=timeout)

    def refusal(channel, metadata=None, timeout=10):
        try:
            get_version(channel, metadata, timeout)
        except grpc.RpcError as e:
            return e.code(), e.details()
        raise AssertionError(f"served with metadata {metadata!r}")

    with grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=ca)) as channel:
        # GetVersionResponse { version: 9 }: field 1, varint 9.
        answer = get_version(channel, [("authorization", f"Bearer {token}")])
        assert answer == b"\\x08\\x09", answer
        code, details = refusal(channel)
        assert code == grpc.StatusCode.UNAUTHENTICATED and "missing bearer token" in details, details
        code, details = refusal(channel, [("authorization", "Bearer guessed")])
        assert code == grpc.StatusCode.UNAUTHENTICATED and "wrong bearer token" in details, details
    # What TensorFlow's clients open: a plaintext channel. It is never
    # served; gRPC keeps reconnecting (logging the server's GOAWAY reason)
    # until the deadline.
    with grpc.insecure_channel(target) as channel:
        code, details = refusal(channel, [("authorization", f"Bearer {token}")], timeout=3)
        assert code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), (code, details)
    print("ok")
''').replace("GET_VERSION", repr(GET_VERSION))


def test_grpc_speaks_tls_and_the_token_with_tfdata_and_plaintext_is_refused(tls_dispatcher, tmp_path):
    port, ca = tls_dispatcher
    ca_path = tmp_path / "trusted-ca.pem"
    ca_path.write_bytes(ca)
    result = subprocess.run(
        [sys.executable, "-c", GRPC_CLIENT, f"localhost:{port}", str(ca_path), TOKEN],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
