"""``app.stream.worker`` without a broker: the table codec, the services built per mode, the
readiness reasons of ``not_ready`` and the overdue rule.

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
from app.stream.worker import BytesTable, build, overdue


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
        "IngestService: catching up", "ReportService: catching up", "release agent not running"
    ]  # fmt: skip
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


@pytest.fixture
def last_released():
    """Set ``dpstream_last_released_slot`` of a stream; back to 0 (nothing released) after."""
    touched = []

    def set_(stream, slot):
        touched.append(stream)
        metrics.LAST_RELEASED_SLOT.labels(stream).set(slot)

    yield set_
    for stream in touched:
        metrics.LAST_RELEASED_SLOT.labels(stream).set(0)


def test_the_readiness_of_a_worker_includes_overdue_streams(settings_for, central, last_released):
    app, (http, ingest) = build(settings_for(central))
    ingest.consuming = True
    asyncio.run(app.agents["release"].fun(Events()))
    last_released("wk", 3)  # slot 3 ended in 1970
    assert http.not_ready() == "stream wk: no release since slot 3"


@pytest.mark.parametrize(("last", "now", "late"), [(0, 1e9, False), (5, 142.0, False),
                                                   (5, 142.01, True)])  # fmt: skip
def test_a_stream_is_overdue_a_slot_after_its_deadline(
    settings_for, central_stream, last_released, last, now, late
):
    """Slot 6 (60-70 s) is due at 71 s (grace 1); the deadline adds the release timeout (1 s)
    and the maximum delay (60 s): 132 s; overdue one slot (10 s) later."""
    settings = settings_for(central_stream(id="ov", max_delay_s=60))
    last_released("ov", last)
    expected = ["stream ov: no release since slot 5"] if late else []
    assert overdue(settings, now) == expected


def test_a_stream_never_released_by_its_agent_is_overdue(settings_for, central_stream):
    """The agent chose slot 6 as its first (60-70 s, due 71 s, deadline 132 s) and released
    nothing: overdue one slot after the deadline, as a stream that stopped releasing."""
    settings = settings_for(central_stream(id="nv", max_delay_s=60))
    assert overdue(settings, 142.0, {"nv": 6}) == []
    assert overdue(settings, 142.01, {"nv": 6}) == ["stream nv: no release yet (first slot 6)"]
