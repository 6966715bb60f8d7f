"""Issue 36 on the real broker: the collect stage of an open-domain stream.

The ingest service runs in this process (the release agent is not involved). Users of every
``events`` partition send keys nobody listed, some far more than ``max_keys`` distinct ones,
one a key past ``max_key_chars``. Read back from ``partials``: one slot's
:class:`~app.stream.internal.OpenPartial` chunks of every partition, whose merged counts equal
the documented bound (per user, the ``max_keys`` keys of smallest keyed-hash score under the
slot's salt, from the deployment's noise key); the long key is dead-lettered
``key_too_long``; the slot shows on ``dpstream_clipped_slots_total``.
"""

from __future__ import annotations

import asyncio
import gc
import math
import time
from collections import Counter
from pathlib import Path

import msgpack
import numpy as np
import pytest

from app import metrics
from app.dp.open.bounding import key_hash
from app.dp.open.salt import scores, slot_salt, user_words
from app.stream.collect.ingest import IngestService
from app.stream.collect.partitioning import partition_for
from app.stream.config import load_settings
from app.stream.internal import OpenPartial, decode
from app.stream.ops.late import LateSlots
from app.stream.topics import load_topics
from tests.integration.conftest import NOISE_KEY_HEX

pytestmark = pytest.mark.integration

SLOT_S = 2.0
MAX_KEYS = 2
CONFIG = f"""
streams:
  - id: urls
    domain: open
    max_keys: {MAX_KEYS}
    max_key_chars: 32
    slot_s: {SLOT_S}
    grace_s: 0.3
    levels: [{{name: std, w: 10, eps: 1.0, delta: 1.0e-6, population: 5000}}]
"""
DEPLOYMENT = "open-ingest-test"


def expected(events: list[tuple[str, str]], slot: int) -> Counter[str]:
    """The documented bound of ``events`` (user, key) in ``slot``: each user's ``MAX_KEYS``
    keys of smallest score."""
    salt = slot_salt(bytes.fromhex(NOISE_KEY_HEX), DEPLOYMENT, "urls", slot)
    mine: dict[str, set[str]] = {}
    for user, key in events:
        mine.setdefault(user, set()).add(key)
    out: Counter[str] = Counter()
    for user, keys in mine.items():
        ranked = sorted(
            (int(scores(key_hash(np.array([k])), user_words([user]), salt)[0]), k) for k in keys
        )
        out.update(k for _, k in ranked[:MAX_KEYS])
    return out


def test_an_open_stream_sends_the_bounded_counts_of_every_partition(kafka, tmp_path: Path):
    from confluent_kafka import Producer

    prefix = "openingest."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    env = {
        "DPSTREAM_BROKER": kafka.bootstrap,
        "DPSTREAM_TOPIC_PREFIX": prefix,
        "DPSTREAM_SESSION_TIMEOUT_S": "6",
        "DPSTREAM_STATE_DIR": str(tmp_path / "state"),
        "DPSTREAM_NOISE_KEY": NOISE_KEY_HEX,
        "DPSTREAM_DEPLOYMENT": DEPLOYMENT,
    }
    settings = load_settings(env, config)
    topics = load_topics(prefix)
    partitions = topics.spec("events").partitions
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5})
    sent: list[tuple[str, str]] = []

    def send() -> int:
        """Events of one slot well ahead: users 0-39 one to three keys, users 40-44 thirty
        each (clipped), one key too long; the slot they fall in."""
        now = time.time()
        slot = math.floor(now / SLOT_S) + 1
        ts = slot * SLOT_S + 0.2
        rows = [
            (f"user-{u}", f"site-{(u * 7 + j) % 25}.example/p")
            for u in range(40)
            for j in range(1 + u % 3)
        ]
        rows += [(f"user-{u}", f"many-{u}-{j}") for u in range(40, 45) for j in range(30)]
        rows += [("user-1", "site-1.example/p")]  # a repeat
        sent.extend(rows)
        time.sleep(max(0.0, ts - time.time()))
        for user, key in [*rows, ("user-2", "x" * 33)]:
            raw = msgpack.packb({"stream": "urls", "user": user, "ts": ts, "value": key})
            producer.produce(
                topics.events,
                key=user.encode(),
                value=raw,
                partition=partition_for(user.encode(), partitions),
            )
        assert producer.flush(10) == 0
        return slot

    before = metrics.CLIPPED_SLOTS.labels("urls")._value.get()

    async def scenario() -> int:
        svc = IngestService(
            settings,
            topics,
            group_id=prefix + "collect",
            clipped=LateSlots(counter=metrics.CLIPPED_SLOTS),
        )
        await svc.start()
        try:
            deadline = time.monotonic() + 60
            while not svc.consuming:
                assert time.monotonic() < deadline, "the ingest never caught up"
                assert not svc.crashed, svc.crash_reason
                await asyncio.sleep(0.1)
            slot = await asyncio.to_thread(send)
            deadline = time.monotonic() + 30
            while time.time() < (slot + 1) * SLOT_S + 2.0:  # the slot closes, the sends land
                assert not svc.crashed, svc.crash_reason
                assert time.monotonic() < deadline
                await asyncio.sleep(0.2)
            return slot
        finally:
            await svc.stop()
            gc.unfreeze()  # the service froze this process's objects (tune_gc)
            gc.set_threshold(700, 10, 10)

    slot = asyncio.run(asyncio.wait_for(scenario(), 120))
    chunks: dict[int, dict[int, OpenPartial]] = {}
    for msg in kafka.read(topics.partials, idle_s=2.0, max_s=30):
        p = decode(msg.value())
        if isinstance(p, OpenPartial) and p.slot == slot:
            chunks.setdefault(p.partition, {})[p.chunk] = p
    assert sorted(chunks) == list(range(partitions))  # every partition closed the slot
    got: Counter[str] = Counter()
    for by_chunk in chunks.values():
        assert sorted(by_chunk) == list(range(next(iter(by_chunk.values())).chunks))
        for p in by_chunk.values():
            got.update(dict(zip(p.keys, p.counts, strict=True)))  # one group: counts = keys
    want = expected(sent, slot)
    assert +got == want
    assert sum(want.values()) <= MAX_KEYS * 45
    letters = [msgpack.unpackb(m.value()) for m in kafka.read(topics.dead_letter, idle_s=1)]
    assert [d["reason"] for d in letters] == ["key_too_long"]
    assert metrics.CLIPPED_SLOTS.labels("urls")._value.get() == before + 1
