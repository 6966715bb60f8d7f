"""A backdated level change, then kill -9: the restarted worker keeps the same exclusion gap.

User ``watched`` sends a value every slot to a cell nobody else uses, on a stream at an eps so
large that releases are exact, so the releases show in which slots the user was counted. A
preference record stamped in the past (Kafka CreateTime 1 ms) moves the user to another level:
the live worker applies it from the first slot it has not closed, with the gap of
``max(w) = 6`` slots; the worker is killed inside that gap. The restarted worker must continue
the same history (saved in the internal ``levels`` topic), not re-read the record as if it took
effect long ago, which would count the user in the new level right after slots it was counted
in under the old one.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest

from app.stream.collect.partitioning import PRODUCER_CONFIG
from tests.integration.load import assert_verified, releases_by_slot, wait_released

pytestmark = pytest.mark.integration

SLOT_S = 1.0
GAP = 6
CONFIG = f"""
streams:
  - id: s
    labels: [a, b, c, d]
    slot_s: {SLOT_S}
    grace_s: 0.3
    mechanism: {{name: uniform}}
    levels:
      - {{name: strict, w: {GAP}, eps: 900}}
      - {{name: loose, w: 2, eps: 900}}
"""


def test_a_restart_keeps_the_gap_of_a_backdated_change(kafka, worker_factory, tmp_path: Path):
    from confluent_kafka import Producer

    prefix = "levels."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5, **PRODUCER_CONFIG})
    stop = threading.Event()

    def send_every_slot() -> None:
        last = None
        while not stop.is_set():
            now = time.time()
            slot = math.floor(now / SLOT_S)
            if slot != last and now % SLOT_S > 0.4:
                for user, value in (("watched", 3), ("other-1", 0), ("other-2", 1)):
                    ev = {"stream": "s", "user": user, "ts": now, "value": value}
                    producer.produce(prefix + "events", key=user.encode(), value=msgpack.packb(ev))
                producer.poll(0)
                last = slot
            time.sleep(0.05)
        producer.flush(30)

    sender = threading.Thread(target=send_every_slot, daemon=True)
    sender.start()
    try:
        time.sleep(4 * SLOT_S)
        producer.produce(
            prefix + "preferences",
            key=b"watched",
            value=msgpack.packb({"level": "loose"}),
            timestamp=1,
        )
        producer.flush(10)
        time.sleep(2.5 * SLOT_S)  # applied and saved; the gap has begun
        worker.kill9()
        worker.start()
        worker.wait_ready(90)
        time.sleep((GAP + 4) * SLOT_S)
    finally:
        stop.set()
        sender.join(30)
    last_slot = math.floor(time.time() / SLOT_S) - 2
    wait_released(kafka, prefix + "releases", ["s"], last_slot, timeout_s=30)
    assert worker.stop() == 0, worker.tail()

    payloads = releases_by_slot(kafka, prefix + "releases", "s")
    assert all(len(p) == 1 for p in payloads.values())
    hist = {s: np.rint(msgpack.unpackb(next(iter(p)))["histogram"]) for s, p in payloads.items()}
    sent = [s for s in sorted(hist) if hist[s][0] == 1]  # slots other-1 sent in
    watched = "".join("1" if hist[s][3] == 1 else "0" for s in range(sent[0], sent[-1] + 1))
    runs = [r for r in watched.strip("0").split("1") if r]
    print(f"\nwatched user counted per slot (1) across the kill: {watched}")
    assert watched.startswith("1") and watched.endswith("1"), watched
    assert len(runs) == 1 and len(runs[0]) >= GAP, f"one gap of >= {GAP} slots: {watched}"
    assert_verified(kafka, prefix, config, "s")  # per user, on the topics (invariant 6)
