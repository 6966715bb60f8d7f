"""OptStream on the real broker: every slot released once, in periods, across two kill -9s.

The first kill hits the moment right after a period's ledger entry (all ``W`` releases in its
outbox) was persisted and before any release was produced: the worker kills itself there on the
test-only hook of :mod:`app.stream.release.faults` (no outside signal can hit that moment
reliably). The second is an outside kill -9 in the middle of a later period, while the ledger
holds the open period's buffer.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import msgpack
import pytest

from app.stream.release.faults import KILL_AFTER_PERIOD_RECORD
from tests.integration.load import SteadyLoad, assert_verified

pytestmark = pytest.mark.integration

SLOT_S = 1.0
W = 4
USERS = 20
CONFIG = f"""
streams:
  - id: o
    labels: [a, b, c]
    slot_s: {SLOT_S}
    grace_s: 0.3
    mechanism: {{name: optstream, noise: laplace, params: {{k: 2, theta: 5.0}}}}
    accept_weaker_guarantee: true  # noise: laplace, the papers' float noise
    levels: [{{name: only, w: {W}, eps: 2.0}}]
"""


def released(kafka, topic: str) -> list[tuple[dict, bytes, float]]:
    """``(record, bytes, produce time in s)`` of every ``releases`` value, in topic order."""
    out = []
    for m in kafka.read(topic, idle_s=1.0):
        out.append((msgpack.unpackb(m.value()), m.value(), m.timestamp()[1] / 1000))
    return out


def test_optstream_releases_each_slot_once_in_periods_across_kills(
    kafka, worker_factory, tmp_path: Path
):
    prefix = "period."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    marker = tmp_path / "killed-after-record"
    failpoint = {KILL_AFTER_PERIOD_RECORD: str(marker), "DPSTREAM_TEST_FAILPOINTS": "1"}
    worker = worker_factory(prefix, config, **failpoint).start()
    worker.wait_ready(90)
    load = SteadyLoad(kafka.bootstrap, prefix + "events", ("o",), USERS, 3, SLOT_S).start()
    try:
        # 1. The first period's end: the worker records it, persists it and kills itself.
        deadline = time.monotonic() + 30
        while worker.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists() and not worker.alive(), worker.tail()
        killed_at = marker.stat().st_mtime
        assert released(kafka, prefix + "releases") == [], "nothing produced before the kill"
        worker.start()
        worker.wait_ready(90)

        # 2. A kill -9 in the middle of a later period (its buffer is in the ledger only).
        deadline = time.monotonic() + 30
        while not (recs := released(kafka, prefix + "releases")) and time.monotonic() < deadline:
            time.sleep(0.5)
        last = max(r["slot"] for r, _, _ in recs)  # a period's last slot
        middle = (last + 1 + W // 2) * SLOT_S + 0.4  # inside slot last + 1 + W/2
        while middle < time.time() + 0.5:
            middle += W * SLOT_S
        time.sleep(middle - time.time())
        mid_kill = time.time()
        worker.kill9()
        worker.start()
        worker.wait_ready(90)
        time.sleep(3 * W * SLOT_S)
    finally:
        load.finish()
    last_slot = math.floor(load.last_ts / SLOT_S)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        recs = released(kafka, prefix + "releases")
        if recs and max(r["slot"] for r, _, _ in recs) >= last_slot - W:
            break
        time.sleep(1)
    assert worker.stop() == 0, worker.tail()
    assert worker.starts == 3

    by_slot: dict[int, set[bytes]] = {}
    for rec, raw, _ in recs:
        by_slot.setdefault(rec["slot"], set()).add(raw)
    slots = sorted(by_slot)
    assert slots == list(range(slots[0], slots[-1] + 1)), "no slot missing"
    assert slots[-1] >= last_slot - W and len(slots) >= 4 * W
    assert all(len(v) == 1 for v in by_slot.values()), "each slot once (identical copies)"
    first = slots[0]
    assert (len(slots)) % W == 0, "only whole periods are released"
    record = {rec["slot"]: rec for rec, _, _ in recs}
    produced = {}
    for rec, _, at in recs:
        produced.setdefault(rec["slot"], at)
    for start in range(first, slots[-1] + 1, W):
        period = [record[s] for s in range(start, start + W)]
        assert [r["delayed"] for r in period] == [True] * (W - 1) + [False], start
        assert len({r["released_at"] for r in period}) == 1, "one computation per period"
        # Never early: a period is computed after its last slot's end plus grace.
        assert period[0]["released_at"] >= period[-1]["end"] + 0.3 - 0.05, start
    # The period recorded before the self-kill was produced afterwards from the stored bytes:
    # computed before the kill, produced after it.
    # The marker's mtime comes from the kernel's coarse clock, up to a tick (a few ms) behind
    # time.time(): a release computed just before the kill may carry a slightly later stamp.
    recorded_before = [s for s in slots if record[s]["released_at"] <= killed_at + 0.05]
    assert len(recorded_before) == W, recorded_before
    assert all(produced[s] > killed_at for s in recorded_before)
    # The kill in the middle of a period: that period was still released whole and once.
    spanning = [s for s in slots if record[s]["start"] <= mid_kill < record[s]["end"]]
    assert spanning, "the mid-period kill fell inside a released slot"
    print(
        f"\nperiod crash: slots {first}..{slots[-1]}, self-kill after recording "
        f"{recorded_before}, outside kill in slot {spanning[0]}"
    )
    assert_verified(kafka, prefix, config, "o")  # per user, on the topics (invariant 6)
