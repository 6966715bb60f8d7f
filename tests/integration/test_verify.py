"""``dpstream verify`` on the real broker: a worker with two levels and preferences (some users
change level while the load runs), then verify as a function and as the CLI: no violation.
A second stream over the same users makes a privacy unit: ``/budget`` states the unit's bound
and verify judges every user's spend across both streams against it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest

from app.stream.config import load_settings
from app.verify import verify
from app.verify.report import to_text
from tests.integration.conftest import REPO
from tests.integration.load import SteadyLoad, assert_verified, wait_released

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
  - id: v
    labels: [x, y]
    slot_s: {SLOT_S}
    grace_s: 0.3
    neighbours: add-remove
    mechanism: {{name: uniform}}
    levels: [{{name: only, w: 4, eps: 1.0}}]
privacy:
  interval_s: 10
  units: [{{name: people, streams: [c, v], cap_eps: 100}}]
"""
UNIT_BOUND = math.ceil(11 / 3) * (4.0 + 2.0) + math.ceil(11 / 4) * 1.0 * 2
"""10 s touch 11 slots of 1 s; `c` (PBA, a ledger per level): windows of the smallest w, 3, at
most the largest eps and the default's; `v` (one level, add-remove: counts double)."""


def test_verify_finds_no_violation_on_a_worker_with_levels(kafka, worker_factory, tmp_path: Path):
    prefix = "verify."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    kafka.produce(
        prefix + "preferences",
        [(f"u{u}".encode(), msgpack.packb({"level": "loose"})) for u in range(0, USERS, 3)],
    )
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)
    load = SteadyLoad(kafka.bootstrap, prefix + "events", ("c", "v"), USERS, 2, SLOT_S).start()
    try:
        time.sleep(6 * SLOT_S)
        kafka.produce(  # some change level while the load runs: each sits out its gap
            prefix + "preferences",
            [
                (b"u1", msgpack.packb({"level": "loose"})),
                (b"u3", None),
                (b"u6", msgpack.packb({"level": "strict"})),
            ],
        )
        time.sleep(10 * SLOT_S)
    finally:
        load.finish()
    wait_released(kafka, prefix + "releases", ["c", "v"], math.floor(load.last_ts / SLOT_S))
    status, body = worker.get("/budget")
    assert status == 200
    (unit,) = json.loads(body)["privacy_units"]
    assert (unit["unit"], sorted(unit["streams"]), unit["interval_s"]) == ("people", ["c", "v"], 10)
    assert unit["bound_eps"] == pytest.approx(UNIT_BOUND) and unit["cap_eps"] == 100
    assert worker.stop() == 0, worker.tail()

    env = {"DPSTREAM_BROKER": kafka.bootstrap, "DPSTREAM_TOPIC_PREFIX": prefix}
    verdict = verify(load_settings(env, config=config), "c", idle_s=1.0, max_s=60.0)
    print(f"\n{to_text(verdict)}")
    assert verdict.ok, to_text(verdict, show_users=True)
    assert verdict.released > 0.9 * USERS * 10
    strict, loose = verdict.levels
    assert strict.users > 0 and loose.users > 0
    assert 0 < loose.worst <= 1 + 1e-9 and 0 < strict.worst <= 1 + 1e-9  # float sums of audit
    assert verdict.not_released["level_change"] > 0  # u1, u3, u6 sat out their gaps
    assert verdict.unit is not None and verdict.unit.streams == ("c", "v")
    assert verdict.unit.users == USERS and 0 < verdict.unit.worst <= UNIT_BOUND

    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "verify",
            "--stream",
            "c",
            "--config",
            str(config),
            "--json",
            "--idle-s",
            "1",
        ],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    out = json.loads(cli.stdout)
    assert out["ok"] and out["violations"] == {} and out["values"]["released"] > 0
    assert "user_ids" not in json.dumps(out)

    bad = subprocess.run(
        [sys.executable, "-m", "app.cli", "verify", "--stream", "nope", "--config", str(config)],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert_verified(kafka, prefix, config, "c")
