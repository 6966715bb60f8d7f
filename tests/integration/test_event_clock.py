"""An event-clock stream idle, then active under a producer stamping ahead, beside a wall-clock
stream, on the real broker (issue 31, section 2; docs/design.md invariant 7).

One worker serves ``live`` (wall clock) and ``rec`` (``clock: event``, events stamped now) at an
eps so large that releases are exact. ``live`` gets one value per user per slot throughout;
``rec`` gets values for two slots, then nothing for ``IDLE_S`` (past ``rec``'s ``max_delay_s``,
when the old driver forced every open slot and its close loop never returned), then values from
every user each slot for ``ACTIVE_S`` while one producer (``mallory``) stamps an event 59 s
ahead every slot, inside the horizon. Then the test waits for ``rec``'s last slot (an
event-time slot closes at its due time plus the allowed skew on the wall) and checks:

* no slot of either stream released before its clock allowed (``live``: its end plus grace;
  ``rec``: its end plus grace plus the skew), each slot once, in order, none forced;
* every value sent counted in its slot's release (``mallory``'s own values too: he is a user);
* ``/readyz`` answered 200 at every poll from ready to the end;
* ``dpstream verify`` clean on both streams (it reports releases published before their end).

``DPSTREAM_TEST_IDLE_S`` / ``DPSTREAM_TEST_ACTIVE_S`` lengthen the phases (the issue's
must-show: ``IDLE_S=70 ACTIVE_S=300 MAX_DELAY_S=60``, about seven minutes).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter
from pathlib import Path

import msgpack
import pytest

from app.stream.collect.partitioning import PRODUCER_CONFIG
from app.stream.slots import SlotClock
from tests.integration.load import assert_verified, releases_by_slot, wait_released

pytestmark = pytest.mark.integration

SLOT_S = 1.0
GRACE_S = 0.3
USERS = 8
IDLE_S = float(os.environ.get("DPSTREAM_TEST_IDLE_S", "12"))
ACTIVE_S = float(os.environ.get("DPSTREAM_TEST_ACTIVE_S", "20"))
MAX_DELAY_S = float(os.environ.get("DPSTREAM_TEST_MAX_DELAY_S", "10"))
CONFIG = f"""
streams:
  - id: live
    labels: [a, b, c, d]
    slot_s: {SLOT_S}
    grace_s: {GRACE_S}
    mechanism: {{name: uniform}}
    levels: [{{name: only, w: 2, eps: 900}}]
  - id: rec
    labels: [a, b, c, d]
    slot_s: {SLOT_S}
    grace_s: {GRACE_S}
    clock: event
    release_timeout_s: {min(MAX_DELAY_S / 2, 30)}
    max_delay_s: {MAX_DELAY_S}
    mechanism: {{name: uniform}}
    levels: [{{name: only, w: 2, eps: 900}}]
"""
SKEW_S = SlotClock(SLOT_S, GRACE_S).skew_s


def test_an_event_clock_stream_idle_then_dragged_keeps_to_its_clock(
    kafka, worker_factory, tmp_path: Path
):
    from confluent_kafka import Producer

    prefix = "evclock."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5, **PRODUCER_CONFIG})
    sent: Counter[tuple[str, int]] = Counter()  # values acknowledged per (stream, slot)
    stop = threading.Event()
    started = time.time()
    idle_from, active_from = started + 2 * SLOT_S, started + 2 * SLOT_S + IDLE_S
    active_to = active_from + ACTIVE_S

    def delivered(err: object, msg: object) -> None:
        if err is None:
            ev = msgpack.unpackb(msg.value())  # type: ignore[attr-defined]
            sent[ev["stream"], math.floor(ev["ts"] / SLOT_S)] += 1

    def send(stream: str, user: str, ts: float, value: int) -> None:
        ev = msgpack.packb({"stream": stream, "user": user, "ts": ts, "value": value})
        producer.produce(prefix + "events", key=user.encode(), value=ev, on_delivery=delivered)

    def load() -> None:
        last = None
        while not stop.is_set():
            now = time.time()
            slot = math.floor(now / SLOT_S)
            if slot != last and now % SLOT_S > GRACE_S:
                for u in range(USERS):
                    send("live", f"u{u}", now, u % 4)
                    if now < idle_from or active_from <= now < active_to:
                        send("rec", f"u{u}", now, (u + 1) % 4)
                if active_from <= now < active_to:
                    send("rec", "mallory", now + SKEW_S - 1.0, 3)  # the drag: 59 s ahead
                producer.poll(0)
                last = slot
            time.sleep(0.05)
        producer.flush(30)

    not_ready: list[tuple[float, int, str]] = []

    def watch() -> None:
        while not stop.is_set():
            status, reasons = worker.get("/readyz")
            if status != 200:
                not_ready.append((time.time() - started, status, reasons))
            stop.wait(1.0)

    threads = [threading.Thread(target=f, daemon=True) for f in (load, watch)]
    for t in threads:
        t.start()
    try:
        time.sleep(max(0.0, active_to - time.time()))
        last_rec = math.floor((active_to - SLOT_S) / SLOT_S)  # rec's last honest slot
        wait_released(
            kafka, prefix + "releases", ["rec"], last_rec, timeout_s=SKEW_S + 4 * SLOT_S + 60
        )
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    metrics = worker.metrics()
    assert worker.stop() == 0, worker.tail()
    print(f"\nphases: idle {IDLE_S:g} s, active {ACTIVE_S:g} s; values sent {sum(sent.values())}")

    assert not_ready == [], f"readiness went red: {not_ready[:5]}"
    for sid in ("live", "rec"):
        assert metrics.get(f'dpstream_slot_timeouts_total{{stream="{sid}"}}', 0.0) == 0, sid
    for sid, edge_s in (("live", GRACE_S), ("rec", GRACE_S + SKEW_S)):
        payloads = releases_by_slot(kafka, prefix + "releases", sid)
        assert all(len(p) == 1 for p in payloads.values()), f"{sid}: each slot released once"
        records = {s: msgpack.unpackb(next(iter(p))) for s, p in payloads.items()}
        assert sorted(records) == list(range(min(records), max(records) + 1)), f"{sid}: gaps"
        early = [s for s, r in records.items() if r["released_at"] < r["end"] + edge_s]
        assert early == [], f"{sid}: slots released before their clock allowed: {early}"
        got = {s: round(sum(r["histogram"])) for s, r in records.items()}
        ours = [s for (k, s) in sent if k == sid]
        assert min(got) <= min(ours), f"{sid}: released from before its first value"
        assert max(got) >= (last_rec if sid == "rec" else math.floor(active_to) - 2), sid
        mine = {s: n for (k, s), n in sent.items() if k == sid and s <= max(got)}
        wrong = {s: (n, got[s]) for s, n in mine.items() if got[s] != n}
        assert wrong == {}, f"{sid}: values sent vs counted per slot: {wrong}"
        after = [r["released_at"] - r["end"] for r in records.values()]
        print(
            f"{sid}: {len(records)} slots released, {sum(mine.values())} values sent and all "
            f"counted, released {min(after):.2f} to {max(after):.2f} s after their end"
        )
    for sid in ("live", "rec"):
        assert_verified(kafka, prefix, config, sid)
