"""A commit lost to a rebalance mid-run leaves the collect stage consuming (issue 23, item 13).

The ingest service runs in this process on the real broker. Just before one of its commits
reaches the broker, the test makes the consumer's group generation stale, as a rebalance the
consumer has not heard of yet does: the broker refuses the commit (``ILLEGAL_GENERATION``,
which aiokafka raises as ``CommitFailedError``). Before the fix the error went up the consume
loop and the service crashed (the worker then stopped with status 1); now the commit is given up
with a warning and ``dpstream_commits_lost_total``, the consumer rejoins, slots go on closing,
and a later commit lands past the lost one.

The release agent's consumer (Faust's) goes through :func:`app.stream.agent_transport.commit`,
checked on the errors a rebalance causes in ``tests/stream/test_commit_lost.py``.
"""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

import msgpack
import pytest
from aiokafka import TopicPartition

from app import metrics
from app.stream.collect.ingest import IngestService
from app.stream.collect.partitioning import partition_for
from app.stream.config import load_settings
from app.stream.topics import load_topics

pytestmark = pytest.mark.integration

CONFIG = """
streams:
  - id: c
    labels: [a, b]
    slot_s: 0.5
    grace_s: 0.2
    mechanism: {name: uniform}
    levels: [{name: only, w: 3, eps: 1.0}]
"""


def lost(label: str) -> float:
    return metrics.COMMITS_LOST.labels(label, "rebalance")._value.get()


def test_a_commit_refused_after_a_rebalance_does_not_stop_the_ingest(kafka, tmp_path: Path):
    from confluent_kafka import Producer

    prefix = "commitlost."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    env = {
        "DPSTREAM_BROKER": kafka.bootstrap,
        "DPSTREAM_TOPIC_PREFIX": prefix,
        "DPSTREAM_SESSION_TIMEOUT_S": "6",
        "DPSTREAM_STATE_DIR": str(tmp_path / "state"),
    }
    settings = load_settings(env, config)
    topics = load_topics(prefix)
    partitions = topics.spec("events").partitions
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5})

    def send_events(n: int) -> None:
        now = time.time()
        for i in range(n):
            user = f"u{i}".encode()
            value = msgpack.packb({"stream": "c", "user": user.decode(), "ts": now, "value": 0})
            producer.produce(
                topics.events, key=user, value=value, partition=partition_for(user, partitions)
            )
        assert producer.flush(10) == 0

    async def scenario() -> tuple[int, list[float]]:
        svc = IngestService(settings, topics, group_id=prefix + "collect")
        label = svc.shortlabel
        before = lost(label)
        await svc.start()
        consumer = None
        try:
            deadline = time.monotonic() + 60
            while not svc.consuming:  # joined the group and caught up
                assert time.monotonic() < deadline, "the ingest never caught up"
                assert not svc.crashed, svc.crash_reason
                await asyncio.sleep(0.1)
            consumer = svc._consumer
            assert consumer is not None
            real_commit, refused = consumer.commit, []

            async def commit_after_a_rebalance(offsets=None):
                if not refused:  # the first commit: the group moved on meanwhile
                    refused.append(time.monotonic())
                    consumer._coordinator.generation += 7
                return await real_commit(offsets)

            consumer.commit = commit_after_a_rebalance
            committed: list[float] = []
            deadline = time.monotonic() + 60
            while lost(label) == before or len(committed) < 1:
                assert time.monotonic() < deadline, f"refused={refused} committed={committed}"
                assert not svc.crashed, f"the ingest crashed: {svc.crash_reason!r}"
                await asyncio.to_thread(send_events, 20)
                await asyncio.sleep(0.3)
                if lost(label) > before:
                    tps = [TopicPartition(topics.events, p) for p in range(partitions)]
                    found = [await consumer.committed(tp) for tp in tps]
                    if sum(o or 0 for o in found) > 0 and svc.consuming:
                        committed.append(time.monotonic())
            return int(lost(label) - before), committed
        finally:
            await svc.stop()
            gc.unfreeze()  # the service froze this process's objects (tune_gc)
            gc.set_threshold(700, 10, 10)

    count, committed = asyncio.run(asyncio.wait_for(scenario(), 180))
    assert count >= 1, "the refused commit was given up (and any refused while rejoining)"
    assert committed, "a later commit landed"
