"""The demo's release lines and its configuration checks (no broker needed)."""

from __future__ import annotations

import argparse

import pytest

from app.stream.config import DEFAULT_STREAMS, load_settings
from app.stream.errors import ConfigError
from app.tools import demo


def settings_of(path: object) -> object:
    return load_settings({}, config=path)  # type: ignore[arg-type]


def release(stream: str, spent: dict[str, float], histogram: list[float]) -> dict[str, object]:
    return {
        "stream": stream,
        "slot": 7,
        "start": 0.0,
        "end": 4.0,
        "histogram": histogram,
        "fresh": True,
        "mechanism": "x",
        "spent_by_group": spent,
    }


def test_local_population_division_shows_what_one_user_spent() -> None:
    """LPA's two rounds ask disjoint cohorts, each with the whole eps: a user spent eps (2), not
    the rounds' sum (4), which would read as an overspend of eps=2."""
    settings = settings_of(demo.LOCAL_STREAMS)
    stream = settings.streams[0]
    assert stream.mechanism == "lpa" and stream.levels[0].eps == 2.0
    line = demo.format_release(settings, release(stream.id, {"standard": 4.0}, [0.9, 0.1]))
    assert line.endswith("| eps per asked user: standard 2 of 2 (w=5)")
    assert demo.per_user_spent(stream, 0.0, "standard") == 0.0


def test_personalized_local_shows_each_levels_report_budget() -> None:
    """PLPA+ splits the private level's eps = 1 in two shares (OPS recycles every 5 slots, its
    w is 10): a private user reports with 0.5 once per slot, whatever the rounds' sum."""
    settings = settings_of(demo.LOCAL_STREAMS)
    stream = settings.stream("app-usage-personal")
    line = demo.format_release(
        settings, release(stream.id, {"private": 1.0, "open": 4.0}, [0.5, 0.5])
    )
    assert line.endswith("| eps per asked user: private 0.5 of 1 (w=10), open 2 of 2 (w=5)")


def test_central_spent_is_shown_against_each_level_eps() -> None:
    settings = settings_of(DEFAULT_STREAMS)
    stream = settings.streams[0]
    spent = {lv.name: lv.eps / 8 for lv in stream.levels}
    line = demo.format_release(settings, release(stream.id, spent, [1.0] * stream.d))
    for lv in stream.levels:
        assert f"{lv.name} {lv.eps / 8:.3g} of {lv.eps:g} (w={lv.w})" in line


def test_header_says_what_the_figures_mean() -> None:
    text = demo.header(settings_of(DEFAULT_STREAMS))
    for word in ("fresh", "repeat", "eps per user", "negative", "duplicates"):
        assert word in text
    assert "frequencies" not in text  # no local stream in the default file


def test_local_header_speaks_of_frequencies_not_duplicate_events() -> None:
    text = demo.header(settings_of(demo.LOCAL_STREAMS))
    assert "frequencies" in text and "duplicates" not in text


def test_local_demo_honours_dpstream_config_and_hints_at_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With DPSTREAM_CONFIG naming a file without local streams, ``--mode local`` uses it (and
    refuses, naming --config) instead of silently switching to the packaged local file."""
    monkeypatch.setenv("DPSTREAM_CONFIG", str(DEFAULT_STREAMS))
    monkeypatch.setenv("DPSTREAM_NOISE_KEY", "5a" * 32)
    args = argparse.Namespace(config=None, mode="local", rate=1.0, users=1, duration=1.0)
    with pytest.raises(ConfigError, match="no local stream .*--config"):
        demo.run_demo(args)


def test_central_demo_on_a_local_only_file_points_at_mode_local() -> None:
    with pytest.raises(ConfigError, match="--mode local"):
        demo.check_streams(settings_of(demo.LOCAL_STREAMS), local=False)  # type: ignore[arg-type]


def test_post_clamp_prints_non_negative_integers() -> None:
    settings = settings_of(DEFAULT_STREAMS)
    stream = settings.streams[0]
    hist = [-3.4] + [2.6] * (stream.d - 1)
    line = demo.format_release(settings, release(stream.id, {}, hist), post="clamp")
    cells = line.split(" | ")[1].split()
    assert cells[0] == f"{stream.labels[0]}=0" and cells[1] == f"{stream.labels[1]}=3"


def test_demo_streams_are_the_default_and_show_the_truth_under_the_release() -> None:
    """Issue 23 item 9: the demo's own file, times in UTC, and the slot's synthetic truth."""
    settings = settings_of(demo.DEMO_STREAMS)
    stream = settings.streams[0]
    assert stream.levels[stream.default_level].population == demo.DEMO_USERS
    rel = release(stream.id, {"standard": 0.4}, [10.0] * stream.d)
    rel["start"] = 3600.0
    text = demo.format_release(settings, rel, truth=[12] * stream.d)
    first, second = text.splitlines()
    assert " 01:00:00Z fresh " in first
    assert first.endswith("| eps per user: standard 0.4 of 2 (w=5)")
    assert second.lstrip().startswith("truth | home=12") and second.endswith("mean error 2.0")
    assert first.index("| home=") == second.index("| home=")


def test_truth_counts_one_value_per_user_and_slot() -> None:
    from app.tools.produce import Truth

    stream = settings_of(demo.DEMO_STREAMS).streams[0]
    truth = Truth(keep=2)
    for ts, user, value in [(0.5, "a", 1), (0.7, "a", 3), (0.9, "b", 3), (2.1, "a", 0)]:
        truth.add(stream, ts, user, value)
    assert truth.histogram(stream.id, 0)[:4] == [0, 1, 0, 1]
    assert truth.histogram(stream.id, 1)[:4] == [1, 0, 0, 0]
    truth.add(stream, 4.1, "a", 0)
    assert truth.histogram(stream.id, 0) is None  # older than keep slots


def test_a_local_release_with_no_report_says_the_devices_did_not_answer() -> None:
    """Issue 23 item 9: a busy machine's all-zero local releases are explained, not silent."""
    settings = settings_of(demo.LOCAL_STREAMS)
    stream = settings.streams[0]
    text = demo.format_release(settings, release(stream.id, {"standard": 2.0}, [0.0, 0.0]))
    assert "no device answered this slot's collection request in time" in text
    fine = demo.format_release(settings, release(stream.id, {"standard": 2.0}, [0.4, 0.6]))
    assert "no device answered" not in fine
    assert "per user, per window" in demo.header(settings)
