"""Issue 37: an open slot's users as keyed digests in numpy runs hold exactly what a dict would.

* :class:`FirstValues` against a dict ``user -> first value`` over random mixes of batch merges
  and single adds, with many duplicates: same answers, same users, same values.
* Forced collisions (a digest that maps many users to one): a collision only drops a value,
  never keeps two for one digest or one user.
* The collector over random streams of events with duplicates, slot closes and restarts (a new
  collector that replays from the committed offset, as after a crash or a rebalance): the first
  partial of each slot equals the counts of a reference dict of first values per user.
"""

from __future__ import annotations

import msgpack
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.stream.collect import first_values
from app.stream.collect.events import Collector, Record
from app.stream.collect.first_values import FirstValues
from app.stream.config import load_streams

USERS = [f"user-{i}" for i in range(40)] + ["", "é", "user-1 "]
D = 5

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("merge"),
            st.lists(st.tuples(st.sampled_from(USERS), st.integers(0, D - 1)), max_size=30),
        ),
        st.tuples(st.just("add"), st.tuples(st.sampled_from(USERS), st.integers(0, D - 1))),
    ),
    max_size=40,
)


def _apply(slot: FirstValues, ref: dict[str, int], op: tuple) -> None:
    kind, arg = op
    if kind == "merge":
        users = [u for u, _ in arg]
        fresh = {u: v for u, v in reversed(arg) if u not in ref}
        assert slot.merge(users, [v for _, v in arg]) == len(fresh)
        ref.update(fresh)
    else:  # one event at a time, as the reference path of a one-event batch
        user, value = arg
        assert slot.merge([user], [value]) == (user not in ref)
        ref.setdefault(user, value)


@settings(max_examples=150, deadline=None)
@given(ops=ops)
def test_first_values_hold_what_a_dict_of_first_values_holds(ops) -> None:
    slot, ref = FirstValues(D), {}
    for op in ops:
        _apply(slot, ref, op)
        assert len(slot) == len(ref)
    assert slot.find(USERS) == [ref.get(u) for u in USERS]
    assert sorted(slot.values().tolist()) == sorted(ref.values())
    assert len(dict(slot.items())) == len(ref)


@settings(max_examples=80, deadline=None)
@given(ops=ops, buckets=st.integers(1, 6))
def test_a_collision_only_drops_values(ops, buckets) -> None:
    """With digests that collide on purpose (``len(user) % buckets``), a slot keeps at most
    one value per digest, each the first value of some user, and never more users than a dict."""
    real = first_values.digests
    first_values.digests = lambda users: np.array(  # type: ignore[assignment]
        [len(u) % buckets for u in users], dtype=np.uint64
    )
    try:
        slot, ref = FirstValues(D), {}
        firsts: dict[int, set[int]] = {}  # per digest, the first values its users sent
        for op in ops:
            events = op[1] if op[0] == "merge" else [op[1]]
            _apply_loose(slot, op)
            for u, v in events:
                if u not in ref:
                    ref[u] = v
                    firsts.setdefault(len(u) % buckets, set()).add(v)
        pairs = list(slot.items())
    finally:
        first_values.digests = real
    held = dict(pairs)
    assert len(pairs) == len(held) == len(slot) == len(firsts)  # one value per digest seen
    assert len(held) <= len(ref)
    assert all(v in firsts[h] for h, v in held.items())


def _apply_loose(slot: FirstValues, op: tuple) -> None:
    events = op[1] if op[0] == "merge" else [op[1]]
    slot.merge([u for u, _ in events], [v for _, v in events])


YAML = """
streams:
  - id: s
    labels: [a, b, c, d, e]
    slot_s: 10
    grace_s: 1
    levels: [{name: only, w: 3, eps: 1.0}]
"""
NOW = 1_000.0


def _collector(path) -> Collector:
    c = Collector(load_streams(path, env={}), partitions_total=1)
    c.assign(0)
    c.mark_caught_up(0)
    return c


def _close_through(c: Collector, slot: int) -> list[tuple[int, list[int]]]:
    t = (slot + 1) * 10 + 1.5
    c.observe_fetch(0, t - 1.0, at_end=True, gap_s=100)
    c.observe_fetch(0, t, at_end=True, gap_s=100)
    partials, _ = c.flush()
    return [(p.slot, p.counts) for p in partials]


streams_of_events = st.lists(
    st.lists(
        st.tuples(st.sampled_from(USERS[:12]), st.integers(0, D - 1)), min_size=1, max_size=25
    ),
    min_size=1,
    max_size=4,
)
"""Per slot (in time order), its events: few users, so many duplicates."""


@settings(max_examples=60, deadline=None)
@given(slots=streams_of_events, data=st.data())
def test_the_collector_counts_first_values_across_restarts(tmp_path_factory, slots, data):
    path = tmp_path_factory.mktemp("fv") / "s.yaml"
    path.write_text(YAML)
    first = int(NOW // 10) - len(slots) - 2
    log: list[Record] = []
    for k, events in enumerate(slots):
        ts = (first + k) * 10 + 2.0
        for user, value in events:
            raw = msgpack.packb({"stream": "s", "user": user, "ts": ts, "value": value})
            log.append(Record(len(log), user.encode(), raw))
    c, read, restarts, released = _collector(path), 0, 0, {}
    slot_of = [first + k for k, events in enumerate(slots) for _ in events]
    while read < len(log):
        size = data.draw(st.integers(1, 10))
        batch = log[read : read + size]
        assert c.add_batch(0, batch, NOW) == []
        read += len(batch)
        done = slot_of[read - 1] - 1 if read < len(log) else slot_of[-1]
        if data.draw(st.booleans()):
            for slot, counts in _close_through(c, done):
                released.setdefault(slot, counts)  # the release agent keeps the first partial
        if restarts < 3 and data.draw(st.integers(0, 3)) == 3:  # crash: replay from the commit
            restarts += 1
            read = c.commit_offset(0, read)
            c = _collector(path)
    for slot, counts in _close_through(c, slot_of[-1]):
        released.setdefault(slot, counts)
    for k, events in enumerate(slots):
        ref: dict[str, int] = {}
        for user, value in events:
            ref.setdefault(user, value)
        want = np.bincount(list(ref.values()), minlength=D).tolist()
        assert released[first + k] == want
