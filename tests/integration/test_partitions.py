"""One value per user per slot across partitions, on the broker (issue 16 item 2).

A producer that picks the partition itself can put a user's events in two partitions, and each
partition's collect stage would count the user once. The collect stage recomputes the partition
of every key (Kafka's default murmur2 partitioner) and dead-letters an event found elsewhere
(``wrong_partition``); and a worker refuses to count at all when the events topic has another
partition count than ``topics/events.yaml`` declares (``/readyz`` says why).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest

from app.stream.collect.partitioning import partition_for
from app.stream.topics import load_topics

pytestmark = pytest.mark.integration

SLOT_S = 1.0
CONFIG = f"""
streams:
  - id: p
    labels: [a, b]
    slot_s: {SLOT_S}
    grace_s: 0.3
    mechanism: {{name: uniform}}
    levels:
      - {{name: only, w: 2, eps: 900}}
"""


def test_an_event_in_another_partition_is_dead_lettered(kafka, worker_factory, tmp_path: Path):
    from confluent_kafka import Producer

    prefix = "parts."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)
    slot = math.floor(time.time() / SLOT_S) + 1
    time.sleep(max(0.0, slot * SLOT_S + 0.1 - time.time()))
    ts = slot * SLOT_S + 0.5
    home = partition_for(b"u1", 4)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for partition, value in ((home, 0), ((home + 1) % 4, 1)):  # the same user, twice
        ev = msgpack.packb({"stream": "p", "user": "u1", "ts": ts, "value": value})
        producer.produce(prefix + "events", key=b"u1", value=ev, partition=partition)
    assert producer.flush(10) == 0
    deadline = time.monotonic() + 30
    release = None
    while time.monotonic() < deadline and release is None:
        for m in kafka.read(prefix + "releases", idle_s=0.5):
            rec = msgpack.unpackb(m.value())
            if rec["slot"] == slot:
                release = rec
    assert worker.stop() == 0, worker.tail()
    assert release is not None
    assert np.rint(release["histogram"]).tolist() == [1, 0], "the user counted once"
    dead = [msgpack.unpackb(x.value()) for x in kafka.read(prefix + "dead-letter", idle_s=1.0)]
    assert [(d["reason"], d["partition"]) for d in dead] == [("wrong_partition", (home + 1) % 4)]


def test_a_changed_partition_count_is_refused(kafka, worker_factory, tmp_path: Path):
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    prefix = "sixparts."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    events = prefix + load_topics().spec("events").name
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(events, 6, 1)])[events].result(30)
    kafka.create_topics(prefix)  # everything else as declared
    worker = worker_factory(prefix, config).start()
    deadline = time.monotonic() + 60
    status, body = 0, ""
    while time.monotonic() < deadline and "refusing to count" not in body:
        status, body = worker.get("/readyz")
        time.sleep(0.5)
    assert worker.stop() == 0, worker.tail()
    assert status == 503, (status, body)
    assert "has 6 partitions but topics/events.yaml declares 4" in body, body
    assert f"topic {events} has 6 partitions, topics/events.yaml declares 4" in body, body
