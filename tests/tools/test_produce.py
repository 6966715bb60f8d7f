"""``dpstream produce`` accounts for every message: delivered, failed, left in the queue."""

from __future__ import annotations

import argparse

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
