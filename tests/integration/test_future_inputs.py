"""No single input moves a clock into the future (issue 21 item 2, docs/design.md invariant 7).

One worker serves a ``clock: event`` stream (``rec``) and a wall-clock stream (``live``) at an
eps so large that releases are exact. While ``live`` gets one value per user per slot:

1. one ``rec`` event stamped 30 days ahead: dead-lettered as ``bad_time``, ``rec``'s clock does
   not jump (no run of empty partials), and ``live`` goes on releasing every value;
2. a forged tick on the internal ``partials`` topic claiming every partition a day ahead:
   refused (no release ahead of the wall clock), counted, named by ``/readyz``;
3. a forged partial for partition 99 of a 4-partition ``events`` topic: refused, counted.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import msgpack
import pytest

from app.stream.collect.partitioning import PRODUCER_CONFIG
from app.stream.internal import Partial, Tick
from app.stream.records import unpack
from app.stream.topics import load_topics
from tests.integration.load import assert_verified, releases_by_slot, wait_released

pytestmark = pytest.mark.integration

SLOT_S = 1.0
DAY_S = 86_400.0
USERS = 12
CONFIG = f"""
streams:
  - id: live
    labels: [a, b, c, d]
    slot_s: {SLOT_S}
    grace_s: 0.3
    mechanism: {{name: uniform}}
    levels:
      - {{name: only, w: 2, eps: 900}}
  - id: rec
    labels: [a, b, c, d]
    slot_s: {SLOT_S}
    grace_s: 0.3
    clock: event
    mechanism: {{name: uniform}}
    levels:
      - {{name: only, w: 2, eps: 900}}
"""


def test_no_input_moves_a_clock_into_the_future(kafka, worker_factory, tmp_path: Path):
    from confluent_kafka import Producer

    prefix = "future."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    internal = load_topics(prefix).partials
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5, **PRODUCER_CONFIG})
    sent: dict[int, int] = {}  # live: values acknowledged per slot
    stop = threading.Event()

    def delivered(err: object, msg: object) -> None:
        if err is None:
            ev = msgpack.unpackb(msg.value())  # type: ignore[attr-defined]
            if ev["stream"] == "live":
                slot = math.floor(ev["ts"] / SLOT_S)
                sent[slot] = sent.get(slot, 0) + 1

    def send(stream: str, user: str, ts: float, value: int) -> None:
        ev = msgpack.packb({"stream": stream, "user": user, "ts": ts, "value": value})
        producer.produce(prefix + "events", key=user.encode(), value=ev, on_delivery=delivered)

    def live_load() -> None:
        last = None
        while not stop.is_set():
            now = time.time()
            slot = math.floor(now / SLOT_S)
            if slot != last and now % SLOT_S > 0.3:
                for u in range(USERS):
                    send("live", f"u{u}", now, u % 4)
                    send("rec", f"u{u}", now - 120.0, u % 4)  # a replay two minutes behind
                producer.poll(0)
                last = slot
            time.sleep(0.05)
        producer.flush(30)

    loader = threading.Thread(target=live_load, daemon=True)
    loader.start()
    try:
        time.sleep(4 * SLOT_S)
        attack_at = time.time()
        send("rec", "mallory", attack_at + 30 * DAY_S, 1)  # 1. one event a month ahead
        total = 4  # events partitions (topics/events.yaml)
        ahead = {p: attack_at + DAY_S for p in range(total)}
        producer.produce(
            internal, key=b"live", value=Tick("live", ahead, total).encode()
        )  # 2. a forged tick
        forged = Partial("live", math.floor(attack_at / SLOT_S) + 2, 99, total, [5] * 4).encode()
        producer.produce(internal, key=b"live", value=forged)  # 3. partition 99
        producer.flush(10)
        time.sleep(2 * SLOT_S)
        status, reasons = worker.get("/readyz")
        time.sleep(6 * SLOT_S)
    finally:
        stop.set()
        loader.join(30)
    end = time.time()
    last_slot = math.floor(end / SLOT_S) - 2
    wait_released(kafka, prefix + "releases", ["live"], last_slot, timeout_s=30)
    metrics = worker.metrics()
    assert worker.stop() == 0, worker.tail()
    stopped = math.floor(time.time() / SLOT_S)  # no slot at or after this one can be closed

    # 2 and 3 refused, counted, and named by readiness while it mattered.
    assert status == 503 and "refused internal messages" in reasons, (status, reasons)
    assert metrics['dpstream_internal_refused_total{reason="future",stream="live"}'] >= 1
    assert metrics['dpstream_internal_refused_total{reason="partition",stream="live"}'] >= 1

    # 1. The event a month ahead is a dead letter, and no stream's clock jumped.
    dead = [msgpack.unpackb(m.value()) for m in kafka.read(prefix + "dead-letter", idle_s=1.0)]
    assert [d["reason"] for d in dead] == ["bad_time"], dead
    partials = [unpack(m.value()) for m in kafka.read(internal, idle_s=1.0)]
    rec_slots = {m["slot"] for m in partials if m["stream"] == "rec" and m["kind"] == "partial"}
    assert max(rec_slots) < stopped, "rec's clock stayed behind the wall"
    assert len(rec_slots) <= (end - attack_at) / SLOT_S + 30, "no run of empty partials"
    for sid in ("live", "rec"):
        payloads = releases_by_slot(kafka, prefix + "releases", sid)
        assert payloads, sid
        assert max(payloads) < stopped, f"{sid}: no release from the future"
        records = [msgpack.unpackb(next(iter(p))) for p in payloads.values()]
        early = [r["slot"] for r in records if r["end"] + 0.3 > r["released_at"] + 0.5]
        assert early == [], f"{sid}: slots released before they were due: {early}"
        assert all(len(p) == 1 for p in payloads.values()), f"{sid}: each slot released once"

    # The wall-clock stream beside them lost nothing: every value sent reached its release.
    live = releases_by_slot(kafka, prefix + "releases", "live")
    got = {s: round(sum(msgpack.unpackb(next(iter(p)))["histogram"])) for s, p in live.items()}
    after = {s: n for s, n in sent.items() if s >= math.floor(attack_at / SLOT_S)}
    assert after and all(got.get(s) == n for s, n in after.items()), (after, got)
    assert_verified(kafka, prefix, config, "live")
