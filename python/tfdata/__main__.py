"""``python -m tfdata``: tf.data service servers in a Python process.

A worker started here runs the Python functions that the modules named by
``--import`` register (:func:`tfdata.register_function`), so pipelines that
name them can be served without a trainer::

    python -m tfdata dispatcher --port 5050
    python -m tfdata worker --dispatcher-address localhost:5050 --import myfunctions

Each server prints one line, ``tfdata <kind> listening on port N``, to stdout
when it is serving, then runs until SIGTERM or Ctrl-C (exit status 0).

Transport security takes the ``tfdata`` binary's flags (``--tls-cert``,
``--tls-key``, ``--tls-ca``, ``--tls-require-client-cert``,
``--tls-client-cert``, ``--tls-client-key``, ``--auth-token-file``), each
falling back to its environment variable (docs/security.md).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import signal
import sys
from typing import Optional, Sequence


class _Terminate(Exception):
    """Raised in the main thread by the SIGTERM handler."""


def _on_sigterm(signum, frame):
    raise _Terminate()


def import_module(spec: str):
    """Imports ``spec``: a module name (``pkg.mod``) or a path to a ``.py`` file.

    A file is imported under its stem as module name (so functions pickled or
    named by module resolve), with its directory on ``sys.path`` for its own
    imports.
    """
    if spec.endswith(".py") or os.sep in spec or (os.altsep and os.altsep in spec):
        path = os.path.abspath(spec)
        if not os.path.isfile(path):
            raise ImportError(f"--import {spec}: no such file {path}")
        name = os.path.splitext(os.path.basename(path))[0]
        directory = os.path.dirname(path)
        if directory not in sys.path:
            sys.path.insert(0, directory)
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"--import {spec}: cannot load {path}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    return importlib.import_module(spec)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tfdata",
        description="Run a tf.data service dispatcher or worker in this Python process.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{dispatcher,worker}")

    d = commands.add_parser("dispatcher", help="run a dispatcher")
    d.add_argument("--port", type=int, default=5050, help="port to bind (0 picks a free one; default 5050)")
    d.add_argument("--protocol", default="grpc", help="grpc (default) or grpc+local")
    d.add_argument("--work-dir", default=None, help="where datasets and the journal are kept")
    d.add_argument(
        "--fault-tolerant-mode",
        action="store_true",
        help="journal state changes in --work-dir and replay them on restart",
    )
    d.add_argument(
        "--worker-addresses",
        default=None,
        help="comma-separated fixed worker list (for static sharding)",
    )
    d.add_argument("--job-gc-check-interval-ms", type=int, default=None)
    d.add_argument("--job-gc-timeout-ms", type=int, default=None)
    d.add_argument("--worker-timeout-ms", type=int, default=None)
    d.add_argument(
        "--autocache",
        action="store_true",
        help="autocache every job (as distribute(..., cache=\"auto\") does for one)",
    )
    d.add_argument(
        "--autocache-dir",
        default=None,
        help="where autocache writes its caches (default <--work-dir>/autocache)",
    )
    d.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="module name or .py file to import first (repeatable)",
    )
    _add_security_flags(d)

    w = commands.add_parser("worker", help="run a worker")
    w.add_argument("--dispatcher-address", required=True, help="the dispatcher's HOST:PORT")
    w.add_argument("--port", type=int, default=0, help="port to bind (default 0: a free one)")
    w.add_argument("--protocol", default="grpc", help="grpc (default) or grpc+local")
    w.add_argument(
        "--worker-address",
        default=None,
        help="address to advertise; %%port%% becomes the port (default localhost:%%port%%)",
    )
    w.add_argument("--heartbeat-interval-ms", type=int, default=None)
    w.add_argument("--dispatcher-timeout-ms", type=int, default=None)
    w.add_argument(
        "--worker-tags",
        default=None,
        help="comma-separated tags for the dispatcher (e.g. COLOCATED)",
    )
    w.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="module name or .py file that registers pipeline functions (repeatable)",
    )
    _add_security_flags(w)
    return parser


# Flag, environment variable, help.
_SECURITY_FLAGS = [
    ("--tls-cert", "TFDATA_TLS_CERT", "certificate chain (PEM) this server presents"),
    ("--tls-key", "TFDATA_TLS_KEY", "private key (PEM) of --tls-cert"),
    ("--tls-ca", "TFDATA_TLS_CA", "CA bundle (PEM) that peers' certificates must chain to"),
    ("--tls-client-cert", "TFDATA_TLS_CLIENT_CERT",
     "certificate presented to servers that require one (default: --tls-cert)"),
    ("--tls-client-key", "TFDATA_TLS_CLIENT_KEY", "private key of --tls-client-cert"),
    ("--auth-token-file", "TFDATA_AUTH_TOKEN_FILE",
     "file holding the shared bearer token (or the token itself in TFDATA_AUTH_TOKEN)"),
]


def _add_security_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("transport security (default: plaintext, as TensorFlow)")
    for flag, env, help in _SECURITY_FLAGS:
        group.add_argument(flag, default=os.environ.get(env) or None, metavar="PATH",
                           help=f"{help} [env: {env}]")
    group.add_argument(
        "--tls-require-client-cert",
        action="store_true",
        default=os.environ.get("TFDATA_TLS_REQUIRE_CLIENT_CERT", "").lower() in ("1", "true", "yes"),
        help="mutual TLS: refuse clients without a certificate signed by --tls-ca "
        "[env: TFDATA_TLS_REQUIRE_CLIENT_CERT=1]",
    )


def _security(args) -> dict:
    """The security keywords of the configs, from the flags (and, for the
    token itself, TFDATA_AUTH_TOKEN unless --auth-token-file is given)."""
    token = None if args.auth_token_file else (os.environ.get("TFDATA_AUTH_TOKEN") or None)
    return dict(
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_ca=args.tls_ca,
        tls_require_client_cert=args.tls_require_client_cert,
        tls_client_cert=args.tls_client_cert,
        tls_client_key=args.tls_client_key,
        auth_token_file=args.auth_token_file,
        auth_token=token,
    )


def _split(value: Optional[str]) -> list:
    return [v for v in (value or "").split(",") if v]


def _serve(server, kind: str) -> int:
    print(f"tfdata {kind} listening on port {server._server.port}", flush=True)
    try:
        server.join()
    except (KeyboardInterrupt, _Terminate):
        pass
    finally:
        # No second signal may interrupt the stop.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        server.stop()
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    # SIGTERM before the server starts also exits cleanly.
    signal.signal(signal.SIGTERM, _on_sigterm)

    from tfdata.experimental import service

    try:
        for spec in args.imports:
            import_module(spec)
        if args.command == "dispatcher":
            config = service.DispatcherConfig(
                port=args.port,
                protocol=args.protocol,
                work_dir=args.work_dir,
                fault_tolerant_mode=args.fault_tolerant_mode,
                worker_addresses=_split(args.worker_addresses) or None,
                job_gc_check_interval_ms=args.job_gc_check_interval_ms,
                job_gc_timeout_ms=args.job_gc_timeout_ms,
                worker_timeout_ms=args.worker_timeout_ms,
                autocache=args.autocache,
                autocache_dir=args.autocache_dir,
                **_security(args),
            )
            server = service.DispatchServer(config)
        else:
            config = service.WorkerConfig(
                dispatcher_address=args.dispatcher_address,
                worker_address=args.worker_address,
                port=args.port,
                protocol=args.protocol,
                heartbeat_interval_ms=args.heartbeat_interval_ms,
                dispatcher_timeout_ms=args.dispatcher_timeout_ms,
                worker_tags=_split(args.worker_tags),
                **_security(args),
            )
            server = service.WorkerServer(config)
    except (KeyboardInterrupt, _Terminate):
        return 0
    return _serve(server, args.command)


if __name__ == "__main__":
    sys.exit(main())
