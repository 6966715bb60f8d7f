"""The collect stage's bookkeeping, without Kafka."""

from __future__ import annotations

import msgpack
import pytest

from app.stream.collect import Collector
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
    c = Collector(load_streams(path, env={}))
    c.assign(0)
    c.partitions[0].caught_up = True
    return c


def ev(user, ts, value):
    return msgpack.packb({"stream": "s", "user": user, "ts": ts, "value": value})


def test_one_value_per_user_per_slot_counts_per_group(collector):
    collector.set_preference("v", "loose", 0.0)
    for off, (user, ts, value) in enumerate(
        [("u", 101, 0), ("u", 105, 2), ("v", 102, "b"), ("w", 111, 1)]
    ):
        collector.add(0, off, user.encode(), ev(user, ts, value), wall_now=112)
    assert collector.commit_offset(0, 4) == 0
    partials = collector.flush(wall_now=120.5)  # slot 11 (110-120) + grace 1 is not due
    assert [(p.slot, p.counts) for p in partials] == [(10, [1, 0, 0, 0, 1, 0])]
    assert collector.commit_offset(0, 4) == 3  # slot 11 still needs offset 3
    assert collector.take_outcomes() == {("s", "accepted"): 3, ("s", "duplicate"): 1}


def test_late_events_are_counted_and_dropped(collector):
    collector.flush(wall_now=120.5)
    collector.add(0, 0, b"u", ev("u", 105, 0), wall_now=122)
    assert collector.take_outcomes() == {("s", "late"): 1}


def test_empty_slots_still_produce_partials(collector):
    collector.flush(wall_now=120.5)
    partials = collector.flush(wall_now=140.5)
    assert [(p.slot, sum(p.counts)) for p in partials] == [(11, 0), (12, 0)]


def test_level_change_blocks_max_w_slots(collector):
    collector.set_preference("u", "loose", 100.0)  # from default strict (w=4) at slot 10
    for off, slot in enumerate([9, 10, 13, 14]):
        collector.add(0, off, b"u", ev("u", slot * 10 + 1, 0), wall_now=150)
    assert collector.take_outcomes() == {("s", "accepted"): 2, ("s", "level_change"): 2}
    groups = {k[1]: next(iter(b.values())) // 3 for k, b in collector.partitions[0].buckets.items()}
    assert groups == {9: 0, 14: 1}


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
