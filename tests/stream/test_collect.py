"""The collect stage's bookkeeping, without Kafka."""

from __future__ import annotations

import msgpack
import pytest

from app.stream.collect.events import Collector, Record
from app.stream.collect.partitioning import partition_for
from app.stream.config import load_streams
from app.stream.errors import BadEvent

YAML = """
streams:
  - id: s
    labels: [a, b, c]
    slot_s: 10
    grace_s: 1
    levels:
      - {name: strict, w: 4, eps: 1.0}
      - {name: loose, w: 2, eps: 1.0}
"""


@pytest.fixture()
def collector(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    c = Collector(load_streams(path, env={}), partitions_total=1)
    c.assign(0)
    c.partitions[0].caught_up = True
    return c


def flush(c, t):
    """Flush after fetches that found partition 0 at its end, settled, up to wall time ``t``."""
    c.observe_fetch(0, t - 5, at_end=True, gap_s=100)
    c.observe_fetch(0, t, at_end=True, gap_s=100)
    partials, _ = c.flush()
    return partials


def ev(user, ts, value):
    return msgpack.packb({"stream": "s", "user": user, "ts": ts, "value": value})


def test_one_value_per_user_per_slot_counts_per_group(collector):
    collector.set_preference("v", "loose", 0.0)
    for off, (user, ts, value) in enumerate(
        [("u", 101, 0), ("u", 105, 2), ("v", 102, "b"), ("w", 111, 1)]
    ):
        collector.add(0, off, user.encode(), ev(user, ts, value), wall_now=112)
    assert collector.commit_offset(0, 4) == 0
    partials = flush(collector, 120.5)  # slot 11 (110-120) + grace 1 is not due
    assert [(p.slot, p.counts) for p in partials] == [(10, [1, 0, 0, 0, 1, 0])]
    assert collector.commit_offset(0, 4) == 3  # slot 11 still needs offset 3
    assert collector.take_outcomes() == {("s", "accepted"): 3, ("s", "duplicate"): 1}


def test_late_events_are_counted_and_dropped(collector):
    flush(collector, 120.5)
    collector.add(0, 0, b"u", ev("u", 105, 0), wall_now=122)
    assert collector.take_outcomes() == {("s", "late"): 1}


def test_empty_slots_still_produce_partials(collector):
    flush(collector, 120.5)
    partials = flush(collector, 140.5)
    assert [(p.slot, sum(p.counts)) for p in partials] == [(11, 0), (12, 0)]


def test_level_change_blocks_max_w_slots(collector):
    """A change read at t=100 (slot 10) applies from slot 11, after a gap of max(4, 2) slots."""
    collector.set_preference("u", "loose", 100.0)
    for off, slot in enumerate([9, 10, 11, 14, 15]):
        collector.add(0, off, b"u", ev("u", slot * 10 + 1, 0), wall_now=150)
    partials = flush(collector, 170)
    groups = {p.slot: p.counts.index(1) // 3 for p in partials if sum(p.counts)}
    assert groups == {9: 0, 10: 0, 15: 1}
    assert collector.take_outcomes()[("s", "level_change")] == 2


def test_a_backdated_change_never_moves_a_closed_slot(collector):
    """After slot 10 closed with u strict, a record stamped t=0 takes effect after slot 10."""
    collector.add(0, 0, b"u", ev("u", 101, 0), wall_now=102)
    assert [p.counts for p in flush(collector, 111.5)] == [[1, 0, 0, 0, 0, 0]]
    collector.set_preference("u", "loose", 0.0)
    for off, slot in enumerate(range(11, 17), start=1):
        collector.add(0, off, b"u", ev("u", slot * 10 + 1, 0), wall_now=slot * 10 + 2)
    partials = flush(collector, 200)
    counted = {p.slot: p.counts.index(1) // 3 for p in partials if sum(p.counts)}
    # Read while slot 11 was open: strict through 11, the gap of max(w) = 4 slots, loose from 16.
    assert counted == {11: 0, 16: 1}


def test_an_event_in_another_partition_than_its_key_is_refused(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    c = Collector(load_streams(path, env={}), partitions_total=4)
    for p in range(4):
        c.assign(p)
    right = partition_for(b"u", 4)
    c.add(right, 0, b"u", ev("u", 105, 0), wall_now=106)
    with pytest.raises(BadEvent) as info:
        c.add((right + 1) % 4, 0, b"u", ev("u", 106, 1), wall_now=107)
    assert info.value.reason == "wrong_partition"
    assert c.take_outcomes() == {("s", "accepted"): 1}


def test_progress_holds_still_through_a_fetch_gap(collector):
    """After a gap in fetch responses, slots wait grace_s of healthy fetching to close."""
    assert [p.slot for p in flush(collector, 120.5)] == [10]
    collector.observe_fetch(0, 150.0, at_end=True, gap_s=3)  # 29.5 s without a response
    assert collector.flush()[0] == []  # not settled: slots 11-13 stay open
    collector.observe_fetch(0, 151.0, at_end=True, gap_s=3)  # 1 s of healthy fetching = grace
    # Progress 151 passes the end of slot 14 (150) plus grace (1): slots 11-14 close at once.
    assert [p.slot for p in collector.flush()[0]] == [11, 12, 13, 14]


def test_after_a_gap_progress_holds_for_the_delivery_horizon_whatever_the_grace(collector):
    """Issue 23, item 2: with grace 1 s and a 10 s delivery horizon, slots that ended during
    an outage stay open for 10 s of healthy fetching, so producers' buffered events count."""
    assert [p.slot for p in flush(collector, 120.5)] == [10]
    collector.observe_fetch(0, 150.0, at_end=True, gap_s=3, hold_s=10)  # after 29.5 s
    collector.observe_fetch(0, 151.0, at_end=True, gap_s=3, hold_s=10)  # grace has passed
    assert collector.flush()[0] == []
    for t in range(152, 160):
        collector.observe_fetch(0, float(t), at_end=True, gap_s=3, hold_s=10)
        assert collector.flush()[0] == []
    collector.add(0, 0, b"u", ev("u", 125, 1), wall_now=159)  # delivered 9 s after the return
    collector.observe_fetch(0, 160.0, at_end=True, gap_s=3, hold_s=10)
    partials = collector.flush()[0]
    assert [(p.slot, sum(p.counts)) for p in partials] == [(11, 0), (12, 1), (13, 0), (14, 0)]
    assert collector.take_outcomes() == {("s", "accepted"): 1}


def test_late_events_name_their_slots_once(collector):
    """The count-free late signal: which slots dropped something, not how much."""
    flush(collector, 120.5)
    for off, user in enumerate("uvw"):
        collector.add(0, off, user.encode(), ev(user, 105, 0), wall_now=122)
    collector.add(0, 3, b"u", ev("u", 95, 0), wall_now=122)
    assert collector.take_late_slots() == {("s", 10), ("s", 9)}
    assert collector.take_late_slots() == set()


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"\xc1", "undecodable"),
        (msgpack.packb([1]), "not_a_map"),
        (msgpack.packb({"stream": "s", "user": "u", "ts": 1.0}), "missing_field"),
        (msgpack.packb({"stream": "x", "user": "u", "ts": 1.0, "value": 0}), "unknown_stream"),
        (msgpack.packb({"stream": "s", "user": "u", "ts": 1.0, "value": 3}), "out_of_domain"),
        (msgpack.packb({"stream": "s", "user": "u", "ts": 1.0, "value": "z"}), "out_of_domain"),
        (msgpack.packb({"stream": "s", "user": "u", "ts": "1", "value": 0}), "wrong_type"),
        (msgpack.packb({"stream": "s", "user": "u", "ts": 1e9, "value": 0}), "bad_time"),
        (msgpack.packb({"stream": "s", "user": "v", "ts": 1.0, "value": 0}), "key_mismatch"),
    ],
)
def test_bad_events_raise_with_a_reason(collector, value, reason):
    with pytest.raises(BadEvent) as info:
        collector.add(0, 0, b"u", value, wall_now=100)
    assert info.value.reason == reason


@pytest.mark.parametrize("key", [None, b"someone-else", b"u "])
def test_an_event_keyed_by_another_user_is_refused(collector, key):
    """Keys are partitions: a user's events under several keys could be counted once per
    partition in the same slot, so only events keyed by their own user are counted."""
    with pytest.raises(BadEvent) as info:
        collector.add(0, 0, key, ev("u", 105, 0), wall_now=106)
    assert info.value.reason == "key_mismatch"
    assert collector.take_outcomes() == {}


def test_a_stream_with_max_values_keeps_the_first_l_distinct_values(tmp_path):
    """l = 2: a user's first two distinct values count; a repeat is a duplicate, a third
    distinct value is clipped; a user with a level counts all its values in that level."""
    path = tmp_path / "s.yaml"
    path.write_text(YAML.replace("    grace_s: 1\n", "    grace_s: 1\n    max_values: 2\n"))
    [stream] = load_streams(path, env={})
    assert stream.sensitivity == 4  # replace: two values moved, L1 = 2 * 2
    c = Collector([stream], partitions_total=1)
    c.assign(0)
    c.partitions[0].caught_up = True
    c.set_preference("v", "loose", 0.0)
    sent = [("u", 0), ("u", 0), ("u", 2), ("u", 1), ("v", 1), ("v", 2), ("v", 0)]
    for off, (user, value) in enumerate(sent):
        c.add(0, off, user.encode(), ev(user, 101 + off / 10, value), wall_now=102)
    [partial] = flush(c, 120.5)
    assert partial.counts == [1, 0, 1, 0, 1, 1]  # u: a, c (strict); v: b, c (loose)
    assert c.take_outcomes() == {("s", "accepted"): 4, ("s", "duplicate"): 1, ("s", "clipped"): 2}


def test_a_revoked_partition_takes_its_users_levels_along(tmp_path):
    """Levels are held per partition: revoking one forgets the levels of its users only (the
    next owner reads them from the co-partitioned preferences partition)."""
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    c = Collector(load_streams(path, env={}), partitions_total=4)
    for p in range(4):
        c.assign(p)
    users = [f"user-{i}" for i in range(20)]
    for user in users:
        c.set_preference(user, "loose", 0.0)
    gone = {u for u in users if partition_for(u.encode(), 4) == 2}
    assert gone and c.owns(next(iter(gone)).encode(), 2)
    c.revoke(2)
    assert set(c.preferences.users) == set(users) - gone
    assert not c.owns(next(iter(gone)).encode(), 2)


EVENT_CLOCKS = """
streams:
  - id: rec
    labels: [a, b, c]
    slot_s: 10
    grace_s: 1
    clock: event
    levels: [{name: only, w: 2, eps: 1.0}]
  - id: old
    labels: [a, b, c]
    slot_s: 10
    grace_s: 1
    clock: event
    levels: [{name: only, w: 2, eps: 1.0}]
"""


def test_no_event_moves_an_event_clock_past_the_horizon(tmp_path):
    """Issue 21 item 2: one event a month ahead is ``bad_time`` on an event-clock stream too,
    and one stream's watermark never moves another's."""
    path = tmp_path / "s.yaml"
    path.write_text(EVENT_CLOCKS)
    c = Collector(load_streams(path, env={}), partitions_total=1)
    c.assign(0)
    c.partitions[0].caught_up = True
    wall = 1_000_000.0
    recorded = [
        msgpack.packb({"stream": "rec", "user": "u", "ts": wall - 500, "value": 0}),
        msgpack.packb({"stream": "old", "user": "u", "ts": 5_000.0, "value": 1}),
    ]
    ahead = msgpack.packb({"stream": "rec", "user": "m", "ts": wall + 30 * 86_400, "value": 0})
    assert c.add_batch(0, [Record(0, b"u", recorded[0]), Record(1, b"u", recorded[1])], wall) == []
    bad = c.add_batch(0, [Record(2, b"m", ahead)], wall)
    assert [exc.reason for exc, _ in bad] == ["bad_time"]
    streams = {s.id: s for s in c.streams.values()}
    assert c.progress(streams["rec"], 0) == wall - 500
    assert c.progress(streams["old"], 0) == 5_000.0
    edge = streams["rec"].slots.horizon(wall)
    at_edge = msgpack.packb({"stream": "rec", "user": "e", "ts": edge, "value": 0})
    assert c.add_batch(0, [Record(3, b"e", at_edge)], wall) == []
    partials, _ = c.flush()
    rec = [p.slot for p in partials if p.stream == "rec"]
    assert len(rec) <= 2 + (edge - wall + 500) / 10, "at most the slots up to the horizon"
