"""The synthetic producer (``dpstream demo``, ``dpstream produce``) sends one batch per partition
and tick, one tick per :data:`~app.tools.produce.TICK_S`: the embedded broker's cost grows with
the batches a partition holds (issue 37, goal 5; ``docs/capacity.md``)."""

from __future__ import annotations

import threading
import time
from collections import Counter

import msgpack
from confluent_kafka import Consumer, TopicPartition

from app.stream.config import load_settings
from app.stream.topics import create_topics, load_topics
from app.tools.demo import DEMO_STREAMS
from app.tools.produce import TICK_S, Deliveries, synthetic_events
from tests.integration.conftest import Kafka

RATE = 400.0
TICKS = 4


def test_each_tick_leaves_as_one_batch_per_partition(kafka: Kafka) -> None:
    settings = load_settings({"DPSTREAM_BROKER": kafka.bootstrap}, config=DEMO_STREAMS)
    topics = load_topics("batches-")
    create_topics(topics, {"bootstrap.servers": kafka.bootstrap})
    stop = threading.Event()
    deliveries = Deliveries()
    args = (settings, topics, settings.streams[0], RATE, 2000, stop, deliveries)
    producer = threading.Thread(target=synthetic_events, args=args)
    started = time.monotonic()
    producer.start()
    time.sleep(TICKS * TICK_S - 0.5)  # stop during the last tick's wait
    stop.set()
    producer.join(30)
    elapsed = time.monotonic() - started
    assert deliveries.delivered == RATE * TICK_S * TICKS and deliveries.lost == 0

    records = kafka.read(topics.events, idle_s=2.0)
    ticks = {msgpack.unpackb(m.value())["ts"] for m in records}
    assert len(ticks) == TICKS  # paced: one stamp per tick, ticks TICK_S apart
    assert elapsed >= (TICKS - 1) * TICK_S

    # Tansu answers ListOffsets with the last *batch*'s base offset + 1, so the end offset and
    # the partition's record count give the size of its last batch: the whole last tick.
    last_tick = max(ticks)
    per_partition = Counter(m.partition() for m in records)
    in_last = Counter(
        m.partition() for m in records if msgpack.unpackb(m.value())["ts"] == last_tick
    )
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "batches"})
    try:
        for p, n in per_partition.items():
            _, end = c.get_watermark_offsets(TopicPartition(topics.events, p), timeout=10)
            assert n - (end - 1) == in_last[p], (p, n, end, in_last[p])
    finally:
        c.close()
