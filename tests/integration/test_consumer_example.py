"""``docs/examples/consumer.py`` (plain Python, no ``app`` import) reads a real worker's
releases from the real broker and prints each slot once, as the service's own decoder reads it:
a labels stream's records (layout 1) and an open-domain stream's (layout 2, a key -> count map,
with the reader's top keys), from one worker running both streams."""

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
TOP = 2
"""The consumer's ``--top`` for the open stream: fewer than the keys it usually releases."""
CONFIG = f"""
streams:
  - id: web
    labels: [a, b, c]
    slot_s: {SLOT_S}
    grace_s: 0.3
    release_timeout_s: 1.5
    levels: [{{name: only, w: 3, eps: 1.0}}]
  - id: urls
    domain: open
    slot_s: {SLOT_S}
    grace_s: 0.3
    release_timeout_s: 1.5
    levels: [{{name: only, w: 2, eps: 8.0, delta: 1.0e-3, population: 1000}}]
"""
KEYS = ["/home"] * 12 + ["/news"] * 9 + ["/shop"] * 8 + ["/clinic-42"]
"""The key user ``u{i}`` sends to ``urls``. At ``w = 2``, ``eps = 8``, ``delta = 1e-3`` and one
key per user under replace, the threshold is 6 and the noise discrete Laplace at rate 2
(``tests/integration/test_open_stream.py``), ``P(Z <= -m) = e**(-2 m) / (1 + e**-2)``. A slot
leaves ``/home`` (12 users) out with probability ``P(Z <= -7) < 1e-6``; ``/shop`` (8) is left
out of all of the 4 slots with events with ``P(Z <= -3)**4 < 3e-11``: once selected it stays
public, so some slot releases more than :data:`TOP` keys."""


def run_example(kafka, topic: str, stream: str) -> list[dict]:
    """The example's JSON lines for ``stream``, reading ``topic`` from the beginning."""
    out = subprocess.run(  # noqa: S603 - our own interpreter and the repository's example
        [
            sys.executable,
            str(EXAMPLE),
            "--bootstrap",
            kafka.bootstrap,
            "--topic",
            topic,
            "--stream",
            stream,
            "--from-beginning",
            "--idle-exit",
            "3",
            "--top",
            str(TOP),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def check_lines(printed: list[dict], published: list[releases.SlotRelease]) -> None:
    """Each slot once, in slot order, every field as :func:`app.wire.releases.decode` reads
    it; an open stream's line adds its top keys, ranked from the decoded key -> count map."""
    slots = [p["slot"] for p in printed]
    assert len(set(slots)) == len(slots)  # each slot once
    by_slot = {r.slot: r for r in published}
    assert slots == sorted(by_slot)
    for p in printed:
        release = by_slot[p["slot"]]
        want = release.to_json()
        del want["start_utc"], want["end_utc"]
        if release.is_open:
            counts = release.key_counts()
            ranked = sorted(counts, key=lambda k: (-counts[k], k))[:TOP]
            want["top_keys"] = [[k, counts[k]] for k in ranked]
        assert p == want


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
            ]
            + [
                (f"u{i}".encode(), events.encode(events.Event("urls", f"u{i}", now, key)))
                for i, key in enumerate(KEYS)
            ],
        )
        time.sleep(SLOT_S / 2)
    deadline = time.monotonic() + 60
    published: list[releases.SlotRelease] = []
    while (
        time.monotonic() < deadline
        and min(sum(r.stream == sid for r in published) for sid in ("web", "urls")) < 3
    ):
        published = [releases.decode(m.value()) for m in kafka.read(prefix + "releases", 1.0)]
    assert worker.stop() == 0  # releases every slot, even an empty one: stop, then read them all
    published = [releases.decode(m.value()) for m in kafka.read(prefix + "releases", 1.0)]
    web = [r for r in published if r.stream == "web"]
    urls = [r for r in published if r.stream == "urls"]
    assert len(web) >= 3 and len(urls) >= 3, worker.tail()
    assert {r.schema for r in web} == {releases.LABELS_SCHEMA}
    assert {r.schema for r in urls} == {releases.OPEN_SCHEMA}
    assert any("/home" in r.keys for r in urls if r.keys), "no open release carries a key"

    check_lines(run_example(kafka, prefix + "releases", "web"), web)
    printed = run_example(kafka, prefix + "releases", "urls")
    check_lines(printed, urls)
    assert any(len(p["keys"]) > TOP for p in printed)  # --top cut a slot's keys
