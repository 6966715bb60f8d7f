"""Property: on whatever a correct worker writes, ``verify`` finds nothing (no false alarm).

Hypothesis drives the worker's own collect stage (:class:`~app.stream.collect.events.Collector`,
as ``tests/stream/test_preferences_property.py`` does) with hostile ``preferences`` records:
tombstones, malformed values, unknown level names, timestamps far in the past or the future,
and bursts of flips that push a user's history past the changes a record keeps (truncated
records). The topics are written the way the ingest service writes them: a ``levels`` record
for every user whose history changed, stamped before the partials of the flush that follows,
and the partials of every closed slot. ``verify`` must judge all of it clean, account for every
value, and never call a value ``dropped``.
"""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.stream.collect.events import Collector
from app.stream.collect.preferences import KEEP_CHANGES
from app.stream.records import decode_preference, pack
from app.verify import judge
from app.verify.fit import CannotJudge
from app.verify.read import Msg, Snapshot
from tests.stream.preference_ops import PREFERENCE_VALUES, USERS, event, preference, tick
from tests.verify.build import stream_of

YAML = """
streams:
  - id: s
    labels: [a, b, c]
    slot_s: 10.0
    grace_s: 1.0
    mechanism: {name: uniform}
    levels:
      - {name: strict, w: 4, eps: 0.5}
      - {name: loose, w: 2, eps: 1.0}
      - {name: mid, w: 7, eps: 0.8}
"""

burst = st.tuples(  # flips between two levels, more than a levels record keeps
    st.just("burst"), st.sampled_from(USERS), st.integers(KEEP_CHANGES - 4, KEEP_CHANGES + 8)
)
operations = st.lists(
    st.one_of(tick, tick, event, event, event, preference, burst), min_size=10, max_size=200
)


class Deployment:
    """One worker's collect stage and the topics it writes (one partition)."""

    def __init__(self, stream) -> None:
        self.c = Collector([stream], partitions_total=1)
        self.c.assign(0)
        self.c.partitions[0].caught_up = True
        self.snap = Snapshot(input_partitions=1)
        self.now = 1000.0
        self.changed: set[str] = set()
        self.offsets: dict[str, int] = {}

    def _msg(self, topic: str, t_ms: int, key: bytes | None, value: bytes | None) -> Msg:
        off = self.offsets.get(topic, 0)
        self.offsets[topic] = off + 1
        return Msg(0, off, t_ms, key, value)

    def event(self, user: str, back: float) -> None:
        value = {"stream": "s", "user": user, "ts": self.now - back, "value": USERS.index(user)}
        raw = msgpack.packb(value)
        # appended just after the flush at ``now``: late for the slots that flush closed
        msg = self._msg("events", int(self.now * 1000) + 1, user.encode(), raw)
        self.snap.events.append(msg)
        self.c.add(0, msg.offset, user.encode(), raw, wall_now=self.now)

    def preference(self, user: str, raw: bytes | None, at: float) -> None:
        self.snap.preferences.append(self._msg("preferences", int(at * 1000), user.encode(), raw))
        if self.c.set_preference(user, decode_preference(raw), round(at * 1000) / 1000):
            self.changed.add(user)

    def flush(self) -> None:
        t_ms = int(self.now * 1000)
        for user in sorted(self.changed):  # saved before any slot closes on them
            history = self.c.preferences.history(user)
            assert history is not None
            self.snap.levels.append(
                self._msg("levels", t_ms, user.encode(), pack(history.to_dict()))
            )
        self.changed.clear()
        read = self.offsets.get("preferences", 0)
        if read:  # the offset marker: every preference so far was read
            self.snap.levels.append(
                self._msg("levels", t_ms, b"\x00offset:0", pack({"offset": read}))
            )
        self.c.observe_fetch(0, self.now - 2.0, at_end=True, gap_s=100)
        self.c.observe_fetch(0, self.now, at_end=True, gap_s=100)
        for partial in self.c.flush()[0]:
            self.snap.partials.append(self._msg("partials", t_ms, b"s", partial.encode()))


def play(stream, ops) -> Deployment:
    dep = Deployment(stream)
    for op in ops:
        if op[0] == "tick":
            dep.now += op[1]
            dep.flush()
        elif op[0] == "event":
            dep.event(op[1], op[2])
        elif op[0] == "pref":
            at = 0.0 if op[3] is None else dep.now + op[3]
            dep.preference(op[1], PREFERENCE_VALUES[op[2]], at)
        else:
            for i in range(op[2]):
                dep.preference(op[1], PREFERENCE_VALUES[i % 2], dep.now)
    dep.now += 100 * stream.slot_s
    dep.flush()
    return dep


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
def test_verify_finds_nothing_on_what_the_worker_writes(tmp_path_factory, ops):
    stream = stream_of(tmp_path_factory.mktemp("s"), YAML)
    dep = play(stream, ops)
    if not dep.snap.events:
        with pytest.raises(CannotJudge):
            judge(stream, dep.snap)
        return
    verdict = judge(stream, dep.snap)
    assert verdict.ok, [(v.kind, v.detail) for v in verdict.violations]
    assert "dropped" not in verdict.not_released, verdict.not_released
    assert verdict.unjudged == 0
    accounted = sum(verdict.not_released.values()) + verdict.released
    assert accounted == len({(m.key, _slot(m)) for m in dep.snap.events})


def _slot(m: Msg) -> int:
    return int(msgpack.unpackb(m.value)["ts"] // 10.0)


def test_a_burst_of_flips_truncates_the_record_and_verify_stays_clean(tmp_path):
    """The scenario of issue 31 §5: more changes than a record keeps, values in every slot
    before and after; the last record alone would put the old slots in a gap."""
    stream = stream_of(tmp_path, YAML)
    ops: list[tuple] = []
    for _ in range(12):
        ops += [("event", u, 0.5) for u in USERS] + [("tick", 10.0)]
    ops += [("burst", "u1", KEEP_CHANGES + 5)]
    for _ in range(12):
        ops += [("event", u, 0.5) for u in USERS] + [("tick", 10.0)]
    dep = play(stream, ops)
    last = msgpack.unpackb([m for m in dep.snap.levels if m.key == b"u1"][-1].value)
    assert last["truncated"] is True, "the scenario must truncate the record"
    verdict = judge(stream, dep.snap)
    assert verdict.ok, [(v.kind, v.detail) for v in verdict.violations]
    assert verdict.not_released.get("level_change", 0) > 0
    assert "dropped" not in verdict.not_released


def test_a_user_counted_loose_before_the_first_change_its_last_record_keeps(tmp_path):
    """Issue 31 §5's start-up gap: u1 goes `loose` (counted so after its gap), then flips more
    often than a record keeps. Its last record starts with a later flip, and read alone (as
    verify did) says u1 was counted nowhere before it, then sat out ``max`` of every ``w`` (7
    slots, where the full history's gap was 4): the worker was right, verify judges each slot
    with the record in force when it closed."""
    stream = stream_of(tmp_path, YAML)
    ops: list[tuple] = [("pref", "u1", 1, 0.5)]
    for _ in range(12):
        ops += [("event", u, 0.5) for u in USERS] + [("tick", 10.0)]
    ops += [("burst", "u1", KEEP_CHANGES + 3)]
    for _ in range(12):
        ops += [("event", u, 0.5) for u in USERS] + [("tick", 10.0)]
    dep = play(stream, ops)
    records = [msgpack.unpackb(m.value) for m in dep.snap.levels if m.key == b"u1"]
    assert records[-1]["truncated"] and not records[0]["truncated"]
    verdict = judge(stream, dep.snap)
    assert verdict.ok, [(v.kind, v.detail) for v in verdict.violations]
    loose = [lv for lv in verdict.levels if lv.name == "loose"][0]
    assert loose.users == 1  # u1, counted loose between its first change and the burst
    assert "dropped" not in verdict.not_released
