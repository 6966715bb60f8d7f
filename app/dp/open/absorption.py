"""OpenPBA: selection at every slot, personalized budget absorption over the public keys."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.dp.errors import ParameterError
from app.dp.open.base import MAX_RELEASED_KEYS, SHARE, OpenMechanism, Outcome, Plan
from app.dp.open.ledger import Level
from app.dp.open.threshold import draw, mean_abs, rate
from app.dp.types import IntArray


class OpenPBA(OpenMechanism):
    """Open-domain PBA: new keys are selected at every slot with a fixed share; the public keys'
    counts are published only when they moved, with PBA's budget absorption per level.

    Paper
    -----
    L. Du et al., PVLDB 18(6), 2025, Algorithm 5 (PBA), lines 1-19, on PWSM (Alg. 2), and
    Kellaris et al., PVLDB 7(12), 2014 (BA, its one-level case); the selection as in
    :class:`~app.dp.open.uniform.OpenUniform`. Reading aids ``docs/specs/seed-000-pwsm.md``
    §2.8-2.11 and ``docs/specs/open-domain.md`` ("Adaptive publication").

    ========================  ===========================================================
    paper / spec              here
    ========================  ===========================================================
    eps_i / (2 w_i)           ``(1 - selection_share)`` of it: one share, :data:`SHARE`
    l                         ``last_publication``
    eps^(2)_{i,l}             ``shares[i]`` shares
    t_{i,N}, t_{i,A}          ``shares[i] - 1``; ``min(t - l - N_i, w_i)`` (l.4-11)
    dis                       noisy ``sum_x |c_t(x) - r_{t-1}(x)|`` over the public keys,
                              divided by their number (Alg. 3 on the public keys)
    ========================  ===========================================================

    Parameters
    ----------
    levels, population, max_keys, sensitivity, retire_after, max_key_chars, max_released_keys
        As in :class:`~app.dp.open.uniform.OpenUniform`.
    selection_share
        The part of each level's eps spent on selection, ``selection_share * eps_i / w_i`` at
        every slot (default 1/2, below 1); the rest runs PBA on the public keys. All of delta
        goes to the selection, ``delta_i / w_i`` per slot.

    State
    -----
    t, ledger, public
        As in :class:`~app.dp.open.uniform.OpenUniform`.
    last_publication, shares
        ``l`` (0 before any publication) and the shares each level spent at ``l``.

    Privacy
    -------
    Neighbours: add-remove of one user (``sensitivity=1``) or replacement of its events
    (``sensitivity=2``). A slot runs three queries on the bounded data, each of L1 sensitivity
    ``Delta = sensitivity * max_keys`` (a user's keys may all be new or all public): the
    selection of new keys, ``(s eps_i / w_i, delta_i / w_i)``-DP as in OpenUniform; the
    dissimilarity, an integer sum of ``|c - r|`` over the public keys noised at
    ``(1 - s) eps_i / (2 w_i)``; and, when it publishes, the public keys' counts at the
    absorbed budget. Sequential composition adds them; the public set, the decision, the
    repeated counts and the cap of ``max_released_keys`` are post-processing. Per window of
    ``w_i`` slots: selection ``s eps_i`` and ``delta_i``, dissimilarity ``(1 - s) eps_i / 2``,
    and publication at most ``w_i`` shares, ``(1 - s) eps_i / 2``, because a publication
    absorbing ``k`` shares nullifies the ``k - 1`` slots after it (PWSM Thm 4.1; Kellaris
    Thm 6). The ledger checks the sums before any draw.
    The noise is drawn at the smallest budget offered over the levels, within every level's.

    Deviations
    ----------
    * No Sampling Mechanism: the publication noise is drawn at ``theta = min_i`` offered
      budget (OBS restricted to that candidate), since the release path carries no user's level;
      every level records its own offer (an upper bound on its loss).
    * Publish iff ``dis > E|Z|`` of the publication's noise (BA's ``dis > 1/b`` for discrete
      Laplace), over the public keys only; with no public key the slot skips.
    * The dissimilarity is noised as an integer sum (sensitivity ``Delta``), then divided.

    Examples
    --------
    A key that 300 users send is selected at slot 1 (no public key yet: the public part
    skips) and public from slot 2; while it holds still the slots skip and repeat its count,
    spending selection and dissimilarity only; when it jumps, the publication absorbs the
    shares of the skipped slots:

    >>> import numpy as np
    >>> from app.dp.open.ledger import Level
    >>> m = OpenPBA(levels=[Level(4, 80.0, 1e-4)], population=1000)
    >>> rng = np.random.default_rng(3)
    >>> sizes = [300, 300, 300, 900]
    >>> out = [m.step(np.arange(n), np.array(["k"] * n), rng) for n in sizes]
    >>> [(r.status, bool(r.new[0]), int(r.counts[0])) for r in out]
    [('skip', True, 300), ('skip', False, 300), ('skip', False, 300), ('publish', False, 900)]
    >>> [float(r.eps_spent[0]) for r in out]  # selection 10 + DC 5; slot 4: 4 shares of 5
    [15.0, 15.0, 15.0, 35.0]

    References
    ----------
    Du et al., PVLDB 18(6), 2025; Kellaris et al., PVLDB 7(12), 2014; Desfontaines et al.,
    PoPETs 2022(4); Zhang et al., PVLDB 17, 2024.
    """

    name = "open_pba"
    version = 1

    def __init__(
        self,
        levels: Sequence[Level],
        population: int,
        max_keys: int = 1,
        sensitivity: int = 1,
        retire_after: int = 16,
        max_key_chars: int = 256,
        selection_share: float = 0.5,
        max_released_keys: int = MAX_RELEASED_KEYS,
    ) -> None:
        if selection_share == 1.0:
            raise ParameterError(
                "selection_share must be below 1 for open_pba: the public keys need a share, "
                f"got {selection_share!r}"
            )
        super().__init__(
            levels,
            population,
            max_keys,
            sensitivity,
            retire_after,
            max_key_chars,
            selection_share,
            max_released_keys,
        )

    def _reset(self) -> None:
        super()._reset()
        self.last_publication = 0
        self.shares = [1] * len(self.levels)

    def describe(self) -> str:
        return (
            f"OpenPBA: selection_share*eps_i/w_i and delta_i/w_i per slot on selection "
            f"(tau={self.tau}); the rest runs PBA on the public keys (eps/(2w) shares on "
            "dissimilarity, absorbed shares on publication)"
        )

    def _selection_units(self) -> Plan:
        sel = math.floor(2 * SHARE * self.share())
        return Plan([sel] * len(self.levels), [2 * SHARE] * len(self.levels))

    def _share(self) -> int:
        """One PBA share: ``(1 - selection_share) eps_i / (2 w_i)`` in units."""
        return math.floor(SHARE * (1 - self.share()))

    def _offer(self, t: int) -> tuple[list[int], bool]:
        owed = [s - 1 for s in self.shares]  # Alg. 5 l.4-5
        if t - self.last_publication <= max(owed):  # l.6-8: nullified
            return [0] * len(owed), True
        return [  # l.10-11: absorbed shares, at most w_i
            min(t - self.last_publication - n, lv.w) * self._share()
            for n, lv in zip(owed, self.levels, strict=True)
        ], False

    def _plan(self, t: int) -> Plan:
        sel = self._selection_units()
        offer, _ = self._offer(t)
        eps = [s + self._share() + o for s, o in zip(sel.eps, offer, strict=True)]
        return Plan(eps, sel.delta)

    def _slot(
        self, t: int, public: IntArray, candidates: IntArray, rng: np.random.Generator
    ) -> Outcome:
        n = len(self.levels)
        sel = self._selection_units()
        sel_eps, _ = self.selection_budget()
        noisy = candidates + draw(rng, rate(sel_eps, self.units), candidates.size)  # selection
        selected = noisy >= self.tau
        base = [s + self._share() for s in sel.eps]
        repeat = self.public.last
        offer, nullified = self._offer(t)
        if public.size == 0:  # nothing to publish
            return Outcome(public, selected, noisy[selected], "skip", Plan(base, sel.delta))
        dc_eps = min(self.ledger.eps_of(i, self._share()) for i in range(n))  # Alg. 3
        total = int(np.abs(public - repeat).sum()) + int(draw(rng, rate(dc_eps, self.units), 1)[0])
        dis = total / public.size
        if nullified:
            return Outcome(repeat, selected, noisy[selected], "nullified", Plan(base, sel.delta))
        theta = rate(min(self.ledger.eps_of(i, offer[i]) for i in range(n)), self.units)
        if not dis > mean_abs(theta):  # Alg. 5 l.14
            return Outcome(repeat, selected, noisy[selected], "skip", Plan(base, sel.delta))
        released = public + draw(rng, theta, public.size)
        self.last_publication = t  # l.17
        self.shares = [o // self._share() for o in offer]
        spent = [b + o for b, o in zip(base, offer, strict=True)]
        return Outcome(released, selected, noisy[selected], "publish", Plan(spent, sel.delta))

    def _state(self) -> dict[str, Any]:
        state = super()._state()
        return {**state, "last_publication": self.last_publication, "shares": self.shares}

    def _load(self, state: dict[str, Any]) -> None:
        super()._load(state)
        self.last_publication = int(state["last_publication"])
        self.shares = [int(s) for s in state["shares"]]
