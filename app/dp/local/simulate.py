"""Noise-free stand-ins for devices: run a local mechanism on known frequencies.

For examples, doctests and the conformance checks: every asked user answers, and the support
counts are their expectations, so a run depends only on the mechanism's own choices.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from app.dp.local.base import LocalMechanism
from app.dp.local.wire import CollectionRequest, Tally, mask_users
from app.dp.oracles import make
from app.dp.types import Release


def expected_tally(request: CollectionRequest, reports: int, f: npt.ArrayLike) -> Tally:
    """The noise-free answer of ``reports`` users with frequencies ``f`` (one group).

    Support counts are their expectations ``n (p f + q (1 - f))``, rounded: a deterministic
    stand-in for devices, for examples and for the conformance checks.
    """
    oracle = make(request.oracle[0], request.d, request.eps[0])
    fa = np.asarray(f, dtype=np.float64)
    support = np.rint(reports * (oracle.p * fa + oracle.q * (1 - fa))).astype(np.int64)
    return Tally(request.slot, request.round, support[None, :], np.array([reports]))


def run_expected(
    mechanism: LocalMechanism, freqs: npt.ArrayLike, rng: np.random.Generator | None
) -> list[Release]:
    """Run ``mechanism`` over frequencies ``(T, d)``, answering with :func:`expected_tally`.

    ``rng`` draws the cohorts (population division); None means a generator seeded with 0.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    out = []
    for f in np.asarray(freqs, dtype=np.float64):
        request = mechanism.open_slot(rng)
        while request is not None:
            n = int(mask_users(request, mechanism.users).sum())
            request = mechanism.on_tally(expected_tally(request, n, f), rng)
        out.append(mechanism.close_slot())
    return out
