"""The releases reader: schema check, layout check, deduplication by (stream, slot)."""

from __future__ import annotations

import asyncio
import math

import msgpack
import pytest

from app.client.releases import (
    FIELDS,
    SCHEMA,
    BadReleaseError,
    Deduplicator,
    NewerSchemaError,
    decode_release,
)
from app.stream.config import load_settings
from app.stream.internal import Partial, Tick
from app.stream.release import Releaser
from app.stream.topics import load_topics
from app.wire.releases import LABELS_SCHEMA
from app.wire.releases import VERSION as RELEASE_SCHEMA
from tests.stream.agent import sized_topics

YAML = """
streams:
  - id: s
    labels: [a, b]
    slot_s: 1
    grace_s: 0.5
    release_timeout_s: 1
    mechanism: {name: pba}
    levels: [{name: only, w: 3, eps: 1.0}]
"""

GOOD = {
    "stream": "s",
    "slot": 9,
    "start": 9.0,
    "end": 10.0,
    "histogram": [1.5, -0.25],
    "fresh": True,
    "mechanism": "pba",
    "spent_by_group": {"only": 0.5},
    "version": 1,
}


def _releases(tmp_path, fail_first_publish: bool) -> list[bytes]:
    """The ``releases`` values the real release agent produces for slots 9..12 (in memory);
    with ``fail_first_publish``, the first publish crashes and a restarted agent re-emits."""
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    settings = load_settings(
        env={"DPSTREAM_NOISE_KEY": "cd" * 16, "DPSTREAM_DEPLOYMENT": "test"}, config=path
    )
    ledger: dict = {}
    slots: dict = {}
    sent: list[bytes] = []
    fail = [fail_first_publish]
    now = [0.0]

    def agent():
        async def produce(topic, key, value):
            if topic == "releases":
                sent.append(value)
                if fail[0]:
                    fail[0] = False
                    raise RuntimeError("crash after the produce, before the ledger's ack")

        async def persist():
            return None

        return Releaser(
            settings, sized_topics(), ledger, slots, produce, persist, clock=lambda: now[0]
        )

    def run(r, raw, at):
        now[0] = at
        try:
            asyncio.run(r.on_message(raw))
        except RuntimeError:
            pass

    r = agent()
    run(r, Tick("s", {0: 10.6}, 1).encode(), 10.6)  # slot 9 closes: its publish crashes
    r = agent()  # restart on the same tables
    run(r, Partial("s", 10, 0, 1, [3, 1]).encode(), 11.6)
    run(r, Tick("s", {0: 13.6}, 1).encode(), 13.7)
    return sent


def test_real_records_decode_and_the_crash_copy_is_dropped(tmp_path):
    sent = _releases(tmp_path, fail_first_publish=True)
    dedup = Deduplicator()
    kept = [rel for raw in sent if dedup.admit(rel := decode_release(raw), raw)]
    assert [r.slot for r in kept] == [9, 10, 11, 12]
    assert dedup.duplicates == len(sent) - 4 >= 1
    assert dedup.conflicts == 0
    assert all(r.schema == LABELS_SCHEMA and len(r.histogram) == 2 for r in kept)
    assert kept[0].start_utc == "1970-01-01T00:00:09Z"


def test_a_differing_copy_is_a_conflict_not_a_duplicate():
    dedup = Deduplicator()
    first = msgpack.packb(GOOD)
    other = msgpack.packb({**GOOD, "histogram": [1.0, 0.0]})
    assert dedup.admit(decode_release(first), first)
    assert not dedup.admit(decode_release(other), other)
    assert (dedup.duplicates, dedup.conflicts) == (0, 1)


def test_memory_is_bounded():
    dedup = Deduplicator(memory=2)
    for slot in (1, 2, 3):
        raw = msgpack.packb({**GOOD, "slot": slot})
        assert dedup.admit(decode_release(raw), raw)
    raw = msgpack.packb({**GOOD, "slot": 1})  # forgotten: admitted again
    assert dedup.admit(decode_release(raw), raw)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({}, None, ""),
        ({"schema": 1}, None, ""),
        ({"schema": SCHEMA + 1}, NewerSchemaError, "newer than this reader"),
        ({"schema": 0}, BadReleaseError, "schema must be"),
        ({"schema": "1"}, BadReleaseError, "schema must be"),
        ({"slot": None}, BadReleaseError, "'slot' has type NoneType"),
        ({"fresh": 1}, BadReleaseError, "'fresh' has type int"),
        ({"slot": True}, BadReleaseError, "'slot' has type bool"),
        ({"histogram": [1.0, "x"]}, BadReleaseError, "not a number"),
        ({"histogram": [1.0, math.nan]}, BadReleaseError, "not finite"),
    ],
)
def test_layout_checks(change, error, match):
    raw = msgpack.packb({**GOOD, **change})
    if error is None:
        assert decode_release(raw).histogram == (1.5, -0.25)
    else:
        with pytest.raises(error, match=match):
            decode_release(raw)


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_each_required_field_is_checked(name):
    value = {k: v for k, v in GOOD.items() if k != name}
    with pytest.raises(BadReleaseError, match=f"missing field '{name}'"):
        decode_release(msgpack.packb(value))


@pytest.mark.parametrize("raw", [b"\xc1", msgpack.packb([1, 2]), None])
def test_not_a_map(raw):
    with pytest.raises(BadReleaseError):
        decode_release(raw)


def test_fields_follow_the_topic_spec():
    spec = load_topics().spec("releases").fields
    assert set(FIELDS) == {k for k, v in spec.items() if v["required"]}
    assert "schema" in spec and not spec["schema"]["required"]
    assert SCHEMA == RELEASE_SCHEMA
