"""Local-mode crash safety: kill -9 the worker while rounds run; requests, releases stay single.

LPA with 3,000 simulated devices (``dpstream simulate devices``) and 2 s slots. The test tails
``collection-requests`` and kills the worker at seeded random moments: right after a request
was produced (the pending request is persisted, maybe not yet marked sent) or later inside the
round (devices are answering), then restarts it on the same state directory. At the end it
reads every topic back and checks:

- releases: every slot between the first and last released exactly once (duplicates, if any,
  byte-identical);
- collection-requests: all records of one (slot, round) are byte-identical, so a cohort is
  never re-planned after a crash (a re-send after a restart is the stored bytes);
- reports: every report answers a request that asked its user, and no user reported twice
  within its window of ``w`` slots (the population ledger's rule);
- devices: no device refused anything; re-sent requests are counted as ``duplicates`` by the
  simulator (skipped, answered once) and every request record is accounted for.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from pathlib import Path

import msgpack
import pytest

from app.dp.local.wire import CollectionRequest, mask_users
from tests.integration.devices import (
    Tail,
    check_reports,
    device_stats,
    kill9_in_rounds,
    start_devices,
    stop_devices,
)
from tests.integration.load import assert_verified, releases_by_slot, wait_releases

pytestmark = pytest.mark.integration

DEVICES = 3_000
W = 3
SLOT_S = 2.0
ROUND_S = 0.5
KILLS = 4
SESSION_S = "3"
AFTER_KILLS = 3
"""Releases to wait for after the last restart."""
CONFIG = f"""
streams:
  - id: lc
    mode: local
    labels: ["off", "on"]
    slot_s: {SLOT_S}
    round_s: {ROUND_S}
    release_timeout_s: 0.3
    mechanism: {{name: lpa, params: {{users: {DEVICES}, oracle: grr}}}}
    levels: [{{name: standard, w: {W}, eps: 2.0}}]
"""


def test_kill9_in_rounds_never_replans_a_cohort_nor_releases_twice(
    kafka, worker_factory, broker, tmp_path: Path
) -> None:
    rnd = random.Random(20240923)
    prefix = "localcrash."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    # A short session timeout: a killed worker's group members expire sooner.
    worker = worker_factory(prefix, config, DPSTREAM_SESSION_TIMEOUT_S=SESSION_S).start()
    tail = Tail(broker.bootstrap, prefix + "collection-requests")
    sim = start_devices(broker, config, prefix, "lc", DEVICES, 11, 100, tmp_path / "devices.log")
    try:
        worker.wait_ready(60)
        moments = kill9_in_rounds(worker, tail, rnd, KILLS, ROUND_S)
        seen = len(kafka.read(prefix + "releases", idle_s=0.3))
        wait_releases(kafka, prefix + "releases", seen + AFTER_KILLS, timeout_s=30, every_s=SLOT_S)
        assert worker.alive(), worker.tail()
        assert worker.stop() == 0, worker.tail()
        time.sleep(1.0)  # the simulator sees every request before it stops
    finally:
        tail.stop.set()
        stop_devices(sim)
        worker.kill9()
    tail.thread.join(5)
    assert worker.starts == KILLS + 1

    # Releases: one per slot, consecutive; duplicates byte-identical.
    payloads = releases_by_slot(kafka, prefix + "releases", "lc")
    slots = sorted(payloads)
    assert len(slots) >= AFTER_KILLS + 2, slots
    assert slots == list(range(slots[0], slots[-1] + 1)), "no slot missing"
    assert all(len(p) == 1 for p in payloads.values()), {
        s: len(p) for s, p in payloads.items() if len(p) > 1
    }

    # Requests: per (slot, round) byte-identical records; the cohorts they ask.
    raw_requests = [m.value() for m in kafka.read(prefix + "collection-requests", idle_s=1.0)]
    by_round: dict[tuple[int, str], set[bytes]] = defaultdict(set)
    asked = {}
    for raw in raw_requests:
        cr = CollectionRequest.from_dict(msgpack.unpackb(raw)["request"])
        by_round[cr.slot, cr.round].add(raw)
        asked[cr.slot, cr.round] = mask_users(cr, DEVICES)
    assert all(len(v) == 1 for v in by_round.values()), {
        k: len(v) for k, v in by_round.items() if len(v) > 1
    }
    resent = len(raw_requests) - len(by_round)

    # Reports: each asked for, no user twice within its window.
    reports = [msgpack.unpackb(m.value()) for m in kafka.read(prefix + "reports", idle_s=1.0)]
    by_user = check_reports(reports, asked, W)

    # Devices: nothing refused; every request record answered, expired or a counted duplicate.
    out = (tmp_path / "devices.log").read_text()
    stats = device_stats(out)
    assert stats["refused"] == 0, out[-3000:]
    assert stats["reports"] == len(reports) > 0
    assert stats["requests"] + stats["expired"] + stats["duplicates"] == len(raw_requests), stats
    print(
        f"kills={KILLS} at +{moments}s after a request | slots={slots[0]}..{slots[-1]} "
        f"({len(slots)}) | requests={len(raw_requests)} "
        f"rounds={len(by_round)} resent={resent} | reports={len(reports)} users={len(by_user)} "
        f"| devices: {stats}"
    )
    assert_verified(kafka, prefix, config, "lc")  # every device within its window
