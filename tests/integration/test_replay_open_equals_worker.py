"""``dpstream replay`` equals the worker on an open-domain stream, over the real broker (issue
36 §3, "replay equal to the worker on the same events").

One worker serves ``ro`` (``open_pba``, real noise: selection, public keys, absorption). The
test sends, at once and in time order, the events of six future slots (one empty): each of 40
users sends up to four keys per slot, some twice, with ``max_keys: 2``, so the ingest's keyed
bound drops keys and its salt decides which. Once the worker released past them, the same events
go to ``dpstream replay`` as a JSON-lines file, shuffled, with a key too long and a malformed
row, under the worker's noise key and deployment, from the worker's first released slot to its
last. Every slot's key -> count map, new keys, status, threshold and spend must be the worker's,
exactly; a replay under another deployment must differ.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import msgpack
import pytest

from app.cli import main
from app.stream.collect.partitioning import PRODUCER_CONFIG
from tests.integration.conftest import NOISE_KEY_HEX
from tests.integration.load import releases_by_slot, wait_released

pytestmark = pytest.mark.integration

SLOT_S = 1.0
USERS = 40
POOL = ["/home", "/search", "/cart", "/help", "/blog"]
CONFIG = f"""
streams:
  - id: ro
    domain: open
    slot_s: {SLOT_S}
    grace_s: 0.3
    max_keys: 2
    max_key_chars: 40
    mechanism: open_pba
    levels: [{{name: std, w: 4, eps: 64, delta: 1.0e-4, population: 100000}}]
"""


def _events(first: int, rng: random.Random) -> list[tuple[str, float, str]]:
    """``(user, ts, key)`` for slots ``first .. first + 5`` (the third one empty), in time
    order, ts on the millisecond away from the slots' edges."""
    out = []
    for slot in range(first, first + 6):
        if slot == first + 2:
            continue
        for u in range(USERS):
            keys = rng.sample(POOL, rng.randint(1, 3))
            if rng.random() < 0.3:
                keys.append(f"/own/{u}")
            for i, key in enumerate(keys):
                ts = round(slot * SLOT_S + 0.1 + 0.15 * i + 0.1 * rng.random(), 3)
                out.append((f"u{u}", ts, key))
            if rng.random() < 0.2:  # the same key again: one value
                out.append((f"u{u}", round(slot * SLOT_S + 0.85, 3), keys[0]))
    return sorted(out, key=lambda e: e[1])


def test_replay_of_an_open_stream_releases_what_the_worker_released(
    kafka, worker_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from confluent_kafka import Producer

    prefix = "replayopen."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)
    rng = random.Random(36)
    first = math.floor(time.time() / SLOT_S) + 4  # ahead of the worker's first release
    events = _events(first, rng)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5, **PRODUCER_CONFIG})
    for user, ts, key in events:
        ev = msgpack.packb({"stream": "ro", "user": user, "ts": ts, "value": key})
        producer.produce(prefix + "events", key=user.encode(), value=ev)
    assert producer.flush(30) == 0
    last = first + 7  # two empty slots after the events
    wait_released(kafka, prefix + "releases", ["ro"], last, timeout_s=60 + 12 * SLOT_S)
    assert worker.stop() == 0, worker.tail()

    payloads = releases_by_slot(kafka, prefix + "releases", "ro")
    assert all(len(p) == 1 for p in payloads.values()), "each slot released once"
    served = {s: msgpack.unpackb(next(iter(p))) for s, p in payloads.items()}
    w0, w1 = min(served), max(served)
    assert w0 < first <= last <= w1, (w0, first, last, w1)

    lines = [json.dumps({"user": u, "ts": ts, "value": key}) for u, ts, key in events]
    rng.shuffle(lines)
    lines.insert(5, json.dumps({"user": "u1", "ts": first * SLOT_S + 0.5, "value": "/" * 41}))
    lines.insert(9, "{not json")
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("DPSTREAM_NOISE_KEY", NOISE_KEY_HEX)
    monkeypatch.setenv("DPSTREAM_DEPLOYMENT", f"it-{prefix}")
    span = ["--from", str(w0 * SLOT_S), "--to", str(w1 * SLOT_S + 0.5)]
    argv = ["replay", "--events", str(path), "--config", str(config), "--stream", "ro", *span]
    out = tmp_path / "replay.jsonl"
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    replayed = {r["slot"]: r for r in map(json.loads, out.read_text().splitlines())}

    assert sorted(replayed) == list(range(w0, w1 + 1))
    wrong = {}
    for s, rec in served.items():
        mine = replayed[s]
        theirs = {
            "counts": dict(zip(rec["keys"], rec["histogram"], strict=True)),
            "new_keys": rec["new_keys"],
            "retired": rec["retired"],
            "threshold": rec["threshold"],
            "fresh": rec["fresh"],
            "status": rec["status"],
            "spent_by_group": rec["spent_by_group"],
            "delta_spent_by_group": rec["delta_spent_by_group"],
            "start": rec["start"],
            "end": rec["end"],
            "mechanism": rec["mechanism"],
        }
        diff = {f: (v, mine[f]) for f, v in theirs.items() if v != mine[f]}
        if diff:
            wrong[s] = diff
    assert wrong == {}
    selected = {k for r in replayed.values() for k in r["new_keys"]}
    assert selected and selected <= set(POOL), selected  # found; no one-user key shown
    print(f"\nslots {w0}..{w1} equal; events in {first}..{first + 5}; keys selected {selected}")

    monkeypatch.setenv("DPSTREAM_DEPLOYMENT", "elsewhere")
    other = tmp_path / "other.jsonl"
    assert main([*argv, "--out", str(other), "--quiet"]) == 0
    theirs = [json.loads(line)["counts"] for line in other.read_text().splitlines()]
    assert theirs != [replayed[s]["counts"] for s in sorted(replayed)]
