"""``verify`` sums each user's spend across the streams of its privacy unit, over every
interval of the unit's length, and flags a user beyond the unit's bound (``unit_overspend``)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.stream.collect.partitioning import partition_for
from app.stream.config import StreamConfig, load_streams
from app.stream.records import pack
from app.verify import judge
from app.verify.report import to_dict, to_text
from app.verify.units import UserSpend, worst_intervals
from tests.verify.build import CENTRAL, PARTITIONS, Topics, reference_partials, stream_of
from tests.verify.test_open_plant import OpenTopics

SLOTS = range(100, 110)
USERS = [f"u{i}" for i in range(4)]


def scenario(tmp_path: Path, spent: float) -> Topics:
    """Every user one value per slot, at the default level; the audit says each group spent
    ``spent`` in every slot."""
    stream = stream_of(tmp_path, CENTRAL + "privacy: {interval_s: 20}\n")
    t = Topics(stream)
    events = []
    for slot in SLOTS:
        for i, user in enumerate(USERS):
            ts = slot * 10 + 1 + i * 0.5
            events.append((user, ts, i % 3))
            t.event(user, ts, i % 3)
    parts = reference_partials(stream, events, {}, SLOTS)
    for slot in SLOTS:
        for p in range(PARTITIONS):
            t.partial(slot, p, parts[slot, p], sent=slot * 10 + 11.5)
        t.release(slot, [0.0] * stream.d, at=slot * 10 + 12.0)
        t.audit(slot, {"strict": spent, "loose": spent})
    return t


def test_a_unit_within_its_bound(tmp_path: Path):
    t = scenario(tmp_path, spent=0.2)
    # uniform keeps one ledger at (w 5, eps 1); 20 s touch 3 slots of 10 s: bound 1 window
    assert t.stream.unit.eps == 1.0
    verdict = judge(t.stream, t.snap, [t.stream])
    assert verdict.ok, to_text(verdict)
    assert verdict.unit.users == len(USERS)
    assert verdict.unit.worst == pytest.approx(0.2 * 3)
    assert to_dict(verdict)["privacy_unit"]["bound_eps"] == 1.0
    assert "privacy unit central (s)" in to_text(verdict)


def test_a_group_spending_beyond_the_unit_bound_is_found(tmp_path: Path):
    """The audit says every group spent 0.5 a slot: three slots in 20 s make 1.5 > 1 for
    every user (the per-stream window check finds it too, over 5 slots)."""
    t = scenario(tmp_path, spent=0.5)
    verdict = judge(t.stream, t.snap, [t.stream])
    assert verdict.counts["unit_overspend"] == len(USERS)
    assert verdict.unit.worst == pytest.approx(1.5)
    assert "unit_overspend" in to_text(verdict) and "u0" not in to_text(verdict)


def brute(rows: list[UserSpend], interval: float) -> dict[str, float]:
    """The worst interval per user, trying every start just before a slot ends and every
    slot start: a plain loop over users and placements."""
    flat = [
        (r.users[u], a, b, c)
        for r in rows
        for u, a, b, c in zip(r.user, r.start, r.end, r.spend, strict=True)
    ]
    out = {}
    for user in {f[0] for f in flat}:
        mine = [(a, b, c) for u, a, b, c in flat if u == user]
        starts = [b - 1e-4 for _, b, _ in mine] + [a for a, _, _ in mine]
        out[user] = max(sum(c for a, b, c in mine if a < t + interval and b > t) for t in starts)
    return out


@st.composite
def spend_rows(draw: st.DrawFn) -> list[UserSpend]:
    users = ("a", "b", "c")
    rows = []
    for slot_s in (draw(st.sampled_from([1.0, 2.5, 10.0])), draw(st.sampled_from([3.0, 60.0]))):
        n = draw(st.integers(1, 25))
        user = np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), dtype=np.int64)
        slot = np.array(draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)), dtype=np.int64)
        spend = np.array(draw(st.lists(st.sampled_from([0.1, 0.25, 1.0]), min_size=n, max_size=n)))
        rows.append(UserSpend(users, user, slot * slot_s, (slot + 1) * slot_s, spend))
    return rows


@settings(max_examples=150, deadline=None)
@given(spend_rows(), st.sampled_from([1.0, 5.0, 30.0, 100.0]))
def test_worst_intervals_match_a_brute_force(rows, interval):
    found = {u: spent for u, (_, spent) in worst_intervals(rows, interval).items()}
    expected = brute(rows, interval)
    assert found.keys() == expected.keys()
    for u, spent in found.items():
        assert abs(spent - expected[u]) < 1e-9, (u, spent, expected[u])


TWO_OPEN = """
streams:
  - id: urls
    domain: open
    slot_s: 10.0
    grace_s: 1.0
    mechanism: open_uniform
    levels: [{name: std, w: 3, eps: 3.0, delta: 3.0e-4, population: 100000}]
  - id: terms
    domain: open
    slot_s: 10.0
    grace_s: 1.0
    mechanism: open_uniform
    levels: [{name: std, w: 3, eps: 3.0, delta: 3.0e-4, population: 100000}]
privacy: {interval_s: 20}
"""
DELTA_T = Fraction(1, 10_000)
"""What each slot of each stream spends: delta / w (and eps / w = 1)."""


def two_open(tmp_path: Path, planted: Fraction) -> tuple[dict[str, StreamConfig], Topics]:
    """Every user sends one key per slot to both open streams of the unit ``central``; each
    slot's audit states ``DELTA_T`` in its exact field, except ``terms``' slot 104, which
    states ``planted`` (its float field still says ``DELTA_T``: verify reads the exact one)."""
    path = tmp_path / "streams.yaml"
    path.write_text(TWO_OPEN)
    streams = {s.id: s for s in load_streams(path)}
    t = OpenTopics(streams["urls"])
    for stream in streams.values():
        t.stream = stream
        for slot in SLOTS:
            parts: dict[int, dict[str, int]] = {}
            for i, user in enumerate(USERS):
                key = f"{stream.id}-{(i + slot) % 3}"
                t.key_event(user, slot * 10 + 1 + i * 0.5, key)
                counts = parts.setdefault(partition_for(user.encode(), PARTITIONS), {})
                counts[key] = counts.get(key, 0) + 1
            for p in range(PARTITIONS):
                t.open_partial(slot, p, parts.get(p, {}), sent=slot * 10 + 11.5)
            t.release(slot, [], at=slot * 10 + 12.0)
            delta = planted if (stream.id, slot) == ("terms", 104) else DELTA_T
            record = {
                "stream": stream.id,
                "slot": slot,
                "spent_by_group": {"std": 1.0},
                "spent_exact_by_group": {"std": "1"},
                "delta_spent_by_group": {"std": float(DELTA_T)},
                "delta_spent_exact_by_group": {"std": str(delta)},
            }
            t.snap.audit.append(t._msg("audit", 0, 0, stream.id.encode(), pack(record)))
    return streams, t


def test_a_unit_of_two_open_streams_within_its_delta(tmp_path: Path):
    streams, t = two_open(tmp_path, DELTA_T)
    unit = streams["urls"].unit
    assert unit is streams["terms"].unit
    # 20 s touch 3 slots of 10 s: one window of 3 per stream, delta 3e-4 each
    assert unit.delta == pytest.approx(6e-4)
    verdict = judge(streams["urls"], t.snap, list(streams.values()))
    assert verdict.ok, to_text(verdict)
    assert verdict.unit.worst_delta == pytest.approx(6e-4)  # 3 slots x 2 streams x 1e-4
    assert to_dict(verdict)["privacy_unit"]["bound_delta"] == unit.delta
    assert "delta 0.0006 of 0.0006" in to_text(verdict)


def test_a_delta_overspend_across_two_open_streams_is_found(tmp_path: Path):
    """``terms`` spends 2.5e-4 in slot 104: 4.5e-4 in its windows over it (its own check finds
    that), within the unit's 6e-4 alone, but 7.5e-4 with ``urls``' 3e-4 in the same 20 s: only
    the unit's sum across both streams finds it, also when judging ``urls``, clean on its own."""
    streams, t = two_open(tmp_path, Fraction(25, 100_000))
    verdict = judge(streams["urls"], t.snap, list(streams.values()))
    assert verdict.kinds() == {"unit_delta_overspend"}, to_text(verdict)
    assert verdict.counts["unit_delta_overspend"] == len(USERS)
    assert verdict.unit.worst_delta == pytest.approx(7.5e-4)
    assert verdict.unit.over == ()  # eps stays within the unit's bound
    assert "unit_delta_overspend" in to_text(verdict) and "u0" not in to_text(verdict)
    own = judge(streams["terms"], t.snap, list(streams.values()))
    assert own.kinds() == {"delta_overspend", "unit_delta_overspend"}, to_text(own)
