"""``dpstream produce`` accounts for every message: delivered, failed, left in the queue."""

from __future__ import annotations

import argparse
import threading
from collections import Counter
from pathlib import Path

import pytest

from app.cli import main
from app.tools.produce import Deliveries


class Err:
    def __init__(self, text: str) -> None:
        self.text = text

    def str(self) -> str:
        return self.text


def test_deliveries_count_each_outcome() -> None:
    d = Deliveries()
    for _ in range(3):
        d(None, object())
    d(Err("Message timed out"), object())
    d.left(5)
    assert (d.delivered, d.failed, d.undelivered, d.lost) == (3, 1, 5, 6)
    assert d.line() == ("delivered 3, failed 1, undelivered 5 (last error: Message timed out)")


def test_broker_errors_are_remembered_not_counted_as_lost() -> None:
    d = Deliveries()
    d.broker_error(Err("Connect to ipv4#127.0.0.1:1 failed: Connection refused"))
    assert d.broker_errors == 1 and d.lost == 0
    assert "Connection refused" in d.line()


def test_produce_refuses_an_unreachable_broker(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DPSTREAM_CONFIG", raising=False)
    monkeypatch.setenv("DPSTREAM_BROKER", "127.0.0.1:1")
    assert main(["produce", "--duration", "1", "--broker-timeout", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot reach the Kafka broker at 127.0.0.1:1" in err


def test_produce_without_a_central_stream_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.tools.demo import LOCAL_STREAMS
    from app.tools.produce import produce_events

    monkeypatch.setenv("DPSTREAM_BROKER", "127.0.0.1:1")
    args = argparse.Namespace(config=LOCAL_STREAMS, rate=1.0, users=1, duration=1.0)
    assert produce_events(args) == 2
    assert "no central stream" in capsys.readouterr().err


OPEN_YAML = """
streams:
  - id: items
    domain: open
    max_keys: 1
    max_key_chars: {chars}
    mechanism: {{name: open_uniform}}
    levels: [{{name: std, w: 10, eps: 1.0, delta: 1.0e-6, population: 100000}}]
"""


class FakeProducer:
    """confluent_kafka.Producer's surface that ``synthetic_events`` uses; keeps the values and
    sets ``stop`` once ``ticks`` ticks went by."""

    sent: list[bytes] = []
    stop: threading.Event | None = None
    ticks = 3

    def __init__(self, _conf: dict[str, object]) -> None:
        self.polls = 0

    def produce(self, topic: str, key: bytes, value: bytes, on_delivery: object) -> None:
        FakeProducer.sent.append(value)

    def poll(self, _timeout: float) -> None:
        self.polls += 1
        if self.polls >= FakeProducer.ticks and FakeProducer.stop is not None:
            FakeProducer.stop.set()

    def flush(self, _timeout: float) -> int:
        return 0


@pytest.mark.parametrize("chars", [3, 256])
def test_produce_sends_valid_zipf_keys_on_an_open_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chars: int
) -> None:
    """The producer thread of an open stream sends keys the stream accepts (``max_key_chars``
    respected), Zipf-like (one key far above the median), and users who send several distinct
    keys in one tick (one slot), so the ``max_keys = 1`` bound has something to drop."""
    import confluent_kafka

    from app.stream.config import load_settings
    from app.stream.topics import load_topics
    from app.tools.produce import synthetic_events
    from app.wire import events

    config = tmp_path / "s.yaml"
    config.write_text(OPEN_YAML.format(chars=chars))
    settings = load_settings(env={"DPSTREAM_BROKER": "127.0.0.1:1"}, config=config)
    stream = settings.streams[0]
    monkeypatch.setattr(confluent_kafka, "Producer", FakeProducer)
    monkeypatch.setattr("app.tools.produce.TICK_S", 0.01)
    FakeProducer.sent, FakeProducer.stop = [], threading.Event()
    rate = 2000.0 / 0.01  # 2,000 events per tick
    synthetic_events(settings, load_topics(), stream, rate, 500, FakeProducer.stop)
    assert len(FakeProducer.sent) == 3 * 2000
    domains = {stream.id: events.Domain.of(stream)}
    got = [events.decode(raw, domains) for raw in FakeProducer.sent]  # BadEvent if refused
    keys = Counter(e.value for e in got)
    assert max(len(k) for k in keys) <= chars
    if chars == 256:
        assert all(str(k).startswith("item-") for k in keys)
        top, median = keys.most_common(1)[0][1], sorted(keys.values())[len(keys) // 2]
        assert len(keys) > 100 and top > 20 * median
    first_tick = got[:2000]
    per_user: dict[str, set[object]] = {}
    for e in first_tick:
        per_user.setdefault(e.user, set()).add(e.value)
    several = sum(len(v) > 1 for v in per_user.values())
    assert several > 100  # 25 % of events repeat the user before: ~ 500 such users
