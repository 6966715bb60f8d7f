"""OpenUniform: the Uniform analogue for open key spaces (eps/w and delta/w at every slot)."""

from __future__ import annotations

import math

import numpy as np

from app.dp.open.base import SHARE, OpenMechanism, Outcome, Plan
from app.dp.open.threshold import draw, rate
from app.dp.types import IntArray


class OpenUniform(OpenMechanism):
    """Open-domain Uniform: every slot spends ``eps_i / w_i`` and ``delta_i / w_i`` per level on
    a fresh release of the public keys' counts and a DP selection of new keys.

    Paper
    -----
    Kellaris et al., PVLDB 7(12), 2014, §4.1 (Uniform) for the schedule; the selection is the
    thresholding of Korolova et al. (WWW 2009) as analysed by Desfontaines et al. (PoPETs 2022)
    and run per trigger by DP-SQLP (Zhang et al., PVLDB 2024). Reading aid:
    ``docs/specs/open-domain.md``.

    ==================  ==================================================
    paper / spec        here
    ==================  ==================================================
    k                   ``max_keys``
    Delta               ``units = sensitivity * max_keys``
    P_t                 ``public.keys``
    tau                 ``tau`` (:mod:`app.dp.open.threshold`)
    eps_t, delta_t      ``min_i eps_i / w_i``, ``min_i delta_i / w_i``
    ==================  ==================================================

    Parameters
    ----------
    levels
        ``Level(w, eps, delta)`` per privacy level (delta at most 1e-3).
    population
        The stated number of users; a threshold above it is refused.
    max_keys, sensitivity
        Keys a user may contribute per slot; 1 (add-remove) or 2 (replace) neighbours.
    retire_after
        A public key released below ``tau`` this many slots in a row is retired.
    max_key_chars
        Longest key accepted (the service dead-letters longer ones first).
    max_released_keys
        The most keys one release shows, public and new together (default 128): beyond it the
        keys of largest released count are kept (ties by key), the public ones left out retire,
        the new ones left out are not shown (post-processing: ``app.dp.open.base``).
    selection_share
        1 (default): one noise draw per key serves the selection and the released count (spec
        "One slot"). Below 1: new keys are selected on a draw at ``share * eps_t`` and the
        released counts of public and selected keys are drawn again at ``(1 - share) * eps_t``
        (unbiased counts for the selected keys, at the price of more noise).

    State
    -----
    t, ledger, public
        Slot counter; the (eps, delta) window ledger per level
        (:class:`~app.dp.open.ledger.OpenLedger`); the public keys with their last released
        counts and quiet streaks (:class:`~app.dp.open.public.PublicKeys`).

    Privacy
    -------
    Neighbours: add-remove of one user (``sensitivity=1``) or replacement of one user's events
    (``sensitivity=2``). After bounding, a user moves at most ``Delta`` counts by one, so the
    noisy counts (discrete Laplace at ``eps_t / Delta``, exact) are ``eps_t``-DP; thresholding
    them is post-processing except for the keys only the changed user holds (at most ``Delta``
    of them over both sides), each released with probability ``P(Z >= tau - 1)``, so the slot is
    ``(eps_t, delta_t)``-DP with ``delta_t = Delta a**(tau-1) / (1 + a)`` (``docs/open-domain.md``).
    With ``selection_share < 1`` the two draws compose sequentially to ``eps_t``. Public keys are
    released outputs (post-processing), and so are retirement and the cap of
    ``max_released_keys`` (a function of the slot's released keys and counts). Over any
    ``w_i`` slots the level records ``w_i (eps_i / w_i, delta_i / w_i) = (eps_i, delta_i)``, and
    by basic composition the window is ``(eps_i, delta_i)``-DP; drawing at the minimum over
    levels spends no level more than its own share.

    Deviations
    ----------
    * Under replace the spec's ``delta_t = k P(Z >= tau - 1)`` counts the keys of one side only;
      here both sides' singletons (``2k``) are counted (``docs/open-domain.md``).
    * The threshold is computed at the rate the exact sampler really draws at (rounded down from
      ``eps_t / Delta``, a slightly heavier tail), not at ``eps_t / Delta``.

    Examples
    --------
    A key 200 users send is selected; a key one user sends is not (it would pass ``tau`` with
    probability below ``delta_t``); the selected key stays public and is released at the next
    slot although nobody sends it:

    >>> import numpy as np
    >>> from app.dp.open.ledger import Level
    >>> m = OpenUniform(levels=[Level(2, 2.0, 1e-4)], population=1000)
    >>> rng = np.random.default_rng(1)
    >>> users, keys = np.arange(201), np.array(["popular"] * 200 + ["rare"])
    >>> first = m.step(users, keys, rng)
    >>> first.keys, m.tau, first.eps_spent, first.delta_spent
    (('popular',), 11, (Fraction(1, 1),), (Fraction(1, 20000),))
    >>> second = m.step(np.array([], dtype=np.int64), np.array([], dtype=str), rng)
    >>> second.keys, bool(second.new[0])
    (('popular',), False)

    References
    ----------
    Kellaris et al., PVLDB 7(12), 2014; Korolova et al., WWW 2009; Desfontaines et al., PoPETs
    2022(4); Zhang et al., PVLDB 17, 2024 (DP-SQLP).
    """

    name = "open_uniform"
    version = 1

    def describe(self) -> str:
        return (
            "OpenUniform: eps_i/w_i and delta_i/w_i per slot on the public keys' counts and a "
            f"thresholded selection of new keys (tau={self.tau}, max_keys={self.max_keys})"
        )

    def _selection_units(self) -> Plan:
        whole = 2 * SHARE  # eps_i / w_i, delta_i / w_i
        sel = whole if self.selection_share == 1.0 else math.floor(whole * self.share())
        return Plan([sel] * len(self.levels), [whole] * len(self.levels))

    def _plan(self, t: int) -> Plan:
        whole = 2 * SHARE
        return Plan([whole] * len(self.levels), [whole] * len(self.levels))

    def _slot(
        self, t: int, public: IntArray, candidates: IntArray, rng: np.random.Generator
    ) -> Outcome:
        plan = self._plan(t)
        n = len(self.levels)
        sel_eps, _ = self.selection_budget()
        g_sel = rate(sel_eps, self.units)
        if self.selection_share == 1.0:  # one draw per key: selection and count
            z = draw(rng, g_sel, public.size + candidates.size)
            noisy = candidates + z[public.size :]
            selected = noisy >= self.tau
            return Outcome(public + z[: public.size], selected, noisy[selected], "publish", plan)
        selected = candidates + draw(rng, g_sel, candidates.size) >= self.tau
        count_units = plan.eps[0] - self._selection_units().eps[0]
        g_cnt = rate(min(self.ledger.eps_of(i, count_units) for i in range(n)), self.units)
        chosen = candidates[selected]
        z = draw(rng, g_cnt, public.size + chosen.size)
        return Outcome(
            public + z[: public.size], selected, chosen + z[public.size :], "publish", plan
        )
