"""PLPD+: PLPD with Optimal Population Selection and Utility Enhancement (PLDP-IDS Alg. 3)."""

from __future__ import annotations

from app.dp.local.plpd import PLPD


class PLPDPlus(PLPD):
    """PLPD + OPS + PUE: a smaller recycling window, split budgets, pooled re-perturbed reports.

    Paper
    -----
    L. Du et al., *PLDP-IDS: Personalized Local Differential Privacy for Infinite Data Stream*,
    §V.C, Algorithm 3, lines 1-27, with Alg. 1 (OPS) and Alg. 2 (PUE) (spec
    ``docs/specs/seed-002-pldp-ids.md`` §3.5, §3.1, §3.2).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    z_i                 ``users // (2 w_i)``
    z_opt, w_opt = W    ``unit``, ``window`` (OPS, spec A9: max w_i with z_i = z_opt)
    eps'_i = eps_i/s_i  ``report_eps[k]``, ``shares[k]`` (spec A10: safe split)
    Ŷ_{s,t}, Ŷ_{r,t}    PUE-enhanced reports (:func:`~app.dp.local.pue.pue`)
    C, g_pp             candidate publication cohort and its budget mix (l.15-16)
    n_min               ``min_users`` (10, spec A8)
    ==================  ==================================================

    Protocol: as :class:`~app.dp.local.plpd.PLPD`, but every report uses ``eps'_i``, the
    dissimilarity cohort has ``z_opt`` users, users are recycled after ``W`` slots, estimates
    pool PUE-enhanced reports, and ``err`` uses the candidate cohort's budget mix.

    Parameters
    ----------
    d, groups, users, buckets, split_rule, dis_on_raw, min_users
        As in :class:`~app.dp.local.plpd.PLPD`.

    State
    -----
    t, last_release, ledger, population, open, pub_users
        As in :class:`~app.dp.local.plpd.PLPD` (``pub_users`` over ``W - 1`` slots).

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    Personalized w-event LDP (Thm V.3, Lemma IX.3, Corollary IX.1): a user reports at most once
    per ``W`` slots with ``eps_i / s_i``, ``s_i >= ceil(w_i / W)`` when ``w_i > W``, so a window
    of its own ``w_i`` slots holds at most ``ceil(w_i / W) <= s_i`` reports: at most ``eps_i``
    (spec I1, I3). PUE, the rejected candidate, ``dis``, ``err`` and the projection are
    post-processing or data-independent (I5). The population ledger checks every user's own
    window before a request leaves.

    Deviations
    ----------
    * OPS splits by ``max(ceil(z_opt / z_i), ceil(w_i / W))`` (A10; the paper's
      ``ceil(z_opt / z_i)`` overspends off its grid: ``split_rule="paper_ceil_z"`` is refused
      by the population ledger when it would); ``W = max{w_i : z_i = z_opt}`` (A9); the OPS
      error is Eq. 7 (Example 4), same argmin as Eq. 6.
    * PUE with the paper's calibration, not the authors' channel (A30); ``n_min = 10`` (A8);
      ``dis`` subtracts the PUE-enhanced ``V_PLDP / d`` (A25); otherwise as PLPD.

    Examples
    --------
    Example 4 (n = 2000, d = 5, Table III(a)): OPS picks ``z_opt = 333``, ``W = 3`` and halves
    the budgets of the ``w = 4`` users; publications of 500 users, a skipped candidate of 250,
    then 250; 251 users are left before recycling and 1084 after.

    >>> from app.dp.local.simulate import run_expected
    >>> from app.dp.types import Group
    >>> levels = [Group(w, e) for e in (0.2, 0.4, 0.6, 0.8) for w in (1, 2, 3, 4)]
    >>> table = [29, 59, 92, 56, 98, 176, 273, 207, 62, 124, 188, 114, 64, 115, 202, 141]
    >>> m = PLPDPlus(d=5, groups=levels, users=table)
    >>> m.unit, m.window, sorted({round(e, 3) for e in m.report_eps})
    (333, 3, [0.1, 0.2, 0.3, 0.4, 0.6, 0.8])
    >>> freqs = [[0.9, 0.1, 0, 0, 0]] * 2 + [[0, 0, 0.1, 0, 0.9]]
    >>> [(r.status, r.users_dc, r.users_pub) for r in run_expected(m, freqs)]
    [('publish', 333, 500), ('skip', 333, 0), ('publish', 333, 250)]
    >>> m.population.available_users(3), m.population.available_users(4)
    (251, 1084)

    References
    ----------
    L. Du et al., PLDP-IDS, §V, Algorithms 1-3, Thms V.1-V.3, Example 4.
    """

    name = "plpd+"
    version = 1
    use_ops = True
    use_pue = True
    candidate_err = True

    def describe(self) -> str:
        return (
            "PLPD+: OPS picks the recycling window W and the per-slot sample z, users with "
            "w_i > W split eps_i into shares; PUE pools re-perturbed reports; distribution "
            "publications; " + self.describe_levels()
        )
