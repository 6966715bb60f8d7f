"""Offline local-mode simulation: devices and service, through the same classes as the service.

:func:`run_local` replays a stream of true values ``(T, N)`` through a registered local
mechanism. For every collection request, the users in its cohort perturb their value with the
oracle's device side (vectorized over the cohort), the service side sums their support counts
into a :class:`~app.dp.local.wire.Tally`, and the mechanism decides the next round. It returns
the releases and the reports actually sent, so tests can check the window invariant per user.

>>> import numpy as np
>>> values = np.zeros((6, 40), dtype=np.int64)
>>> run = run_local(values, 2, "lpu", {"eps": 1.0, "w": 3, "users": 40}, np.random.default_rng(0))
>>> [r.users_pub for r in run.releases], [len(s.users) for s in run.sent]
([14, 13, 13, 14, 13, 13], [14, 13, 13, 14, 13, 13])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from app.dp import registry
from app.dp.local.base import LocalMechanism
from app.dp.local.simulate import drive
from app.dp.local.wire import CollectionRequest, Tally, mask_users
from app.dp.oracles import make
from app.dp.types import Release

Keep = Literal["counts", "users", "reports"]


@dataclass(frozen=True)
class Sent:
    """The reports of one round: who sent them (if kept), and the reports (if kept)."""

    slot: int
    round: str
    oracle: tuple[str, ...]
    eps: tuple[float, ...]
    units: tuple[int, ...]
    n: int
    users: npt.NDArray[np.int64] | None
    reports: list[npt.NDArray[Any]] | None


@dataclass(frozen=True)
class LocalRun:
    """What :func:`run_local` returns."""

    releases: list[Release]
    sent: list[Sent]

    def histograms(self) -> npt.NDArray[np.float64]:
        """The released frequencies, ``(T, d)``."""
        return np.array([r.histogram for r in self.releases])

    def reports_per_slot(self, T: int) -> npt.NDArray[np.int64]:
        """Reports sent at each slot ``1..T`` (all rounds)."""
        out = np.zeros(T, dtype=np.int64)
        for s in self.sent:
            out[s.slot - 1] += s.n
        return out


def user_groups(mechanism: LocalMechanism) -> npt.NDArray[np.int64]:
    """The requirement group of each user index (contiguous index ranges, in group order)."""
    sizes = mechanism.group_users
    return np.repeat(np.arange(len(sizes)), sizes).astype(np.int64)


def answer(
    request: CollectionRequest,
    values: npt.NDArray[np.integer[Any]],
    groups: npt.NDArray[np.int64],
    rng: np.random.Generator,
    keep: Keep = "users",
) -> tuple[Tally, Sent]:
    """The devices' answer to ``request`` given every user's value this slot."""
    m = len(request.oracle)
    asked_mask = None if request.cohort is None else mask_users(request, values.shape[0])
    if keep == "counts" and m == 1:  # aggregate draw with the same law (GRR, OUE)
        oracle = make(request.oracle[0], request.d, request.eps[0])
        mine = values if asked_mask is None else values[asked_mask]
        counts = np.bincount(mine, minlength=request.d)[: request.d]
        support = oracle.sample_support(counts, rng)
        if support is not None:
            size = int(mine.shape[0])
            record = Sent(
                request.slot,
                request.round,
                request.oracle,
                request.eps,
                request.units,
                size,
                None,
                None,
            )
            return Tally(request.slot, request.round, support[None, :], np.array([size])), record
    asked = np.arange(values.shape[0]) if asked_mask is None else np.flatnonzero(asked_mask)
    support = np.zeros((m, request.d), dtype=np.int64)
    n = np.zeros(m, dtype=np.int64)
    reports = []
    for g in range(m):  # one oracle per requirement group (several only for PLBU)
        who = asked if m == 1 else asked[groups[asked] == g]
        oracle = make(request.oracle[g], request.d, request.eps[g])
        sent = oracle.perturb(values[who], rng)  # device side, vectorized over the cohort
        support[g] = oracle.support(sent)  # service side
        n[g] = who.shape[0]
        reports.append(sent)
    record = Sent(
        request.slot,
        request.round,
        request.oracle,
        request.eps,
        request.units,
        int(n.sum()),
        asked if keep != "counts" else None,
        reports if keep == "reports" else None,
    )
    return Tally(request.slot, request.round, support, n), record


def run_local(
    values: npt.ArrayLike,
    d: int,
    mechanism: str,
    params: dict[str, Any],
    rng: np.random.Generator,
    keep: Keep = "users",
) -> LocalRun:
    """Run ``mechanism`` (a registry name, built with ``d`` and ``params``) over ``values``.

    Parameters
    ----------
    values
        ``(T, N)`` integers in ``[0, d)``: user ``i``'s true value at slot ``t``. ``N`` must be
        the mechanism's registered population.
    d
        Domain size.
    mechanism, params
        Registry name and its parameters (without ``d``).
    rng
        Drives both the service (cohort draws) and the devices (perturbation).
    keep
        ``"counts"`` keeps only the number of reports per round, and draws the support counts
        of GRR and OUE in aggregate from the cohort's true counts (the same law as perturbing
        each device, spec ``seed-004`` §7.9; much faster for budget division); ``"users"``
        perturbs every device and keeps the reporting user indices; ``"reports"`` also keeps
        the perturbed reports.
    """
    v = np.asarray(values)
    mech = registry.create(mechanism, d=d, **params)
    if not isinstance(mech, LocalMechanism):
        raise ValueError(f"{mechanism!r} is not a local mechanism")
    if v.ndim != 2 or v.shape[1] != sum(mech.group_users):
        raise ValueError(f"values must be (T, N={sum(mech.group_users)}), got {v.shape}")
    groups = user_groups(mech)
    releases: list[Release] = []
    sent: list[Sent] = []
    for t in range(v.shape[0]):

        def devices(request: CollectionRequest, values: npt.NDArray[Any] = v[t]) -> Tally:
            tally, record = answer(request, values, groups, rng, keep)
            sent.append(record)
            return tally

        releases.append(drive(mech, devices, rng))
    return LocalRun(releases, sent)
