"""The release agent's logic on in-memory tables: one release per slot, crash re-emission."""

from __future__ import annotations

import asyncio

import msgpack
import pytest

from app import metrics
from app.stream.config import load_settings
from app.stream.internal import Partial, Tick
from app.stream.release import LedgerEntry
from tests.stream.agent import TEST_ENV, Boom, agent, recording_agent, run

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


def make(tmp_path, ledger, slots, sent, fail_publish=False):
    return recording_agent(tmp_path / "s.yaml", YAML, ledger, slots, sent, fail_publish)


def tick(r, progress, now):
    """Partition 0 (of 1) is complete up to event time ``progress``."""
    run(r, Tick("s", {0: progress}, 1).encode(), now)


def test_slots_close_in_order_even_without_events(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    tick(r, 10.6, 10.6)  # starts at slot 9 (ends 10, due 10.5)
    run(r, Partial("s", 10, 0, 1, [3, 1]).encode(), 11.6)
    tick(r, 13.6, 13.7)  # slots 11-12 have no events: the progress closes them
    releases = [msgpack.unpackb(v) for t, v in sent if t == "releases"]
    assert [x["slot"] for x in releases] == [9, 10, 11, 12]
    assert msgpack.unpackb(ledger["s"])["next_slot"] == 13


def test_crash_between_record_and_publish_reemits_identical_bytes(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent, fail_publish=True)
    try:
        tick(r, 10.6, 10.6)  # starts at slot 9
        run(r, Partial("s", 10, 0, 1, [2, 0]).encode(), 11.6)
    except Boom:
        pass
    entry = LedgerEntry.decode(ledger["s"])
    assert entry.published is False
    restarted = make(tmp_path, ledger, slots, sent)
    tick(restarted, 10.7, 11.7)
    assert [v for t, v in sent if t == "releases"] == [entry.record("releases")]
    assert msgpack.unpackb(ledger["s"])["published"] is True


def late_partials() -> float:
    return metrics.LATE_PARTIALS.labels("s")._value.get()


def late_slots() -> float:
    return metrics.LATE_SLOTS.labels("s")._value.get()


def test_only_partials_whose_values_are_discarded_are_late(tmp_path):
    """Issue 23, items 3 and 8: a replay of a released partial, an empty partial, a partial
    from before the stream's first release are not late data; different counts are."""
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    before, before_slots = late_partials(), late_slots()
    tick(r, 10.6, 10.6)  # starts at slot 9
    run(r, Partial("s", 7, 0, 1, [5, 5]).encode(), 10.7)  # history from before the start
    run(r, Partial("s", 10, 0, 1, [3, 1]).encode(), 11.6)  # slot 10 released with it
    run(r, Partial("s", 9, 0, 1, [0, 0]).encode(), 11.7)  # empty: nothing lost
    assert (late_partials(), late_slots()) == (before, before_slots)
    restarted = make(tmp_path, ledger, slots, sent)  # a restart replays the released partial
    run(restarted, Partial("s", 10, 0, 1, [3, 1]).encode(), 12.0)
    assert (late_partials(), late_slots()) == (before, before_slots)
    run(restarted, Partial("s", 10, 0, 1, [4, 1]).encode(), 12.1)  # one more value: dropped
    run(restarted, Partial("s", 9, 0, 1, [0, 2]).encode(), 12.2)  # slot 9 was released empty
    assert late_partials() == before + 2
    assert late_slots() == before_slots + 2
    run(restarted, Partial("s", 9, 0, 1, [0, 3]).encode(), 12.3)  # the same slot again
    assert (late_partials(), late_slots()) == (before + 3, before_slots + 2)


def test_a_partial_for_a_partition_the_topic_lacks_is_refused_not_late(tmp_path):
    """Issue 23, item 8: the guard refuses it (counted); the driver never sees it."""
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    tick(r, 10.6, 10.6)
    refused = metrics.INTERNAL_REFUSED.labels("s", "partition")._value.get()
    before = late_partials()
    run(r, Partial("s", 9, 3, 1, [1, 0]).encode(), 11.0)
    assert metrics.INTERNAL_REFUSED.labels("s", "partition")._value.get() == refused + 1
    assert late_partials() == before


def gated_agent(tmp_path, ledger, slots, produce):
    """An agent of ``YAML`` whose broker is ``produce``."""
    config = tmp_path / "s.yaml"
    config.write_text(YAML)
    return agent(load_settings(env=TEST_ENV, config=config), ledger, slots, produce)


def test_release_and_audit_await_their_acks_together(tmp_path):
    """Issue 37, goal 4: the audit record is sent before the release is acknowledged (one
    round trip); a broker that acknowledges neither until both arrived would hang a publisher
    that awaits them one after the other (the wait then times out and the test fails)."""
    ledger, slots, sent = {}, {}, []
    in_flight: set[str] = set()
    both = asyncio.Event()

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        in_flight.add(topic)
        if in_flight >= {"releases", "audit"}:
            both.set()
        await asyncio.wait_for(both.wait(), 2.0)
        sent.append((topic, value))

    r = gated_agent(tmp_path, ledger, slots, produce)
    tick(r, 10.6, 10.6)  # starts at slot 9
    run(r, Partial("s", 10, 0, 1, [2, 0]).encode(), 11.6)
    entry = LedgerEntry.decode(ledger["s"])
    assert entry.published is True
    assert sorted(sent[-2:]) == sorted(entry.outbox)  # slot 10's two records, both acked


def test_an_unacknowledged_audit_leaves_the_slot_unmarked_and_resent(tmp_path):
    """The release was acknowledged, its audit record was not: the entry stays unpublished, and
    the restarted agent re-sends both stored records, byte for byte, before marking it."""
    ledger, slots, sent = {}, {}, []

    async def audit_fails(topic: str, key: bytes, value: bytes) -> None:
        if topic == "audit":
            raise Boom
        sent.append((topic, value))

    r = gated_agent(tmp_path, ledger, slots, audit_fails)
    with pytest.raises(Boom):
        tick(r, 10.6, 10.6)  # starts at slot 9 and releases it
    entry = LedgerEntry.decode(ledger["s"])
    assert entry.published is False
    acked = list(sent)
    assert acked == [("releases", entry.record("releases"))]
    restarted = make(tmp_path, ledger, slots, sent)
    tick(restarted, 10.7, 11.7)
    assert sent[len(acked) :] == entry.outbox  # the stored bytes, in the outbox's order
    assert LedgerEntry.decode(ledger["s"]).published is True
