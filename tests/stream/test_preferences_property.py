"""Property: whatever the ``preferences`` topic holds, no window of a level sees a user twice.

Hypothesis drives the collect path exactly as the ingest service does (events through
``Collector.add``; preference records through ``decode_preference`` and
``Collector.set_preference`` with their Kafka timestamp; settled fetches and ``flush``) with
hostile preference records: tombstones, malformed values, unknown level names, timestamps far
in the past or the future, flips every slot, records read before or after the events of the
same slot. Each user sends its own value, so a closed slot's counts show in which level (if
any) each user was counted.

The guarantee (:mod:`app.stream.collect.preferences`): a user counted in level ``a`` at slot ``s1``
and
in level ``b != a`` at slot ``s2 > s1`` has ``s2 - s1 >= max(w_a, w_b)``, so no window of
either level holds values of both; and a user is counted at most once per slot.
"""

from __future__ import annotations

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.stream.collect.events import Collector
from app.stream.config import load_streams
from app.stream.records import decode_preference
from tests.stream.preference_ops import PREFERENCE_VALUES, USERS, event, preference, tick

SLOT_S = 10.0
YAML = """
streams:
  - id: s
    d: 3
    slot_s: 10
    grace_s: 1
    levels:
      - {name: strict, w: 4, eps: 0.5}
      - {name: loose, w: 2, eps: 1.0}
      - {name: mid, w: 3, eps: 0.8}
"""

operations = st.lists(st.one_of(tick, event, event, preference), min_size=10, max_size=160)


def run(streams, ops) -> dict[int, list[int]]:
    """Play ``ops`` on a collector; return the closed slots' counts (``groups x d``)."""
    c = Collector(streams, partitions_total=1)
    c.assign(0)
    c.partitions[0].caught_up = True
    now, offset = 100.0, 0
    closed: dict[int, list[int]] = {}

    def flush() -> None:
        c.observe_fetch(0, now - 2.0, at_end=True, gap_s=100)
        c.observe_fetch(0, now, at_end=True, gap_s=100)
        for p in c.flush()[0]:
            assert p.slot not in closed, "a slot closes once"
            closed[p.slot] = p.counts

    for op in ops:
        if op[0] == "tick":
            now += op[1]
            flush()
        elif op[0] == "event":
            user, back = op[1], op[2]
            value = {"stream": "s", "user": user, "ts": now - back, "value": USERS.index(user)}
            c.add(0, offset, user.encode(), msgpack.packb(value), wall_now=now)
            offset += 1
        else:
            user, which, rel = op[1], op[2], op[3]
            at = 0.0 if rel is None else now + rel
            c.set_preference(user, decode_preference(PREFERENCE_VALUES[which]), at)
    now += 100 * SLOT_S
    flush()
    return closed


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_no_window_of_any_level_counts_a_user_in_two_levels(ops):
    [stream] = load_streams_once()
    widths = [level.w for level in stream.levels]
    m, d = len(stream.levels), stream.d
    closed = run([stream], ops)
    for i, _user in enumerate(USERS):
        counted: list[tuple[int, int]] = []  # (slot, group)
        for slot in sorted(closed):
            column = [closed[slot][g * d + i] for g in range(m)]
            assert sum(column) <= 1, "one value per user per slot"
            if sum(column) == 1:
                counted.append((slot, column.index(1)))
        for k, (s1, a) in enumerate(counted):
            for s2, b in counted[k + 1 :]:
                if a != b:
                    assert s2 - s1 >= max(widths[a], widths[b]), (counted, s1, a, s2, b)


def test_a_user_without_changes_is_always_counted_in_the_default_level():
    """The property above must not hold by counting nobody: a plain stream counts everyone."""
    [stream] = load_streams_once()
    ops = [("event", u, 0.5) for u in USERS] + [("tick", 10.0)]
    ops = ops * 12
    closed = run([stream], ops)
    counted = [slot for slot, counts in closed.items() if sum(counts) == len(USERS)]
    assert len(counted) >= 10
    assert all(closed[s][: stream.d] == [1, 1, 1] for s in counted)  # default level: strict


_STREAMS: list = []


def load_streams_once():
    if not _STREAMS:
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "s.yaml"
            path.write_text(YAML)
            _STREAMS.extend(load_streams(path, env={}))
    return _STREAMS
