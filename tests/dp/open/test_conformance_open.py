"""The open-domain mechanisms pass the conformance suite's generic checks, and their own.

They are not registered (``app.dp.registry``): the shared suite's release-shape and parameter
checks drive a histogram of fixed length ``d`` (``check_release_shape``,
``check_state_refuses_other_params`` build ``d + 1``), and ``tests/dp/test_conformance.py``
requires every check for every registered kind. Here every check of ``app.dp.checks.CHECKS`` that
does not assume ``d`` runs through the open adapter, and the two that do get open-domain
versions below. The population check is OBS's and does not apply (no OBS here).
"""

from __future__ import annotations

import numpy as np
import pytest

from app.dp.checks import CHECKS, factory_for, run, same, through_msgpack
from app.dp.errors import StateMismatchError
from app.dp.open import Level, OpenPBA, OpenUniform
from app.dp.open.checks import OPEN, random_events

MECHANISMS = (OpenUniform, OpenPBA)
NEEDS_D = {"check_release_shape", "check_state_refuses_other_params", "check_population_required"}
GENERIC = [c for c in CHECKS if c.__name__ not in NEEDS_D]


@pytest.mark.parametrize(
    ("cls", "check"),
    [
        pytest.param(cls, check, id=f"{cls.name}:{check.__name__.removeprefix('check_')}")
        for cls in MECHANISMS
        for check in GENERIC
    ],
)
def test_generic_check(cls, check):
    check(OPEN, factory_for(cls), np.random.default_rng(20261122))


def test_the_generic_checks_are_all_but_the_ones_needing_d():
    assert len(GENERIC) == len(CHECKS) - len(NEEDS_D) >= 7


@pytest.mark.parametrize("cls", MECHANISMS, ids=lambda c: c.name)
def test_release_shape(cls):
    """Every slot is released once, in order: sorted distinct keys, integer counts, the new
    keys never public before, spending per level, a repeat repeats the last public counts."""
    rng = np.random.default_rng(5)
    m = factory_for(cls)()
    public: dict[str, int] = {}
    for t, x in enumerate(random_events(rng, 80), start=1):
        r = m.step(x.users, x.keys, rng)
        assert r.slot == t and r.mechanism == m.name and r.version == m.version
        assert list(r.keys) == sorted(set(r.keys)), "keys not sorted and distinct"
        assert r.counts.dtype == np.int64 and r.counts.shape == (len(r.keys),)
        assert len(r.eps_spent) == len(r.delta_spent) == len(m.levels)
        new = {k for k, n in zip(r.keys, r.new, strict=True) if n}
        assert not new & set(public), "a public key came back as new"
        assert set(public) - set(r.retired) <= set(r.keys) | set(r.retired)
        assert set(public) <= set(r.keys), "a public key was not released"
        if not r.fresh:
            assert r.status in ("skip", "nullified")
            old = {k: c for k, c in r.histogram().items() if k in public}
            assert old == public, "a repeat changed a public count"
        public = {k: c for k, c in r.histogram().items() if k not in r.retired}


@pytest.mark.parametrize("cls", MECHANISMS, ids=lambda c: c.name)
@pytest.mark.parametrize(
    "other", [{"max_keys": 3}, {"levels": [Level(4, 4.0, 1e-4)]}, {"sensitivity": 2}]
)
def test_state_refuses_other_params(cls, other):
    m = factory_for(cls)()
    run(OPEN, m, random_events(np.random.default_rng(1), 3), np.random.default_rng(2))
    with pytest.raises(StateMismatchError, match="fingerprint"):
        factory_for(cls)(**other).load_state(through_msgpack(m.state_dict()))


@pytest.mark.parametrize("cls", MECHANISMS, ids=lambda c: c.name)
def test_state_roundtrip_keeps_the_public_set(cls):
    rng = np.random.default_rng(9)
    m = factory_for(cls)()
    run(OPEN, m, random_events(rng, 10), rng)
    fresh = factory_for(cls)()
    fresh.load_state(through_msgpack(m.state_dict()))
    assert same(fresh.public.keys, m.public.keys) and same(fresh.public.last, m.public.last)
    assert len(m.public) > 0, "the stream selected nothing: the test shows nothing"
