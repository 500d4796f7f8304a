"""The transport-security keywords that ``DispatcherConfig`` and
``WorkerConfig`` share (docs/security.md): their documentation and their
checks."""

from __future__ import annotations

import os
from typing import Optional

SECURITY_DOC = """
    Transport security (tfdata's own, keyword-only; docs/security.md). The
    default, plaintext without a token, is what TensorFlow peers speak:
      tls_cert, tls_key: The server's certificate chain and private key
        (PEM files); with ``tls_ca``, the server serves TLS only.
      tls_ca: The CA bundle (PEM) that peers' certificates must chain to:
        the servers this one calls, and its clients with
        ``tls_require_client_cert``.
      tls_require_client_cert: Mutual TLS: refuse clients without a
        certificate signed by ``tls_ca``.
      tls_client_cert, tls_client_key: The certificate presented to servers
        that require one; default ``tls_cert``/``tls_key``.
      auth_token_file: A file holding the shared bearer token every call
        must carry (and this server sends on its own calls).
      auth_token: The token itself (never shown by ``repr``).
"""


def security_settings(tls_cert, tls_key, tls_ca, tls_require_client_cert, tls_client_cert,
                       tls_client_key, auth_token_file, auth_token) -> Optional[dict]:
    """The security keywords as the native servers take them; ``None`` when
    none is set (plaintext)."""
    settings = {
        "tls_cert": tls_cert,
        "tls_key": tls_key,
        "tls_ca": tls_ca,
        "tls_client_cert": tls_client_cert,
        "tls_client_key": tls_client_key,
        "auth_token_file": auth_token_file,
    }
    for name, value in settings.items():
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"`{name}` must be a path (str or os.PathLike), but was {type(value)}")
    settings = {k: os.fspath(v) for k, v in settings.items() if v is not None}
    if tls_require_client_cert:
        settings["tls_require_client_cert"] = True
    if auth_token is not None:
        if not isinstance(auth_token, str):
            raise TypeError(f"`auth_token` must be a str, but was {type(auth_token)}")
        settings["auth_token"] = auth_token
    return settings or None
