"""The public keys' released counts carry discrete Laplace noise at ``eps_t / Delta``, exactly.

A public set of 20,000 keys and a slot nobody sends anything in: every released count is pure
noise. Its share of zeros, ``P(Z = 0) = (1 - a) / (1 + a)``, must match the scale the mechanism
claims and reject the same scale off by 30 % either way (five binomial standard deviations).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.dp.open import Level, OpenUniform

KEYS = 20_000
SIGMAS = 5.0
"""Tolerance in binomial standard deviations of the share of zeros (seed fixed)."""
OFF = 0.3
"""The relative error of the scale the test must reject."""


def zero_share(gamma: float) -> float:
    a = math.exp(-gamma)
    return (1 - a) / (1 + a)


@pytest.mark.parametrize(
    ("sensitivity", "max_keys", "share"), [(1, 1, 1.0), (2, 1, 1.0), (1, 2, 0.5)]
)
def test_public_counts_are_noised_at_the_claimed_scale(sensitivity, max_keys, share):
    m = OpenUniform(
        levels=[Level(1, 2.0, 1e-3)],
        population=10**6,
        sensitivity=sensitivity,
        max_keys=max_keys,
        selection_share=share,
        max_released_keys=KEYS,  # the cap would keep the largest counts: not pure noise
    )
    keys = np.char.add("p", np.arange(KEYS).astype(str))
    m.public.admit(keys, np.zeros(KEYS, dtype=np.int64))
    r = m.step(np.zeros(0, np.int64), np.zeros(0, str), np.random.default_rng(11))
    assert len(r.keys) == KEYS and not r.new.any()
    observed = float(np.mean(r.counts == 0))
    count_eps = 2.0 * (1 - share) if share < 1 else 2.0  # eps_t = eps / w, less the selection
    gamma = count_eps / (sensitivity * max_keys)
    for scale, accepted in ((1.0, True), (1 + OFF, False), (1 - OFF, False)):
        p = zero_share(gamma * scale)
        inside = abs(observed - p) <= SIGMAS * math.sqrt(p * (1 - p) / KEYS)
        assert inside is accepted, (scale, observed, p)
