"""Two broker pauses (SIGSTOP for 20 s, then 30 s, each followed by SIGCONT) under steady load.

While the broker is stopped nothing can be fetched or produced: the worker must say so
(``/readyz`` 503 with the reason), hold its open slots instead of closing them on the wall
clock, and once the broker is back take in what producers buffered through the pause before
it closes those slots: it holds for the producers' delivery horizon (10 s by default), not for
the stream's ``grace_s``, which is 0.3 s here (issue 23, item 2). Values: every value the
broker acknowledged reaches a release, none twice; slots: each released once, in order.
"""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path

import pytest

from tests.integration.load import (
    SteadyLoad,
    account,
    assert_verified,
    releases_by_slot,
    wait_released,
)

pytestmark = pytest.mark.integration

SLOT_S = 1.0
PAUSES_S = (20.0, 30.0)
D = 4
CONFIG = f"""
streams:
  - id: u
    labels: [a, b, c, d]
    slot_s: {SLOT_S}
    grace_s: 0.3
    mechanism: {{name: uniform}}
    levels:
      - {{name: only, w: 2, eps: 900}}
"""


def test_a_broker_pause_is_seen_and_loses_nothing(kafka, broker, worker_factory, tmp_path: Path):
    prefix = "pause."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)
    load = SteadyLoad(kafka.bootstrap, prefix + "events", ["u"], users=40, d=D, slot_s=SLOT_S)
    load.start()
    time.sleep(4 * SLOT_S)
    readiness: list[tuple[float, int, str]] = []
    back_after: list[float] = []
    for pause_s in PAUSES_S:
        os.kill(broker.pid, signal.SIGSTOP)
        paused_at = time.monotonic()
        try:
            while time.monotonic() - paused_at < pause_s:
                status, body = worker.get("/readyz")
                readiness.append((time.monotonic() - paused_at, status, body.strip()))
                time.sleep(0.5)
        finally:
            os.kill(broker.pid, signal.SIGCONT)
        resumed_at = time.monotonic()
        worker.wait_ready(90)
        back_after.append(time.monotonic() - resumed_at)
        time.sleep(4 * SLOT_S)
    load.finish()
    last_slot = math.floor(load.last_ts / SLOT_S)
    wait_released(kafka, prefix + "releases", ["u"], last_slot)
    assert worker.alive(), worker.tail()
    assert worker.stop() == 0, worker.tail()

    red = [t for t, status, _ in readiness if status != 200]
    assert red and red[0] < 10.0, f"/readyz must turn red during the pause: {readiness}"
    assert all(status != 200 for t, status, _ in readiness if t > 10.0), readiness
    payloads = releases_by_slot(kafka, prefix + "releases", "u")
    slots = sorted(payloads)
    assert slots == list(range(slots[0], slots[-1] + 1)), "no slot missing"
    assert all(len(p) == 1 for p in payloads.values()), "each slot released once"
    result = account(load.truth["u"], {s: next(iter(p)) for s, p in payloads.items()})
    reasons = sorted(
        {
            line.split(" behind")[0]
            for _, status, body in readiness
            if status != 200
            for line in body.splitlines()
        }
    )
    print(
        f"\nbroker pauses {PAUSES_S} s, grace 0.3 s: {result}; /readyz red after "
        f"{red[0]:.1f} s ({reasons}), green {back_after} s after SIGCONT"
    )
    assert result.over == {} and result.unreleased == []
    assert result.lost == {}, "every acknowledged value reached a release"
    assert_verified(kafka, prefix, config, "u")  # per user, on the topics (invariant 6)
