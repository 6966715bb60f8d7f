"""Issue 21, item 3: a device cannot be drained through its defaults.

A device enrolled with the SDK's default :class:`Enrollment` (no slot length) took its slot length
from the first request it answered. An aggregator that stated slots of 0.01 s, three slot numbers
apart, had 100 full-budget requests of a ``w = 3, eps = 1`` user answered in 3 s. Now the slot
grid (``slot_s``, ``origin_s``) is required at enrollment, and the device's own clock decides
which grid slot a request may ask for: the same bursts answer at most one window's budget.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.client import Device, Enrollment, ReportRefusedError, When
from app.dp.errors import ParameterError
from app.dp.local.wire import CollectionRequest

SLOT_S = 60.0
T0 = 1_700_000_040.0  # a slot start of the 60 s grid from the epoch (origin 0)
REQUESTS = 100
BURST_S = 3.0


def full_request(slot: int, device: Device) -> CollectionRequest:
    """Everybody asked for the device's whole eps at ``slot``."""
    return CollectionRequest(
        "lpu", slot, "publication", 2, 8, None, ("grr",), (1.0,), (device.ledger.budget.total,)
    )


def burst(device: Device, stated_s: float, grid_step_s: float) -> int:
    """``REQUESTS`` full-budget requests for slots 1, 4, 7, ... (one window of ``w = 3`` apart),
    received within ``BURST_S`` s of the device's clock; request ``i`` states a slot of
    ``stated_s`` seconds starting ``i * grid_step_s`` after ``T0``. Returns how many were
    answered; checks that the device's ledger stays within one eps per window."""
    answered = 0
    for i in range(REQUESTS):
        slot = 1 + 3 * i
        start = T0 + i * grid_step_s
        when = When(start, start + stated_s, T0 + i * BURST_S / REQUESTS)
        try:
            report = device.respond(full_request(slot, device), 1, np.random.default_rng(i), when)
        except ReportRefusedError:
            continue
        answered += report is not None
    total = device.ledger.budget.total
    assert all(device.ledger.window(1 + 3 * i) <= total for i in range(REQUESTS))
    return answered


def test_issue_21_the_default_device_burst_answers_at_most_one_window():
    """The reproduction: 100 requests of 0.01 s slots, three slot numbers apart, in 3 s."""
    try:
        device = Device(Enrollment(user=3, w=3, eps=1.0))  # the SDK's defaults
    except TypeError as exc:  # issue 21: there is no default slot grid any more
        assert "slot_s" in str(exc) and "origin_s" in str(exc)
        device = Device(Enrollment(user=3, w=3, eps=1.0, slot_s=SLOT_S, origin_s=0.0))
    assert burst(device, stated_s=0.01, grid_step_s=0.03) <= 1


@pytest.mark.parametrize(
    ("how", "grid_step_s"),
    [
        ("each request states its own 60 s slot, three slots on", 3 * SLOT_S),
        ("each request states the current 60 s slot", 0.0),
        ("each request states the next 60 s slot", SLOT_S),
    ],
)
def test_issue_21_a_burst_on_the_enrolled_grid_answers_one_window(how, grid_step_s):
    device = Device(Enrollment(user=3, w=3, eps=1.0, slot_s=SLOT_S, origin_s=0.0))
    assert burst(device, stated_s=SLOT_S, grid_step_s=grid_step_s) == 1
    assert device.clock.last is not None and device.clock.last[0] == 1


def test_issue_21_the_enrollment_requires_the_slot_grid_by_keyword():
    with pytest.raises(TypeError, match="positional"):
        Enrollment(3, 3, 1.0, 0, 60.0, 0.0)  # type: ignore[misc]
    with pytest.raises(TypeError, match="origin_s"):
        Enrollment(user=3, w=3, eps=1.0, slot_s=SLOT_S)  # type: ignore[call-arg]
    for slot_s, origin_s, name in ((0.0, 0.0, "slot_s"), (SLOT_S, float("nan"), "origin_s")):
        with pytest.raises(ParameterError, match=name):
            Enrollment(user=3, w=3, eps=1.0, slot_s=slot_s, origin_s=origin_s)


def test_issue_21_a_stated_slot_off_the_grid_is_refused():
    device = Device(Enrollment(user=3, w=3, eps=1.0, slot_s=SLOT_S, origin_s=0.0))
    shifted = When(T0 + 30.0, T0 + 30.0 + SLOT_S, T0 + 31.0)  # right length, half a slot off
    with pytest.raises(ReportRefusedError, match="off the stream's slot grid"):
        device.respond(full_request(1, device), 1, np.random.default_rng(0), shifted)
    assert device.ledger.window(1) == 0 and device.clock.last is None


def test_issue_21_a_skew_of_half_a_slot_or_more_is_refused():
    enrollment = Enrollment(user=3, w=3, eps=1.0, slot_s=2.0, origin_s=0.0)
    assert Device(enrollment).clock.tolerance_s == 0.5  # the 2 s default, capped at a quarter slot
    with pytest.raises(ParameterError, match="tolerance_s"):
        Device(enrollment, tolerance_s=1.0)


def test_issue_21_a_device_state_from_before_the_grid_is_refused():
    device = Device(Enrollment(user=3, w=3, eps=1.0, slot_s=SLOT_S, origin_s=0.0))
    state = device.state_dict()
    state["clock"] = {"slot_s": 0.01, "last": [1, T0, T0]}  # a grid learnt from a request
    with pytest.raises(ParameterError, match="enrolled with slot_s=60.0 origin_s=0.0"):
        Device(Enrollment(user=3, w=3, eps=1.0, slot_s=SLOT_S, origin_s=0.0)).load_state(state)
