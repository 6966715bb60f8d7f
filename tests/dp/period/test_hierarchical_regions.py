"""OptStream's per-region hierarchy (``optstream_hr``): the budget of every node, a worked
example by hand, consistency and the strict window invariant."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.dp.budget import within
from app.dp.errors import ParameterError
from app.dp.period import RegionalHierOptStream
from app.dp.period.checks import collect, random_series, window_violations
from app.dp.registry import create
from app.dp.types import Group


def spy(m: RegionalHierOptStream) -> list[tuple[int, float]]:
    """Record ``(columns, eps)`` of every node's noisy inputs (a region or the root)."""
    calls: list[tuple[int, float]] = []
    inner = m.noisy_inputs

    def record(x, eps, rng):
        calls.append((x.shape[1], eps))
        return inner(x, eps, rng)

    m.noisy_inputs = record  # type: ignore[method-assign]
    return calls


@settings(deadline=None, max_examples=30, derandomize=True)
@given(
    d=st.integers(1, 5),
    w=st.integers(2, 8),
    eps=st.sampled_from([0.1, 0.5, 1.0, 2.0]),
    strict=st.booleans(),
    split=st.sampled_from(["sequential", "parallel"]),
    seed=st.integers(0, 999),
)
def test_nodes_compose_to_the_period_budget(d, w, eps, strict, split, seed):
    """Sequential: the regions' budgets plus the root's sum to at most eps_P (every region and
    the root once per period). Parallel: the largest region plus the root does, and the
    mechanism says it is weaker when d > 1."""
    m = RegionalHierOptStream(
        d=d, groups=[Group(w, eps)], k=2, theta=5.0, strict=strict, region_split=split
    )
    calls = spy(m)
    rng = np.random.default_rng(seed)
    collect(m, random_series(rng, 3 * w, 1, d), rng)
    periods = 3
    assert len(calls) == periods * (d + 1)
    for p in range(periods):
        node = calls[p * (d + 1) : (p + 1) * (d + 1)]
        regions, root = node[:-1], node[-1]
        assert [c for c, _ in regions] == [1] * d and root[0] == 1
        region_cost = (
            sum(e for _, e in regions) if split == "sequential" else max(e for _, e in regions)
        )
        assert within(region_cost + root[1], m.period_eps)
        assert math.isclose(root[1], m.period_eps / 2)
    assert (m.weaker_guarantee() is not None) == (split == "parallel" and d > 1 or not strict)


def test_worked_example_by_hand():
    """d = 3 regions, w = 48, eps = 1, aligned periods, LS with its three equal shares.

    Level budget 1/2; sequential: each region 1/6, so eps_s = eps_p = eps_o = 1/18; k = 10
    samples at Delta = 1: perturbation scale k Delta / eps_p = 180, features at the w-event
    sensitivity w Delta / eps_o = 864. Root: 1/2, shares 1/6, scales 60 and 288.
    """
    m = RegionalHierOptStream(d=3, groups=[Group(48, 1.0)], strict=False)
    assert m.period_eps == 1.0
    level = m.period_eps / 2
    assert m.region_eps(level) == pytest.approx(1 / 6)
    s, p, o = m.split(m.region_eps(level))
    assert (s, p, o) == pytest.approx((1 / 18,) * 3)
    assert m.k * m.delta / p == pytest.approx(180.0)
    assert 48 * m.delta / o == pytest.approx(864.0)
    assert m.k * m.delta / m.split(level)[1] == pytest.approx(60.0)
    par = RegionalHierOptStream(d=3, groups=[Group(48, 1.0)], strict=False, region_split="parallel")
    assert par.region_eps(level) == 0.5
    assert "region_split=parallel" in (par.weaker_guarantee() or "")


def test_every_region_gets_its_own_sample_set(monkeypatch):
    """By hand, k = 3, no noise to speak of, theta = 50: the bump (0..400 at slot 4, down to
    100) first scores above theta at slot 5 (the line 0 -> 300 misses the peak by 160), so it
    is sampled at {0, 5, 8}; the flat region never scores, and Alg. 3 l.8 fills it at slot 7:
    {0, 7, 8}. The root (their sum) is sampled on its own too."""
    import app.dp.period.optstream as optstream

    w = 9
    bump = np.r_[np.arange(5) * 100, (3 - np.arange(4)) * 100].astype(float)
    x = np.stack([bump, np.full(w, 50.0)], axis=1)
    m = RegionalHierOptStream(
        d=2, groups=[Group(w, 1e9)], k=3, theta=50.0, strict=False, noise="laplace"
    )
    chosen: list[list[int]] = []
    inner = optstream.l1_sample

    def record(*args, **kw):
        out = inner(*args, **kw)
        chosen.append(out.tolist())
        return out

    monkeypatch.setattr(optstream, "l1_sample", record)
    out = m._release(x, 1e9, np.random.default_rng(0))
    assert chosen == [[0, 5, 8], [0, 7, 8], [0, 5, 8]]
    assert out.shape == (w, 2) and (out >= 0).all()


def test_consistent_at_bench_size():
    """12 regions, w = 48: national = sum of regions, non-negative (the paper's tree)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(2000, 9000, (96, 12))
    m = RegionalHierOptStream(d=12, groups=[Group(48, 1.0)], strict=False, alpha=10.0)
    out = collect(m, x[:, None, :], np.random.default_rng(0))
    leaves = np.array([r.histogram for r in out])
    assert leaves.shape == (96, 12) and (leaves >= 0).all()


@settings(deadline=None, max_examples=15, derandomize=True)
@given(w=st.integers(1, 10), other_w=st.integers(1, 10), seed=st.integers(0, 2**16))
def test_window_invariant_strict(w, other_w, seed):
    """Strict mode: every sliding window of w_g slots spends at most eps_g (invariant 1)."""
    groups = [Group(w, 0.5), Group(other_w, 1.0)]
    m = create("optstream_hr", d=3, groups=groups, k=3, theta=100.0)
    rng = np.random.default_rng(seed)
    releases = collect(m, random_series(rng, 5 * m.period + 2, 2, 3), rng)
    assert not window_violations(releases, groups, m)


def test_parameters_are_checked():
    with pytest.raises(ParameterError, match="region_split"):
        RegionalHierOptStream(d=2, groups=[Group(4, 1.0)], region_split="both")
    with pytest.raises(ParameterError, match="postprocess"):
        RegionalHierOptStream(d=2, groups=[Group(4, 1.0)], postprocess=False)
