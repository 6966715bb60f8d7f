"""The PWSM paper's worked examples, exact, as corrected in docs/specs/seed-000-pwsm.md §8."""

from __future__ import annotations

import math
from fractions import Fraction as F

import numpy as np
import pytest

from app.dp.personalized import obs, obs_errors, sampling_probabilities
from app.dp.registry import create
from app.dp.types import Group


def scripted(name, groups, decisions, d=2, thresholds=None):
    """A mechanism whose publish/skip decisions follow ``decisions`` (True = publish); the
    thresholds it would have used are appended to ``thresholds``."""
    m = create(name, d=d, groups=groups)

    def decide(dis, threshold):
        if thresholds is not None:
            thresholds.append(threshold)
        return decisions[m.t]

    m._publishes = decide
    return m


def run(m, slots, seed=0):
    rng = np.random.default_rng(seed)
    counts = np.full((len(m.groups), m.d), 7)
    users = [7 * m.d] * len(m.groups)  # every user holds a value: the public population
    return [m.step(counts, rng, users) for _ in range(slots)]


def test_obs_example_2():
    """T1/A4: OBS returns 0.4 with error 15.3084; the candidate 0.8 costs 27.733, not 89.74."""
    theta, err = obs([F(1, 10)] * 2 + [F(2, 5)] * 5 + [F(4, 5)] * 3, [1] * 10)
    assert theta == F(2, 5)
    assert err == pytest.approx(15.308424246782675, abs=1e-9)
    errors = obs_errors([F(1, 10), F(2, 5), F(4, 5)], [2, 5, 3])
    assert errors == pytest.approx([200.0, 15.308424246782675, 27.733024428005873], abs=1e-9)


@pytest.mark.parametrize(
    ("budget", "theta", "expected"),
    [
        (F(1, 10), F(2, 5), 0.21383822036598443),
        (F(1, 10), F(4, 5), 0.08581591657246233),
        (F(2, 5), F(4, 5), 0.401312339887548),
        (F(1, 8), F(1, 4), 0.4687906266262437),
    ],
)
def test_sampling_probability_and_amplification(budget, theta, expected):
    """T2 and T3: the inclusion probability, and ln(1 + p(e^theta - 1)) == budget."""
    (p,) = sampling_probabilities([budget], theta)
    assert p == pytest.approx(expected, abs=1e-12)
    assert math.log1p(p * math.expm1(float(theta))) == pytest.approx(float(budget), rel=1e-12)


@pytest.mark.parametrize(
    ("budgets", "counts", "theta", "err"),
    [
        ([F(1, 8), F(1, 4)], [2, 98], F(1, 4), 33.62678554346779),  # T4, Example 1
        ([F(1, 10)], [2], F(1, 10), 200.0),
        ([F(1, 2), F(1)], [5, 5], F(1, 2), 8.0),
        ([F(1, 400), F(1, 240)], [1130, 8870], F(1, 400), 320000.0),  # T5, the OBS switch
        ([F(1, 400), F(1, 240)], [1129, 8871], F(1, 240), 319923.87841818493),
    ],
)
def test_obs_test_vectors(budgets, counts, theta, err):
    assert obs(budgets, counts) == (theta, pytest.approx(err, rel=1e-12))


def test_obs_ten_types():
    """T6: the 10-type example of the spec (1000 users each)."""
    types = [
        (0.6, 120),
        (0.8, 40),
        (1.0, 80),
        (0.6, 40),
        (0.8, 120),
        (1.0, 40),
        (0.6, 80),
        (0.8, 80),
        (1.0, 120),
        (0.6, 40),
    ]
    e = [F(str(eps)) for eps, _ in types]
    dc = [x / (2 * w) for x, (_, w) in zip(e, types, strict=True)]
    assert obs(dc, [1000] * 10)[0] == F(1, 300)
    assert obs([x / 4 for x in e], [1000] * 10) == (F(3, 20), pytest.approx(800 / 9))
    assert obs([x / 2 for x in e], [1000] * 10) == (F(3, 10), pytest.approx(200 / 9))


def test_lemma_4_1_bound_example_2():
    """T14: OBS error <= min(2/min^2, (n - n_M)(n - n_M + 1/4) + 2/max^2) = 53.875."""
    _, err = obs([F(1, 10), F(2, 5), F(4, 5)], [2, 5, 3])
    bound = min(2 / 0.1**2, (10 - 3) * (10 - 3 + 0.25) + 2 / 0.8**2)
    assert bound == pytest.approx(53.875)
    assert err <= bound


def test_pbd_example_3():
    """T7: w = (4, 2, 3), eps = 1, decisions P, S, P, P, P."""
    m = scripted("pbd", [Group(4, 1.0), Group(2, 1.0), Group(3, 1.0)], [1, 0, 1, 1, 1])
    rels = run(m, 5)
    expected = [
        [F(1, 4), F(1, 4), F(1, 4)],
        [0, 0, 0],
        [F(1, 8), F(1, 4), F(1, 8)],
        [F(1, 16), F(1, 8), F(3, 16)],
        [F(5, 32), F(3, 16), F(3, 32)],
    ]
    assert [list(r.spent_pub) for r in rels] == [[float(x) for x in row] for row in expected]
    assert all(list(r.spent_dc) == [1 / 8, 1 / 4, 1 / 6] for r in rels)
    assert rels[0].spent[0] == 3 / 8


def test_pbd_paper_queue_convention():
    """T8/A9: the window sum covers the previous w - 1 slots (paper), not w (authors' code)."""
    rels = run(scripted("pbd", [Group(4, 1.0)], [1, 0, 1, 1, 1, 1]), 6)
    assert [r.spent_pub[0] for r in rels] == [1 / 4, 0, 1 / 8, 1 / 16, 5 / 32, 5 / 64]


def test_pba_example_4():
    """T9: w = (4, 2, 3), eps = 1, decisions P, S, P, -, P."""
    m = scripted("pba", [Group(4, 1.0), Group(2, 1.0), Group(3, 1.0)], [1, 0, 1, 0, 1])
    offers, rels = [], []
    for _ in range(5):
        offers.append(list(m.next_offer()))
        rels += run(m, 1)
    assert [r.status for r in rels] == ["publish", "skip", "publish", "nullified", "publish"]
    assert offers[1] == [1 / 8, 1 / 4, 1 / 6]
    assert list(rels[0].spent_pub) == [1 / 8, 1 / 4, 1 / 6]
    assert list(rels[2].spent_pub) == [1 / 4, 1 / 2, 1 / 3]
    assert list(rels[4].spent_pub) == [1 / 8, 1 / 4, 1 / 6]


def test_pba_figure_8_lower_bounds():
    """T10: w = (4, 2, 8, 6), skips at t = 1..5, a publication at t = 6."""
    groups = [Group(4, 1.0), Group(2, 1.0), Group(8, 1.0), Group(6, 1.0)]
    m = scripted("pba", groups, [0] * 5 + [1] + [0] * 5 + [1] + [0] * 10)
    offers, statuses = [], []
    for _ in range(14):
        offers.append([F(x).limit_denominator(1000) for x in m.next_offer()])
        statuses += [r.status for r in run(m, 1)]
    assert [o[0] for o in offers[:6]] == [F(1, 8), F(1, 4), F(3, 8), F(1, 2), F(1, 2), F(1, 2)]
    assert [o[1] for o in offers[:6]] == [F(1, 4)] + [F(1, 2)] * 5
    assert [o[2] for o in offers[:6]] == [F(k, 16) for k in range(1, 7)]
    assert [o[3] for o in offers[:6]] == [F(k, 12) for k in range(1, 7)]
    assert statuses[:6] == ["skip"] * 5 + ["publish"]
    assert statuses[6:11] == ["nullified"] * 5  # N-bar = max(3, 1, 5, 5)
    assert offers[11] == [F(3, 8), F(1, 2), F(1, 16), F(1, 12)]  # shares 3, 2, 1, 1
    assert statuses[11:14] == ["publish", "nullified", "nullified"]


def test_bd_always_publishing():
    """T11: BD at w = 4, eps = 1 always publishing spends 1/4, 1/8, 1/16, 1/32, 9/64..."""
    rels = run(scripted("bd", [Group(4, 1.0)], [1] * 8), 8)
    assert [r.spent_pub[0] for r in rels] == [
        1 / 4,
        1 / 8,
        1 / 16,
        1 / 32,
        9 / 64,
        17 / 128,
        25 / 256,
        33 / 512,
    ]


def test_ba_trace():
    """T11: BA with decisions P, S, P, -, P, S, S, S, S, S, P, -."""
    decisions = [1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0]
    rels = run(scripted("ba", [Group(4, 1.0)], decisions), 12)
    assert [r.spent_pub[0] for r in rels] == [1 / 8, 0, 1 / 4, 0, 1 / 8, 0, 0, 0, 0, 0, 1 / 2, 0]
    assert rels[3].status == rels[11].status == "nullified"


@pytest.mark.parametrize(("personal", "static"), [("pbd", "bd"), ("pba", "ba")])
def test_one_group_reduces_to_kellaris(personal, static):
    """T13: with one group, PBD/BD (PBA/BA) spend identically under the same decisions, and
    their only difference is the threshold: sqrt(err) = sqrt(2)/b against 1/b."""
    rng = np.random.default_rng(11)
    decisions = list(rng.random(300) < 0.4)
    ta, tb = [], []
    a = scripted(personal, [Group(10, 0.8)], decisions, thresholds=ta)
    b = scripted(static, [Group(10, 0.8)], decisions, thresholds=tb)
    ra, rb = run(a, 300), run(b, 300)
    assert [r.spent.tolist() for r in ra] == [r.spent.tolist() for r in rb]
    assert [r.status for r in ra] == [r.status for r in rb]
    first = 0.2 if personal == "pbd" else 0.04  # t = 1: eps/4 (BD) or one share eps/(2w) (BA)
    assert ta[0] == pytest.approx(math.sqrt(2) / first, rel=1e-12)
    assert tb[0] == pytest.approx(1 / first, rel=1e-12)
    assert np.allclose(np.array(ta) / np.array(tb), math.sqrt(2), rtol=1e-12)
