"""Operations from Python: http_port on both configs serves /metrics,
/healthz and /readyz over real HTTP, and reader_metrics() returns the
trainer process's reader metrics."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import tfdata
from tfdata.experimental import service

from conftest import wait_for


def _get(port: int, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def _sample(text: str, series: str) -> float:
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name == series:
            return float(value)
    return 0.0


def test_http_port_serves_metrics_and_health():
    with service.DispatchServer(service.DispatcherConfig(http_port=0)) as dispatcher, \
            service.WorkerServer(service.WorkerConfig(dispatcher._address, http_port=0)) as worker:
        assert dispatcher.http_port and worker.http_port
        assert dispatcher.http_port != worker.http_port
        wait_for(lambda: _get(worker.http_port, "/readyz")[0] == 200, timeout=20)
        dataset = tfdata.Dataset.range(500).apply(
            service.distribute(processing_mode="parallel_epochs", service=dispatcher.target)
        )
        assert [x.item() for x in dataset.as_numpy_iterator()] == list(range(500))

        status, content_type, text = _get(worker.http_port, "/metrics")
        assert status == 200 and content_type.startswith("application/openmetrics-text")
        assert _sample(text, 'tfdata_worker_sent_elements_total{transfer="stream"}') >= 500, text
        status, _, text = _get(dispatcher.http_port, "/metrics")
        assert _sample(text, 'tfdata_dispatcher_rpcs_total{method="GetOrCreateJob",code="OK"}') == 1, text
        assert _get(dispatcher.http_port, "/healthz")[:3:2] == (200, "ok\n")
        assert _get(dispatcher.http_port, "/readyz")[0] == 200

    reader = service.reader_metrics()
    assert re.search(r"^tfdata_reader_consumed_elements_total \d+", reader, re.M), reader
    assert _sample(reader, "tfdata_reader_consumed_elements_total") >= 500
    assert reader.endswith("# EOF\n")


def test_no_http_port_by_default(dispatcher, worker):
    assert dispatcher.http_port is None and worker.http_port is None
