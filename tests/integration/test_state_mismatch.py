"""A stream whose stored ledger does not match its configuration: the worker refuses to start.

Changing eps (or the mechanism, or the levels) of a stream that has released would continue a
ledger the new mechanism does not describe. The worker's pre-flight reads the ledgers from the
changelog and exits 2 with one line naming the stream and the way out, before it creates or
consumes anything; the documented migration (a new stream id) starts.
"""

from __future__ import annotations

import time
from pathlib import Path

import msgpack
import pytest

pytestmark = pytest.mark.integration

CONFIG = """
streams:
  - id: {sid}
    labels: [a, b]
    slot_s: 1
    grace_s: 0.2
    mechanism: {{name: pba}}
    levels:
      - {{name: only, w: 3, eps: {eps}}}
"""


def test_a_changed_stream_is_refused_with_one_line(kafka, worker_factory, tmp_path: Path):
    prefix = "mismatch."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG.format(sid="s", eps=1.0))
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if len(kafka.read(prefix + "releases", idle_s=0.5, max_s=5)) >= 2:
            break
        time.sleep(0.5)
    assert worker.stop() == 0, worker.tail()

    config.write_text(CONFIG.format(sid="s", eps=2.0))
    changed = worker_factory(prefix, config).start()
    assert changed.proc is not None
    assert changed.proc.wait(60) == 2
    out = changed.log_path.read_text().strip().splitlines()[-1]
    assert out.startswith("dpstream worker: stream s: its ledger does not match"), out
    assert "Changing a stream" in out
    assert "Traceback" not in changed.log_path.read_text()

    # The documented migration: the changed stream under a new id starts and releases.
    config.write_text(CONFIG.format(sid="s2", eps=2.0))
    migrated = worker_factory(prefix, config).start()
    migrated.wait_ready(90)
    deadline = time.monotonic() + 30
    slots: list[int] = []
    while time.monotonic() < deadline and not slots:
        got = [msgpack.unpackb(m.value()) for m in kafka.read(prefix + "releases", idle_s=0.5)]
        slots = [r["slot"] for r in got if r["stream"] == "s2"]
    assert slots, migrated.tail()
    assert migrated.stop() == 0, migrated.tail()
