"""Issue 34: the event rules are stated once (:func:`app.wire.events.decode_batch`, over a batch).

Held equal on hostile input (:mod:`tests.fuzz.hostile`):

- a batch and its records one by one (:func:`~app.wire.events.decode`, a batch of one): the
  same event or the same reason and detail, whatever else the batch holds;
- an oracle written here from ``docs/wire.md``, record by record in plain Python (on purpose a
  second, independent statement of the rules, as a reader of the docs would write it);
- the collector's fast path and its reference path (:meth:`Collector.add_batch` and
  :meth:`Collector.add_batch_reference`) on batches of one stream with hostile records among
  valid ones: the same refusals and the same state.

An open-domain stream (``o``, issue 36) is among them: its value is a key.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from app.stream.collect.events import Collector, Record
from app.stream.collect.partitioning import partition_for
from app.stream.config import load_streams
from app.wire import events
from app.wire.errors import BadEvent
from tests.fuzz.hostile import pack, records

DOMAINS = {
    "c": events.Domain(3, {"a": 0, "b": 1, "c": 2}),
    "s": events.Domain(2, {"n": 0, "s": 1}, sums=True),
    "o": events.Domain(0, {}, open=True, max_key_chars=3),
}
EVENT = {
    "stream": st.sampled_from(["c", "c", "s", "o", "o", "nope"]),
    "user": st.sampled_from(["u1", "u2", 7, ""]),
    "ts": st.sampled_from([0, 10.5, 1e10, 1e11, -1.0]),
    "value": st.sampled_from([0, 2, 3, -1, "a", "c", "z", "xyz", "wxyz", "", "é"]),
    "amount": st.sampled_from([0, 1.5, 100, -2.0, float("inf")]),
}
FUZZ = settings(max_examples=300, deadline=None)


def oracle(raw: bytes | None) -> tuple[str, Any]:
    """``("ok", Event)`` or ``(reason, None)``: the rules of ``docs/wire.md``, one record."""
    if raw is None:
        return "undecodable", None
    if len(raw) > events.MAX_BYTES:
        return "too_large", None
    try:
        ev = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception:  # noqa: BLE001 - any failure to decode
        return "undecodable", None
    if type(ev) is not dict:
        return "not_a_map", None
    for name in ("stream", "user", "ts", "value"):
        if name not in ev:
            return "missing_field", None
    stream, user, ts, value = ev["stream"], ev["user"], ev["ts"], ev["value"]
    if type(stream) is not str:
        return "wrong_type", None
    if stream not in DOMAINS:
        return "unknown_stream", None
    domain = DOMAINS[stream]
    if not ((type(user) is str and user) or type(user) is int):
        return "wrong_type", None
    if type(ts) not in (int, float):
        return "wrong_type", None
    if not 0 <= ts < 1e11:
        return "bad_time", None
    if domain.open:  # the key: a non-empty string of at most max_key_chars characters
        if type(value) is not str or not value:
            return "wrong_type", None
        if len(value) > domain.max_key_chars:
            return "key_too_long", None
        return "ok", events.Event(stream, str(user), float(ts), value, None)
    if type(value) is str:
        if value not in domain.index:
            return "out_of_domain", None
        index = domain.index[value]
    elif type(value) is int:
        if not 0 <= value < domain.d:
            return "out_of_domain", None
        index = value
    else:
        return "wrong_type", None
    amount = None
    if domain.sums:
        if "amount" not in ev:
            return "missing_field", None
        if type(ev["amount"]) not in (int, float):
            return "wrong_type", None
        amount = float(ev["amount"])
        if not 0 <= amount < math.inf:
            return "bad_amount", None
    return "ok", events.Event(stream, str(user), float(ts), index, amount)


def _one(raw: bytes | None) -> tuple[str, Any]:
    try:
        return "ok", events.decode(raw, DOMAINS)
    except BadEvent as exc:
        return exc.reason, exc.detail


@FUZZ
@given(raws=st.lists(records(EVENT), max_size=12))
def test_a_batch_decodes_as_its_records_one_by_one(raws) -> None:
    batch = events.decode_batch(raws, DOMAINS)
    for i, raw in enumerate(raws):
        got: tuple[str, Any]
        if batch.codes[i]:
            exc = batch.error(i)
            got = exc.reason, exc.detail
        else:
            got = "ok", batch.event(i)
        assert got == _one(raw), (i, raw)


@FUZZ
@given(raw=records(EVENT))
def test_the_rules_are_the_documented_ones(raw) -> None:
    reason, event = oracle(raw)
    got = _one(raw)
    assert got[0] == reason, (raw, got)
    if reason == "ok":
        assert got[1] == event


YAML = """
streams:
  - id: c
    labels: [a, b, c]
    slot_s: 10
    grace_s: 1
    levels: [{name: only, w: 3, eps: 1.0}]
  - id: s
    labels: [n, s]
    slot_s: 10
    grace_s: 1
    sum: {alpha: 5}
    mechanism: {name: optstream}
    levels: [{name: only, w: 3, eps: 1.0}]
  - id: o
    domain: open
    max_keys: 2
    max_key_chars: 3
    slot_s: 10
    grace_s: 1
    levels: [{name: only, w: 3, eps: 1.0, delta: 1.0e-4, population: 100000}]
"""
NOW = 1_000.0
MINE = [u for u in (f"u{i}" for i in range(20)) if partition_for(u.encode(), 2) == 0]


@st.composite
def mostly_valid(draw: st.DrawFn, stream: str) -> Record:
    """A record of ``stream`` from a user of partition 0: valid, or hostile now and then."""
    user = draw(st.sampled_from(MINE))
    if draw(st.integers(0, 9)) == 0:
        return Record(0, user.encode(), draw(records(EVENT)))
    ts = NOW - draw(st.sampled_from([25.0, 12.0, 3.0]))
    values = ["a", "bc", "def", "b"] if stream == "o" else [0, 1, 2, "a", "b"]
    value = draw(st.sampled_from(values))
    return Record(
        0, user.encode(), pack({"stream": stream, "user": user, "ts": ts, "value": value})
    )


def _held(buckets: dict[Any, Any]) -> dict[Any, Any]:
    """Each open slot's values (a FirstValues, an OpenKeys or a dict: all have ``items``)."""
    return {k: sorted(v.items()) for k, v in buckets.items()}


@settings(max_examples=100, deadline=None)
@given(
    stream=st.sampled_from(["c", "o"]),
    data=st.data(),
)
def test_the_fast_path_agrees_with_the_reference_on_hostile_batches(tmp_path_factory, stream, data):
    batch_of = st.lists(mostly_valid(stream), min_size=1, max_size=25)
    batches = data.draw(st.lists(batch_of, max_size=5))
    path = tmp_path_factory.mktemp("rules") / "s.yaml"
    path.write_text(YAML)
    fast, reference = (Collector(load_streams(path, env={}), 2, b"k" * 16) for _ in "ab")
    for c in (fast, reference):
        c.assign(0)
        c.partitions[0].caught_up = True
    offset = 0
    for batch in batches:
        recs = [Record(offset + i, r.key, r.value) for i, r in enumerate(batch)]
        offset += len(recs)
        got = fast.add_batch(0, recs, NOW)
        want = reference.add_batch_reference(0, recs, NOW)
        assert [(e.args, r) for e, r in got] == [(e.args, r) for e, r in want]
        for c in (fast, reference):
            c.observe_fetch(0, NOW - 15, at_end=True, gap_s=100)
            c.observe_fetch(0, NOW - 10, at_end=True, gap_s=100)
        closed = [c.flush() for c in (fast, reference)]
        assert [vars(p) for p in closed[0][0]] == [vars(p) for p in closed[1][0]]
        pa, pb = fast.partitions[0], reference.partitions[0]
        assert _held(pa.buckets) == _held(pb.buckets) and pa.min_offset == pb.min_offset
        assert pa.max_ts == pb.max_ts and fast.outcomes == reference.outcomes
