"""Issue 16, item 3: OBS takes the public population per group, never the slot's counts.

With the slot's row sums as population, the threshold OBS picks, and with it the noise scale of
the release, moved with the data: 16 against 17 low-budget users changed PBD's publication
scale, and an audit measured a privacy loss of 6.74 at a claimed 0.6.
"""

from __future__ import annotations

import numpy as np
import pytest

import app.dp.personalized as personalized
from app.dp.errors import ParameterError
from app.dp.registry import create, get, names
from app.dp.types import Group

PWSM = ["ba", "bd", "pba", "pbd"]  # the mechanisms that run OBS (Alg. 2 l.3-4)
GROUPS = [Group(10, 0.6), Group(10, 1.0)]
LOW_16 = np.array([[16, 0], [3, 0]])  # 16 low-budget users, 3 high-budget users
LOW_17 = np.array([[17, 0], [3, 0]])  # one more low-budget user: a neighbouring slot


def test_the_registry_marks_exactly_the_pwsm_family_as_running_obs():
    assert sorted(n for n in names("central") if getattr(get(n), "uses_obs", False)) == PWSM


@pytest.mark.parametrize("name", PWSM)
def test_step_without_population_raises(name):
    m = create(name, d=2, groups=GROUPS)
    with pytest.raises(ParameterError, match="population is required"):
        m.step(LOW_16, np.random.default_rng(0))
    fresh = create(name, d=2, groups=GROUPS)
    assert m.t == 0 and m.ledger.state_dict() == fresh.ledger.state_dict()


@pytest.mark.parametrize("name", ["uniform", "sample"])
def test_mechanisms_without_obs_need_no_population(name):
    r = create(name, d=2, groups=GROUPS).step(LOW_16, np.random.default_rng(0))
    assert r.slot == 1


@pytest.mark.parametrize("population", [[-1, 3], [16], [16, 3, 1]])
def test_bad_population_is_refused(population):
    with pytest.raises(ParameterError, match="population must be 2 non-negative ints"):
        create("pbd", d=2, groups=GROUPS).step(LOW_16, np.random.default_rng(0), population)


@pytest.fixture
def drawn(monkeypatch):
    """The budgets every noise draw of :mod:`app.dp.personalized` is made at, in order."""
    out: list[float] = []
    perturb = personalized.perturb

    def spy(noise, rng, x, eps):
        out.append(eps)
        return perturb(noise, rng, x, eps)

    monkeypatch.setattr(personalized, "perturb", spy)
    return out


def noise_scales(drawn, counts, population):
    """The budgets PBD draws its noise at in one published slot (dissimilarity, publication)."""
    drawn.clear()
    m = create("pbd", d=2, groups=GROUPS)
    m._publishes = lambda dis, threshold: True  # publish, so the publication scale is drawn
    m.step(counts, np.random.default_rng(0), population)
    return list(drawn)


def test_noise_scale_does_not_depend_on_the_row_sums(drawn):
    # The pair is sensitive: with each slot's own row sums (the old default) the scale moves.
    by_rows = [noise_scales(drawn, c, c.sum(axis=1)) for c in (LOW_16, LOW_17)]
    assert by_rows[0][1] != by_rows[1][1]
    # With the public population the two neighbouring slots are drawn at the same scales.
    for population in ([16, 3], [17, 3], [1000, 10]):
        a, b = (noise_scales(drawn, c, population) for c in (LOW_16, LOW_17))
        assert len(a) == 2 and a == b, population
