"""PLDP-IDS mechanisms: parameter rules, reductions, and the device SDK against them."""

from __future__ import annotations

import numpy as np
import pytest

from app.client.clock import When
from app.client.device import Device, Enrollment
from app.client.errors import ReportRefusedError
from app.client.fleet import Fleet
from app.dp import registry
from app.dp.errors import ParameterError
from app.dp.local.checks import drive
from app.dp.local.wire import Tally
from app.dp.types import Group
from tests.dp.pldp.counterexample import paper_split_plpd_plus

OFFLINE_GRID = {"slot_s": 1.0, "origin_s": 0.0}  # the slot grid of When.offline

LEVELS = [Group(4, 1.0), Group(9, 0.5), Group(2, 2.0)]
USERS = [50, 30, 40]


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"groups": LEVELS, "users": [50, 30]}, "users must give one count per group"),
        ({"groups": LEVELS, "users": [5, 3, 4]}, "users must total at least 2 max"),
        ({"groups": [], "users": []}, "groups must be a non-empty"),
        ({"groups": LEVELS, "users": USERS, "buckets": 3}, "buckets must be at least 2W"),
        ({"groups": LEVELS, "users": USERS, "buckets": 121}, "buckets must be at most"),
        ({"groups": LEVELS, "users": USERS, "split_rule": "ceil"}, "split_rule"),
        ({"groups": LEVELS, "users": USERS, "dis_on_raw": 1}, "dis_on_raw"),
        ({"groups": LEVELS, "users": USERS, "eps": 1.0, "w": 3}, "either groups or"),
        ({"eps": -1.0, "w": 3, "users": 40}, "eps must be"),
        ({"eps": 1.0, "w": 0, "users": 40}, "w must be"),
    ],
)
def test_parameter_rules(params, match):
    with pytest.raises(ParameterError, match=match):
        registry.create("plpd+", d=3, **params)


def test_min_users_rule_is_distribution_only():
    with pytest.raises(ParameterError, match="min_users"):
        registry.create("plpd", d=3, groups=LEVELS, users=USERS, min_users=0)
    with pytest.raises(TypeError):
        registry.create("plpa", d=3, groups=LEVELS, users=USERS, min_users=5)


@pytest.mark.parametrize(("plus", "basic"), [("plpd+", "plpd"), ("plpa+", "plpa")])
def test_one_level_plus_reduces_to_basic(plus, basic):
    # spec §3.8: with (w_i, eps_i) = (w, eps), OPS has one candidate and PUE is a no-op
    a = registry.create(plus, d=4, eps=1.0, w=5, users=90)
    b = registry.create(basic, d=4, eps=1.0, w=5, users=90)
    assert (a.window, a.unit, a.shares) == (b.window, b.unit, b.shares) == (5, 9, (1,))
    ra, _ = drive(a, 200, 5)
    rb, _ = drive(b, 200, 5)
    assert [(r.status, r.users_pub) for r in ra] == [(r.status, r.users_pub) for r in rb]
    assert all(np.array_equal(x.histogram, y.histogram) for x, y in zip(ra, rb, strict=True))


def test_for_stream_takes_the_levels():
    m = registry.get("plpa+").for_stream(3, LEVELS, users=USERS)
    assert m.groups == tuple(LEVELS) and m.group_users == USERS
    assert "W=" in m.describe() and "z=" in m.describe()


def enrollments(m):
    out, user = [], 0
    for k, (g, n) in enumerate(zip(m.groups, m.group_users, strict=True)):
        out += [
            Enrollment(user=user + i, w=g.w, eps=g.eps, group=k, **OFFLINE_GRID) for i in range(n)
        ]
        user += n
    return out


@pytest.mark.parametrize("name", ["plpd", "plpa+", "plbd-ops"])
def test_devices_never_refuse_an_honest_service(name):
    m = registry.create(name, d=3, groups=LEVELS, users=USERS)
    fleet = Fleet(enrollments(m))
    rng = np.random.default_rng(9)
    level_of = np.repeat(np.arange(len(LEVELS)), USERS)
    sent = 0
    for t in range(1, 301):
        values = rng.integers(0, 3, m.users) if t % 5 else np.zeros(m.users, dtype=np.int64)
        request = m.open_slot(rng)
        while request is not None:
            answer = fleet.respond(request, values, rng, When.offline(request.slot))
            assert answer.refused == []
            support = np.zeros((len(LEVELS), 3), dtype=np.int64)
            n = np.zeros(len(LEVELS), dtype=np.int64)
            for report in answer.reports:
                support[report.group, report.payload[0]] += 1
                n[report.group] += 1
            assert n.tolist() == m.population.users_in_levels(request.cohort_buckets()).tolist()
            assert np.array_equal(
                n, np.bincount(level_of[[r.user for r in answer.reports]], minlength=len(LEVELS))
            )
            sent += len(answer.reports)
            request = m.on_tally(Tally(request.slot, request.round, support, n), rng)
        m.close_slot()
    assert sent > 0


def test_device_refuses_the_paper_split_third_report():
    # spec §3.1 counterexample: eps/2 per report, reports at slots 1, 63, 125 of a w=125 user
    m = paper_split_plpd_plus()
    request = m.open_slot(np.random.default_rng(0))
    user = next(u for u in range(10_000, 10_269) if request.asks(u))
    device = Device(Enrollment(user=user, w=125, eps=1.0, group=1, **OFFLINE_GRID))
    for slot in (1, 63):
        asked = request.__class__(**{**request.__dict__, "slot": slot})
        device.respond(asked, 0, np.random.default_rng(slot), When.offline(slot))
    third = request.__class__(**{**request.__dict__, "slot": 125})
    with pytest.raises(ReportRefusedError, match="window of 125 slots"):
        device.respond(third, 0, np.random.default_rng(2), When.offline(125))
