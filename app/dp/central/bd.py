"""BD: Budget Distribution (Kellaris et al., VLDB 2014), as the PWSM paper's baseline."""

from __future__ import annotations

from app.dp.central.pbd import PBD


class BD(PBD):
    """Budget Distribution: PBD's schedule for one requirement, with Kellaris's threshold.

    Paper
    -----
    G. Kellaris, S. Papadopoulos, X. Xiao, D. Papadias. *Differentially Private Event Sequences
    over Infinite Streams*. PVLDB 7(12), 2014, Budget Distribution; as reconstructed in
    ``docs/specs/seed-000-pwsm.md`` §2.7 (lines 1-5 there).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    (w, eps)            ``budget_groups[0] = (max_g w_g, min_g eps_g)``
    eps / (2w)          DC budget, ``ledger.budgets[0].share``
    eps_{t,2}           offered units ``(half - pub_window) // 2`` (l.2)
    ==================  ==================================================

    Parameters
    ----------
    d, groups, noise
        As in :class:`~app.dp.central.pbd.PBD`; the groups are only used to pick the single
        conservative requirement ``(max w, min eps)`` and to report spending per group.

    State
    -----
    t, last_release, ledger
        As in PBD, with one ledger row.

    Privacy
    -------
    Neighbours: add-remove at ``sensitivity=1`` (the paper's relation); ``sensitivity=2`` (the
    service's default, ``neighbours: replace``) draws every noise at ``eps / 2``, so a change of
    one user's value is protected at the same eps.
    w-event eps-DP at ``(max w, min eps)``, hence ``(w_g, eps_g)`` for every group: DC spends
    ``eps/(2w)`` per slot and publications halve what the window has left (Kellaris Thm 5).

    Deviations
    ----------
    * Publish iff ``dis > 1/b`` (the Laplace scale), where PBD uses ``sqrt(2/b**2)``: with the
      same decisions the two spend identical budgets (spec A19, T13).
    * The window sum covers the previous ``w - 1`` slots (spec A9).

    Examples
    --------
    Always publishing at ``w = 4, eps = 1`` spends 1/4, 1/8, 1/16, 1/32, 9/64 (spec T11):

    >>> import numpy as np
    >>> from app.dp.types import Group
    >>> m = BD(d=2, groups=[Group(4, 1.0)])
    >>> rng = np.random.default_rng(1)
    >>> [float(m.step([[10**6 * (t % 2), 0]], rng, [10**6]).spent_pub[0] * 64) for t in range(1, 6)]
    [16.0, 8.0, 4.0, 2.0, 9.0]

    References
    ----------
    Kellaris et al., PVLDB 7(12), 2014, §4.3.
    """

    name = "bd"
    version = 1
    personalized = False
    kellaris_threshold = True

    def describe(self) -> str:
        return (
            "BD at (max w, min eps): eps/(2w) per slot on dissimilarity; each publication spends "
            "half of the unspent publication half in the window; threshold 1/b"
        )
