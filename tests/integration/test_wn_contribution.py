"""Issue 14 on a real broker: a (w,n) stream with ``max_values: 3`` counts a user who sends 50
distinct values in one slot with at most 3 of them, the rest ``clipped``, and nothing else moves.

STBD over an 8 x 8 grid at eps = 1000 and w = 1 (noise scale 0.012 per cell) with one page group
per page, so every page whose count changed is re-published: each release, rounded, is its slot's
counts, and the heavy user's share in them is read off exactly.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest

from app.stream.config import load_settings
from app.stream.ops.ledger_view import read_ledger, render

pytestmark = pytest.mark.integration

SLOT_S = 1.0
N_SLOTS = 6
HEAVY_SLOT = 2  # test slot in which the heavy user sends its 50 values
ROWS = COLS = 8
D = ROWS * COLS
L = 3
USERS = 12
TOLERANCE = 0.5  # w = 1: Laplace scale l / (eps / 4) = 0.012 per cell, P(|noise| > 0.5) < 1e-18

PAGE_GROUPS = [[p] for p in range(D)]
CONFIG = f"""
streams:
  - id: cells
    d: {D}
    slot_s: {SLOT_S}
    grace_s: 0.3
    release_timeout_s: 1.5
    neighbours: add-remove
    max_values: {L}
    mechanism: {{name: stbd, noise: laplace, params: {{page_groups: {PAGE_GROUPS}}}}}
    accept_weaker_guarantee: true  # noise: laplace, the papers' float noise
    graph: {{grid: {ROWS} x {COLS}, neighbours: 4, n: 2}}
    levels:
      - {{name: std, w: 1, eps: 1000}}
"""


def event(user: str, ts: float, value: int) -> tuple[bytes, bytes]:
    body = {"stream": "cells", "user": user, "ts": ts, "value": value}
    return user.encode(), msgpack.packb(body)


def others(k: int) -> np.ndarray:
    """The other users' values in test slot ``k``: two distinct ones each (within l), shifting
    every slot, as ``(user, value)`` rows."""
    return np.array([(u, (5 * u + 3 * k + shift) % D) for u in range(USERS) for shift in (0, 17)])


def slot_events(k: int, slot: int) -> tuple[list[tuple[bytes, bytes]], np.ndarray, int]:
    """Test slot ``k``'s events, the histogram a correct worker counts, and the values sent."""
    rows = others(k)
    truth = np.bincount(rows[:, 1], minlength=D)
    ts = slot * SLOT_S + 0.5
    items = [event(f"user-{u}", ts, int(v)) for u, v in rows]
    if k == HEAVY_SLOT:
        items += [event("heavy", ts + 0.01 * i, i) for i in range(50)]  # 50 distinct, in order
        truth[:L] += 1  # the first l distinct values count, the other 47 are clipped
    return items, truth, len(items)


def test_a_user_with_50_values_counts_at_most_l(kafka, worker_factory, tmp_path: Path) -> None:
    prefix = "wnclip."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config, DPSTREAM_EXPOSE_DATA_COUNTS="true").start()
    worker.wait_ready(90)

    first = math.floor(time.time() / SLOT_S) + 1
    truths: dict[int, np.ndarray] = {}
    sent = 0
    for k in range(N_SLOTS):
        slot = first + k
        time.sleep(max(0.0, slot * SLOT_S + 0.1 - time.time()))
        items, truths[slot], n = slot_events(k, slot)
        kafka.produce(prefix + "events", items)
        sent += n
    last = first + N_SLOTS - 1
    deadline = time.monotonic() + 20
    by_slot: dict[int, dict] = {}
    while time.monotonic() < deadline and last not in by_slot:
        time.sleep(1)
        by_slot = {
            r["slot"]: r
            for r in (msgpack.unpackb(m.value()) for m in kafka.read(prefix + "releases", 1.0))
        }
    metrics = worker.metrics()
    assert worker.stop() == 0, worker.tail()

    for slot, truth in truths.items():
        rel = by_slot[slot]
        assert rel["mechanism"] == "stbd"
        hist = np.asarray(rel["histogram"])
        assert np.all(np.abs(hist - truth) < TOLERANCE), (slot, hist - truth)
    heavy_slot = first + HEAVY_SLOT
    without_heavy = np.bincount(others(HEAVY_SLOT)[:, 1], minlength=D)
    share = np.rint(by_slot[heavy_slot]["histogram"]).astype(np.int64) - without_heavy
    assert share.tolist() == [1] * L + [0] * (D - L)  # its first l values, nothing else

    clipped = metrics['dpstream_events_total{outcome="clipped",stream="cells"}']
    accepted = metrics['dpstream_events_total{outcome="accepted",stream="cells"}']
    assert clipped == 50 - L
    assert accepted == sent - clipped == sum(int(t.sum()) for t in truths.values())
    spent = metrics['dpstream_window_budget_spent{level="std",stream="cells"}']
    assert 0 < spent <= 1000

    settings = load_settings(env={**worker.env, "DPSTREAM_CONFIG": str(config)})
    entry = read_ledger(settings, "cells")
    assert entry is not None
    view = render(settings.stream("cells"), entry)
    assert "(w,n) window, grid 8 x 8, 4-neighbour: 64 nodes, 112 edges, n=2" in view
