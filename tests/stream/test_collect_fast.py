"""Issue 24: the batch fast path of ``Collector.add_batch`` agrees with the event-by-event rules.

Two collectors see the same random batches (valid events, duplicates, late events, labels and
indices, several slots, several streams, and now and then a bad record: wrong key, another
partition's user, a time past the horizon, a value out of the domain, junk bytes); one takes
the fast path where it can, the other only :meth:`Collector.add_batch_reference`. Their open
slots, offsets, outcomes, late slots, clocks, bad records and partials must be identical.
"""

from __future__ import annotations

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from app.stream.collect.events import Collector, Record
from app.stream.collect.partitioning import partition_for
from app.stream.config import load_streams

YAML = """
streams:
  - id: s
    labels: [a, b, c]
    slot_s: 10
    grace_s: 1
    levels:
      - {name: strict, w: 4, eps: 1.0}
      - {name: loose, w: 2, eps: 1.0}
  - id: e
    d: 4
    slot_s: 5
    grace_s: 1
    clock: event
    levels: [{name: only, w: 3, eps: 1.0}]
  - id: m
    d: 3
    slot_s: 10
    grace_s: 1
    max_values: 2
    levels: [{name: only, w: 3, eps: 1.0}]
  - id: o
    domain: open
    max_keys: 2
    max_key_chars: 4
    slot_s: 10
    grace_s: 1
    levels: [{name: only, w: 3, eps: 1.0, delta: 1.0e-4, population: 100000}]
"""
NOISE_KEY = b"k" * 32
NOW = 1_000.0
PARTITIONS = 2
USERS = [f"u{i}" for i in range(12)]
MINE = [u for u in USERS if partition_for(u.encode(), PARTITIONS) == 0]
OTHERS = [u for u in USERS if partition_for(u.encode(), PARTITIONS) != 0]


def _pair(tmp_path_factory) -> tuple[Collector, Collector]:
    path = tmp_path_factory.mktemp("fast") / "s.yaml"
    path.write_text(YAML)
    out = []
    for _ in range(2):
        c = Collector(load_streams(path, env={}), PARTITIONS, NOISE_KEY, "test")
        c.assign(0)
        c.partitions[0].caught_up = True
        out.append(c)
    fast, reference = out
    reference._count_fast = lambda *_: False  # type: ignore[method-assign]
    return fast, reference


@st.composite
def events(draw: st.DrawFn) -> tuple[bytes | None, bytes | None]:
    """One record's key and value; mostly valid, sometimes not."""
    fault = draw(st.sampled_from(["none"] * 12 + ["key", "partition", "future", "domain", "junk"]))
    stream = draw(st.sampled_from(["s"] * 6 + ["e", "m", "o", "o"]))
    user = draw(st.sampled_from(OTHERS if fault == "partition" else MINE))
    ts = NOW - draw(st.sampled_from([45.0, 25.0, 12.0, 8.0, 3.0, 0.5]))
    ts = NOW + 600.0 if fault == "future" else ts + draw(st.sampled_from([0.0, 0.25]))
    value: int | str = draw(st.integers(0, 2))
    if stream == "s" and draw(st.booleans()):
        value = "abc"[int(value)]
    if stream == "o":  # keys; "vwxyz" is one character too long
        value = draw(st.sampled_from(["a", "bb", "ccc", "dddd", "ab", "vwxyz", ""]))
    if fault == "domain":
        value = 9
    key = b"someone" if fault == "key" else user.encode()
    raw = msgpack.packb({"stream": stream, "user": user, "ts": ts, "value": value})
    return key, b"\x92\x01" if fault == "junk" else raw


def _state(c: Collector) -> tuple[object, ...]:
    part = c.partitions[0]
    buckets = {k: sorted(v.items()) for k, v in part.buckets.items()}
    clocks = c.event_clocks.newest
    return (buckets, part.min_offset, part.max_ts, dict(c.outcomes), c.late_slots, clocks)


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(events(), max_size=30), min_size=1, max_size=6), data=st.data())
def test_fast_path_agrees_with_the_reference(tmp_path_factory, batches, data) -> None:
    fast, reference = _pair(tmp_path_factory)
    offset = 0
    for batch in batches:
        records = []
        for key, raw in batch:
            records.append(Record(offset, key, raw))
            offset += 1
        got = fast.add_batch(0, records, NOW)
        want = reference.add_batch(0, records, NOW)
        assert [(e.args, r) for e, r in got] == [(e.args, r) for e, r in want]
        assert _state(fast) == _state(reference)
        if data.draw(st.booleans()):  # close what is due, so later events can be late
            t = NOW - data.draw(st.sampled_from([30.0, 10.0, 0.0]))
            closed = []
            for c in (fast, reference):
                c.observe_fetch(0, t - 5, at_end=True, gap_s=100)
                c.observe_fetch(0, t, at_end=True, gap_s=100)
                partials, ticks = c.flush()
                closed.append(([(p.stream, p.slot, vars(p)) for p in partials], ticks))
            assert closed[0] == closed[1]
    assert _state(fast) == _state(reference)


def test_one_stream_batches_take_the_fast_path(tmp_path_factory) -> None:
    fast, _ = _pair(tmp_path_factory)
    user = MINE[0]
    raw = msgpack.packb({"stream": "s", "user": user, "ts": NOW - 3, "value": "b"})
    records = [Record(i, user.encode(), raw) for i in range(3)]
    assert fast._count_fast(0, records, fast.check(0, records, NOW), NOW)
    assert fast.outcomes == {("s", "accepted"): 1, ("s", "duplicate"): 2}
    held = fast.partitions[0].buckets[("s", 99)]
    assert (len(held), held.find([user])) == (1, [1])
