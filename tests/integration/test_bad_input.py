"""Bad input: >= 1,000 fuzzed messages mixed into valid traffic; the worker goes on."""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

import msgpack
import pytest

from app.stream.records import REASONS

pytestmark = pytest.mark.integration

SLOT_S = 1.0
N_BAD = 1200
CONFIG = f"""
streams:
  - id: b
    labels: [x, y, z]
    slot_s: {SLOT_S}
    grace_s: 0.3
    release_timeout_s: 1.0
    mechanism: {{name: pba, noise: geometric}}
    levels:
      - {{name: only, w: 4, eps: 1.0}}
"""


def fuzz(rnd: random.Random, now: float) -> bytes | None:
    """One bad ``events`` value of a random kind."""
    good = {"stream": "b", "user": f"bad{rnd.randrange(10**6)}", "ts": now, "value": 1}
    kind = rnd.randrange(9)
    if kind == 0:
        return rnd.randbytes(rnd.randrange(1, 40)) + b"\xc1"  # 0xc1 is never valid msgpack
    if kind == 1:
        return msgpack.packb(rnd.choice([1, "text", [1, 2], None, 2.5]))
    if kind == 2:
        good.pop(rnd.choice(list(good)))
        return msgpack.packb(good)
    if kind == 3:
        return msgpack.packb({**good, "stream": f"nope{rnd.randrange(100)}"})
    if kind == 4:
        return msgpack.packb({**good, "value": rnd.choice([-1, 3, 10**9, "w", "X"])})
    if kind == 5:
        return msgpack.packb({**good, "value": rnd.choice([1.5, [1], {"a": 1}, True, None])})
    if kind == 6:
        return msgpack.packb({**good, "ts": rnd.choice(["now", None, -5.0, float("nan"), 1e15])})
    if kind == 7:
        return msgpack.packb({**good, "user": rnd.choice([None, "", 1.5, [1]])})
    return None  # a null value


def test_fuzzed_messages_go_to_dead_letter(kafka, worker_factory, tmp_path: Path) -> None:
    rnd = random.Random(99)
    prefix = "bad."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    # The exact counts asserted below are served only with the operator's opt-in.
    worker = worker_factory(prefix, config, DPSTREAM_EXPOSE_DATA_COUNTS="true").start()
    worker.wait_ready(90)

    fractions = []
    n_valid = 0
    n_bad = 0
    rounds = 6
    for r in range(rounds):
        now = time.time()
        items: list[tuple[bytes | None, bytes | None]] = []
        for i in range(N_BAD // rounds):
            items.append((rnd.choice([None, b"k"]), fuzz(rnd, now)))
            n_bad += 1
            if i % 4 == 0:
                user = f"r{r}-v{i}"
                ev = {"stream": "b", "user": user, "ts": now, "value": rnd.choice([0, "y", 2])}
                items.append((user.encode(), msgpack.packb(ev)))
                n_valid += 1
        rnd.shuffle(items)
        kafka.produce(prefix + "events", items)  # type: ignore[arg-type]
        time.sleep(SLOT_S)
        fractions.append(
            worker.metrics().get('dpstream_window_budget_fraction{level="only",stream="b"}')
        )
    end_slot = math.floor(time.time() / SLOT_S)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        m = worker.metrics()
        if m.get('dpstream_last_released_slot{stream="b"}', 0) >= end_slot:
            break
        time.sleep(0.5)
    assert worker.alive() and worker.get("/readyz")[0] == 200, worker.tail()
    assert worker.get("/healthz")[0] == 200
    m = worker.metrics()
    assert m['dpstream_events_total{outcome="accepted",stream="b"}'] == n_valid
    assert sum(v for k, v in m.items() if k.startswith("dpstream_dead_letters_total")) == n_bad
    assert m['dpstream_events_total{outcome="invalid",stream=""}'] == n_bad
    # The budget gauges moved while slots closed (PBA's window fills up after the start).
    assert len({f for f in fractions if f is not None}) >= 2, fractions
    assert all(0 <= f <= 1 for f in fractions if f is not None)
    assert worker.stop() == 0, worker.tail()

    dead = [msgpack.unpackb(x.value()) for x in kafka.read(prefix + "dead-letter", idle_s=1.5)]
    assert len(dead) == n_bad
    assert {d["reason"] for d in dead} <= set(REASONS)
    assert len({d["reason"] for d in dead}) >= 6
    assert all(d["topic"] == prefix + "events" and d["offset"] >= 0 for d in dead)
    # The valid events were released: the histograms are noisy, but every slot is there.
    releases = [msgpack.unpackb(x.value()) for x in kafka.read(prefix + "releases", idle_s=1.0)]
    slots = [r["slot"] for r in releases]
    assert slots == list(range(slots[0], slots[-1] + 1))
