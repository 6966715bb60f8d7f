"""PLPA+: PLPA with Optimal Population Selection and Utility Enhancement (PLDP-IDS Alg. 4)."""

from __future__ import annotations

from app.dp.local.plpa import PLPA


class PLPAPlus(PLPA):
    """PLPA + OPS + PUE: absorption in units of ``z_opt`` over the OPS recycling window ``W``.

    Paper
    -----
    L. Du et al., *PLDP-IDS: Personalized Local Differential Privacy for Infinite Data Stream*,
    §V.C, Algorithm 4, lines 1-24, with Alg. 1 (OPS) and Alg. 2 (PUE) (spec
    ``docs/specs/seed-002-pldp-ids.md`` §3.6, §3.1, §3.2).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    z_opt, w_opt = W    ``unit``, ``window`` (OPS, spec A9)
    eps'_i = eps_i/s_i  ``report_eps[k]``, ``shares[k]`` (spec A10: safe split)
    l, |U_{r,l}|/z_opt  ``last_publication``, ``last_units``
    t_N, t_A, n_pp      ``last_units - 1``, ``t - l - t_N``, ``z_opt min(t_A, W)``
    C, g_pp             candidate publication cohort and its budget mix (l.10)
    ==================  ==================================================

    Protocol: as :class:`~app.dp.local.plpa.PLPA`, but every report uses ``eps'_i``, units are
    ``z_opt`` users, users are recycled after ``W`` slots, estimates pool PUE-enhanced reports,
    and ``err`` uses the candidate cohort's budget mix.

    Parameters
    ----------
    d, groups, users, buckets, split_rule, dis_on_raw
        As in :class:`~app.dp.local.plpa.PLPA`.

    State
    -----
    t, last_release, ledger, population, open, l, k
        As in :class:`~app.dp.local.plpa.PLPA`.

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    Personalized w-event LDP (Thm V.3, Lemma IX.3): at most one report per ``W`` slots, each at
    ``eps_i / s_i`` with ``s_i >= ceil(w_i / W)``, so at most ``eps_i`` in any window of the
    user's own ``w_i`` (spec I1, I3); absorption keeps a window's publication units at most
    ``W`` (I4); PUE and the rejected candidates spend nothing (I5). The population ledger checks
    every user's own window before a request leaves.

    Deviations
    ----------
    * The OPS split, ``W`` and PUE as in :class:`~app.dp.local.plpd_plus.PLPDPlus` (A9, A10,
      A30); absorption as in :class:`~app.dp.local.plpa.PLPA` (A6, A7, A23).

    Examples
    --------
    Example 5 (Example 4's users, ``z_opt = 333``, ``W = 3``): the first publication absorbs
    two units (666 users), the next slot is nullified, the third publishes one unit.

    >>> from app.dp.local.simulate import run_expected
    >>> from app.dp.types import Group
    >>> levels = [Group(w, e) for e in (0.2, 0.4, 0.6, 0.8) for w in (1, 2, 3, 4)]
    >>> table = [29, 59, 92, 56, 98, 176, 273, 207, 62, 124, 188, 114, 64, 115, 202, 141]
    >>> m = PLPAPlus(d=5, groups=levels, users=table)
    >>> freqs = [[0.9, 0.1, 0, 0, 0]] * 2 + [[0, 0, 0.1, 0, 0.9]]
    >>> [(r.status, r.users_dc, r.users_pub) for r in run_expected(m, freqs)]
    [('publish', 333, 666), ('nullified', 333, 0), ('publish', 333, 333)]

    References
    ----------
    L. Du et al., PLDP-IDS, §V, Algorithms 1, 2, 4, Thms V.1-V.3, Example 5.
    """

    name = "plpa+"
    version = 1
    use_ops = True
    use_pue = True
    candidate_err = True

    def describe(self) -> str:
        return (
            "PLPA+: OPS picks the recycling window W and the unit z, users with w_i > W split "
            "eps_i into shares; PUE pools re-perturbed reports; absorption publications; "
            + self.describe_levels()
        )
