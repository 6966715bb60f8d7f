"""Worst-case cases: claims computed from the mechanism, the statistic is the exact likelihood
ratio, and the plants patch only the runs they wrap."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from app.audit.controls import draws_doubled, grid_halved, perturb_at_delta, planted
from app.audit.pairs import PERIOD_LEVEL, central_pair
from app.audit.tight import (
    LOCAL_PARAMS,
    TIGHT_GROUPS,
    central_case,
    claimed,
    graph_case,
    local_case,
    period_case,
    recorded_loss,
)
from app.dp import noise as dp_noise
from app.dp.central.sample import Sample
from app.dp.central.uniform import Uniform
from app.dp.local.lpu import LPU
from app.dp.period import optstream as optstream_module
from app.dp.period.optstream import OptStream
from app.dp.types import Group
from app.dp.wn.uniform import WNUniform


def test_claims_are_the_computed_loss_not_the_level_eps():
    strictest = Group(max(g.w for g in TIGHT_GROUPS), min(g.eps for g in TIGHT_GROUPS))
    per_slot = strictest.eps / strictest.w
    assert TIGHT_GROUPS[0].eps == 2.0 and per_slot == 1.0
    # Uniform spends eps / W per slot: group 0's one-slot window costs half its level's eps
    assert central_case("uniform", Uniform).claim == Group(1, per_slot)
    # Sample spends all of eps on slot 1, the window's only slot
    assert central_case("sample", Sample).claim == Group(1, strictest.eps)
    # (w,n) Uniform: eps / W per page and slot (the l values are its calibration's business)
    assert graph_case("wn_uniform", WNUniform).claim == Group(1, per_slot)
    # strict OptStream: eps_P = eps / 2 for the one period the window fills
    assert period_case("optstream", OptStream).claim == Group(2, strictest.eps / 2)
    assert period_case("optstream", OptStream, alpha=1.0).claim == Group(2, strictest.eps / 2)
    # LPU: the target device reports once in its window, at eps
    assert local_case("lpu", LPU).claim == Group(LOCAL_PARAMS["w"], LOCAL_PARAMS["eps"])


def test_a_data_dependent_spending_is_not_a_worst_case():
    # a mechanism recording a budget that follows the counts: the pair's loss is not one figure
    class Adaptive:
        def step(self, counts, rng, population):
            return SimpleNamespace(spent=np.full(2, 0.01 * int(counts.sum())))

    pair = central_pair("add/remove", "boundary", 0, TIGHT_GROUPS, 2, level=5)
    with pytest.raises(ValueError, match="depends on the data or the noise"):
        recorded_loss(Adaptive, pair)
    # Uniform's is one figure, whatever the input and the seed
    assert recorded_loss(lambda: Uniform(d=2, groups=list(TIGHT_GROUPS)), pair) == 1


def test_a_claim_above_the_level_is_refused():
    case = central_case("uniform", Uniform)
    with pytest.raises(ValueError, match="exceeds its level's eps"):
        claimed(case, 2.5, Group(1, 2.0))


@pytest.mark.parametrize(
    ("build", "units"),
    [
        (lambda: central_case("uniform", Uniform), 1),  # one cell of one slot
        (lambda: period_case("optstream", OptStream), 2),  # one cell in both slots of a period
    ],
)
def test_loss_stat_is_the_exact_log_likelihood_ratio(build, units):
    # integer noise: the release is count + DL(a), a = exp(-eps_unit); the log ratio of an
    # output under A (count c + 1) and B (count c) is eps_unit (|x - c| - |x - c - 1|) per cell
    case = build()
    eps_unit = case.claim.eps / units  # the claim spread over the changed cells
    for side in ("A", "B"):
        runs = case.run(side, 300, np.random.default_rng(7), lambda k: None)
        names, x, _ = case.features(runs)
        cells = runs.hist[:, :units, 0]  # the changed slots come first; the user is in cell 0
        c = float(PERIOD_LEVEL)  # B's count there: the other users' level
        llr = eps_unit * (np.abs(cells - c) - np.abs(cells - c - 1)).sum(axis=1)
        assert np.allclose(x[:, names.index("loss_stat")] * eps_unit, llr)
        assert np.ptp(llr) > 0  # the runs do spread over the ratio's values
    assert case.statistic == "loss_stat"


def test_draws_doubled_doubles_each_draw_once_and_only_inside():
    original = dp_noise.two_sided_geometric, dp_noise.discrete_laplace
    with draws_doubled():
        a = dp_noise.discrete_laplace(np.random.default_rng(1), 1.0, 3, (500,))
        b = dp_noise.two_sided_geometric(np.random.default_rng(2), 0.5, 500)
    assert (dp_noise.two_sided_geometric, dp_noise.discrete_laplace) == original
    assert (a == dp_noise.discrete_laplace(np.random.default_rng(1), 2.0, 3, (500,))).all()
    assert (b == dp_noise.two_sided_geometric(np.random.default_rng(2), 1.0, 500)).all()


def test_grid_halved_and_perturb_at_delta_are_scoped():
    units = dp_noise.grid_units(2.0, 4, 2.0**-7)
    perturb = optstream_module.perturb
    with grid_halved(), perturb_at_delta():
        assert dp_noise.grid_units(2.0, 4, 2.0**-7) == units // 2
        x = np.arange(6.0).reshape(3, 2)
        out = optstream_module.perturb(
            x, np.array([0, 2]), 1e9, 1.0, np.random.default_rng(0), noise="geometric", exact=True
        )
        assert out.tolist() == x[[0, 2]].tolist()
    assert dp_noise.grid_units(2.0, 4, 2.0**-7) == units
    assert optstream_module.perturb is perturb


def test_a_planted_case_keeps_the_real_claim():
    case = period_case("optstream", OptStream)
    plant = planted(case, draws_doubled)
    assert plant.claim == case.claim and plant.run is not case.run
