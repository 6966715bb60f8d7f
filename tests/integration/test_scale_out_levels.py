"""Rebalances keep every user's level: kept and moved partitions, kill -9 (issue 21 item 1).

Two levels, ``strict`` (w=5, the default) and ``loose`` (w=3), most users ``loose`` through
``preferences``, an eps so large that the noise is zero. The workers come and go so that every
rebalance both *keeps* partitions on a worker and *moves* others, whatever the assignor picks:

1. w1 alone holds all four ``events`` partitions; w2 joins: w1 keeps two, two move to w2;
2. w1 is killed (-9): w2 keeps its two and takes w1's two;
3. w3 joins: w2 keeps two, two move to w3.

The loose users' preferences are older than the load by more than the change gap, so every
value a user sent must be counted in the user's own group. The internal ``partials`` topic
holds exactly what each partition counted per group (the first partial per slot and partition
is the one released), which the test compares with what was sent, user by user: a value
counted in another group than its user's level is a privacy defect (a loose user counted in
the default level without a gap mixes two ledgers in one window). ``dpstream verify`` checks
the same from the topics with its own rules; every slot is released once, and every value sent
reaches a release except in slots closed on the timeout policy.
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from pathlib import Path

import msgpack
import numpy as np
import pytest

from app.stream.collect.partitioning import PRODUCER_CONFIG, partition_for
from app.stream.records import unpack
from app.stream.topics import load_topics
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
USERS = 40
PARTITIONS = 4
STRICT, LOOSE = 0, 1
CONFIG = f"""
streams:
  - id: p
    labels: [a, b, c, d]
    slot_s: {SLOT_S}
    grace_s: 0.5
    mechanism: {{name: uniform}}
    default_level: strict
    levels:
      - {{name: strict, w: 5, eps: 900}}
      - {{name: loose, w: 3, eps: 900}}
"""
LOOSE_USERS = {f"u{u}" for u in range(USERS) if u % 4}


def assignments(log: str) -> list[set[int]]:
    """The ``events`` partitions a worker was given at each rebalance, in order."""
    found = re.findall(r"IngestService assigned partitions=\[([\d, ]*)\]", log)
    return [{int(x) for x in f.split(",") if x.strip()} for f in found]


def test_rebalances_keep_every_users_level(kafka, worker_factory, tmp_path: Path):
    from confluent_kafka import Producer

    prefix = "scalelv."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    w1 = worker_factory(prefix, config).start()
    w1.wait_ready(120)
    prefs = Producer({"bootstrap.servers": kafka.bootstrap, **PRODUCER_CONFIG})
    for user in sorted(LOOSE_USERS):
        prefs.produce(
            prefix + "preferences", key=user.encode(), value=msgpack.packb({"level": "loose"})
        )
    assert prefs.flush(10) == 0
    time.sleep(9 * SLOT_S)  # the change gap (max w = 5 slots, from the next slot) has passed
    load = SteadyLoad(kafka.bootstrap, prefix + "events", ["p"], users=USERS, d=D, slot_s=SLOT_S)
    load.start()
    time.sleep(5)
    w2 = worker_factory(prefix, config).start()  # 1. w1 keeps two partitions, two move
    w2.wait_ready(120)
    time.sleep(6)
    w1.kill9()  # 2. w2 keeps its two and takes w1's
    time.sleep(14)
    w3 = worker_factory(prefix, config).start()  # 3. w2 keeps two, two move to w3
    w3.wait_ready(120)
    time.sleep(6)
    load.finish()
    last_slot = math.floor(load.last_ts / SLOT_S)
    wait_released(kafka, prefix + "releases", ["p"], last_slot)
    assert w2.alive() and w3.alive(), w2.tail() + w3.tail()
    assert w2.stop() == 0, w2.tail()
    assert w3.stop() == 0, w3.tail()
    # dpstream verify first: with the level fix reverted it is what fails (wrong_group)
    assert_verified(kafka, prefix, config, "p")

    # The rebalances did keep partitions on a worker and move others.
    workers = {"w1": w1, "w2": w2, "w3": w3}
    logs = {name: w.log_path.read_text(errors="replace") for name, w in workers.items()}
    seen = {name: assignments(text) for name, text in logs.items()}
    kept = [a & b for runs in seen.values() for a, b in zip(runs, runs[1:], strict=False)]
    assert any(kept), f"a partition kept through a rebalance: {seen}"
    assert seen["w2"] and seen["w3"], f"partitions moved: {seen}"

    # Per user: every value counted in a partial was counted in its user's own group.
    sent = load.values["p"]
    expected: dict[tuple[int, int], np.ndarray] = defaultdict(lambda: np.zeros((2, D), int))
    for slot, users in sent.items():
        for user, value in users.items():
            group = LOOSE if user in LOOSE_USERS else STRICT
            expected[slot, partition_for(user.encode(), PARTITIONS)][group, value] += 1
    first: dict[tuple[int, int], np.ndarray] = {}
    for m in kafka.read(load_topics(prefix).partials, idle_s=1.0):
        msg = unpack(m.value())
        if msg.get("kind") == "partial" and msg["stream"] == "p":
            key = (msg["slot"], msg["partition"])
            first.setdefault(key, np.asarray(msg["counts"], dtype=np.int64).reshape(2, D))
    wrong = {k: (c - expected[k]).tolist() for k, c in first.items() if np.any(c > expected[k])}
    counted = sum(int(np.minimum(c, expected[k]).sum()) for k, c in first.items())
    total = sum(len(users) for users in sent.values())
    print(
        f"\nscale-out with levels: {counted} of {total} values counted in their user's group;"
        f" assignments {seen}"
    )
    assert wrong == {}, f"values counted in another group than their user's level: {wrong}"

    payloads = releases_by_slot(kafka, prefix + "releases", "p")
    slots = sorted(payloads)
    assert slots == list(range(slots[0], slots[-1] + 1)), "no slot missing"
    assert all(len(p) == 1 for p in payloads.values()), "each slot released once"
    result = account(load.truth["p"], {s: next(iter(p)) for s, p in payloads.items()})
    forced = {
        int(s)
        for text in logs.values()
        for s in re.findall(r"slot closed without partitions stream=p slot=(\d+)", text)
    }
    print(f"releases: {result}; force-closed slots {sorted(forced)}")
    assert result.over == {} and result.unreleased == []
    assert {s for s in result.lost if s not in forced} == set(), result.lost
