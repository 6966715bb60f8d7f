"""Issue 31 §1 and §6 on the real broker: hostile records among honest ones on ``events``.

An event whose ``stream`` is a list made every worker exit on its first read, forever (the offset
was never committed). Here one worker reads honest events with poison records in the same fetch:
each poison record is dead-lettered on its first read, the worker stays alive and ready on its
first start, the honest values are all counted, no record is left without an outcome, the
committed offsets reach the end of every partition, and ``dpstream verify`` finds no violation
and no value dropped.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import msgpack
import pytest

from app.stream.collect.batch import UNACCOUNTED
from app.stream.config import load_settings
from app.verify import verify
from app.verify.report import to_text
from tests.integration.load import wait_released

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SLOT_S = 1.0
CONFIG = f"""
streams:
  - id: p
    labels: [x, y, z]
    slot_s: {SLOT_S}
    grace_s: 0.3
    release_timeout_s: 1.0
    mechanism: {{name: pba}}
    levels:
      - {{name: only, w: 4, eps: 1.0}}
"""
NOT_UTF8 = b"\xa2\xff\xfe"


def hostile(user: str, now: float) -> list[bytes | None]:
    """Poison values keyed by an honest user: every field's wrong types and shapes."""
    ok = {"stream": "p", "user": user, "ts": now, "value": 1}
    pack = msgpack.packb
    return [
        pack({**ok, "stream": ["p"]}),  # the record: unhashable on the fast path
        pack({**ok, "stream": {"p": 1}}),
        pack({**ok, "stream": [[], {}]}),
        pack({**ok, "user": ["x"]}),
        pack({**ok, "user": {"a": b"\x00"}}),
        pack({**ok, "ts": [now]}),
        pack({**ok, "ts": float("nan")}),
        pack({**ok, "ts": float("inf")}),
        pack({**ok, "value": 2**64 - 1}),
        pack({**ok, "value": {"x": [1, 2]}}),
        pack({**ok, "value": b"\xff\xfe"}),
        b"\x85" + pack(ok)[1:] + NOT_UTF8 + pack(1),  # a key that is not UTF-8
        pack(ok)[:-3],  # truncated
        pack([ok]),
        None,
    ]


def committed_total(bootstrap: str, topic: str, group: str) -> int:
    """The sum of ``group``'s committed offsets over ``topic``'s partitions."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        found = c.committed([TopicPartition(topic, p) for p in parts], timeout=10)
        return sum(max(tp.offset, 0) for tp in found)
    finally:
        c.close()


def test_poison_events_are_dead_lettered_on_first_read_and_the_worker_goes_on(
    kafka, worker_factory, tmp_path: Path
) -> None:
    prefix = "poison."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config, DPSTREAM_EXPOSE_DATA_COUNTS="true").start()
    worker.wait_ready(90)
    before = worker.metrics()

    now = time.time()
    items: list[tuple[bytes | None, bytes | None]] = []
    n_honest = n_bad = 0
    for i in range(60):  # honest events, each user's poison right after it: one fetch
        user = f"h{i}"
        items.append(
            (user.encode(), msgpack.packb({"stream": "p", "user": user, "ts": now, "value": i % 3}))
        )
        n_honest += 1
        if i % 4 == 0:
            poison = hostile(user, now)[(i // 4) % 15]
            items.append((user.encode(), poison))
            n_bad += 1
    sent_at = time.monotonic()
    kafka.produce(prefix + "events", items)  # type: ignore[arg-type]

    def dead() -> float:
        assert worker.alive(), worker.tail()  # on main: TypeError, unhashable type: 'list'
        m = worker.metrics()
        return sum(v for k, v in m.items() if k.startswith("dpstream_dead_letters_total"))

    deadline = time.monotonic() + 30
    while dead() < n_bad and time.monotonic() < deadline:
        time.sleep(0.2)
    dead_after_s = time.monotonic() - sent_at
    assert dead() == n_bad, worker.tail()
    assert worker.alive() and worker.starts == 1

    end_slot = math.floor(time.time() / SLOT_S) + 2
    wait_released(kafka, prefix + "releases", ["p"], end_slot, timeout_s=30)
    total = len(items)
    deadline = time.monotonic() + 30
    committed = committed_total(kafka.bootstrap, prefix + "events", prefix + "dpstream-collect")
    while committed < total and time.monotonic() < deadline:
        time.sleep(0.5)
        committed = committed_total(kafka.bootstrap, prefix + "events", prefix + "dpstream-collect")
    m = worker.metrics()
    unaccounted = {
        r: m[f'dpstream_records_unaccounted_total{{consumer="IngestService",reason="{r}"}}']
        for r in UNACCOUNTED
    }
    accepted = m['dpstream_events_total{outcome="accepted",stream="p"}'] - before.get(
        'dpstream_events_total{outcome="accepted",stream="p"}', 0.0
    )
    print(
        f"\n{n_bad} poison among {n_honest} honest events: all dead-lettered "
        f"{dead_after_s:.1f} s after the send, worker alive on start {worker.starts}, "
        f"accepted {accepted:.0f}, committed {committed} of {total}, unaccounted {unaccounted}"
    )
    assert worker.get("/readyz")[0] == 200, worker.tail()
    assert accepted == n_honest
    assert committed == total
    assert set(unaccounted.values()) == {0.0}
    assert worker.stop() == 0, worker.tail()

    letters = [msgpack.unpackb(x.value()) for x in kafka.read(prefix + "dead-letter", idle_s=1.5)]
    assert len(letters) == n_bad
    assert {d["reason"] for d in letters} >= {"wrong_type", "undecodable", "not_a_map"}
    poison_offsets = {d["offset"] for d in letters}
    assert len(poison_offsets) == n_bad
    env = {"DPSTREAM_BROKER": kafka.bootstrap, "DPSTREAM_TOPIC_PREFIX": prefix}
    verdict = verify(load_settings(env, config=config), "p", idle_s=1.0, max_s=60.0)
    print(to_text(verdict))
    assert verdict.ok, to_text(verdict, show_users=True)
    assert verdict.not_released.get("dropped", 0) == 0
    assert verdict.released >= n_honest
