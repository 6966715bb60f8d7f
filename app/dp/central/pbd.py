"""PBD: Personalized Budget Distribution (PWSM paper, Alg. 4)."""

from __future__ import annotations

from app.dp.central.pwsm import PWSMMechanism


class PBD(PWSMMechanism):
    """Personalized Budget Distribution: each publication takes half of what a window has left.

    Paper
    -----
    L. Du, P. Cheng, L. Chen, H. T. Shen, X. Lin, W. Xi. *Infinite Stream Estimation under
    Personalized w-Event Privacy*. PVLDB 18(6): 1905-1918, 2025. Algorithm 4, lines 1-12, on
    the PWSM scheme (Alg. 2) with DC (Alg. 3), OBS (Alg. 1) and the Sampling Mechanism.

    ========================  ===========================================================
    paper                     here
    ========================  ===========================================================
    (w_i, eps_i)              ``groups[g]`` (one ledger row per requirement group)
    eps_{i,t}^(1)             ``ledger.budgets[g].share`` (eps_g / (2 w_g))
    eps_{i,t}^(2)             offered units ``(half - pub_window(g)) // 2`` (l.4-5)
    r_{t-1}                   ``last_release``
    ========================  ===========================================================

    Parameters
    ----------
    d
        Domain size (histogram length).
    groups
        The requirement groups ``Group(w, eps)``.
    noise
        ``"laplace"`` (as in the paper) or ``"geometric"`` (integer releases).

    State
    -----
    t
        Slots released so far.
    last_release
        ``r_{t-1}`` (zeros before the first slot, spec A10).
    ledger
        Per group, the total and publication units of the last ``w_g - 1`` slots.

    Privacy
    -------
    Neighbours: add-remove at ``sensitivity=1`` (the paper's relation); ``sensitivity=2`` (the
    service's default, ``neighbours: replace``) draws every noise at ``eps / 2``, so a change of
    one user's value is protected at the same eps.
    (w, eps)-EPDP per group (Thm 4.1). Every slot spends ``eps_g/(2 w_g)`` on DC, so a window
    of ``w_g`` slots spends at most ``eps_g / 2`` on DC. A publication offers
    ``b_g = (eps_g/2 - sum of the previous w_g - 1 publication spends) / 2`` (l.4-5), so the
    publication spends of any window sum to less than ``eps_g / 2``. SM with threshold
    ``theta2`` costs each user at most its offered ``b_g`` (amplification by sampling), and the
    ledger records ``b_g`` (spec A30). The ledger refuses any slot that would break either half.

    Deviations
    ----------
    * Line 4 uses ``eps_i / 2`` (not the example's ``eps-bar_i / 2``), spec A8.
    * The window sum runs over the previous ``w_i - 1`` slots as in the paper, not ``w_i`` as in
      the authors' code (spec A9).
    * Budgets are exact fixed-point units; halvings past 2**-40 of a share round down.
    * Users are sampled by binomial thinning of per-group counts (spec §2.12).

    Examples
    --------
    A stream that jumps by a million users every slot publishes every slot; with one group
    ``(w=4, eps=1)`` the publication budgets, in units of ``eps / 64``, are 1/4, 1/8, 1/16,
    1/32, 9/64, 17/128 (spec T11):

    >>> import numpy as np
    >>> from app.dp.types import Group
    >>> m = PBD(d=2, groups=[Group(4, 1.0)])
    >>> rng = np.random.default_rng(0)
    >>> [float(m.step([[10**6 * (t % 2), 0]], rng, [10**6]).spent_pub[0] * 64) for t in range(1, 7)]
    [16.0, 8.0, 4.0, 2.0, 9.0, 8.5]

    References
    ----------
    G. Kellaris et al., *Differentially private event sequences over infinite streams*,
    PVLDB 7(12), 2014 (Budget Distribution).
    """

    name = "pbd"
    version = 1

    def describe(self) -> str:
        return (
            "PBD: eps_g/(2w_g) per slot on dissimilarity; each publication spends half of the "
            "group's unspent publication half (eps_g/2) in its window; threshold sqrt(OBS err)"
        )

    def _offer(self, t: int) -> tuple[list[int], bool]:
        return [  # Alg. 4 l.4-5
            (b.half - self.ledger.pub_window(g)) // 2 for g, b in enumerate(self.ledger.budgets)
        ], False
