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


def test_a_local_streams_truth_is_the_devices_frequencies(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Local demo: the simulated devices' true frequencies arrive whole (Truth.put) and are
    drawn like the central counts, named as frequencies."""
    from app.tools.demo import LOCAL_STREAMS

    stream = load_settings({}, config=LOCAL_STREAMS).streams[0]
    truth = Truth()
    truth.put(stream.id, 10, [0.25, 0.75])
    path = tmp_path / "truth.json"
    truth.dump(path)
    monkeypatch.setenv(status.DEMO_TRUTH_ENV, str(path))
    chart = status._chart(stream, _releases(stream.id, stream.d))
    assert "<title>slot 10 truth = 0.75</title>" in chart
    assert "true frequencies of the simulated devices" in chart


def test_local_cohort_bars_are_labelled_per_user_per_window_and_not_alarming() -> None:
    """Issue 23 item 11: the bar is the most one user spent in the last w slots; for a cohort
    mechanism it reaches eps by design, which the page says instead of painting it red."""
    from fractions import Fraction

    from app.dp.types import WindowSpend
    from app.tools.demo import LOCAL_STREAMS

    stream = load_settings({}, config=LOCAL_STREAMS).streams[0]
    window = [WindowSpend(5, 2.0, Fraction(2))]
    html = "\n".join(status._stream_section(stream, _releases(stream.id, stream.d), window, 11))
    assert status.WINDOW_LABEL in html and "2 of eps 2 (100%)" in html
    assert status.BUDGET_OVER_COLOR not in html and "not the budget running out" in html
    central = load_settings({}, config=DEFAULT_STREAMS).streams[0]
    # Issue 32: a central window spent in full is the mechanism working: red is for alerts.
    full = [WindowSpend(lv.w, lv.eps, Fraction(repr(lv.eps))) for lv in central.levels]
    html = "\n".join(status._stream_section(central, _releases(central.id, central.d), full, 11))
    assert status.BUDGET_OVER_COLOR not in html and "(100%)" in html
    over = [WindowSpend(lv.w, lv.eps, 2 * Fraction(repr(lv.eps))) for lv in central.levels]
    html = "\n".join(status._stream_section(central, _releases(central.id, central.d), over, 11))
    assert status.BUDGET_OVER_COLOR in html


def test_the_local_demo_says_on_the_page_which_slots_devices_missed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 23 item 9: devices that did not answer in time are named under the chart too."""
    import numpy as np

    from app.tools.demo import LOCAL_STREAMS
    from app.tools.simulator import DeviceWatch

    stream = load_settings({}, config=LOCAL_STREAMS).streams[0]
    truth = Truth()
    watch = DeviceWatch(truth)
    values = np.array([0, 1, 1, 1])
    watch.record(stream, 10, values, asked=40, late=3)
    watch.record(stream, 11, values, asked=40)
    path = tmp_path / "truth.json"
    truth.dump(path)
    monkeypatch.setenv(status.DEMO_TRUTH_ENV, str(path))
    assert status.demo_truth(stream.id) == {10: [0.25, 0.75], 11: [0.25, 0.75]}
    chart = status._chart(stream, _releases(stream.id, stream.d))
    assert (
        "<b>Devices:</b> 3 of 40 devices asked did not answer slot 10 before its deadline" in chart
    )
    assert chart.count("<b>Devices:</b>") == 1
