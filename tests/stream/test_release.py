"""The release agent's logic on in-memory tables: one release per slot, crash re-emission."""

from __future__ import annotations

import msgpack

from app.stream.config import load_settings
from app.stream.records import encode_partial, encode_tick
from app.stream.release import LedgerEntry
from tests.stream.agent import agent, run

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


class Boom(Exception):
    pass


def make(tmp_path, ledger, slots, sent, fail_publish=False):
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    settings = load_settings(env={"DPSTREAM_NOISE_KEY": "cd" * 16}, config=path)

    async def produce(topic, key, value):
        if fail_publish:
            raise Boom
        sent.append((topic, value))

    return agent(settings, ledger, slots, produce)



def tick(r, progress, now):
    """Partition 0 (of 1) is complete up to event time ``progress``."""
    run(r, encode_tick("s", {0: progress}, 1), now)


def test_slots_close_in_order_even_without_events(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    tick(r, 10.6, 10.6)  # starts at slot 9 (ends 10, due 10.5)
    run(r, encode_partial("s", 10, 0, 1, [3, 1]), 11.6)
    tick(r, 13.6, 13.7)  # slots 11-12 have no events: the progress closes them
    releases = [msgpack.unpackb(v) for t, v in sent if t == "releases"]
    assert [x["slot"] for x in releases] == [9, 10, 11, 12]
    assert msgpack.unpackb(ledger["s"])["next_slot"] == 13


def test_crash_between_record_and_publish_reemits_identical_bytes(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent, fail_publish=True)
    try:
        tick(r, 10.6, 10.6)  # starts at slot 9
        run(r, encode_partial("s", 10, 0, 1, [2, 0]), 11.6)
    except Boom:
        pass
    entry = LedgerEntry.decode(ledger["s"])
    assert entry.published is False
    restarted = make(tmp_path, ledger, slots, sent)
    tick(restarted, 10.7, 11.7)
    assert [v for t, v in sent if t == "releases"] == [entry.record("releases")]
    assert msgpack.unpackb(ledger["s"])["published"] is True
