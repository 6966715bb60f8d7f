"""Wire formats (``app.stream.records``): every dead-letter reason, every encoder's fields."""

from __future__ import annotations

import hashlib
from fractions import Fraction

import msgpack
import numpy as np
import pytest

from app.dp.local.wire import CollectionRequest
from app.dp.types import Release, WindowSpend
from app.stream import records
from app.stream.errors import BadEvent
from app.stream.internal import Partial, PartitionTally, Tick
from app.stream.records import (
    REASONS,
    RECENT,
    Domain,
    decode_preference,
    decode_report,
    encode_dead_letter,
    encode_release,
    encode_request,
    unpack,
)
from app.wire.dead_letters import MAX_VALUE_BYTES as MAX_DEAD_LETTER_BYTES
from tests.wire.shapes import decode_event


@pytest.fixture
def domains(load_configs, central_stream):
    return {s.id: Domain.of(s) for s in load_configs(central_stream())}


def pack(**fields):
    return msgpack.packb(fields)


EVENT = {"stream": "s", "user": "u1", "ts": 10.5, "value": "b"}


def test_a_good_event_decodes_labels_and_indices(domains):
    assert decode_event(pack(**EVENT), domains) == ("s", "u1", 10.5, 1)
    # an int user and an int time are accepted as their string and float
    raw = pack(**{**EVENT, "user": 7, "ts": 10, "value": 2})
    assert decode_event(raw, domains) == ("s", "7", 10.0, 2)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "undecodable"),
        (b"\xc1", "undecodable"),
        (msgpack.packb([1, 2]), "not_a_map"),
        (pack(stream="s", user="u", ts=1.0), "missing_field"),
        (pack(**{**EVENT, "stream": 3}), "wrong_type"),
        (pack(**{**EVENT, "stream": "other"}), "unknown_stream"),
        (pack(**{**EVENT, "user": ""}), "wrong_type"),
        (pack(**{**EVENT, "user": 1.5}), "wrong_type"),
        (pack(**{**EVENT, "ts": "10"}), "wrong_type"),
        (pack(**{**EVENT, "ts": -1.0}), "bad_time"),
        (pack(**{**EVENT, "ts": 1e11}), "bad_time"),
        (pack(**{**EVENT, "ts": float("nan")}), "bad_time"),
        (pack(**{**EVENT, "value": 3}), "out_of_domain"),
        (pack(**{**EVENT, "value": -1}), "out_of_domain"),
        (pack(**{**EVENT, "value": "z"}), "out_of_domain"),
        (pack(**{**EVENT, "value": 1.0}), "wrong_type"),
        (pack(**{**EVENT, "value": True}), "wrong_type"),
    ],
)
def test_a_bad_event_names_its_reason(domains, raw, reason):
    with pytest.raises(BadEvent) as info:
        decode_event(raw, domains)
    assert info.value.reason == reason and reason in REASONS


def test_an_unknown_stream_id_is_cut_in_the_detail(domains):
    with pytest.raises(BadEvent) as info:
        decode_event(pack(**{**EVENT, "stream": "x" * 1000}), domains)
    assert info.value.detail == "x" * 64


@pytest.mark.parametrize(
    ("raw", "level"),
    [
        (msgpack.packb({"level": "strict"}), "strict"),
        (None, None),  # tombstone
        (b"\xc1", None),  # undecodable
        (msgpack.packb({"level": 3}), None),
        (msgpack.packb({"other": "strict"}), None),
        (msgpack.packb(["strict"]), None),
    ],
)
def test_a_preference_is_a_level_name_or_none(raw, level):
    assert decode_preference(raw) == level


def test_partials_and_ticks_keep_their_wire_keys():
    partial = unpack(Partial("s", 12, 1, 4, [1, 0, 2]).encode())
    assert partial == {
        "kind": "partial",
        "stream": "s",
        "slot": 12,
        "partition": 1,
        "partitions": 4,
        "counts": [1, 0, 2],
    }
    tick = unpack(Tick("s", {3: 120, 0: 119.5}, 4).encode())
    assert tick == {
        "kind": "tick",
        "stream": "s",
        "progress": {3: 120.0, 0: 119.5},
        "partitions": 4,
    }
    assert all(type(t) is float for t in tick["progress"].values())


def test_a_small_dead_letter_keeps_the_whole_value():
    value = b"v" * MAX_DEAD_LETTER_BYTES  # exactly at the limit: kept whole
    out = unpack(encode_dead_letter("bad_time", "ts 1", "events", 2, 40, value))
    assert out == {
        "reason": "bad_time",
        "detail": "ts 1",
        "topic": "events",
        "partition": 2,
        "offset": 40,
        "value": value,
    }


def test_a_large_dead_letter_is_truncated_with_its_size_and_sha256():
    value = bytes(range(256)) * ((MAX_DEAD_LETTER_BYTES >> 8) + 1) + b"tail"
    raw = encode_dead_letter("not_a_map", "d" * 2000, "events", 0, 7, value)
    out = unpack(raw)
    assert MAX_DEAD_LETTER_BYTES == 64 * 1024
    assert out["value"] == value[:MAX_DEAD_LETTER_BYTES]
    assert out["truncated"] is True and out["size"] == len(value)
    assert out["sha256"] == hashlib.sha256(value).hexdigest()
    assert out["detail"] == "d" * 512
    assert len(raw) < MAX_DEAD_LETTER_BYTES + 1024  # fits any producer's request size


def test_a_null_dead_letter_value_stays_null():
    assert unpack(encode_dead_letter("undecodable", "", "events", 0, 1, None))["value"] is None


def release(slot, fresh=True, spent=(0.25, 0.5)):
    return Release(
        slot=slot,
        histogram=np.array([1.5, -0.5, 3.0]),
        fresh=fresh,
        status="publish" if fresh else "skip",
        spent_dc=np.array([0.05, 0.1]),
        spent_pub=np.array(spent) - np.array([0.05, 0.1]),
        mechanism="pba",
        version=3,
        spent_exact=(Fraction(1, 4), Fraction(1, 2)),
    )


@pytest.fixture
def two_levels(load_configs, central_stream):
    levels = [{"name": "strict", "w": 4, "eps": 1.0}, {"name": "loose", "w": 2, "eps": 2.0}]
    (stream,) = load_configs(central_stream(levels=levels, neighbours="add-remove"))
    return stream


def test_a_release_names_levels_and_the_slot_bounds(two_levels):
    window = [WindowSpend(4, 1.0, Fraction(3, 4)), WindowSpend(2, 2.0, Fraction(1, 2))]
    record, audit, recent = encode_release(
        two_levels, 12, release(12), "describe", window, [], users_dc=9, users_pub=8
    )
    rec = unpack(record)
    expected = {
        "stream": "s",
        "slot": 12,
        "start": 120.0,
        "end": 130.0,
        "histogram": [1.5, -0.5, 3.0],
        "fresh": True,
        "mechanism": "pba",
        "spent_by_group": {"strict": 0.25, "loose": 0.5},
        "version": 3,
    }
    assert {k: rec.get(k) for k in expected} == expected
    assert "spent_dc_by_group" not in rec and "describe" not in rec  # the audit's, not ours
    au = unpack(audit)
    assert au["neighbours"] == "add-remove" and au["describe"] == "describe"
    assert au["window_spent_by_group"] == {"strict": 0.75, "loose": 0.5}
    assert au["window_spent_exact_by_group"] == {"strict": "3/4", "loose": "1/2"}
    assert au["spent_exact_by_group"] == {"strict": "1/4", "loose": "1/2"}
    assert au["eps_by_group"] == {"strict": 1.0, "loose": 2.0}
    assert au["w_by_group"] == {"strict": 4, "loose": 2}
    assert au["spent_dc_by_group"] == {"strict": 0.05, "loose": 0.1}
    assert au["users_dc"] == 9 and au["users_pub"] == 8
    assert recent == [[12, True, "publish", {"strict": 0.25, "loose": 0.5}]]
    # The order of the fields is part of the bytes on the topics (docs/wire.md): pinned.
    assert list(rec) == [
        *("stream", "slot", "start", "end", "histogram", "fresh", "mechanism"),
        *("spent_by_group", "version", "schema", "released_at", "delayed", "guarantee"),
    ]
    assert list(au) == [
        *("stream", "slot", "mechanism", "describe", "neighbours", "noise", "deployment"),
        *("status", "fresh", "released_at", "delayed", "weaker_guarantee", "privacy_unit"),
        *("spent_by_group", "spent_dc_by_group", "spent_pub_by_group", "window_spent_by_group"),
        *("window_spent_exact_by_group", "eps_by_group", "w_by_group", "users_dc", "users_pub"),
        "spent_exact_by_group",
    ]


def test_the_recent_list_keeps_the_last_releases_only(two_levels):
    window = [WindowSpend(4, 1.0, Fraction(0)), WindowSpend(2, 2.0, Fraction(0))]
    recent: list = []
    for slot in range(RECENT + 5):
        _, _, recent = encode_release(
            two_levels, slot, release(slot, fresh=slot % 2 == 1), "", window, recent
        )
    assert len(recent) == RECENT
    assert [r[0] for r in recent] == list(range(5, RECENT + 5))
    assert recent[-1][1:3] == [False, "skip"]


def test_a_release_needs_one_window_per_level(two_levels):
    with pytest.raises(ValueError):
        encode_release(two_levels, 1, release(1), "", [WindowSpend(4, 1.0, Fraction(0))], [])


def test_a_request_carries_the_slot_bounds_and_users(load_configs, local_stream):
    (stream,) = load_configs(local_stream())
    request = CollectionRequest("lpu", 3, "publication", 2, 4, None, ("grr",), (1.0,), (8,))
    out = unpack(encode_request(stream, 7, 75.5, request))
    assert out == {
        "stream": "loc",
        "slot": 7,
        "start": 70.0,
        "end": 80.0,
        "deadline": 75.5,
        "users": 60,
        "request": request.to_dict(),
    }


REPORT = {"stream": "loc", "slot": 3, "round": "publication", "user": 5, "group": 0, "payload": [1]}


def test_a_good_report_decodes_with_its_round_index():
    assert decode_report(pack(**REPORT)) == ("loc", 3, 1, 5, 0, [1])
    assert decode_report(pack(**{**REPORT, "round": "dissimilarity"}))[2] == 0


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "undecodable"),
        (b"\xc1", "undecodable"),
        (msgpack.packb("x"), "not_a_map"),
        (pack(**{k: v for k, v in REPORT.items() if k != "payload"}), "missing_field"),
        (pack(**{**REPORT, "stream": 1}), "wrong_type"),
        (pack(**{**REPORT, "round": "third"}), "wrong_type"),
        (pack(**{**REPORT, "round": 1}), "wrong_type"),
        (pack(**{**REPORT, "slot": "3"}), "wrong_type"),
        (pack(**{**REPORT, "user": 5.0}), "wrong_type"),
        (pack(**{**REPORT, "group": None}), "wrong_type"),
        (pack(**{**REPORT, "payload": 1}), "wrong_type"),
        (pack(**{**REPORT, "payload": [1, "0"]}), "wrong_type"),
    ],
)
def test_a_bad_report_names_its_reason(raw, reason):
    with pytest.raises(BadEvent) as info:
        decode_report(raw)
    assert info.value.reason == reason


def test_a_tally_carries_its_round_and_counts():
    out = unpack(PartitionTally("loc", 3, "publication", 1, 2, [4, 5], [9], 31.5).encode())
    assert out == {
        "kind": "tally",
        "stream": "loc",
        "slot": 3,
        "round": "publication",
        "partition": 1,
        "partitions": 2,
        "support": [4, 5],
        "reports": [9],
        "now": 31.5,
    }


def test_pack_keeps_float64():
    x = 0.1 + 0.2  # not representable as float32
    assert records.unpack(records.pack({"x": x}))["x"] == x
