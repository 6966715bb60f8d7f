"""Exposure: no exact figure about the data on ``/metrics``, in the public topics or the logs.

The worker runs with its defaults (no ``DPSTREAM_EXPOSE_DATA_COUNTS``) on data whose exact
figures are chosen to be distinctive numbers: the events of each slot, the values counted per
slot and per level, the duplicates, the users, and their running totals. The test then reads
every sample of ``/metrics`` (during and after the run), every field of every record of the
public topics (``releases``, ``audit``) except the mechanism's output itself (``histogram``),
and the worker's log, and fails on any of those numbers. The same data with the operator's
opt-in does show them on ``/metrics``, so the scan is able to see a leak when there is one.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

pytestmark = pytest.mark.integration

SLOT_S = 2.0
D = 4
COUNTED = (1013, 1129, 1237, 1361)  # values counted per slot: one per user
DUPLICATES = (211, 307, 401, 503)  # second values of some users in the same slot
CONFIG = f"""
streams:
  - id: x
    labels: [a, b, c, d]
    slot_s: {SLOT_S}
    grace_s: 0.3
    mechanism: {{name: pba}}
    levels:
      - {{name: strict, w: 4, eps: 1.0}}
      - {{name: loose, w: 2, eps: 2.0}}
"""


def slot_items(k: int, slot: int) -> tuple[list[tuple[bytes, bytes]], list[int]]:
    """Test slot ``k``: ``COUNTED[k]`` users with one value each, ``DUPLICATES[k]`` of them
    with a second one; and the exact per-cell counts."""
    ts = slot * SLOT_S + 0.5
    items, cells = [], [0] * D
    for u in range(COUNTED[k]):
        user = f"user-{u}"
        value = (u * 7 + k) % D
        cells[value] += 1
        items.append(
            (user.encode(), msgpack.packb({"stream": "x", "user": user, "ts": ts, "value": value}))
        )
    for u in range(DUPLICATES[k]):
        user = f"user-{u}"
        items.append(
            (
                user.encode(),
                msgpack.packb({"stream": "x", "user": user, "ts": ts + 0.1, "value": 0}),
            )
        )
    return items, cells


def secrets(cells_by_slot: list[list[int]]) -> set[int]:
    """Every exact figure of the data this test sends (each > 100, so none is a slot count,
    a window length or a small metric value by chance)."""
    out = set(COUNTED) | set(DUPLICATES)
    out |= {sum(COUNTED[: k + 1]) for k in range(len(COUNTED))}
    out |= {sum(DUPLICATES[: k + 1]) for k in range(len(DUPLICATES))}
    out |= {c + d for c, d in zip(COUNTED, DUPLICATES, strict=True)}
    out |= {sum(COUNTED[: k + 1]) + sum(DUPLICATES[: k + 1]) for k in range(len(COUNTED))}
    out |= {max(COUNTED)}  # distinct users
    out |= {c for cells in cells_by_slot for c in cells}
    return {x for x in out if x > 100}


def numbers(value: Any, skip: frozenset[str] = frozenset({"histogram"})) -> Iterator[float]:
    """Every number in a decoded record, except under the keys in ``skip``."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in skip:
                yield from numbers(v, skip)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from numbers(v, skip)
    elif isinstance(value, bytes):
        try:
            yield from numbers(msgpack.unpackb(value), skip)
        except Exception:  # noqa: BLE001 - opaque bytes hold no number we could read
            return
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield float(value)


def leaked(samples: dict[str, float], exact: set[int]) -> dict[str, float]:
    return {k: v for k, v in samples.items() if v in exact}


def test_no_exact_figure_leaves_the_service(kafka, worker_factory, tmp_path: Path) -> None:
    prefix = "exposure."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)

    first = math.floor(time.time() / SLOT_S) + 1
    cells_by_slot, scraped = [], []
    for k in range(len(COUNTED)):
        slot = first + k
        time.sleep(max(0.0, slot * SLOT_S + 0.1 - time.time()))
        items, cells = slot_items(k, slot)
        cells_by_slot.append(cells)
        kafka.produce(prefix + "events", items)
        scraped.append(worker.metrics())
    last = first + len(COUNTED) - 1
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = [msgpack.unpackb(m.value()) for m in kafka.read(prefix + "releases", idle_s=1.0)]
        if got and got[-1]["slot"] >= last:
            break
        time.sleep(1)
    scraped.append(worker.metrics())
    assert worker.stop() == 0, worker.tail()
    exact = secrets(cells_by_slot)

    for samples in scraped:
        assert leaked(samples, exact) == {}, "/metrics shows an exact figure of the data"
    for topic in ("releases", "audit"):
        records = [msgpack.unpackb(m.value()) for m in kafka.read(prefix + topic, idle_s=1.0)]
        assert any(r["slot"] == last for r in records), topic
        found = {x for r in records for x in numbers(r)} & exact
        assert found == set(), f"{topic} carries exact figures {found}"
    # Log times ("2026-11-23 12:06:13,310", also inside librdkafka and Faust lines), pids
    # ("[31264]") and object addresses ("0x7fcc78a7f310") aside: clock and process, not data.
    log = worker.log_path.read_text(errors="replace")
    log = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d+|\[\d+\]|0x[0-9a-fA-F]+", "", log)
    in_log = {int(x) for x in re.findall(r"(?<![\w.])\d{3,5}(?![\w.])", log)} & exact
    assert in_log == set(), f"the log carries exact figures {in_log}"

    # The scan sees a leak when there is one: the operator's opt-in serves the exact counts.
    opted = worker_factory(prefix, config, DPSTREAM_EXPOSE_DATA_COUNTS="true").start()
    opted.wait_ready(90)
    slot = math.floor(time.time() / SLOT_S) + 1
    time.sleep(max(0.0, slot * SLOT_S + 0.1 - time.time()))
    items, cells = slot_items(0, slot)
    kafka.produce(prefix + "events", items)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not leaked(opted.metrics(), {COUNTED[0]}):
        time.sleep(0.5)
    assert leaked(opted.metrics(), {COUNTED[0]}), "with the opt-in, accepted counts are served"
    assert opted.stop() == 0, opted.tail()
