"""``docs/examples/consumer.py`` (plain Python, no ``app`` import) reads a real worker's
releases from the real broker and prints each slot once, as the service's own decoder reads it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.wire import events, releases

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "consumer.py"
SLOT_S = 1.0
CONFIG = f"""
streams:
  - id: web
    labels: [a, b, c]
    slot_s: {SLOT_S}
    grace_s: 0.3
    release_timeout_s: 1.5
    levels: [{{name: only, w: 3, eps: 1.0}}]
"""


def test_the_example_consumer_prints_a_real_workers_releases(
    kafka, worker_factory, tmp_path: Path
) -> None:
    prefix = "consumer."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)
    start = time.time()
    while time.time() - start < 4 * SLOT_S:  # a few slots of events
        now = time.time()
        kafka.produce(
            prefix + "events",
            [
                (f"u{i}".encode(), events.encode(events.Event("web", f"u{i}", now, "abc"[i % 3])))
                for i in range(30)
            ],
        )
        time.sleep(SLOT_S / 2)
    deadline = time.monotonic() + 60
    published: list[releases.SlotRelease] = []
    while time.monotonic() < deadline and len(published) < 3:
        published = [releases.decode(m.value()) for m in kafka.read(prefix + "releases", 1.0)]
    assert len(published) >= 3, worker.tail()
    assert worker.stop() == 0  # releases every slot, even an empty one: stop, then read them all
    published = [releases.decode(m.value()) for m in kafka.read(prefix + "releases", 1.0)]

    out = subprocess.run(  # noqa: S603 - our own interpreter and the repository's example
        [
            sys.executable,
            str(EXAMPLE),
            "--bootstrap",
            kafka.bootstrap,
            "--topic",
            prefix + "releases",
            "--stream",
            "web",
            "--from-beginning",
            "--idle-exit",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 0, out.stderr
    printed = [json.loads(line) for line in out.stdout.splitlines()]
    slots = [p["slot"] for p in printed]
    assert len(set(slots)) == len(slots)  # each slot once
    by_slot = {r.slot: r for r in published}
    assert slots == sorted(by_slot)
    for p in printed:
        want = by_slot[p["slot"]].to_json()
        del want["start_utc"], want["end_utc"]
        assert p == want
