"""Property tests: on random streams, a correct collect stage (a naive reference) passes
``verify``; one planted perturbation of its partials or releases is always found."""

from __future__ import annotations

from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from app.stream.collect.partitioning import partition_for
from app.stream.config import StreamConfig
from app.verify import judge
from app.verify.fit import CannotJudge
from app.verify.report import to_text
from tests.verify.build import CENTRAL, PARTITIONS, Topics, reference_partials, stream_of

SLOT_S = 10.0
FIRST, SLOTS = 50, 16
USERS = 12
STREAM: list[StreamConfig] = []
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def stream(tmp: Path) -> StreamConfig:
    if not STREAM:
        STREAM.append(stream_of(tmp, CENTRAL))
    return STREAM[0]


events = st.lists(
    st.tuples(
        st.integers(0, USERS - 1),
        st.floats(FIRST * SLOT_S, (FIRST + SLOTS) * SLOT_S, exclude_max=True),
        st.integers(0, 2),
    ),
    max_size=150,
)
preferences = st.lists(
    st.tuples(
        st.integers(0, USERS - 1),
        st.sampled_from(["loose", "strict", None, "bogus"]),
        st.floats(FIRST * SLOT_S - 30, (FIRST + SLOTS) * SLOT_S),
    ),
    max_size=8,
)


def build(s: StreamConfig, evs, prefs) -> tuple[Topics, dict]:
    """The topics of a correct run: histories from the preferences (each effective at its
    record's time), partials by the reference, releases and audit for every slot."""
    t = Topics(s)
    histories: dict[str, list[tuple[float, str | None]]] = {}
    for user, level, at in sorted(prefs, key=lambda p: p[2]):
        name = f"u{user}"
        t.preference(name, level, at)
        h = histories.setdefault(name, [])
        if not h or h[-1][1] != level:
            h.append((at, level))
    for name, h in histories.items():
        t.levels(name, h)
    t.read_preferences(FIRST * SLOT_S - 30)  # read at once: every request owed
    order = []
    for user, ts, value in evs:
        t.event(f"u{user}", ts, value)
        order.append((f"u{user}", ts, value))
    # events are read partition by partition, in offset order: what "first" means per user
    parts = reference_partials(s, order, histories, range(FIRST, FIRST + SLOTS))
    for slot in range(FIRST, FIRST + SLOTS):
        for p in range(PARTITIONS):
            t.partial(slot, p, parts[slot, p], sent=(slot + 1) * SLOT_S + 1.5)
        t.release(slot, [float(slot)] * s.d, at=(slot + 1) * SLOT_S + 2)
        t.audit(slot, {"strict": 1.0 / 5, "loose": 4.0 / 3})
    return t, parts


@SETTINGS
@given(evs=events, prefs=preferences)
def test_a_correct_run_passes(tmp_path: Path, evs, prefs):
    s = stream(tmp_path)
    t, _ = build(s, evs, prefs)
    if not evs:  # nothing to account for: refused, never a clean verdict about nothing
        with pytest.raises(CannotJudge, match="nothing to judge"):
            judge(s, t.snap)
        return
    verdict = judge(s, t.snap)
    assert verdict.ok, to_text(verdict, show_users=True)
    for lv in verdict.levels:
        assert lv.worst <= 1 + 1e-9


@SETTINGS
@given(evs=events.filter(bool), prefs=preferences, data=st.data())
def test_one_planted_defect_is_found(tmp_path: Path, evs, prefs, data):
    s = stream(tmp_path)
    t, parts = build(s, evs, prefs)
    m, d = len(s.levels), s.d
    kind = data.draw(st.sampled_from(["move", "add", "release"]))
    if kind == "release":
        slot = data.draw(st.integers(FIRST, FIRST + SLOTS - 1))
        t.release(slot, [-1.0] * s.d, at=9999.0)
        expected = {"release_differs"}
    else:
        user, ts, value = data.draw(st.sampled_from(evs))
        slot, p = int(ts // SLOT_S), partition_for(f"u{user}".encode(), PARTITIONS)
        counts = list(parts[slot, p])
        cells = [i for i, c in enumerate(counts) if c > 0]
        if kind == "move" and cells:
            src = data.draw(st.sampled_from(cells))
            dst = (src + d * data.draw(st.integers(1, m - 1))) % (m * d)  # same value, other level
            counts[src] -= 1
            counts[dst] += 1
        else:
            counts[data.draw(st.integers(0, m * d - 1))] += 1
        first = next(i for i, msg in enumerate(t.snap.partials) if _key(msg) == (slot, p))
        t.partial(slot, p, counts, sent=(slot + 1) * SLOT_S + 1.5)
        t.snap.partials[first] = t.snap.partials.pop()
        expected = {"wrong_group", "no_gap", "overcount"}
    verdict = judge(s, t.snap)
    assert verdict.kinds() & expected, to_text(verdict, show_users=True)


def _key(msg) -> tuple[int, int]:
    from app.stream.records import unpack

    rec = unpack(msg.value)
    return rec["slot"], rec["partition"]
