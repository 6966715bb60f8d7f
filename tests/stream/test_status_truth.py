"""Issue 23 item 9: in the demo only, the status page draws the synthetic truth over the
released bars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.stream.config import DEFAULT_STREAMS, load_settings
from app.stream.ops import status
from app.tools.produce import Truth


def _releases(stream_id: str, d: int) -> list[dict[str, object]]:
    return [
        {
            "stream": stream_id,
            "slot": slot,
            "start": 2.0 * slot,
            "fresh": slot % 2 == 0,
            "histogram": [float(slot)] * d,
        }
        for slot in (10, 11)
    ]


def test_no_truth_outside_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(status.DEMO_TRUTH_ENV, raising=False)
    stream = load_settings({}, config=DEFAULT_STREAMS).streams[0]
    chart = status._chart(stream, _releases(stream.id, stream.d))
    assert "truth" not in chart and status.demo_truth(stream.id) == {}


def test_the_demos_truth_file_is_drawn_as_ticks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stream = load_settings({}, config=DEFAULT_STREAMS).streams[0]
    truth = Truth()
    for user, value in [("a", 2), ("b", 2), ("c", 5)]:
        truth.add(stream, 21.0, user, value)  # slot 10 of 2 s slots
    path = tmp_path / "truth.json"
    truth.dump(path)
    assert json.loads(path.read_text())[stream.id]["10"][2] == 2
    monkeypatch.setenv(status.DEMO_TRUTH_ENV, str(path))
    chart = status._chart(stream, _releases(stream.id, stream.d))
    assert chart.count("truth = ") == stream.d  # one tick per category of slot 10, none for 11
    assert "<title>slot 10 truth = 2</title>" in chart and "exact counts of the demo" in chart
    path.write_text("not json")
    assert status.demo_truth(stream.id) == {}
