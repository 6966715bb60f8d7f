"""The release agent's logic on in-memory tables: one release per slot, crash re-emission."""

from __future__ import annotations

import asyncio

import msgpack

from app.stream.config import load_settings
from app.stream.records import encode_partial, encode_tick
from app.stream.release import Releaser
from app.stream.topics import load_topics

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

    async def persist():
        return None

    return Releaser(settings, load_topics(), ledger, slots, produce, persist)


def test_slots_close_in_order_even_without_events(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    asyncio.run(r.on_message(encode_tick("s", 10.6)))  # starts at slot 9
    asyncio.run(r.on_message(encode_partial("s", 10, 0, 1, [3, 1], 11.6)))
    asyncio.run(r.on_message(encode_tick("s", 14.6)))  # slots 11-12 by timeout
    releases = [msgpack.unpackb(v) for t, v in sent if t == "releases"]
    assert [x["slot"] for x in releases] == [9, 10, 11, 12]
    assert msgpack.unpackb(ledger["s"])["next_slot"] == 13


def test_crash_between_record_and_publish_reemits_identical_bytes(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent, fail_publish=True)
    try:
        asyncio.run(r.on_message(encode_partial("s", 10, 0, 1, [2, 0], 11.6)))
    except Boom:
        pass
    entry = msgpack.unpackb(ledger["s"])
    assert entry["published"] is False
    restarted = make(tmp_path, ledger, slots, sent)
    asyncio.run(restarted.on_message(encode_tick("s", 11.7)))
    assert [v for t, v in sent if t == "releases"] == [entry["record"]]
    assert msgpack.unpackb(ledger["s"])["published"] is True
