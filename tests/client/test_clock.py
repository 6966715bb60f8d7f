"""Issue 16, item 6 (and issue 21, item 3): the device checks a request's wall-clock slot against
its own clock, on the slot grid it was enrolled with.

A compromised aggregator sent full-budget requests for slots 7, 10 and 13 of a ``w = 3`` user
back to back, and the device answered all three: its ledger counts the service's slot numbers,
and those were three windows apart. The device now refuses a request whose slot is not the one
its own clock is in, or whose slot number ran ahead of time since the last slot it answered.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.client import ClockRefusedError, Device, Enrollment, When
from app.client.fleet import Fleet
from app.dp.local.wire import CollectionRequest
from app.wire import requests

SLOT_S = 60.0
T0 = 1_700_000_040.0  # the wall-clock start of service slot 7 (a multiple of SLOT_S)


def full_request(slot: int, device: Device) -> CollectionRequest:
    """Everybody asked for the device's whole eps at ``slot``."""
    return CollectionRequest(
        "lpu", slot, "publication", 2, 8, None, ("grr",), (1.0,), (device.ledger.budget.total,)
    )


def on_wire(start: float | None, end: float | None) -> requests.RequestRecord:
    """A ``collection-requests`` value stating the slot ``[start, end)`` (None: no time), as
    a device decodes it."""
    d = Device(Enrollment(user=0, w=2, eps=1.0, slot_s=SLOT_S, origin_s=0.0))
    sent = requests.RequestRecord("loc", 7, start, end, T0 + 10, 8, full_request(7, d))
    return requests.decode(requests.encode(sent))


def stated(slot: int, now: float, shift: float = 0.0) -> When:
    """The wall-clock slot a service states for ``slot`` (``shift`` s off the truth), received
    at the device's ``now``."""
    start = T0 + (slot - 7) * SLOT_S + shift
    return When(start, start + SLOT_S, now)


def device(**kw) -> Device:
    return Device(Enrollment(user=3, w=3, eps=1.0, slot_s=SLOT_S, origin_s=0.0), **kw)


def test_an_honest_service_is_answered_slot_after_slot():
    d = device()
    for slot in (7, 10, 13):  # three windows apart, each in its own wall-clock slot
        now = T0 + (slot - 7) * SLOT_S + 1.5
        assert d.respond(full_request(slot, d), 1, np.random.default_rng(slot), stated(slot, now))
    assert d.clock.last == (13, T0 + 6 * SLOT_S, T0 + 6 * SLOT_S + 1.5)


@pytest.mark.parametrize(
    ("how", "shift_per_slot", "match"),
    [
        ("every request states the current slot", 0.0, "slots after slot 7 but starts 0 slots"),
        ("each states its own (future) slot", SLOT_S, "in the future"),
        ("each states a slot long over", -SLOT_S, "over by"),
    ],
)
def test_slots_7_10_13_back_to_back_are_refused_after_the_first(how, shift_per_slot, match):
    d = device()
    now = T0 + 2.0  # all three arrive within one wall-clock slot
    assert d.respond(full_request(7, d), 1, np.random.default_rng(0), stated(7, now))
    for slot in (10, 13):
        when = stated(slot, now + 0.1, shift=-(slot - 7) * SLOT_S + (slot - 7) * shift_per_slot)
        with pytest.raises(ClockRefusedError, match=match):
            d.respond(full_request(slot, d), 1, np.random.default_rng(slot), when)
    spent = [d.ledger.window(s) for s in (7, 10, 13)]
    assert spent == [d.ledger.budget.total, 0, 0]  # only slot 7 was spent
    assert d.clock.last[0] == 7


def test_stated_times_that_advance_but_not_on_the_device_clock_are_refused():
    d = device()
    assert d.respond(full_request(7, d), 1, np.random.default_rng(0), stated(7, T0 + 1.0))
    # Slot 10 states its true start, but the device's clock says only one slot has passed.
    later = stated(10, now=T0 + SLOT_S + 1.0)
    with pytest.raises(ClockRefusedError, match="in the future"):
        d.respond(full_request(10, d), 1, np.random.default_rng(1), later)


def test_a_request_without_a_wall_clock_slot_is_refused_and_spends_nothing():
    d = device()
    bare = When.on_wire(on_wire(None, None), now=T0)
    assert bare.start is None
    with pytest.raises(ClockRefusedError, match="no wall-clock slot"):
        d.respond(full_request(7, d), 1, np.random.default_rng(0), bare)
    assert d.ledger.window(7) == 0 and d.clock.last is None


def test_the_wire_value_gives_the_slot_and_its_length_is_checked():
    d = device()
    wire = on_wire(T0, T0 + SLOT_S)
    assert When.on_wire(wire, now=T0 + 1) == When(T0, T0 + SLOT_S, T0 + 1)
    short = When.on_wire(on_wire(T0, T0 + 1.0), now=T0 + 0.5)
    with pytest.raises(ClockRefusedError, match="lasts 1 s, the stream's slots last 60 s"):
        d.respond(full_request(7, d), 1, np.random.default_rng(0), short)


def test_a_slot_of_another_length_is_refused_whatever_came_first():
    """Issue 21: the slot length comes from the enrollment, never from a request."""
    d = device()
    tiny = When(T0, T0 + 0.5, T0)
    with pytest.raises(ClockRefusedError, match=r"lasts 0\.5 s, the stream's slots last 60 s"):
        d.respond(full_request(7, d), 1, np.random.default_rng(0), tiny)
    assert d.respond(full_request(7, d), 1, np.random.default_rng(1), stated(7, T0 + 1))


def test_both_rounds_of_one_slot_are_answered_and_an_earlier_slot_is_refused():
    d = device()
    half = d.ledger.budget.total // 2
    ask = CollectionRequest("lbd", 8, "dissimilarity", 2, 8, None, ("grr",), (0.5,), (half,))
    when = stated(8, T0 + SLOT_S + 1)
    assert d.respond(ask, 0, np.random.default_rng(0), when)
    publication = CollectionRequest(**{**ask.__dict__, "round": "publication"})
    assert d.respond(publication, 0, np.random.default_rng(1), stated(8, T0 + SLOT_S + 20))
    with pytest.raises(ClockRefusedError, match="off the stream's slot grid"):
        d.respond(publication, 0, np.random.default_rng(2), stated(8, T0 + SLOT_S + 21, 1.0))
    with pytest.raises(ClockRefusedError, match="another start"):  # slot 9's start, near its start
        d.respond(publication, 0, np.random.default_rng(2), stated(8, T0 + 2 * SLOT_S - 1, SLOT_S))
    with pytest.raises(ClockRefusedError, match="before slot 8"):
        now_as_7 = stated(7, T0 + SLOT_S + 22, shift=SLOT_S)  # slot 7 stated at the current time
        d.respond(full_request(7, d), 0, np.random.default_rng(3), now_as_7)


def test_the_clock_memory_survives_a_restart():
    d = device()
    assert d.respond(full_request(7, d), 1, np.random.default_rng(0), stated(7, T0 + 1))
    restarted = device()
    restarted.load_state(d.state_dict())
    with pytest.raises(ClockRefusedError, match="slots after slot 7"):
        restarted.respond(full_request(10, d), 1, np.random.default_rng(1), stated(7, T0 + 2))


def test_the_tolerance_admits_a_clock_a_little_behind_and_no_more():
    early = stated(7, now=T0 - 1.5)  # the device's clock 1.5 s behind the service's
    assert device().respond(full_request(7, device()), 1, np.random.default_rng(0), early)
    with pytest.raises(ClockRefusedError, match="in the future"):
        device(tolerance_s=1.0).respond(
            full_request(7, device()), 1, np.random.default_rng(0), early
        )


def test_a_fleet_counts_clock_refusals_and_goes_on():
    fleet = Fleet([Enrollment(user=i, w=3, eps=1.0, slot_s=SLOT_S, origin_s=0.0) for i in range(6)])
    values = np.ones(6, dtype=np.int64)
    first = full_request(7, fleet.devices[0])
    answer = fleet.respond(first, values, np.random.default_rng(0), stated(7, T0 + 1))
    assert [r.user for r in answer.reports] == list(range(6)) and answer.clock_refused == []
    compressed = full_request(10, fleet.devices[0])
    again = fleet.respond(compressed, values, np.random.default_rng(1), stated(7, T0 + 2))
    assert again.reports == [] and again.clock_refused == list(range(6)) and again.refused == []
    honest = fleet.respond(compressed, values, np.random.default_rng(2), stated(10, T0 + 181))
    assert [r.user for r in honest.reports] == list(range(6))
