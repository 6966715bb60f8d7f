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
    """LPD's two rounds ask disjoint cohorts, each with the whole eps: a user spent eps (2), not
    the rounds' sum (4), which would read as an overspend of eps=2 (without the demo's devices
    to ask, the line shows the slot's per-user figure)."""
    settings = settings_of(demo.LOCAL_STREAMS)
    stream = settings.streams[0]
    assert stream.mechanism == "lpd" and stream.levels[0].eps == 2.0
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
    text = demo.header(settings_of(DEFAULT_STREAMS), wide=True)
    for word in ("fresh", "repeat", "eps per user", "negative", "duplicates"):
        assert word in text
    assert "frequencies" not in text  # no local stream in the default file


def test_local_header_speaks_of_frequencies_not_duplicate_events() -> None:
    text = demo.header(settings_of(demo.LOCAL_STREAMS), wide=True)
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
    assert "per user, per window" in demo.header(settings, wide=True)


def local_release(stream: str, histogram: list[float], slot: int = 12) -> dict[str, object]:
    rel = release(stream, {"standard": 4.0}, histogram)
    rel["slot"], rel["start"] = slot, 48.0
    return rel


def test_local_line_shows_the_per_window_figure_the_truth_and_who_was_late() -> None:
    """Issue 23 items 9 and 11: the local demo line names the figure eps bounds, shows the
    devices' true frequencies under the release, and says how many devices did not answer."""
    from fractions import Fraction

    from app.tools.simulator import SlotAnswers

    settings = settings_of(demo.LOCAL_STREAMS)
    stream = settings.streams[0]
    answers = SlotAnswers(asked=40, late=3, refused=0, truth=[0.4, 0.6])
    text = demo.format_local(
        settings, local_release(stream.id, [0.41, 0.59]), "none", answers, {0: Fraction(2)}
    )
    first, second, third = text.splitlines()
    assert " 00:00:48Z fresh " in first
    assert first.endswith("| max per-user spend in any w-window: standard 2 of eps 2 (w=5)")
    assert second.lstrip().startswith("truth | idle=0.400 active=0.600")
    assert second.endswith("mean error 0.010") and first.index("| idle=") == second.index("| idle=")
    assert third == "  3 of 40 devices asked did not answer slot 12 before its deadline"


def test_local_line_says_when_no_device_answered_or_none_was_asked() -> None:
    from app.tools.simulator import SlotAnswers

    settings = settings_of(demo.LOCAL_STREAMS)
    personal = settings.stream("app-usage-personal")
    zero = local_release(personal.id, [0.0, 0.0])
    text = demo.format_local(settings, zero, "none", SlotAnswers(40, 40, 2, [0.5, 0.5]), {})
    assert "private 0 of eps 1 (w=10), open 0 of eps 2 (w=5)" in text
    assert "40 of 40 devices asked did not answer slot 12 before its deadline (none" in text
    assert "2 of 40 devices asked refused slot 12" in text
    text = demo.format_local(settings, zero, "none", None, {})
    assert "no collection request of slot 12 reached the devices" in text
    text = demo.format_local(settings, zero, "none", SlotAnswers(40, 0, 0, [0.5, 0.5]), {})
    assert "all-zero frequencies: no estimate yet" in text


def test_the_watch_keeps_truth_and_the_devices_largest_window_spend() -> None:
    """The simulated devices' own ledgers give the per-user, per-window figure: an LPU device
    reports once per window with the whole eps, whatever the rounds add up to."""
    import numpy as np

    from app.client.clock import When
    from app.client.device import Enrollment
    from app.client.fleet import Fleet
    from app.dp.local import LPU
    from app.dp.local.wire import Tally
    from app.tools.produce import Truth
    from app.tools.simulator import DeviceWatch, _window_spent

    settings = settings_of(demo.LOCAL_STREAMS)
    stream = settings.streams[0]
    service = LPU(d=2, eps=2.0, w=2, users=8)
    fleet = Fleet([Enrollment(user=i, w=2, eps=2.0, slot_s=1.0, origin_s=0.0) for i in range(8)])
    truth = Truth()
    watch = DeviceWatch(truth)
    values = np.array([0, 1, 1, 1, 0, 1, 1, 1])
    for t in (1, 2):
        request = service.open_slot(np.random.default_rng(t))
        answer = fleet.respond(request, values, np.random.default_rng(0), When.offline(t))
        watch.record(stream, 100 + t, values, 4, 0, 0, _window_spent(fleet, answer, t))
        nothing = Tally(t, "publication", np.zeros((1, 2), dtype=np.int64), np.zeros(1, np.int64))
        service.on_tally(nothing, np.random.default_rng(0))
        service.close_slot()
    assert watch.peaks(stream.id) == {0: 2}
    answers = watch.slot(stream.id, 101)
    assert answers is not None and answers.asked == 4 and answers.truth == [0.25, 0.75]
    assert watch.slot(stream.id, 99) is None


def test_device_values_are_drawn_once_per_slot_and_the_wave_swings() -> None:
    import numpy as np

    from app.tools.simulator import WAVE_SLOTS, ValueSource, wave

    source = ValueSource("synthetic:wave", 1000, 2, np.random.default_rng(0))
    first = source.at(3)
    assert source.at(3) is first  # both rounds of a slot see the same values
    assert abs(first.mean() - wave(3)[2]) < 0.05
    p = wave(WAVE_SLOTS)
    assert p.min() == pytest.approx(0.1) and p.max() == pytest.approx(0.9)


def test_the_demo_prints_the_compact_line_of_releases_tail_with_its_truth_aligned() -> None:
    """Issue 32: the demo's line was 225 characters; it is now releases tail's compact line."""
    from app.client.releases import SlotRelease
    from app.tools.releases import COMPACT_WIDTH, compact_line

    stream = settings_of(demo.DEMO_STREAMS).streams[0]
    hist = tuple(float(100 + 10 * i) for i in range(stream.d))
    rel = SlotRelease(
        stream.id, 897718126, 1795436252.0, 1795436254.0, hist, True, "pba", {"standard": 0.4}, 1, 1
    )
    truth = [103 + 10 * i for i in range(stream.d)]
    first, second = demo.format_compact(rel, "none", False, truth).splitlines()
    assert first == compact_line(rel) and len(first) <= COMPACT_WIDTH
    assert len(second) <= COMPACT_WIDTH + 20 and second.endswith("mean error 3.0")
    assert first.index("|") == second.index("|")
    assert first.split("|")[1].split() == [f"{x:.0f}" for x in hist]
    assert second.split("|")[1].split() == [str(t) for t in truth]
    text = demo.header(settings_of(demo.DEMO_STREAMS))
    assert "--wide" in text and " ".join(stream.labels) in text
