"""The device SDK: membership, its own ledger, and reports the service can aggregate."""

from __future__ import annotations

import numpy as np
import pytest

from app.client import Device, Enrollment, ReportRefusedError, When
from app.dp import registry
from app.dp.errors import ParameterError
from app.dp.local.wire import CollectionRequest, Tally
from app.dp.oracles import make

OFFLINE_GRID = {"slot_s": 1.0, "origin_s": 0.0}  # the slot grid of When.offline


def _devices(n, w, eps):
    return [Device(Enrollment(user=i, w=w, eps=eps, **OFFLINE_GRID)) for i in range(n)]


@pytest.mark.parametrize("oracle", ["grr", "oue", "olh"])
def test_reports_aggregate_into_the_service_tally(oracle):
    m = registry.create("lpu", d=4, eps=1.0, w=3, users=30, oracle=oracle)
    rng = np.random.default_rng(0)
    request = m.open_slot(rng)
    reports = [
        r
        for d in _devices(30, 3, 1.0)
        if (r := d.respond(request, 2, rng, When.offline(request.slot))) is not None
    ]
    assert [r.user for r in reports] == list(range(0, 30, 3))
    o = make(oracle, 4, request.eps[0])
    support = o.support(o.from_payloads([r.payload for r in reports]))
    assert m.on_tally(Tally(1, "publication", [support], [len(reports)]), rng) is None
    assert m.close_slot().users_pub == len(reports)


def test_device_refuses_a_second_report_within_its_window_even_if_asked():
    device = Device(Enrollment(user=5, w=4, eps=1.0, **OFFLINE_GRID))
    full = device.ledger.budget.total
    ask = CollectionRequest("lpu", 10, "publication", 2, 8, None, ("grr",), (1.0,), (full,))
    assert device.respond(ask, 1, np.random.default_rng(0), When.offline(ask.slot)) is not None
    for slot in (11, 12, 13):  # a dishonest service asks again inside the window
        again = CollectionRequest("lpu", slot, "publication", 2, 8, None, ("grr",), (1.0,), (full,))
        with pytest.raises(ReportRefusedError, match="already spent 1"):
            device.respond(again, 1, np.random.default_rng(0), When.offline(again.slot))
    later = CollectionRequest("lpu", 14, "publication", 2, 8, None, ("grr",), (1.0,), (full,))
    assert device.respond(later, 1, np.random.default_rng(0), When.offline(later.slot)) is not None


def test_budget_division_spends_exactly_eps_per_window():
    m = registry.create("lbd", d=2, eps=1.0, w=3, users=4)
    devices = _devices(4, 3, 1.0)
    rng = np.random.default_rng(1)
    for t in range(30):
        request = m.open_slot(rng)
        while request is not None:
            when = When.offline(request.slot)
            reports = [d.respond(request, t % 2, rng, when) for d in devices]  # never refused
            support = np.bincount([r.payload[0] for r in reports], minlength=2)
            request = m.on_tally(Tally(request.slot, request.round, [support], [4]), rng)
        m.close_slot()
    for d in devices:
        assert d.ledger.window(30) <= d.ledger.budget.total


def test_device_refuses_a_budget_that_does_not_match_its_own():
    device = Device(Enrollment(user=0, w=4, eps=1.0, **OFFLINE_GRID))
    units = device.ledger.budget.total // 4  # eps/4 of the device's eps ...
    lying = CollectionRequest("lbu", 1, "publication", 2, 1, None, ("grr",), (0.5,), (units,))
    with pytest.raises(ReportRefusedError, match="does not match"):
        # ... but the request says 0.5
        device.respond(lying, 0, np.random.default_rng(0), When.offline(lying.slot))


def test_not_asked_sends_nothing_and_spends_nothing():
    m = registry.create("lpu", d=2, eps=1.0, w=2, users=4)
    request = m.open_slot(np.random.default_rng(0))
    device = Device(Enrollment(user=1, w=2, eps=1.0, **OFFLINE_GRID))
    assert device.respond(request, 0, np.random.default_rng(0), When.offline(request.slot)) is None
    assert device.ledger.window(1) == 0


def test_ledger_state_round_trip_and_bad_values():
    device = Device(Enrollment(user=2, w=3, eps=1.0, **OFFLINE_GRID))
    ask = CollectionRequest(
        "lsp", 1, "publication", 3, 1, None, ("oue",), (1.0,), (device.ledger.budget.total,)
    )
    with pytest.raises(ParameterError, match="value"):
        device.respond(ask, 3, np.random.default_rng(0), When.offline(ask.slot))
    device.respond(ask, 2, np.random.default_rng(0), When.offline(ask.slot))
    other = Device(Enrollment(user=2, w=3, eps=1.0, **OFFLINE_GRID))
    other.load_state(device.state_dict())
    with pytest.raises(ReportRefusedError):
        third = CollectionRequest(**{**ask.__dict__, "slot": 3})
        other.respond(third, 0, np.random.default_rng(0), When.offline(3))
    with pytest.raises(ParameterError, match="user"):
        Device(Enrollment(user=9, w=3, eps=1.0, **OFFLINE_GRID)).load_state(device.state_dict())


def test_a_device_that_changes_level_sits_out_then_uses_its_new_level_only():
    """Kept by the device itself, whatever the service asks (PLDP-IDS levels, docs/design.md)."""
    device = Device(Enrollment(user=2, w=4, eps=1.0, group=0, **OFFLINE_GRID))
    units = [device.ledger.budget.total, 0]
    device.change_level(1, 2, 2.0, slot=5)  # from slot 5 on: nothing until 5 + max(4, 2) = 9
    from app.dp.budget import GroupBudget
    from app.dp.types import Group

    units[1] = GroupBudget(Group(2, 2.0)).total

    def ask(slot, levels):
        return CollectionRequest(
            "plpa",
            slot,
            "publication",
            2,
            8,
            None,
            ("grr", "grr"),
            (1.0, 2.0),
            tuple(units),
            bytes(levels),
        )

    rng = np.random.default_rng(0)
    for slot in range(5, 9):  # asked at the new level inside the gap: refused
        with pytest.raises(ReportRefusedError, match="sits out until slot 9"):
            device.respond(ask(slot, [0, 0, 1]), 1, rng, When.offline(slot))
    with pytest.raises(ReportRefusedError, match="holds it at level 0, its own level is 1"):
        device.respond(ask(9, [1, 1, 0]), 1, rng, When.offline(9))
    report = device.respond(ask(9, [0, 0, 1]), 1, rng, When.offline(9))
    assert report is not None and report.group == 1
    assert device.respond(ask(10, [0, 0, 255]), 1, rng, When.offline(10)) is None  # sits out
    with pytest.raises(ReportRefusedError, match="window of 2 slots already spent 2"):
        device.respond(ask(10, [0, 0, 1]), 1, rng, When.offline(10))
    restored = Device(Enrollment(user=2, w=4, eps=1.0, group=0, **OFFLINE_GRID))
    restored.load_state(device.state_dict())
    assert (restored.group, restored.level, restored.quiet_until) == (1, Group(2, 2.0), 9)
