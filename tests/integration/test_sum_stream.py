"""Issue 13 item 3 on a real broker: a sum stream releases, per category, the sum of the users'
amounts, each user's first amount per slot clipped to ``alpha``; a negative amount goes to
dead-letter (``bad_amount``), a clipped one counts as ``clipped``.

OptStream's Laplace baseline (``<P,o,o>``: no sampling, no post-processing) over periods of
``W = 2`` slots at eps = 1000: strict periods run at eps/2, so each point gets
``Lap(W alpha / (eps / 2)) = Lap(0.2)`` (add-remove, ``Delta = alpha``) and every release is its
slot's true sums within :data:`TOLERANCE`.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest

pytestmark = pytest.mark.integration

SLOT_S = 1.0
W = 2
ALPHA = 50.0
N_SLOTS = 4
TOLERANCE = 5.0  # Laplace scale 0.2: P(|noise| > 5) = exp(-25) < 1e-10 per cell
CONFIG = f"""
streams:
  - id: energy
    labels: [north, south, west]
    slot_s: {SLOT_S}
    grace_s: 0.3
    release_timeout_s: 1.5
    neighbours: add-remove
    sum: {{alpha: {ALPHA}}}
    mechanism:
      name: optstream
      noise: laplace
      params: {{sampling: none, postprocess: false}}
    accept_weaker_guarantee: true  # noise: laplace, the papers' float noise
    levels: [{{name: only, w: {W}, eps: 1000}}]
"""


def event(user: str, ts: float, value: str, amount: float) -> tuple[bytes, bytes]:
    body = {"stream": "energy", "user": user, "ts": ts, "value": value, "amount": amount}
    return user.encode(), msgpack.packb(body)


def slot_events(k: int, slot: int) -> tuple[list[tuple[bytes, bytes]], list[float]]:
    """Test slot ``k``'s events and the sums a correct worker releases for them."""
    ts = slot * SLOT_S + 0.2
    a = 10.0 + k
    items = [
        event("a", ts, "north", a),
        event("a", ts + 0.01, "north", 30.0),  # the same user again: duplicate, not added
        event("b", ts + 0.02, "south", 80.0 + k),  # above alpha: clipped to 50
        event("c", ts + 0.03, "west", -1.0),  # negative: dead-lettered
        event("c", ts + 0.04, "west", 3.25),
    ]
    return items, [a, ALPHA, 3.25]


def test_a_sum_stream_releases_clipped_sums(kafka, worker_factory, tmp_path: Path) -> None:
    prefix = "sums."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config, DPSTREAM_EXPOSE_DATA_COUNTS="true").start()
    worker.wait_ready(90)

    first = math.floor(time.time() / SLOT_S) + 1
    truths: dict[int, list[float]] = {}
    for k in range(N_SLOTS):
        slot = first + k
        time.sleep(max(0.0, slot * SLOT_S + 0.1 - time.time()))
        items, truths[slot] = slot_events(k, slot)
        kafka.produce(prefix + "events", items)
    wanted = set(truths)
    deadline = time.monotonic() + 20 + W * SLOT_S
    records: list[dict] = []
    while time.monotonic() < deadline:
        time.sleep(1)
        records = [msgpack.unpackb(m.value()) for m in kafka.read(prefix + "releases", 1.0)]
        if wanted <= {r["slot"] for r in records}:
            break
    metrics = worker.metrics()
    assert worker.stop() == 0, worker.tail()

    slots = [r["slot"] for r in records]
    assert len(slots) == len(set(slots)), "every slot is released once"
    by_slot = {r["slot"]: r for r in records}
    assert wanted <= set(by_slot), (sorted(wanted), slots)
    for slot, truth in truths.items():
        rel = by_slot[slot]
        assert rel["mechanism"] == "optstream"
        hist = np.asarray(rel["histogram"])
        assert np.all(np.abs(hist - truth) < TOLERANCE), (slot, hist.tolist(), truth)
    # Periods of W slots: all but the last slot of each period are released late.
    assert sum(by_slot[s]["delayed"] for s in wanted) == N_SLOTS // W * (W - 1)

    outcome = 'dpstream_events_total{{outcome="{}",stream="energy"}}'
    assert metrics[outcome.format("clipped")] == N_SLOTS
    assert metrics[outcome.format("duplicate")] == N_SLOTS
    assert metrics[outcome.format("accepted")] == 2 * N_SLOTS
    dead = [msgpack.unpackb(m.value()) for m in kafka.read(prefix + "dead-letter", 1.0)]
    assert [d["reason"] for d in dead] == ["bad_amount"] * N_SLOTS
    assert metrics['dpstream_dead_letters_total{reason="bad_amount"}'] == N_SLOTS
