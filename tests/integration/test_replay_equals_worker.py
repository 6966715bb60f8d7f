"""``dpstream replay`` equals the worker on the same events, over the real broker (issue 36 §3).

One worker serves ``rp`` (PBA over two levels, eps small enough that the noise is real and the
mechanism skips some slots). The test sends, at once and in time order, the events of six
future slots (one of them empty): several users send two values in a slot (the first counts),
two users move to the relaxed level by a ``preferences`` record stamped before the first of
those slots (the level change rule applies). Once the worker released past them, the same
events go to ``dpstream replay`` as a CSV file in +05:30, shuffled, with malformed rows, under
the worker's noise key and deployment, from the worker's first released slot to its last. Every
slot's histogram, freshness and spend must be the worker's, exactly; a replay under another
deployment must differ (the noise really is the key's).
"""

from __future__ import annotations

import csv
import json
import math
import random
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import msgpack
import pytest

from app.cli import main
from app.stream.collect.partitioning import PRODUCER_CONFIG
from tests.integration.conftest import NOISE_KEY_HEX
from tests.integration.load import releases_by_slot, wait_released

pytestmark = pytest.mark.integration

SLOT_S = 1.0
LABELS = ["a", "b", "c", "d", "e", "f"]
USERS = 40
CONFIG = f"""
streams:
  - id: rp
    labels: {LABELS}
    slot_s: {SLOT_S}
    grace_s: 0.3
    mechanism: {{name: pba}}
    levels:
      - {{name: strict, w: 4, eps: 2, population: {USERS}}}
      - {{name: relaxed, w: 2, eps: 4, population: {USERS}}}
"""
IST = timezone(timedelta(hours=5, minutes=30))


def _events(first: int, rng: random.Random) -> list[tuple[str, float, str]]:
    """``(user, ts, label)`` for slots ``first .. first + 5`` (the third one empty), in time
    order; ts on the millisecond, away from the slots' edges; duplicates 10+ ms apart."""
    out = []
    for slot in range(first, first + 6):
        if slot == first + 2:
            continue
        for u in range(USERS):
            if rng.random() < 0.2:
                continue
            sends = 2 if rng.random() < 0.3 else 1
            for i in range(sends):
                ts = round(slot * SLOT_S + 0.1 + 0.4 * i + 0.3 * rng.random(), 3)
                out.append((f"u{u}", ts, rng.choice(LABELS[: 2 + u % 5])))
    return sorted(out, key=lambda e: e[1])


def _write_csv(path: Path, rows: list[tuple[str, float, str, str]], rng: random.Random) -> None:
    shuffled = rows[:]
    rng.shuffle(shuffled)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user", "ts", "value", "level"])
        for i, (user, ts, value, level) in enumerate(shuffled):
            w.writerow([user, datetime.fromtimestamp(ts, IST).isoformat(), value, level])
            if i == 7:
                w.writerow(["u1", "yesterday", "a", ""])  # malformed: named and skipped
            if i == 11:
                w.writerow(["u2", ts, "zz", ""])  # not a label: the service's refusal


def test_replay_releases_what_the_worker_released(
    kafka, worker_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from confluent_kafka import Producer

    prefix = "replay."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)
    rng = random.Random(36)
    first = math.floor(time.time() / SLOT_S) + 4  # ahead of the worker's first release
    events = _events(first, rng)
    moved = {"u3": first * SLOT_S - 0.5, "u8": first * SLOT_S - 0.25}  # stamped before first
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5, **PRODUCER_CONFIG})
    for user, at in moved.items():
        value = msgpack.packb({"level": "relaxed"})
        producer.produce(
            prefix + "preferences", key=user.encode(), value=value, timestamp=round(at * 1000)
        )
    assert producer.flush(30) == 0
    time.sleep(0.5)  # the preferences are read before the events (the worker tails them)
    for user, ts, label in events:
        ev = msgpack.packb({"stream": "rp", "user": user, "ts": ts, "value": label})
        producer.produce(prefix + "events", key=user.encode(), value=ev)
    assert producer.flush(30) == 0
    last = first + 7  # two empty slots after the events
    wait_released(kafka, prefix + "releases", ["rp"], last, timeout_s=60 + 12 * SLOT_S)
    assert worker.stop() == 0, worker.tail()

    payloads = releases_by_slot(kafka, prefix + "releases", "rp")
    assert all(len(p) == 1 for p in payloads.values()), "each slot released once"
    served = {s: msgpack.unpackb(next(iter(p))) for s, p in payloads.items()}
    w0, w1 = min(served), max(served)
    assert w0 < first <= last <= w1, (w0, first, last, w1)

    rows = [(u, ts, v, "") for u, ts, v in events]
    rows += [(u, at, "", "relaxed") for u, at in moved.items()]
    path = tmp_path / "events.csv"
    _write_csv(path, rows, rng)
    monkeypatch.setenv("DPSTREAM_NOISE_KEY", NOISE_KEY_HEX)
    monkeypatch.setenv("DPSTREAM_DEPLOYMENT", f"it-{prefix}")
    span = ["--from", str(w0 * SLOT_S), "--to", str(w1 * SLOT_S + 0.5)]
    argv = ["replay", "--events", str(path), "--config", str(config), "--stream", "rp", *span]
    out = tmp_path / "replay.jsonl"
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    replayed = {r["slot"]: r for r in map(json.loads, out.read_text().splitlines())}

    assert sorted(replayed) == list(range(w0, w1 + 1))
    fields = ("histogram", "fresh", "spent_by_group", "start", "end", "mechanism", "delayed")
    wrong = {
        s: {f: (served[s][f], replayed[s][f]) for f in fields if served[s][f] != replayed[s][f]}
        for s in served
    }
    assert {s: d for s, d in wrong.items() if d} == {}
    fresh = [r["fresh"] for s, r in replayed.items() if first <= s <= last]
    print(f"\nslots {w0}..{w1} equal; events in {first}..{first + 5}; fresh {sum(fresh)}/8")

    monkeypatch.setenv("DPSTREAM_DEPLOYMENT", "elsewhere")
    other = tmp_path / "other.jsonl"
    assert main([*argv, "--out", str(other), "--quiet"]) == 0
    theirs = [json.loads(line)["histogram"] for line in other.read_text().splitlines()]
    assert theirs != [replayed[s]["histogram"] for s in sorted(replayed)]
