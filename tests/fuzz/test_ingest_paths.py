"""Issue 31 §1 and §6: both ingest paths, fed hostile records among honest ones.

The fast path (:meth:`Collector._count_fast`) and the reference path
(:meth:`Collector.add_batch_reference`) must never raise, must refuse the same records with the
same reasons, must leave the same state, and must give every record exactly one outcome: the
outcomes counted plus the records refused equal the records given. The same holds for the
local-mode report collector.
"""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.dp.local import LPU
from app.stream.collect.events import Collector, Record
from app.stream.collect.partitioning import partition_for
from app.stream.collect.tally import ReportCollector
from app.stream.config import load_streams
from app.stream.records import REASONS, encode_request
from tests.fuzz.hostile import pack, records
from tests.stream.conftest import report_rec

YAML = """
streams:
  - id: s
    labels: [a, b, c]
    slot_s: 10
    grace_s: 1
    levels: [{name: strict, w: 4, eps: 1.0}, {name: loose, w: 2, eps: 1.0}]
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
  - id: sum
    labels: [north, south]
    slot_s: 10
    grace_s: 1
    sum: {alpha: 50}
    mechanism: {name: optstream}
    levels: [{name: only, w: 4, eps: 1.0}]
  - id: loc
    mode: local
    labels: [a, b]
    slot_s: 10
    round_s: 2
    release_timeout_s: 1
    mechanism: {name: lpu, params: {users: 40, oracle: grr}}
    levels: [{name: only, w: 3, eps: 1.0}]
"""
NOW = 1_000.0
PARTITIONS = 2
MINE = [u for u in (f"u{i}" for i in range(16)) if partition_for(u.encode(), PARTITIONS) == 0]
EVENT = {
    "stream": st.sampled_from(["s", "s", "e", "m", "sum"]),
    "user": st.sampled_from(MINE),
    "ts": st.sampled_from([NOW - 25.0, NOW - 12.0, NOW - 3.0, NOW - 0.5]),
    "value": st.sampled_from([0, 1, 2, "a", "c", "north"]),
    "amount": st.sampled_from([0, 2.5, 80]),
}
FUZZ = settings(max_examples=100, deadline=None)


def _streams(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "s.yaml"
    path.write_text(YAML)
    return load_streams(path, env={})


def _pair(tmp_path_factory) -> tuple[Collector, Collector]:
    streams = _streams(tmp_path_factory)
    out = []
    for _ in range(2):
        c = Collector(streams, partitions_total=PARTITIONS)
        c.assign(0)
        c.partitions[0].caught_up = True
        out.append(c)
    fast, reference = out
    reference._count_fast = lambda *_: False  # type: ignore[method-assign]
    return fast, reference


@st.composite
def event_records(draw: st.DrawFn) -> tuple[bytes | None, bytes | None]:
    """An honest event, or a hostile value; keyed by its user, or by anything."""
    fields = {name: draw(ok) for name, ok in EVENT.items()}
    raw = draw(st.one_of(st.just(pack(fields)), records(EVENT)))
    key = draw(st.one_of(st.just(str(fields["user"]).encode()), st.none(), st.binary(max_size=4)))
    return key, raw


def _state(c: Collector) -> tuple[object, ...]:
    part = c.partitions[0]
    buckets = {k: dict(sorted(v.items())) for k, v in part.buckets.items()}
    return (
        buckets,
        part.min_offset,
        part.max_ts,
        dict(c.outcomes),
        c.late_slots,
        c.event_clocks.newest,
    )


POISON = [
    pack({"stream": bad, "user": MINE[0], "ts": NOW - 3.0, "value": 1})
    for bad in (["s"], {"s": 1}, [[]], {1: [None]})
]
"""Issue 31 §1: a ``stream`` that is a list or a map made the fast path raise (unhashable)."""
HONEST = pack({"stream": "s", "user": MINE[0], "ts": NOW - 3.0, "value": 1})


@FUZZ
@given(batches=st.lists(st.lists(event_records(), max_size=25), min_size=1, max_size=5))
@example(batches=[[(MINE[0].encode(), poison)] for poison in POISON])
@example(batches=[[(MINE[0].encode(), HONEST), (MINE[0].encode(), POISON[0])]])
def test_both_paths_refuse_alike_and_give_every_record_one_outcome(tmp_path_factory, batches):
    fast, reference = _pair(tmp_path_factory)
    offset = 0
    for batch in batches:
        records_ = [Record(offset + i, key, raw) for i, (key, raw) in enumerate(batch)]
        offset += len(batch)
        before = sum(fast.outcomes.values())
        got = fast.add_batch(0, records_, NOW)
        want = reference.add_batch(0, records_, NOW)
        assert [(e.args, r) for e, r in got] == [(e.args, r) for e, r in want]
        assert all(e.reason in REASONS for e, _ in got)
        assert _state(fast) == _state(reference)
        assert sum(fast.outcomes.values()) - before + len(got) == len(records_)
        for c in (fast, reference):  # close what is due: later batches meet closed slots
            c.observe_fetch(0, NOW - 10, at_end=True, gap_s=100)
            c.observe_fetch(0, NOW - 5, at_end=True, gap_s=100)
        closed = [[(p.stream, p.slot, p.counts) for p in c.flush()[0]] for c in (fast, reference)]
        assert closed[0] == closed[1]


def test_a_poison_stream_field_is_refused_by_the_fast_path_caller(tmp_path_factory) -> None:
    """The batch the issue names: honest events of one stream and one whose ``stream`` is a
    list. The honest ones are counted, the poison one is refused as ``wrong_type``."""
    fast, _ = _pair(tmp_path_factory)
    honest = [
        Record(i, u.encode(), pack({"stream": "s", "user": u, "ts": NOW - 3.0, "value": 1}))
        for i, u in enumerate(MINE[:3])
    ]
    batch = [*honest, Record(3, MINE[0].encode(), POISON[0])]
    bad = fast.add_batch(0, batch, NOW)
    assert [(e.reason, r.offset) for e, r in bad] == [("wrong_type", 3)]
    assert fast.outcomes == {("s", "accepted"): 3}


REPORT = {
    "stream": st.sampled_from(["loc", "nope"]),
    "slot": st.integers(0, 2),  # the request below is for slot 1
    "round": st.sampled_from(["dissimilarity", "publication"]),
    "user": st.integers(-1, 41),
    "group": st.integers(0, 1),
    "payload": st.lists(st.integers(-1, 3), max_size=2),
}
OK_REPORT = {
    "stream": "loc",
    "slot": 1,
    "round": "publication",
    "user": 3,
    "group": 0,
    "payload": [1],
}
"""A report of the request below but for its payload; a uint64 in any integer field crashed
the collector's int64 arrays."""


@FUZZ
@given(
    batch=st.lists(
        st.one_of(records(REPORT), st.builds(pack, st.fixed_dictionaries(REPORT))), max_size=30
    )
)
@example(batch=[pack({**OK_REPORT, field: 2**64 - 1}) for field in ("user", "group", "slot")])
@example(batch=[pack({**OK_REPORT, "payload": [2**64 - 1]})])
def test_reports_are_counted_or_refused_one_outcome_each(tmp_path_factory, batch) -> None:
    streams = {s.id: s for s in _streams(tmp_path_factory)}
    c = ReportCollector(streams.values())
    c.assign(0)
    c.partitions[0] = True
    mech = LPU(users=40, d=2, w=3, eps=1.0, oracle="grr")
    req = mech.open_slot(np.random.default_rng(5))
    c.add_request(encode_request(streams["loc"], req.slot, NOW, req))
    recs = [report_rec(i, raw) for i, raw in enumerate(batch)]
    bad = c.add_batch(0, recs)
    assert all(e.reason in REASONS for e, _ in bad)
    assert sum(c.outcomes.values()) + len(bad) == len(recs)
    c.flush(NOW + 1)
