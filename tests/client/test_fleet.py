"""The device SDK refuses a second request within its window, alone or in a fleet."""

from __future__ import annotations

import numpy as np
import pytest

from app.client import Device, Enrollment, ReportRefusedError, When
from app.client.fleet import Fleet
from app.dp.local import LPU
from app.dp.local.wire import CollectionRequest

OFFLINE_GRID = {"slot_s": 1.0, "origin_s": 0.0}  # the slot grid of When.offline


def forged_next_slot(request: CollectionRequest, slots: int = 1) -> CollectionRequest:
    """The same cohort asked again ``slots`` later (what a buggy or malicious service does)."""
    return CollectionRequest.from_dict(dict(request.to_dict(), slot=request.slot + slots))


def test_a_device_asked_twice_within_its_window_refuses():
    service = LPU(d=3, eps=1.0, w=3, users=10)
    request = service.open_slot(np.random.default_rng(0))
    user = next(u for u in range(10) if request.asks(u))
    device = Device(Enrollment(user=user, w=3, eps=1.0, **OFFLINE_GRID))
    assert (
        device.respond(request, 1, np.random.default_rng(1), When.offline(request.slot)) is not None
    )
    for later in (1, 2):
        with pytest.raises(ReportRefusedError, match="window of 3 slots"):
            forged = forged_next_slot(request, later)
            device.respond(forged, 1, np.random.default_rng(2), When.offline(forged.slot))
    # Once the window has passed, the same cohort may be asked again.
    forged = forged_next_slot(request, 3)
    assert device.respond(forged, 1, np.random.default_rng(3), When.offline(forged.slot))


def test_a_fleet_refuses_per_device_and_sends_nothing_for_refusals():
    service = LPU(d=2, eps=1.0, w=2, users=1000)
    request = service.open_slot(np.random.default_rng(0))
    fleet = Fleet([Enrollment(user=i, w=2, eps=1.0, **OFFLINE_GRID) for i in range(1000)])
    values = np.ones(1000, dtype=np.int64)
    first = fleet.respond(request, values, np.random.default_rng(1), When.offline(request.slot))
    asked = [u for u in range(1000) if request.asks(u)]
    assert [r.user for r in first.reports] == asked and first.refused == []
    forged = forged_next_slot(request)
    again = fleet.respond(forged, values, np.random.default_rng(2), When.offline(forged.slot))
    assert again.reports == [] and again.refused == asked
