"""The per-user level state is compact (issue 23, item 7): a worker that reads 300,000
``preferences`` records grows its resident set by a bounded amount per user.

One worker on the real broker, one central stream with two levels; the test waits until the
worker is ready, notes its RSS, produces one ``preferences`` record for each of
:data:`USERS` users (keyed, partitioned as producers must), waits until the worker has applied
and saved every one of them (its ``levels`` topic holds each user's history and, per partition,
the next ``preferences`` offset to apply at the end of the partition), and checks the growth.

Before the change (a ``History`` of ``Change`` objects per user, every user's key cached for
its partition, every changed history copied until saved and every record read at once) the
growth was +296 MB for 300,000 users (~1,000 bytes per user); :data:`RSS_BOUND_MB` says what
it may be now and why.
"""

from __future__ import annotations

import time
from pathlib import Path

import msgpack
import pytest

from app.stream.collect.ingest import OFFSET_KEY
from app.stream.collect.partitioning import PRODUCER_CONFIG, partition_for
from app.stream.records import unpack
from app.stream.topics import load_topics

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USERS = 300_000
CONFIG = """
streams:
  - id: m
    labels: [a, b, c, d]
    slot_s: 2.0
    grace_s: 0.5
    mechanism: {name: uniform}
    default_level: strict
    levels:
      - {name: strict, w: 5, eps: 1.0}
      - {name: loose, w: 3, eps: 2.0}
"""
BYTES_PER_USER = 160
"""What one user with a one-change history keeps resident: its key (a ``str``, ~60 bytes for
``"user-123456"``), its packed history (a ``bytes`` of 10 bytes, 48 with its header) and the
dict slot that maps one to the other (~35 bytes at the table's load factor). Measured on the
collector alone: 139 bytes per user (40 MB for 300,000)."""
SLACK_MB = 50
"""What applying the records leaves resident besides their state: the fetched batches (at most
:data:`~app.stream.collect.batch.SIDE_RECORDS` records decoded at once), the ``levels`` records
in flight (at most :data:`~app.stream.collect.ingest.SAVE_CHUNK`), and the allocator's arenas
those transient objects leave partly used among the users' keys and histories (measured:
~33 MB for 300,000 records)."""
RSS_BOUND_MB = USERS * BYTES_PER_USER / 2**20 + SLACK_MB
"""~96 MB for 300,000 users (measured: +73 to +74 MB; before the change: +296 MB)."""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def saved_offsets(kafka, prefix: str) -> tuple[dict[int, int], int]:
    """The worker's ``levels`` topic: per partition the last offset marker, and how many
    users have a history in it."""
    marks: dict[int, int] = {}
    users = set()
    for m in kafka.read(load_topics(prefix).levels, idle_s=1.5, max_s=120):
        key = m.key() or b""
        if key.startswith(OFFSET_KEY):
            marks[int(key[len(OFFSET_KEY) :])] = int(unpack(m.value())["offset"])
        else:
            users.add(key)
    return marks, len(users)


def test_300k_preferences_keep_the_workers_rss_bounded(kafka, worker_factory, tmp_path: Path):
    from confluent_kafka import Producer

    prefix = "levelmem."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(120)
    assert worker.proc is not None
    time.sleep(2)  # the first slots close; the worker's own start-up allocations are done
    before = rss_mb(worker.proc.pid)

    topic = prefix + "preferences"
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 20, **PRODUCER_CONFIG})
    value = msgpack.packb({"level": "loose"})
    for i in range(USERS):
        producer.produce(topic, key=b"user-%d" % i, value=value)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    ends = {p: 0 for p in range(load_topics(prefix).spec("preferences").partitions)}
    for i in range(USERS):  # the worker's marker is the next offset: the count per partition
        ends[partition_for(b"user-%d" % i, len(ends))] += 1

    # Applied and saved: every partition's marker is at its end (read from the topic).
    deadline = time.monotonic() + 240
    while True:
        assert worker.alive(), worker.tail()
        marks, users = saved_offsets(kafka, prefix)
        if marks == ends and users == USERS:
            break
        assert time.monotonic() < deadline, f"not applied in time: {marks} != {ends}, {users}"
        time.sleep(5)
    grown = rss_mb(worker.proc.pid) - before
    print(
        f"\n{USERS} preferences: worker RSS {before:.0f} -> {before + grown:.0f} MB "
        f"(+{grown:.1f} MB, {grown * 2**20 / USERS:.0f} bytes per user; bound {RSS_BOUND_MB:.0f})"
    )
    assert worker.get("/readyz")[0] == 200, worker.get("/readyz")
    assert worker.stop() == 0, worker.tail()
    assert grown < RSS_BOUND_MB, f"RSS grew {grown:.1f} MB for {USERS} users"
