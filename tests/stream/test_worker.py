"""``app.stream.worker`` without a broker: the table codec, the services built per mode, the
readiness reasons of ``not_ready`` and the release lag rule.

``build`` makes the Faust app, its tables and the services without connecting to anything, so
the readiness function is tested on the real objects; the release agent is run on an in-memory
stream of events. Running the worker (``run``, table recovery, rebalances) needs a broker:
``tests/integration``.
"""

from __future__ import annotations

import asyncio
import base64
import inspect

import pytest

from app import metrics
from app.stream.errors import ConfigError
from app.stream.worker import BytesTable, build, lagging


def test_bytes_table_stores_base64_text_and_reads_bytes():
    raw: dict[str, str | None] = {}
    table = BytesTable(raw)
    table["a"] = b"\x00\xff ledger"
    assert raw["a"] == base64.b64encode(b"\x00\xff ledger").decode()
    assert table["a"] == b"\x00\xff ledger"
    assert list(table) == ["a"] and len(table) == 1
    raw["gone"] = None  # a Faust table's default: no entry
    with pytest.raises(KeyError):
        table["gone"]
    assert table.get("gone") is None
    del table["a"]
    assert "a" not in raw


@pytest.fixture
def settings_for(make_settings, tmp_path):
    def make(*streams, **env):
        env = {"DPSTREAM_STATE_DIR": str(tmp_path), **env}
        return make_settings(*streams, **env)

    return make


@pytest.fixture
def central(central_stream):
    return central_stream(id="wk")  # an id no other test releases (the gauges are global)


def kinds(services):
    return [type(s).__name__ for s in services]


def test_build_runs_the_collect_service_of_each_mode(settings_for, central, local_stream):
    _, services = build(settings_for(central))
    assert kinds(services) == ["HttpService", "IngestService"]
    _, services = build(settings_for(local_stream()))
    assert kinds(services) == ["HttpService", "ReportService"]
    _, services = build(settings_for(central, local_stream()))
    assert kinds(services) == ["HttpService", "IngestService", "ReportService"]
    ingest = services[1]
    assert [s.id for s in ingest.settings.streams] == ["wk"]  # central streams only


def test_build_refuses_to_run_without_a_noise_key(settings_for, central):
    settings = settings_for(central, DPSTREAM_NOISE_KEY="")
    with pytest.raises(ConfigError, match="no noise key"):
        build(settings)


class Events:
    """The release agent's stream: ``values`` handed over in order, then ``error`` raised."""

    def __init__(self, values=(), error=None) -> None:
        self.values, self.error = values, error

    async def events(self):
        for value in self.values:
            yield type("Event", (), {"value": value})()
        if self.error is not None:
            raise self.error


def test_not_ready_names_every_reason_and_clears(settings_for, central, local_stream):
    app, (http, ingest, reports) = build(settings_for(central, local_stream(id="wkl")))
    agent = app.agents["release"]
    reasons = http.not_ready().split("; ")
    assert reasons == [
        "IngestService: catching up",
        "ReportService: catching up",
        "release agent not running",
    ]
    ingest.consuming = reports.consuming = True
    asyncio.run(agent.fun(Events()))
    assert http.not_ready() == ""
    ingest.failed = "events has 2 partitions but topics/events.yaml declares 4"
    reports.connected = False
    app.rebalancing = True
    releaser = inspect.getclosurevars(agent.fun).nonlocals["releaser"]
    releaser.failed["wk"] = "stream wk: ledger unreadable"
    assert http.not_ready().split("; ") == [
        "events has 2 partitions but topics/events.yaml declares 4",
        "ReportService: broker unreachable",
        "rebalancing",
        "stream wk: ledger unreadable",
    ]


def test_a_failed_release_agent_says_why(settings_for, central):
    app, (http, ingest) = build(settings_for(central))
    ingest.consuming = True
    with pytest.raises(OSError):
        asyncio.run(app.agents["release"].fun(Events(error=OSError("disk full"))))
    assert http.not_ready() == "release agent failed: OSError('disk full')"


def test_the_readiness_of_a_worker_names_a_stream_past_its_lag_bound(settings_for, central):
    app, (http, ingest) = build(settings_for(central))
    ingest.consuming = True
    agent = app.agents["release"]
    asyncio.run(agent.fun(Events()))
    releaser = inspect.getclosurevars(agent.fun).nonlocals["releaser"]
    releaser.serving.add("wk")
    releaser.publisher.next_slot["wk"] = 3  # slot 3 was due in 1970
    (reason,) = http.not_ready().split("; ")
    assert reason.startswith("stream wk: releases ") and "s behind the wall clock" in reason
    releaser.revoked()  # another worker serves it now: neither a reason nor a gauge here
    assert http.not_ready() == ""
    assert "wk" not in {
        s.labels["stream"]
        for f in metrics.REGISTRY.collect()
        for s in f.samples
        if f.name == "dpstream_release_lag_seconds"
    }


@pytest.mark.parametrize(("now", "behind"), [(70.0, False), (82.0, False), (82.01, True)])
def test_a_stream_lags_past_release_timeout_plus_a_slot(settings_for, central_stream, now, behind):
    """Slot 6 (60-70 s) is due at 71 s (grace 1); the bound is the release timeout (1 s) plus
    a slot (10 s): 82 s. The gauges say how far behind, slots and seconds (issue 23, item 4)."""
    settings = settings_for(central_stream(id="ov"))
    reasons = lagging(settings, now, {"ov": 6})
    assert bool(reasons) is behind
    if behind:
        assert reasons == [
            "stream ov: releases 11 s behind the wall clock (2 slots due, bound 11 s)"
        ]
    assert metrics.RELEASE_LAG_SECONDS.labels("ov")._value.get() == pytest.approx(max(0, now - 71))
    assert metrics.RELEASE_LAG_SLOTS.labels("ov")._value.get() == (2 if now > 81 else 0)


def test_a_saturated_loop_is_not_called_a_broker_outage(settings_for, central):
    """Issue 23, item 5: fetches stalled while the broker answers its probe; the loop is late."""
    app, (http, ingest) = build(settings_for(central))
    ingest.consuming = True
    asyncio.run(app.agents["release"].fun(Events()))
    ingest.connected = False
    http.probe.reachable = lambda: True
    http.loop_watch.beat(100.0, 102.5)
    http.loop_watch.beat(102.6, 102.6)
    lag = http.loop_watch.lag(102.61)
    assert lag == pytest.approx(2.5)
    reasons = http.not_ready()
    assert "broker unreachable" not in reasons and "event loop saturated" in reasons
    http.probe.reachable = lambda: False
    assert "IngestService: broker unreachable" in http.not_ready()
