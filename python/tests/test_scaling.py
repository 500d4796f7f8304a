"""The dispatcher's scaling controller as Python configures and reads it
(issue 36; docs/operations.md, "Scaling")."""

import json
import time
import urllib.request

import pytest

from tfdata.experimental import service


def _scaling(dispatcher):
    url = f"http://127.0.0.1:{dispatcher.http_port}/api/status"
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)["scaling"]


def test_scaling_period_ms_sets_how_often_the_controller_decides():
    config = service.DispatcherConfig(http_port=0, scaling_period_ms=200)
    assert config.scaling_period_ms == 200
    with service.DispatchServer(config) as d:
        deadline = time.monotonic() + 30
        scaling = _scaling(d)
        while scaling is None and time.monotonic() < deadline:
            time.sleep(0.05)
            scaling = _scaling(d)
        assert scaling is not None, "no decision within 30 s"
        assert scaling["period_seconds"] == pytest.approx(0.2)
        # No reader: the controller keeps the minimum.
        assert scaling["target_workers"] == 1
        assert scaling["phase"] in ("idle", "steady")


def test_the_default_scaling_period_is_five_seconds():
    assert service.DispatcherConfig().scaling_period_ms is None


@pytest.mark.parametrize("value", [0, -5, 1.5, "200", True])
def test_a_bad_scaling_period_is_refused(value):
    with pytest.raises(ValueError, match="scaling_period_ms"):
        service.DispatcherConfig(scaling_period_ms=value)
