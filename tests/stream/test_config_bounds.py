"""The streams file refuses what the service cannot run and defaults to what protects most.

Each case failed before the config package (issue 9 item 8, issue 16 items 1, 4, 5): unknown
keys were ignored, booleans taken as numbers, infinities and absurd sizes accepted; the noise
was Laplace and the relation add-remove unless said otherwise; the default level was the first
level even when it promised less than another.
"""

from __future__ import annotations

import pytest

from app.stream.config import load_streams
from app.stream.errors import ConfigError

LEVEL = "levels: [{name: a, w: 2, eps: 1}]"


def load(tmp_path, text):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_streams(path, env={})


@pytest.mark.parametrize(
    ("stream", "match"),
    [
        ("{id: s, d: 2, slot_seconds: 5, " + LEVEL + "}", "slot_seconds"),  # a typo
        ("{id: s, d: 2, mechanism: {name: pba, nosie: laplace}, " + LEVEL + "}", "nosie"),
        ("{id: s, d: 2, levels: [{name: a, w: 2, eps: true}]}", "eps must be a number"),
        ("{id: s, d: 2, levels: [{name: a, w: 2, eps: 1e9}]}", "eps"),
        ("{id: s, d: 2, levels: [{name: a, w: 2, eps: .inf}]}", "eps"),
        ("{id: s, d: 100000, " + LEVEL + "}", r"\.d"),
        ("{id: s, d: 2, levels: [{name: a, w: 100000, eps: 1}]}", r"\.w"),
        ("{id: s, d: 2, slot_s: 1e-9, " + LEVEL + "}", "slot_s"),
        ("{id: s, d: 2, slot_s: .inf, " + LEVEL + "}", "slot_s"),
        ("{id: s, d: 2, grace_s: .inf, " + LEVEL + "}", "grace_s"),
        ("{id: s, d: 2, neighbours: sometimes, " + LEVEL + "}", "neighbours"),
        ("{id: s, d: 2, max_values: 0, " + LEVEL + "}", "max_values"),
        ("{id: s, d: 2, levels: [{name: a, w: 2, eps: 1, population: 1e30}]}", "population"),
    ],
)
def test_values_the_service_cannot_run_are_refused_with_one_line(tmp_path, stream, match):
    with pytest.raises(ConfigError, match=match) as info:
        load(tmp_path, f"streams: [{stream}]")
    assert "\n" not in str(info.value)


def test_the_defaults_protect_a_change_of_value_with_exact_noise(tmp_path):
    [s] = load(tmp_path, "streams: [{id: s, d: 3, " + LEVEL + "}]")
    assert (s.neighbours, s.sensitivity, s.noise) == ("replace", 2, "geometric")
    m = s.build_mechanism()
    assert m.sensitivity == 2  # the mechanism draws its noise at eps / 2
    [p] = load(tmp_path, "streams: [{id: p, d: 3, neighbours: add-remove, " + LEVEL + "}]")
    assert p.sensitivity == 1  # the papers' relation, chosen explicitly


def test_the_default_level_satisfies_every_level(tmp_path):
    """Levels (120, 1.0) and (40, 0.6): neither satisfies both; the default is synthesized at
    (120, 0.6). With (120, 0.6) offered, that one is the default."""
    two = "[{name: long, w: 120, eps: 1.0}, {name: tight, w: 40, eps: 0.6}]"
    [s] = load(tmp_path, "streams: [{id: s, d: 2, levels: " + two + "}]")
    default = s.levels[s.default_level]
    assert (default.w, default.eps) == (120, 0.6)
    assert all(default.satisfies(level) for level in s.levels)
    offered = "[{name: a, w: 40, eps: 1.0}, {name: b, w: 120, eps: 0.6}]"
    [t] = load(tmp_path, "streams: [{id: t, d: 2, levels: " + offered + "}]")
    assert t.levels[t.default_level].name == "b" and len(t.levels) == 2
    with pytest.raises(ConfigError, match="does not satisfy every level"):
        load(tmp_path, "streams: [{id: u, d: 2, default_level: a, levels: " + offered + "}]")


def test_a_period_stream_whose_values_can_leave_the_noise_grid_is_refused(tmp_path):
    """Issue 33 section 3: the grid noise covers floating-point error only below 2**40 steps.
    A period of 48 slots over 12 categories: 10^6 public users fit, 10^8 may not."""
    path = tmp_path / "streams.yaml"
    stream = (
        "streams:\n  - {id: load, d: 12, slot_s: 1800, sum: {alpha: 1000}, mechanism: optstream,"
        " levels: [{name: a, w: 48, eps: 1.0, population: %d}]}\n"
    )
    path.write_text(stream % 10**8)
    with pytest.raises(ConfigError, match="not below 2\\*\\*40 steps"):
        load_streams(path, env={})
    path.write_text(stream % 10**6)
    (s,) = load_streams(path, env={})
    assert s.levels[0].population == 10**6
