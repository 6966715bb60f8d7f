"""Crash safety: kill -9 the worker at random moments; every slot ends with one distinct release."""

from __future__ import annotations

import math
import random
import threading
import time
from collections import defaultdict
from pathlib import Path

import msgpack
import pytest

from app.dp.budget import within

pytestmark = pytest.mark.integration

SLOT_S = 1.0
KILLS = 5
CONFIG = f"""
streams:
  - id: c
    labels: [a, b, c, d, e]
    slot_s: {SLOT_S}
    grace_s: 0.3
    release_timeout_s: 1.0
    mechanism: {{name: pba, noise: laplace}}
    levels:
      - {{name: strict, w: 5, eps: 2.0}}
      - {{name: loose, w: 3, eps: 4.0}}
"""


def test_kill9_never_releases_a_slot_twice_differently(kafka, worker_factory, tmp_path: Path):
    rnd = random.Random(20240611)
    prefix = "crash."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    kafka.produce(
        prefix + "preferences",
        [
            (f"u{u}".encode(), msgpack.packb({"level": "loose", "ts": 0.0}))
            for u in range(0, 100, 3)
        ],
    )
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)

    stop = threading.Event()
    produced_until = [0.0]

    def produce() -> None:
        prnd = random.Random(7)
        while not stop.is_set():
            now = time.time()
            items = []
            for _ in range(20):
                user = f"u{prnd.randrange(100)}"
                event = {"stream": "c", "user": user, "ts": now, "value": prnd.randrange(5)}
                items.append((user.encode(), msgpack.packb(event)))
            kafka.produce(prefix + "events", items)
            produced_until[0] = now
            time.sleep(0.1)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        for i in range(KILLS):
            if i % 2 == 0:
                worker.wait_ready(90)
                time.sleep(rnd.uniform(0.0, 2.5))
            else:
                time.sleep(rnd.uniform(1.0, 4.0))  # maybe during start-up or table recovery
            worker.kill9()
            worker.start()
        worker.wait_ready(90)
        time.sleep(3 * SLOT_S)
    finally:
        stop.set()
        producer.join(10)
    last_slot = math.floor(produced_until[0] / SLOT_S)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        msgs = kafka.read(prefix + "releases", idle_s=1.0)
        if msgs and msgpack.unpackb(msgs[-1].value())["slot"] >= last_slot:
            break
        time.sleep(1)
    assert worker.alive(), worker.tail()
    assert worker.stop() == 0, worker.tail()
    assert worker.starts == KILLS + 1

    payloads: dict[int, set[bytes]] = defaultdict(set)
    order = []
    for m in kafka.read(prefix + "releases", idle_s=1.0):
        slot = msgpack.unpackb(m.value())["slot"]
        payloads[slot].add(m.value())
        order.append(slot)
    slots = sorted(payloads)
    assert slots == list(range(slots[0], slots[-1] + 1)), "no slot missing"
    assert slots[-1] >= last_slot
    assert all(len(p) == 1 for p in payloads.values()), {
        s: len(p) for s, p in payloads.items() if len(p) > 1
    }

    audit: dict[int, dict] = {}
    for m in kafka.read(prefix + "audit", idle_s=1.0):
        a = msgpack.unpackb(m.value())
        assert audit.setdefault(a["slot"], a) == a, "audit duplicates are identical"
    assert sorted(audit) == slots
    for level, w, eps in (("strict", 5, 2.0), ("loose", 3, 4.0)):
        spent = [audit[s]["spent_by_group"][level] for s in slots]
        for i in range(len(spent)):
            assert within(sum(spent[max(0, i - w + 1) : i + 1]), eps), (level, i)
