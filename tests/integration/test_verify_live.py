"""``dpstream verify`` on a live deployment (issues 31 §5 and 32 §2), on the real broker.

A worker runs with two levels under a steady load that never stops while ``verify`` reads:
verify must answer in seconds with its defaults (each topic read to the end it had when the read
began) and find nothing, also with a preference the worker dead-letters (in a partition its key
does not hash to) and users who flip levels more often than a ``levels`` record keeps. Then the
refusals, each one line on stderr and exit 2: a streams file with other levels than the topics
were written with, a stream with no value, and a malformed ``levels`` record.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest

from app.stream.collect.partitioning import partition_for
from app.stream.collect.preferences import KEEP_CHANGES
from app.stream.topics import load_topics
from tests.integration.conftest import REPO
from tests.integration.load import SteadyLoad

pytestmark = pytest.mark.integration

SLOT_S = 1.0
USERS = 40
CONFIG = f"""
streams:
  - id: c
    labels: [a, b, c, d]
    slot_s: {SLOT_S}
    grace_s: 0.3
    mechanism: {{name: pba}}
    levels:
      - {{name: strict, w: 5, eps: 2.0}}
      - {{name: loose, w: 3, eps: 4.0}}
  - id: quiet
    labels: [x, y]
    slot_s: {SLOT_S}
    mechanism: {{name: pba}}
    levels: [{{name: strict, w: 5, eps: 2.0}}]
"""
LIVE_LIMIT_S = 30.0
"""Issue 32 §2: verify answers a live deployment in under 30 s."""


def cli(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "verify", "--no-progress", *args],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )
    return done, time.monotonic() - began


def refused(done: subprocess.CompletedProcess[str], why: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stdout + done.stderr
    assert why in lines[0], lines[0]


def test_verify_answers_a_live_deployment_and_refuses_what_it_cannot_judge(
    kafka, worker_factory, tmp_path: Path
):
    prefix = "verifylive."
    topics = load_topics(prefix)
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    partitions = topics.spec("events").partitions
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    loose = msgpack.packb({"level": "loose"})
    home = partition_for(b"u2", partitions)  # dead-lettered by the worker: not owed
    producer.produce(topics.preferences, key=b"u2", value=loose, partition=(home + 1) % partitions)
    producer.flush(30)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)
    load = SteadyLoad(kafka.bootstrap, topics.events, ("c",), USERS, 4, SLOT_S).start()
    env = {"DPSTREAM_BROKER": kafka.bootstrap, "DPSTREAM_TOPIC_PREFIX": prefix}
    try:
        time.sleep(4 * SLOT_S)
        flips = [  # u5 and u7 flip more often than a levels record keeps
            (f"u{u}".encode(), msgpack.packb({"level": ("loose", "strict")[i % 2]}))
            for i in range(KEEP_CHANGES + 5)  # ending at loose
            for u in (5, 7)
        ]
        kafka.produce(topics.preferences, flips)
        time.sleep(12 * SLOT_S)

        live, took = cli(env, "--stream", "c", "--config", str(config))
        print(f"\nverify on the live worker: {took:.1f} s\n{live.stdout}")
        assert live.returncode == 0, live.stdout + live.stderr
        assert took < LIVE_LIMIT_S
        assert "no violation" in live.stdout and "values not released (level_change)" in live.stdout
        assert "loose (w=3, eps=4): 2 users" in live.stdout  # u5, u7 past their gap

        other = tmp_path / "other.yaml"
        other.write_text(CONFIG.replace("w: 3, eps: 4.0", "w: 4, eps: 4.0"))
        wrong, _ = cli(env, "--stream", "c", "--config", str(other))
        refused(wrong, "configuration")  # the ledger or the audit: either names it
        quiet, _ = cli(env, "--stream", "quiet", "--config", str(config))
        refused(quiet, "nothing to judge")

        garbage = Producer({"bootstrap.servers": kafka.bootstrap})
        garbage.produce(topics.levels, key=b"u9", value=b"\xc1", partition=1)
        garbage.flush(30)
        bad, _ = cli(env, "--stream", "c", "--config", str(config))
        refused(bad, "levels partition 1 offset")
    finally:
        load.finish()
        worker.stop()
