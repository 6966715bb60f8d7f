"""Driving a local mechanism offline: the two-round loop, and noise-free stand-ins for devices.

:func:`drive` is the one place the slot protocol (``open_slot``, one ``on_tally`` per request,
``close_slot``) is written for offline use; the bench, the auditor, the conformance checks and
:func:`run_expected` each supply only how a request is answered. :func:`run_expected` answers
with expectations (every asked user answers, support counts are their expected values), so a
run depends only on the mechanism's own choices: for examples, doctests and the checks.
"""

from __future__ import annotations

from collections.abc import Callable

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


def drive(
    mechanism: LocalMechanism,
    answer: Callable[[CollectionRequest], Tally],
    rng: np.random.Generator,
) -> Release:
    """One slot of the local protocol: open it, hand each request's tally from ``answer`` back
    to the mechanism until it asks no more, close it; the slot's release.

    ``answer`` stands for the devices (and whatever the caller records on the way); ``rng`` is
    the mechanism's own generator (cohorts, the service's noise), never the devices'.

    >>> from app.dp.local.lpu import LPU
    >>> m = LPU(d=2, eps=1.0, w=2, users=10)
    >>> seen = []
    >>> def answer(request):
    ...     seen.append(request.round)
    ...     return expected_tally(request, int(mask_users(request, m.users).sum()), [0.5, 0.5])
    >>> release = drive(m, answer, np.random.default_rng(0))
    >>> release.slot, seen
    (1, ['publication'])
    """
    request = mechanism.open_slot(rng)
    while request is not None:
        request = mechanism.on_tally(answer(request), rng)
    return mechanism.close_slot()


def run_expected(
    mechanism: LocalMechanism, freqs: npt.ArrayLike, rng: np.random.Generator | None
) -> list[Release]:
    """Run ``mechanism`` over frequencies ``(T, d)``, answering with :func:`expected_tally`.

    ``rng`` draws the cohorts (population division); None means a generator seeded with 0.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    out = []
    for f in np.asarray(freqs, dtype=np.float64):

        def answer(request: CollectionRequest, f: npt.NDArray[np.float64] = f) -> Tally:
            return expected_tally(request, int(mask_users(request, mechanism.users).sum()), f)

        out.append(drive(mechanism, answer, rng))
    return out
