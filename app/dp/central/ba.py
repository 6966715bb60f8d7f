"""BA: Budget Absorption (Kellaris et al., VLDB 2014), as the PWSM paper's baseline."""

from __future__ import annotations

from app.dp.central.pba import PBA


class BA(PBA):
    """Budget Absorption: PBA's schedule for one requirement, with Kellaris's threshold.

    Paper
    -----
    G. Kellaris et al., PVLDB 7(12), 2014, Budget Absorption; as reconstructed in
    ``docs/specs/seed-000-pwsm.md`` §2.8 (lines 1-6 there).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    (w, eps)            ``budget_groups[0] = (max_g w_g, min_g eps_g)``
    l, s                ``last_publication``, ``shares[0]``
    k                   ``min(t - l - (s - 1), w)`` absorbed shares (l.4)
    ==================  ==================================================

    Parameters
    ----------
    d, groups, noise
        As in :class:`~app.dp.central.pba.PBA`; the groups only pick ``(max w, min eps)``.

    State
    -----
    t, last_release, ledger, last_publication, shares
        As in PBA, with one group.

    Privacy
    -------
    Neighbours: add-remove at ``sensitivity=1`` (the paper's relation); ``sensitivity=2`` (the
    service's default, ``neighbours: replace``) draws every noise at ``eps / 2``, so a change of
    one user's value is protected at the same eps.
    w-event eps-DP at ``(max w, min eps)``: DC spends ``eps/(2w)`` per slot; a publication
    absorbing ``k`` shares nullifies the ``k - 1`` slots after it, so no window holds more than
    ``w`` shares of ``eps/(2w)`` on publication (Kellaris Thm 6).

    Deviations
    ----------
    * Publish iff ``dis > 1/b`` where PBA uses ``sqrt(err)`` (spec A19, T13).
    * ``l`` is updated after every publication (the authors' code never does, spec A28).

    Examples
    --------
    Spec T11: skipping slots 1-6, then publishing, absorbs ``w = 4`` shares (1/2), and the
    next three slots are nullified:

    >>> import numpy as np
    >>> from app.dp.types import Group
    >>> m = BA(d=2, groups=[Group(4, 1.0)])
    >>> m._publishes = lambda dis, threshold: m.t + 1 >= 7  # scripted decisions
    >>> steps = (m.step([[5, 5]], np.random.default_rng(t), [10]) for t in range(11))
    >>> [(r.status, float(r.spent_pub[0])) for r in steps][5:]  # doctest: +NORMALIZE_WHITESPACE
    [('skip', 0.0), ('publish', 0.5), ('nullified', 0.0), ('nullified', 0.0),
     ('nullified', 0.0), ('publish', 0.125)]

    References
    ----------
    Kellaris et al., PVLDB 7(12), 2014, §4.4.
    """

    name = "ba"
    version = 1
    personalized = False
    kellaris_threshold = True

    def describe(self) -> str:
        return (
            "BA at (max w, min eps): eps/(2w) per slot on dissimilarity; a publication absorbs "
            "the shares eps/(2w) of skipped slots (at most w) and nullifies as many after it; "
            "threshold 1/b"
        )
