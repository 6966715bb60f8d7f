"""The bytes on the public topics, pinned: each expected value below is written by hand from the
msgpack spec and ``docs/wire.md`` (fixmap ``0x8N``, map16 ``0xde`` and its 2-byte size, fixstr
``0xaN``, float64 ``0xcb`` and its 8 big-endian bytes, nil ``0xc0``, true/false
``0xc3``/``0xc2``, fixarray ``0x9N``, bin8 ``0xc4``), never produced by the code under test. A
change to any of them breaks every reader of the topic: bump the record's ``VERSION`` instead
and say how to migrate (``docs/wire.md``)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from app.dp.local.wire import CollectionRequest
from app.wire import audit, dead_letters, events, preferences, releases, reports, requests


def s(text: str) -> bytes:
    """A fixstr (< 32 bytes)."""
    raw = text.encode()
    assert len(raw) < 32
    return bytes([0xA0 | len(raw)]) + raw


def f64(hex16: str) -> bytes:
    return b"\xcb" + bytes.fromhex(hex16)


EVENT = (
    b"\x84"
    + s("stream") + s("clicks")
    + s("user") + s("u1")
    + s("ts") + f64("4025000000000000")  # 10.5
    + s("value") + s("news")
)  # fmt: skip
SUM_EVENT = (
    b"\x85"
    + s("stream") + s("energy")
    + s("user") + b"\x07"
    + s("ts") + f64("401c000000000000")  # 7.0
    + s("value") + b"\x01"
    + s("amount") + f64("4025000000000000")  # 10.5
)  # fmt: skip
PREFERENCE = b"\x81" + s("level") + s("open")
REPORT = (
    b"\x88"
    + s("mechanism") + s("lpu")
    + s("slot") + b"\x03"
    + s("round") + s("publication")
    + s("user") + b"\x07"
    + s("group") + b"\x00"
    + s("oracle") + s("grr")
    + s("payload") + b"\x91\x02"
    + s("stream") + s("loc")
)  # fmt: skip
REQUEST = (
    b"\x87"
    + s("stream") + s("loc")
    + s("slot") + b"\x07"
    + s("start") + f64("4051800000000000")  # 70.0
    + s("end") + f64("4054000000000000")  # 80.0
    + s("deadline") + f64("4052e00000000000")  # 75.5
    + s("users") + b"\x3c"  # 60
    + s("request") + b"\x8a"
    + s("mechanism") + s("lpu")
    + s("slot") + b"\x03"
    + s("round") + s("publication")
    + s("d") + b"\x02"
    + s("buckets") + b"\x04"
    + s("cohort") + b"\xc0"
    + s("oracle") + b"\x91" + s("grr")
    + s("eps") + b"\x91" + f64("3ff0000000000000")  # 1.0
    + s("units") + b"\x91\x08"
    + s("levels") + b"\xc0"
)  # fmt: skip
RELEASE = (
    b"\x8d"
    + s("stream") + s("clicks")
    + s("slot") + b"\x07"
    + s("start") + f64("407a400000000000")  # 420.0
    + s("end") + f64("407e000000000000")  # 480.0
    + s("histogram") + b"\x92" + f64("400c000000000000") + f64("bff0000000000000")  # 3.5, -1
    + s("fresh") + b"\xc3"
    + s("mechanism") + s("pba")
    + s("spent_by_group") + b"\x81" + s("strict") + f64("3fb999999999999a")  # 0.1
    + s("version") + b"\x01"
    + s("schema") + b"\x01"
    + s("released_at") + f64("407f400000000000")  # 500.0
    + s("delayed") + b"\xc2"
    + s("guarantee") + b"\x84"
    + s("eps") + f64("3ff0000000000000")
    + s("w") + b"\x05"
    + s("relation") + s("replace")
    + s("noise") + s("geometric")
)  # fmt: skip
OPEN_RELEASE = (
    b"\xde\x00\x15"  # map16: the 13 fields of layout 1, then the 8 of an open stream
    + s("stream") + s("urls")
    + s("slot") + b"\x07"
    + s("start") + f64("407a400000000000")  # 420.0
    + s("end") + f64("407e000000000000")  # 480.0
    + s("histogram") + b"\x92" + f64("4044800000000000") + f64("4031000000000000")  # 41, 17
    + s("fresh") + b"\xc3"
    + s("mechanism") + s("open_uniform")
    + s("spent_by_group") + b"\x81" + s("strict") + f64("3fe0000000000000")  # 0.5
    + s("version") + b"\x01"
    + s("schema") + b"\x02"
    + s("released_at") + f64("407f400000000000")  # 500.0
    + s("delayed") + b"\xc2"
    + s("guarantee") + b"\x85"
    + s("eps") + f64("3ff0000000000000")
    + s("w") + b"\x05"
    + s("relation") + s("replace")
    + s("noise") + s("geometric")
    + s("delta") + f64("3f50624dd2f1a9fc")  # 0.001
    + s("keys") + b"\x92" + s("/a") + s("/b")
    + s("new_keys") + b"\x91" + s("/b")
    + s("status") + s("publish")
    + s("threshold") + b"\x0c"  # 12
    + s("retired") + b"\x91" + s("/c")
    + s("spent_exact_by_group") + b"\x81" + s("strict") + s("1/2")
    + s("delta_spent_by_group") + b"\x81" + s("strict") + f64("3f50624dd2f1a9fc")
    + s("delta_spent_exact_by_group") + b"\x81" + s("strict") + s("1/1000")
)  # fmt: skip
DEAD_LETTER = (
    b"\x86"
    + s("reason") + s("bad_time")
    + s("detail") + s("x")
    + s("topic") + s("events")
    + s("partition") + b"\x00"
    + s("offset") + b"\x05"
    + s("value") + b"\xc4\x01\x01"
)  # fmt: skip

DOMAINS = {
    "clicks": events.Domain(3, {"news": 0, "sport": 1, "music": 2}),
    "energy": events.Domain(2, {"north": 0, "south": 1}, sums=True),
}
ASK = CollectionRequest("lpu", 3, "publication", 2, 4, None, ("grr",), (1.0,), (8,))
GUARANTEE = {"eps": 1.0, "w": 5, "relation": "replace", "noise": "geometric"}
RELEASED = releases.SlotRelease(
    "clicks", 7, 420.0, 480.0, (3.5, -1.0), True, "pba", {"strict": 0.1}, 1, 1, 500.0, False,
    GUARANTEE,
)  # fmt: skip
OPEN_GUARANTEE = {**GUARANTEE, "delta": 0.001}
OPEN_RELEASED = releases.SlotRelease(
    "urls", 7, 420.0, 480.0, (41.0, 17.0), True, "open_uniform", {"strict": 0.5}, 1, 2, 500.0,
    False, OPEN_GUARANTEE, keys=("/a", "/b"), new_keys=("/b",), status="publish", threshold=12,
    retired=("/c",), spent_exact_by_group={"strict": "1/2"},
    delta_spent_by_group={"strict": 0.001}, delta_spent_exact_by_group={"strict": "1/1000"},
)  # fmt: skip

LETTER = dead_letters.DeadLetter("bad_time", "x", "events", 0, 5, b"\x01")


@pytest.mark.parametrize(
    ("record", "encode", "raw"),
    [
        (events.Event("clicks", "u1", 10.5, "news"), events.encode, EVENT),
        (events.Event("energy", 7, 7.0, 1, 10.5), events.encode, SUM_EVENT),
        (preferences.Preference("open"), preferences.encode, PREFERENCE),
        (reports.Report("loc", "lpu", 3, "publication", 7, 0, "grr", (2,)), reports.encode, REPORT),
        (requests.RequestRecord("loc", 7, 70.0, 80.0, 75.5, 60, ASK), requests.encode, REQUEST),
        (RELEASED, releases.encode, RELEASE),
        (OPEN_RELEASED, releases.encode, OPEN_RELEASE),
        (LETTER, dead_letters.encode, DEAD_LETTER),
    ],
)  # fmt: skip
def test_encoding_writes_the_pinned_bytes(record, encode, raw) -> None:
    assert encode(record) == raw


def test_decoding_the_pinned_bytes_gives_the_records() -> None:
    assert events.decode(EVENT, DOMAINS) == events.Event("clicks", "u1", 10.5, 0)
    assert events.decode(SUM_EVENT, DOMAINS) == events.Event("energy", "7", 7.0, 1, 10.5)
    assert preferences.decode(PREFERENCE) == preferences.Preference("open")
    assert reports.decode(REPORT) == reports.Report(
        "loc", "lpu", 3, "publication", 7, 0, "grr", (2,)
    )
    assert requests.decode(REQUEST) == requests.RequestRecord("loc", 7, 70.0, 80.0, 75.5, 60, ASK)
    assert releases.decode(RELEASE) == RELEASED
    assert releases.decode(OPEN_RELEASE) == OPEN_RELEASED
    assert OPEN_RELEASED.key_counts() == {"/a": 41.0, "/b": 17.0}


def test_a_tombstone_is_the_default_level_both_ways() -> None:
    assert preferences.encode(preferences.Preference(None)) is None
    assert preferences.decode(None) == preferences.Preference(None)


def test_every_record_type_is_frozen_with_slots() -> None:
    for kind in (
        events.Event,
        preferences.Preference,
        reports.Report,
        requests.RequestRecord,
        releases.SlotRelease,
        audit.AuditRecord,
        dead_letters.DeadLetter,
    ):
        assert kind.__dataclass_params__.frozen, kind  # type: ignore[attr-defined]
        assert "__slots__" in vars(kind), kind
        assert fields(kind)
