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
from app.dp.local.wire import CollectionRequest, Tally
from app.dp.oracles import make
from app.dp.types import Release


def expected_tally(request: CollectionRequest, reports: npt.ArrayLike, f: npt.ArrayLike) -> Tally:
    """The noise-free answer of ``reports[k]`` users of each group ``k`` with frequencies ``f``.

    Group ``k`` answers with the request's oracle and budget ``k``; its support counts are their
    expectations ``n_k (p_k f + q_k (1 - f))``, rounded: a deterministic stand-in for devices,
    for examples and for the conformance checks. ``reports`` is usually what
    :meth:`~app.dp.local.base.LocalMechanism.expected_reports` says the request asks.
    """
    n = np.atleast_1d(np.asarray(reports, dtype=np.int64))
    fa = np.asarray(f, dtype=np.float64)
    rows = []
    for k in range(n.shape[0]):
        oracle = make(request.oracle[k], request.d, request.eps[k])
        rows.append(np.rint(n[k] * (oracle.p * fa + oracle.q * (1 - fa))).astype(np.int64))
    return Tally(request.slot, request.round, np.array(rows), n)


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
    ...     return expected_tally(request, m.expected_reports(request), [0.5, 0.5])
    >>> release = drive(m, answer, np.random.default_rng(0))
    >>> release.slot, seen
    (1, ['publication'])
    """
    request = mechanism.open_slot(rng)
    while request is not None:
        request = mechanism.on_tally(answer(request), rng)
    return mechanism.close_slot()


def run_expected(
    mechanism: LocalMechanism, freqs: npt.ArrayLike, rng: np.random.Generator | None = None
) -> list[Release]:
    """Run ``mechanism`` over frequencies ``(T, d)``, every asked user answering with
    :func:`expected_tally` (per group, as :meth:`~LocalMechanism.expected_reports` counts them).

    ``rng`` draws the cohorts (population division) and whatever else the mechanism draws;
    None means a generator seeded with 0.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    out = []
    for f in np.asarray(freqs, dtype=np.float64):

        def answer(request: CollectionRequest, f: npt.NDArray[np.float64] = f) -> Tally:
            return expected_tally(request, mechanism.expected_reports(request), f)

        out.append(drive(mechanism, answer, rng))
    return out
