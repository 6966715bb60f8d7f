"""Sum streams (issue 13 item 3): events carry an ``amount``, the collect stage keeps each
user's first amount per value and slot clipped to ``alpha``, partials carry float sums, and
only the period mechanisms (noise calibrated to ``alpha``) accept such a stream."""

from __future__ import annotations

import asyncio
import math

import msgpack
import numpy as np
import pytest

from app.dp.period import OptStream
from app.stream.collect.events import Collector
from app.stream.config import load_settings, load_streams
from app.stream.errors import BadEvent, ConfigError
from app.stream.internal import Partial, Tick
from app.stream.records import REASONS, Domain
from app.stream.release import Releaser
from tests.stream.agent import sized_topics
from tests.wire.shapes import decode_event

ALPHA = 50.0


def stream_yaml(extra: str = "", mechanism: str = "optstream", levels: str = "") -> str:
    return f"""
streams:
  - id: e
    labels: [north, south, west]
    slot_s: 10
    grace_s: 1
    release_timeout_s: 1
    mechanism: {{name: {mechanism}, noise: laplace}}
    accept_weaker_guarantee: true  # noise: laplace, the papers' float noise
    levels:
      - {{name: strict, w: 4, eps: 1.0}}
{levels}{extra}
"""


def load(tmp_path, text):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_streams(path, env={})


# -- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "alpha", "delta"),
    [
        (f"    sum: {{alpha: {ALPHA}}}\n", ALPHA, 2 * ALPHA),  # replace: 2 alpha
        (f"    sum: {{alpha: {ALPHA}}}\n    neighbours: add-remove\n", ALPHA, ALPHA),
        (f"    sum: {{alpha: {ALPHA}}}\n    max_values: 3\n", ALPHA, 6 * ALPHA),  # times l
        ("", None, 2.0),  # a count stream: no alpha
    ],
)
def test_a_sum_streams_mechanism_gets_sensitivity_alpha_times_the_count_one(
    tmp_path, extra, alpha, delta
):
    (stream,) = load(tmp_path, stream_yaml(extra))
    assert stream.alpha == alpha and stream.sums == (alpha is not None)
    mech = stream.build_mechanism()
    assert mech.alpha == alpha
    assert mech.delta == delta


@pytest.mark.parametrize(
    ("extra", "mechanism", "match"),
    [
        ("    sum: {alpha: 50}\n", "pba", r"mechanism 'pba' does not release sums; use one of"),
        ("    sum: {alpha: 0}\n", "optstream", r"sum\.alpha must be a finite number in"),
        ("    sum: {alpha: -3}\n", "optstream", r"sum\.alpha must be a finite number in"),
        ("    sum: {alpha: .nan}\n", "optstream", r"sum\.alpha must be a finite number in"),
        ("    sum: {alpha: true}\n", "optstream", r"sum\.alpha must be a number, got True"),
        ("    sum: {}\n", "optstream", r"sum\.alpha must be a number, got None"),
        ("    sum: {alpha: 5, clip: 2}\n", "optstream", r"sum: unknown key\(s\) \['clip'\]"),
        ("    sum: 50\n", "optstream", r"sum must be a mapping \{alpha: number\}, got 50"),
    ],
)
def test_sum_configuration_errors_are_one_line(tmp_path, extra, mechanism, match):
    with pytest.raises(ConfigError, match=match) as info:
        load(tmp_path, stream_yaml(extra, mechanism))
    assert "\n" not in str(info.value)


def test_the_bound_is_only_given_under_sum(tmp_path):
    text = stream_yaml().replace("noise: laplace}", "noise: laplace, params: {alpha: 5}}")
    with pytest.raises(ConfigError, match=r"give the sum bound as `sum: \{alpha: \.\.\.\}`"):
        load(tmp_path, text)


def test_a_local_stream_cannot_sum(tmp_path):
    text = """
streams:
  - id: loc
    mode: local
    d: 2
    slot_s: 300
    round_s: 60
    mechanism: {name: lpa, params: {users: 60}}
    levels: [{name: standard, w: 4, eps: 1.0}]
    sum: {alpha: 5}
"""
    with pytest.raises(ConfigError, match=r"does not release sums|sums are central only"):
        load(tmp_path, text)


# -- decoding -----------------------------------------------------------------------------------

SUMS = {"e": Domain(3, {"north": 0, "south": 1, "west": 2}, sums=True)}
COUNTS = {"e": Domain(3, {"north": 0, "south": 1, "west": 2})}
EVENT = {"stream": "e", "user": "u1", "ts": 5.0, "value": "south"}


def test_a_sum_event_decodes_to_its_value_and_amount_and_a_count_event_ignores_amount():
    assert decode_event(msgpack.packb({**EVENT, "amount": 7}), SUMS) == ("e", "u1", 5.0, (1, 7.0))
    assert decode_event(msgpack.packb({**EVENT, "value": 2, "amount": 0.5}), SUMS)[3] == (2, 0.5)
    assert decode_event(msgpack.packb({**EVENT, "amount": -1}), COUNTS) == ("e", "u1", 5.0, 1)


@pytest.mark.parametrize(
    ("amount", "reason"),
    [
        (-0.001, "bad_amount"),
        (math.inf, "bad_amount"),
        (-math.inf, "bad_amount"),
        (math.nan, "bad_amount"),
        ("7", "wrong_type"),
        (True, "wrong_type"),
        (None, "wrong_type"),
    ],
)
def test_an_amount_that_is_not_a_finite_number_at_least_zero_is_refused(amount, reason):
    with pytest.raises(BadEvent) as info:
        decode_event(msgpack.packb({**EVENT, "amount": amount}), SUMS)
    assert info.value.reason == reason and reason in REASONS


def test_a_sum_event_without_amount_is_missing_a_field():
    with pytest.raises(BadEvent) as info:
        decode_event(msgpack.packb(EVENT), SUMS)
    assert info.value.reason == "missing_field"


# -- collecting ---------------------------------------------------------------------------------


def collector(tmp_path, extra=f"    sum: {{alpha: {ALPHA}}}\n", levels=""):
    c = Collector(load(tmp_path, stream_yaml(extra, levels=levels)), partitions_total=1)
    c.assign(0)
    c.partitions[0].caught_up = True
    return c


def add(c, events, wall_now=112.0):
    bad = []
    for off, (user, ts, value, amount) in enumerate(events):
        raw = msgpack.packb(
            {"stream": "e", "user": user, "ts": ts, "value": value, "amount": amount}
        )
        try:
            c.add(0, off, user.encode(), raw, wall_now=wall_now)
        except BadEvent as exc:
            bad.append(exc.reason)
    return bad


def close(c, t=120.5):
    c.observe_fetch(0, t - 5, at_end=True, gap_s=100)
    c.observe_fetch(0, t, at_end=True, gap_s=100)
    partials, _ = c.flush()
    return {p.slot: p.counts for p in partials}


def test_amounts_are_summed_per_category_each_users_first_clipped_to_alpha(tmp_path):
    c = collector(tmp_path)
    bad = add(
        c,
        [
            ("u", 101, "north", 12.5),
            ("u", 102, "north", 30.0),  # the same user again in the slot: duplicate
            ("u", 103, "south", 1.0),  # another value, one value per user: duplicate
            ("v", 104, "north", 80.0),  # clipped to alpha
            ("w", 105, "west", 0.25),
            ("x", 106, "south", ALPHA),  # exactly alpha: not clipped
            ("y", 107, "south", -2.0),  # dead-lettered
            ("z", 111, "west", 3.0),  # next slot
        ],
    )
    assert bad == ["bad_amount"]
    got = close(c)
    assert got == {10: [12.5 + ALPHA, ALPHA, 0.25]}
    assert all(type(x) is float for x in got[10])
    assert c.take_outcomes() == {
        ("e", "accepted"): 4,
        ("e", "duplicate"): 2,
        ("e", "clipped"): 1,
    }


def test_with_max_values_each_distinct_value_keeps_its_own_clipped_amount(tmp_path):
    c = collector(tmp_path, f"    sum: {{alpha: {ALPHA}}}\n    max_values: 2\n")
    add(
        c,
        [
            ("u", 101, "north", 10.0),
            ("u", 102, "south", 70.0),  # second distinct value, amount clipped
            ("u", 103, "north", 5.0),  # a repeated value: duplicate
            ("u", 104, "west", 1.0),  # a third distinct value: past l = 2, clipped and dropped
        ],
    )
    assert close(c) == {10: [10.0, ALPHA, 0.0]}
    assert c.take_outcomes() == {("e", "accepted"): 1, ("e", "clipped"): 2, ("e", "duplicate"): 1}


def test_a_users_amounts_go_to_its_levels_row_and_never_below_zero(tmp_path):
    levels = "      - {name: loose, w: 2, eps: 1.0}\n"
    c = collector(tmp_path, levels=levels)
    c.set_preference("v", "loose", 0.0)
    add(c, [("u", 101, "north", 0.1), ("v", 102, "north", 0.2), ("w", 103, "south", 0.3)])
    (sums,) = close(c).values()
    rows = np.array(sums).reshape(2, 3)
    # Added once to the right row: exact (0.1 + 0.2 - 0.2 in floats is not 0.1).
    assert rows.tolist() == [[0.1, 0.3, 0.0], [0.2, 0.0, 0.0]]


def test_an_empty_slot_of_a_sum_stream_closes_into_float_zeros(tmp_path):
    c = collector(tmp_path)
    add(c, [("u", 111, "north", 1.0)])
    assert close(c, 120.5) == {10: [0.0, 0.0, 0.0]}


def test_a_count_stream_is_unchanged_by_amounts(tmp_path):
    c = collector(tmp_path, "")
    add(c, [("u", 101, "north", 12.5), ("v", 102, "north", -4.0), ("w", 103, "west", 1e9)])
    got = close(c)
    assert got == {10: [2, 0, 1]} and all(type(x) is int for x in got[10])


# -- releasing ----------------------------------------------------------------------------------


def test_the_release_driver_hands_the_merged_float_sums_to_the_mechanism(tmp_path, monkeypatch):
    path = tmp_path / "s.yaml"
    path.write_text(stream_yaml(f"    sum: {{alpha: {ALPHA}}}\n"))
    settings = load_settings(
        env={"DPSTREAM_NOISE_KEY": "cd" * 16, "DPSTREAM_DEPLOYMENT": "test"}, config=path
    )
    seen: list[np.ndarray] = []
    step = OptStream.step

    def spy(self, counts, rng, population=None):
        seen.append(np.array(counts))
        return step(self, counts, rng, population)

    monkeypatch.setattr(OptStream, "step", spy)
    sent: list[tuple[str, bytes]] = []

    async def produce(topic, key, value):
        sent.append((topic, value))

    async def persist():
        return None

    now = [0.0]
    r = Releaser(settings, sized_topics(events=2), {}, {}, produce, persist, clock=lambda: now[0])

    def run(raw, t):
        now[0] = t
        asyncio.run(r.on_message(raw))

    run(Tick("e", {0: 101.6, 1: 101.6}, 2).encode(), 101.6)  # slot 9 (due 101) is the first
    seen.clear()
    run(Partial("e", 10, 0, 2, [2.5, 0.0, 49.75]).encode(), 111.0)
    run(Partial("e", 10, 1, 2, [0.25, 0.5, 0.0]).encode(), 111.1)
    assert len(seen) == 1
    assert seen[0].dtype == np.float64
    assert seen[0].tolist() == [[2.75, 0.5, 49.75]]
