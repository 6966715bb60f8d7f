"""Local mode end to end on a real broker: 10,000 simulated devices, LPA, one release per slot.

The worker issues collection requests, `dpstream simulate devices` answers them through the
device SDK, the worker tallies the reports and releases. Then we read the topics back and check
the population ledger's rule on what the devices actually sent: every report answers a request
that asked its user, and no user reported twice within its window of w slots. Finally a forged
request that asks the last cohort again in the next slot (inside the window) is refused by every
device it names.
"""

from __future__ import annotations

import time
from pathlib import Path

import msgpack
import pytest

from app.dp.local.wire import CollectionRequest, mask_users
from tests.integration.devices import check_reports, device_stats, start_devices, stop_devices

pytestmark = pytest.mark.integration

DEVICES = 10_000
W = 3
SLOT_S = 3.0
MIN_RELEASES = 5

CONFIG = f"""
streams:
  - id: usage
    mode: local
    labels: ["off", "on"]
    slot_s: {SLOT_S}
    round_s: 0.6
    release_timeout_s: 0.5
    mechanism: {{name: lpa, params: {{users: {DEVICES}, oracle: grr}}}}
    levels: [{{name: standard, w: {W}, eps: 2.0}}]
"""


def _releases(kafka, prefix: str) -> list[dict]:
    return [msgpack.unpackb(m.value()) for m in kafka.read(prefix + "releases", idle_s=0.5)]


def test_devices_and_worker_release_one_histogram_per_slot(
    kafka, worker_factory, broker, tmp_path: Path
) -> None:
    prefix = "local."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    # The exact counts asserted below are served only with the operator's opt-in.
    worker = worker_factory(prefix, config, DPSTREAM_EXPOSE_DATA_COUNTS="true").start()
    sim_log = tmp_path / "devices.log"
    sim = start_devices(broker, config, prefix, "usage", DEVICES, 7, 90, sim_log)
    try:
        worker.wait_ready(60)
        deadline = time.monotonic() + 45
        releases: list[dict] = []
        # Whether a slot is fresh is the mechanism's noisy decision: read on (within the
        # deadline) until one is, rather than judge only the first MIN_RELEASES slots.
        while time.monotonic() < deadline and (
            len(releases) < MIN_RELEASES or not any(r["fresh"] for r in releases)
        ):
            time.sleep(1.0)
            releases = _releases(kafka, prefix)
        metrics = worker.metrics()
        worker.stop()

        # One release per slot, consecutive, frequencies over d = 2, some of them fresh.
        slots = [r["slot"] for r in releases]
        assert len(slots) >= MIN_RELEASES, f"{slots}\n{worker.tail()}"
        assert slots == list(range(slots[0], slots[0] + len(slots)))
        assert all(len(r["histogram"]) == 2 for r in releases)
        assert any(r["fresh"] for r in releases), releases

        requests = [msgpack.unpackb(m.value()) for m in kafka.read(prefix + "collection-requests")]
        asked = {}
        for req in requests:
            cr = CollectionRequest.from_dict(req["request"])
            asked[cr.slot, cr.round] = mask_users(cr, DEVICES)
        assert asked

        # Forge a request that asks the last cohort again one slot later (inside its window).
        last = requests[-1]
        forged = dict(last["request"], slot=last["request"]["slot"] + 1)
        forged_cohort = int(mask_users(CollectionRequest.from_dict(forged), DEVICES).sum())
        kafka.produce(
            prefix + "collection-requests",
            [(b"usage", msgpack.packb({**last, "request": forged, "deadline": time.time() + 30}))],
        )
        time.sleep(3.0)
    finally:
        stop_devices(sim)
        worker.stop()
    out = sim_log.read_text()
    stats = device_stats(out)
    assert stats["devices"] == DEVICES
    # The forged request keeps the last request's wall-clock slot: the devices' own clocks
    # refuse it as time compressed (issue 16) before their ledgers would; honest requests pass.
    assert stats["clock_refused"] == forged_cohort > 0, out[-2000:]
    assert stats["refused"] == 0, out[-2000:]

    # Every report answers a request that asked its user; no user twice within w slots.
    reports = [msgpack.unpackb(m.value()) for m in kafka.read(prefix + "reports")]
    assert len(reports) == stats["reports"] > 0
    by_user = check_reports(reports, asked, W)

    # Metrics: reports by outcome add up to what the devices sent before the worker stopped.
    accepted = metrics.get('dpstream_reports_total{outcome="accepted",stream="usage"}', 0.0)
    assert accepted > 0
    assert metrics.get('dpstream_rounds_total{round="publication",stream="usage"}', 0) >= 1
    assert metrics.get('dpstream_users_available{stream="usage"}', -1) >= 0
    print(
        f"releases={len(releases)} requests={len(requests)} reports={len(reports)} "
        f"users={len(by_user)} accepted={accepted:.0f} "
        + " ".join(f"{k}={v:.0f}" for k, v in metrics.items() if "dpstream_reports_total" in k)
        + f" | devices: {stats}"
    )
