"""Scale-out: several workers in one consumer group, added and removed mid-run (kill -9 too).

The four ``events`` partitions are balanced across the workers' collect stages and the
release agent runs where the ``partials`` partition is; Kafka moves both when workers come
and go. Whatever the moves: every slot of every stream released exactly once (re-emissions
byte-identical), no value counted twice, and every value the broker acknowledged reaches a
release unless its slot was closed on the timeout policy (the test names those slots).
"""

from __future__ import annotations

import math
import re
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
D = 4
STREAMS = ("u", "v")
CONFIG = "streams:\n" + "".join(
    f"""  - id: {sid}
    labels: [a, b, c, d]
    slot_s: {SLOT_S}
    grace_s: 0.5
    mechanism: {{name: uniform}}
    levels:
      - {{name: only, w: 2, eps: 900}}
"""
    for sid in STREAMS
)


def test_workers_join_and_leave_without_loss(kafka, worker_factory, tmp_path: Path):
    prefix = "scale."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    w1 = worker_factory(prefix, config).start()
    w2 = worker_factory(prefix, config).start()
    w1.wait_ready(120)
    w2.wait_ready(120)
    load = SteadyLoad(kafka.bootstrap, prefix + "events", STREAMS, users=40, d=D, slot_s=SLOT_S)
    load.start()
    time.sleep(6)
    w3 = worker_factory(prefix, config).start()  # a third worker joins
    w3.wait_ready(120)
    time.sleep(6)
    w1.kill9()  # one dies without a word
    time.sleep(12)
    assert w2.stop() == 0, w2.tail()  # one leaves cleanly
    w3.wait_ready(120)
    time.sleep(6)
    load.finish()
    last_slot = math.floor(load.last_ts / SLOT_S)
    wait_released(kafka, prefix + "releases", STREAMS, last_slot)
    assert w3.alive(), w3.tail()
    assert w3.stop() == 0, w3.tail()

    logs = "".join(w.log_path.read_text(errors="replace") for w in (w1, w2, w3))
    for sid in STREAMS:
        payloads = releases_by_slot(kafka, prefix + "releases", sid)
        slots = sorted(payloads)
        assert slots == list(range(slots[0], slots[-1] + 1)), f"{sid}: no slot missing"
        assert all(len(p) == 1 for p in payloads.values()), f"{sid}: each slot released once"
        result = account(load.truth[sid], {s: next(iter(p)) for s, p in payloads.items()})
        forced = {
            int(m)
            for m in re.findall(rf"slot closed without partitions stream={sid} slot=(\d+)", logs)
        }
        print(f"\nscale-out {sid}: {result}; force-closed slots {sorted(forced)}")
        assert result.over == {} and result.unreleased == []
        assert {s for s in result.lost if s not in forced} == set(), result.lost
    for sid in STREAMS:  # per user, on what the topics hold (invariant 6)
        assert_verified(kafka, prefix, config, sid)
