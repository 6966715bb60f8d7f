"""Hostile internal records and state (issue 31 item 4): every internal decoder refuses
anything it could not have written with its own typed error and never another exception; the
ranges are checked; the release agent refuses, counts and goes on."""

from __future__ import annotations

import asyncio
import base64
import math
import time

import msgpack
import pytest
from aiokafka import TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app import metrics
from app.stream.collect.preferences import (
    OFFSET_KEY,
    Change,
    History,
    LevelsError,
    LevelsRestore,
    OffsetMark,
    UserLevels,
    decode_levels,
    encode_history,
    encode_mark,
    too_far,
)
from app.stream.config import load_settings
from app.stream.internal import (
    MAX_COUNT,
    InternalError,
    OpenPartial,
    Partial,
    PartitionTally,
    StateError,
    Tick,
    decode,
    decode_merged,
    decode_open_round,
    decode_open_slots,
)
from app.stream.release.entry import LedgerEntry
from app.stream.release.guard import Capacity, Guard
from app.stream.release.local_levels import LevelBook, PreferenceRecord
from app.stream.tables import BytesTable
from tests.stream.agent import agent, run, sized_topics

# -- arbitrary msgpack values -------------------------------------------------------------------
FIELDS = [
    "kind",
    "stream",
    "slot",
    "partition",
    "partitions",
    "counts",
    "progress",
    "round",
    "support",
    "reports",
    "now",
    "of",
    "parts",
    "digests",
    "changes",
    "truncated",
    "offset",
    "state",
    "next_slot",
    "outbox",
    "published",
    "recent",
    "seq",
    "request",
    "sent",
    "deadline",
    "levels",
    "keys",
    "chunk",
    "chunks",
]
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.sampled_from(
        ["partial", "open_partial", "tick", "tally", "s", "loose", math.nan, math.inf, -1, 10**18]
    )
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(
            st.sampled_from(FIELDS) | st.integers(-3, 5) | st.text(max_size=3), inner, max_size=8
        )
    ),
    max_leaves=25,
)


def packed(value: object) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


raws = values.map(packed) | st.binary(max_size=40)


def _typed_only(fn, error: type[Exception], raw: object) -> object | None:
    try:
        return fn(raw)
    except error:
        return None


@settings(max_examples=500, deadline=None)
@given(value=values, kind=st.sampled_from(["partial", "open_partial", "tick", "tally"]))
def test_a_partials_value_decodes_in_range_or_is_an_internal_error(value, kind):
    raw = packed({**value, "kind": kind} if isinstance(value, dict) else value)
    msg = _typed_only(decode, InternalError, raw)
    if msg is None:
        return
    assert decode(msg.encode()) == msg
    numbers = {
        Partial: lambda m: m.counts,
        OpenPartial: lambda m: m.counts,
        PartitionTally: lambda m: [*m.support, *m.reports],
        Tick: lambda m: list(m.progress.values()),
    }[type(msg)](msg)
    assert all(math.isfinite(x) and not isinstance(x, bool) for x in numbers)
    if not isinstance(msg, Tick):
        assert all(0 <= x <= MAX_COUNT for x in numbers)


@settings(max_examples=300, deadline=None)
@given(raw=raws)
def test_slots_table_values_decode_or_are_a_state_error(raw):
    for fn in (decode_open_slots, decode_open_round, decode_merged):
        _typed_only(fn, StateError, raw)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=raws)
def test_a_ledger_value_decodes_or_is_a_state_error(raw):
    entry = _typed_only(LedgerEntry.decode, StateError, raw)
    if entry is not None:  # bytes, not ==: a NaN inside a state never equals itself
        assert LedgerEntry.decode(entry.encode()).encode() == entry.encode()


@settings(max_examples=300, deadline=None)
@given(value=values | st.dictionaries(st.sampled_from(["offsets", "users", "settled"]), values))
def test_a_stored_levels_book_loads_or_is_a_state_error(value):
    _typed_only(lambda v: LevelBook.from_dict(8, v, ["a", "b"]), StateError, value)


keys = st.none() | st.binary(max_size=12) | st.integers(0, 9).map(lambda p: OFFSET_KEY + b"%d" % p)


@settings(max_examples=500, deadline=None)
@given(key=keys, raw=st.none() | raws, partition=st.integers(0, 9))
def test_a_levels_record_decodes_or_is_a_levels_error(key, raw, partition):
    found = _typed_only(lambda r: decode_levels(key, r, partition), LevelsError, raw)
    if isinstance(found, OffsetMark):
        assert found.partition == partition and found.offset >= 0
    elif isinstance(found, UserLevels) and found.history is not None:
        h = found.history
        assert all(math.isfinite(c.at) for c in h.changes)
        assert all(
            a.at <= b.at and a.level != b.level
            for a, b in zip(h.changes, h.changes[1:], strict=False)
        )


# -- ranges -------------------------------------------------------------------------------------
def partial_raw(**fields: object) -> bytes:
    base = {"kind": "partial", "stream": "s", "slot": 5, "partition": 0, "partitions": 1}
    return packed({**base, "counts": [1, 2], **fields})


@pytest.mark.parametrize(
    "fields",
    [
        {"counts": [math.nan, 1]},
        {"counts": [math.inf, 1]},
        {"counts": [-1, 1]},
        {"counts": [2**60, 1]},
        {"counts": [True, 1]},
        {"counts": [[1], 1]},
        {"slot": -1},
        {"slot": 2**60},
        {"partition": -1},
        {"partitions": 0},
        {"stream": ""},
        {"stream": "x" * 300},
    ],
    ids=str,
)
def test_out_of_range_partials_are_malformed(fields):
    with pytest.raises(InternalError):
        decode(partial_raw(**fields))


def test_a_tick_with_a_nan_time_is_malformed():
    raw = packed({"kind": "tick", "stream": "s", "progress": {0: math.nan}, "partitions": 1})
    with pytest.raises(InternalError):
        decode(raw)


STREAM_YAML = """
streams:
  - id: s
    labels: [a, b]
    slot_s: 1
    grace_s: 0.5
    mechanism: {name: uniform}
    levels: [{name: only, w: 2, eps: 900}]
  - id: sum
    labels: [a, b]
    slot_s: 1
    grace_s: 0.5
    sum: {alpha: 2.0}
    mechanism: {name: optstream, noise: laplace}
    accept_weaker_guarantee: true  # noise: laplace, the papers' float noise
    levels: [{name: only, w: 4, eps: 1.0}]
"""


@pytest.fixture()
def conf(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(STREAM_YAML)
    env = {"DPSTREAM_NOISE_KEY": "cd" * 16, "DPSTREAM_DEPLOYMENT": "test"}
    return load_settings(env=env, config=path)


def test_a_partial_must_fit_its_streams_shape(conf):
    s, sums = conf.stream("s"), conf.stream("sum")
    g = Guard()
    assert g.misfit(s, Partial("s", 5, 0, 1, [1, 2])) is None
    assert g.misfit(s, Partial("s", 5, 0, 1, [1, 2, 3])) == "shape"
    assert g.misfit(s, Partial("s", 5, 0, 1, [1.5, 2])) == "shape"
    assert g.misfit(sums, Partial("sum", 5, 0, 1, [1.5, 2])) is None


def test_capacity_reads_the_end_offset_only_past_what_it_knows(conf):
    asked: list[tuple[str, int]] = []
    ends = {0: 10}

    async def end_offset(role: str, partition: int) -> int | None:
        asked.append((role, partition))
        return ends.get(partition)

    cap, s = Capacity(end_offset), conf.stream("s")
    over = lambda msg: asyncio.run(cap.over(s, msg))  # noqa: E731
    assert not over(Partial("s", 5, 0, 1, [6, 4]))  # 10 records claimed, 10 held
    assert not over(Partial("s", 6, 0, 1, [3, 4]))  # under the cached 10: no read
    assert asked == [("events", 0)]
    assert over(Partial("s", 7, 0, 1, [10**6, 10**6]))
    assert asked == [("events", 0)] * 2  # read again before refusing
    assert not over(Partial("s", 7, 1, 1, [10**6, 0]))  # unknown end offset: let in
    sums = Capacity(end_offset)
    assert not asyncio.run(sums.over(conf.stream("sum"), Partial("sum", 5, 0, 1, [19.0, 1.0])))
    assert asyncio.run(sums.over(conf.stream("sum"), Partial("sum", 5, 0, 1, [19.0, 1.5])))


def test_the_agent_refuses_a_partial_claiming_more_than_its_partition_holds(conf):
    out: list[tuple[str, bytes]] = []

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        out.append((topic, value))

    async def end_offset(role: str, partition: int) -> int | None:
        return 12  # the events partition holds 12 records

    r = agent(conf, {}, {}, produce, sized_topics())
    r.capacity = Capacity(end_offset)
    before = metrics.INTERNAL_REFUSED.labels("s", "capacity")._value.get()
    run(r, Tick("s", {0: 100.6}, 1).encode(), 100.6)  # starts: slot 99 released
    run(r, Partial("s", 100, 0, 1, [10**6, 10**6]).encode(), 101.2)
    run(r, Partial("s", 100, 0, 1, [3, 4]).encode(), 101.3)
    run(r, Tick("s", {0: 101.6}, 1).encode(), 101.6)
    assert metrics.INTERNAL_REFUSED.labels("s", "capacity")._value.get() == before + 1
    released = {
        msgpack.unpackb(v)["slot"]: msgpack.unpackb(v)["histogram"]
        for t, v in out
        if t.endswith("releases")
    }
    assert released[100] == [3.0, 4.0], "the honest partial, not the forged one, is released"


def test_garbage_in_the_slots_table_is_dropped_and_counted(conf):
    out: list[str] = []

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        out.append(topic)

    slots: dict[str, bytes] = {}
    r = agent(conf, {}, slots, produce, sized_topics())
    run(r, Tick("s", {0: 100.6}, 1).encode(), 100.6)
    slots["s"] = b"\xc1garbage"
    slots["s\x00merged"] = packed({"x": "y"})
    before = metrics.INTERNAL_REFUSED.labels("s", "state")._value.get()
    run(r, Partial("s", 100, 0, 1, [1, 1]).encode(), 101.2)
    run(r, Tick("s", {0: 101.6}, 1).encode(), 101.6)
    assert metrics.INTERNAL_REFUSED.labels("s", "state")._value.get() >= before + 1
    assert "s" not in r.failed
    assert sum(t.endswith("releases") for t in out) == 2, "slot 100 released after the garbage"


def test_garbage_in_the_ledger_stops_the_stream_not_the_agent(conf):
    out: list[str] = []

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        out.append(topic)

    r = agent(conf, {"s": b"\x93garbage"}, {}, produce, sized_topics())
    run(r, Tick("s", {0: 100.6}, 1).encode(), 100.6)
    run(r, Tick("sum", {0: 100.6}, 1).encode(), 100.6)
    assert "ledger table" in r.failed["s"]
    assert not [t for t in out if t.endswith("releases")][1:], "only the other stream released"
    assert "sum" not in r.failed


def test_a_table_value_that_is_not_base64_is_a_state_error():
    table = BytesTable({"s": "not base64!", "t": 5, "u": base64.b64encode(b"ok").decode()}, "slots")
    for key in ("s", "t"):
        with pytest.raises(StateError):
            table[key]
    assert table["u"] == b"ok"
    assert table.get("missing") is None


# -- levels -------------------------------------------------------------------------------------
def test_levels_records_round_trip_and_refuse_what_the_collect_stage_never_writes():
    h = History([Change(10.0, "loose"), Change(20.0, None)], truncated=True)
    assert decode_levels(b"17", encode_history(h), 2) == UserLevels("17", h)
    assert decode_levels(OFFSET_KEY + b"2", encode_mark(40), 2) == OffsetMark(2, 40)
    assert decode_levels(b"17", None, 2) == UserLevels("17", None)
    bad = [
        (b"17", b"\xc1"),
        (b"17", packed({"truncated": False})),
        (b"17", packed({"changes": [[1.0, "a"], [0.5, "b"]]})),
        (b"17", packed({"changes": [[1.0, "a"], [2.0, "a"]]})),
        (b"17", packed({"changes": [[math.nan, "a"]]})),
        (b"17", packed({"changes": [[1.0, "a"]] * 20})),
        (b"\xff\xfe", encode_history(h)),
        (OFFSET_KEY + b"3", encode_mark(4)),
        (OFFSET_KEY + b"x", encode_mark(4)),
        (OFFSET_KEY + b"2", encode_mark(-4)),
        (OFFSET_KEY + b"2", packed({"offset": "4"})),
        (None, encode_mark(4)),
    ]
    for key, value in bad:
        with pytest.raises(LevelsError):
            decode_levels(key, value, 2)


def restore(stored: dict[str, History | None], asked: dict[str, list[tuple[float, str | None]]]):
    r = LevelsRestore(["strict", "loose"])
    for user, history in stored.items():
        r.add(UserLevels(user, history))
    for user, requests in asked.items():
        for at, level in requests:
            r.asked(user, None if level is None else packed({"level": level}), at)
    return {u: (h, why) for u, h, why in r.histories(1000.0)}


def test_a_history_the_users_requests_made_is_restored_as_stored():
    honest = History([Change(105.0, "loose")])
    back = History([Change(105.0, "loose"), Change(300.0, "strict")])
    out = restore(
        {"1": honest, "2": back},
        {"1": [(100.0, "loose")], "2": [(100.0, "loose"), (290.0, "strict")]},
    )
    assert out == {"1": (honest, ""), "2": (back, "")}
    # a user who asked again for the level it had: the change stays at the first request
    again = restore({"3": honest}, {"3": [(90.0, "strict"), (100.0, "loose"), (200.0, "loose")]})
    assert again["3"] == (honest, "")


@pytest.mark.parametrize(
    ("stored", "asked"),
    [
        (History([Change(0.0, "loose")]), []),  # loose since 0, never asked
        (History([Change(0.0, "loose")]), [(100.0, "strict")]),  # asked for another level
        (History([Change(0.0, "loose")]), [(50.0, "strict"), (100.0, "loose")]),  # backdated
        (None, [(100.0, "loose")]),  # the history of a request was deleted
    ],
    ids=["never-asked", "other-level", "backdated", "deleted"],
)
def test_a_forged_history_is_replaced_by_a_gap_from_the_takeover(stored, asked):
    out = restore({"9": stored}, {"9": asked})
    history, why = out["9"]
    assert why
    assert history.truncated and len(history.changes) == 1 and history.changes[0].at == 1000.0
    assert history.changes[0].level == (asked[-1][1] if asked else None)


def test_preferences_past_the_horizon_are_refused(conf):
    streams = conf.streams
    assert not too_far(1060.0, 1000.0, streams)
    assert too_far(1061.0, 1000.0, streams) and too_far(math.nan, 1000.0, streams)
    book = LevelBook(8, ["only"])
    before = metrics.INTERNAL_REFUSED.labels("preferences", "future")._value.get()
    far = PreferenceRecord(0, 0, b"3", packed({"level": "only"}), 10**13)
    book.apply([far], floor=100.0, horizon=200.0)
    assert book.preferences.history("3") is None and book.offsets == {0: 1}
    assert metrics.INTERNAL_REFUSED.labels("preferences", "future")._value.get() == before + 1


# -- the Faust changelogs -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def changelog_table():
    import faust

    from app.stream.tables import ChangelogTable

    app = faust.App("hostile-fuzz", store="memory://", Table=ChangelogTable, autodiscover=False)
    return app.Table("slots", default=None, key_type=str, value_type=str, partitions=1)


def _json(value: object) -> bytes:
    import json

    return json.dumps(value).encode()


b64 = st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode())
changelog_bytes = (
    st.none()
    | st.binary(max_size=12)
    | raws
    | (st.text(max_size=8) | b64 | st.integers() | st.none() | st.lists(st.integers())).map(_json)
)


@settings(max_examples=400, deadline=None)
@given(key=changelog_bytes, value=changelog_bytes)
def test_a_changelog_record_is_restored_only_if_the_table_could_have_written_it(
    changelog_table, key, value
):
    import json
    import types

    message = types.SimpleNamespace(key=key, value=value, partition=0, offset=7)

    def text(raw: bytes) -> object:
        try:
            return json.loads(raw)
        except ValueError:
            return None

    key_ok = isinstance(key, bytes) and isinstance(text(key), str)
    decoded = text(value) if isinstance(value, bytes) else None
    value_ok = value is None or (
        isinstance(decoded, str)
        and _typed_only(lambda v: base64.b64decode(v, validate=True), ValueError, decoded)
        is not None
    )
    assert changelog_table._fits(message) is (key_ok and value_ok)


@settings(max_examples=200, deadline=None)
@given(value=st.none() | st.integers() | st.text(max_size=12) | b64 | st.binary(max_size=8))
def test_a_table_value_reads_as_bytes_or_a_state_error(value):
    table = BytesTable({"k": value}, "ledger")
    try:
        got = table["k"]
    except KeyError:
        assert value is None
    except StateError as exc:
        assert exc.table == "ledger" and exc.key == "k"
    else:
        assert got == base64.b64decode(value)


def test_the_collect_stage_dead_letters_a_preference_past_the_horizon(
    make_settings, central_stream, fake_kafka
):
    from tests.stream.test_ingest import TWO_LEVELS, make_service, users_of

    service = make_service(make_settings(central_stream(levels=TWO_LEVELS)), fake_kafka)
    service._consumer.assign([TopicPartition(service.source, 0)])
    asyncio.run(service.on_assigned([TopicPartition(service.source, 0)]))
    first, second = users_of(0, service._partitions_total, 2)
    level = packed({"level": "loose"})
    ahead_ms = int((time.time() + 3600) * 1000)  # an hour ahead: past max(60 s, 2 slots)

    async def apply():
        service._apply_side_input(
            fake_kafka.Rec("preferences", 0, 3, first.encode(), level, ahead_ms)
        )
        service._apply_side_input(
            fake_kafka.Rec("preferences", 0, 4, second.encode(), level, 100_000)
        )
        await service._commit([])  # waits for the dead letter's send

    asyncio.run(apply())
    assert service.collector.preferences.history(first) is None
    assert service.collector.preferences.history(second) is not None, "the next one applies"
    (dead,) = service._producer.values(service.topics.dead_letter)
    assert (msgpack.unpackb(dead)["reason"], msgpack.unpackb(dead)["offset"]) == ("bad_time", 3)
