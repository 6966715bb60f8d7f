"""The four PLDP-IDS ablations (§VI.D): the ``+`` methods without OPS or without PUE.

Spec ``docs/specs/seed-002-pldp-ids.md`` §3.7, A21: "-RP" keeps only re-perturbation (no
OPS: ``W = w_max``, ``z = floor(n/(2 w_max))``, full budgets); "-OPS" keeps only OPS (plain PFO
everywhere, including the ``dis`` variance). Both draw the publication candidate before the
decision and take ``err`` from its budget mix, as the ``+`` methods do. Each is its publication
rule (:class:`~app.dp.local.plpd.PLPD` or :class:`~app.dp.local.plpa.PLPA`) with the three
switches of :class:`~app.dp.local.pldp.PLDPMechanism` set as the table says; the privacy
argument is that of the ``+`` method with the same rule.

========  =======  =======  =============
name      use_ops  use_pue  candidate_err
========  =======  =======  =============
plpd      no       no       no
plpd+     yes      yes      yes
plbd-rp   no       yes      yes
plbd-ops  yes      no       yes
========  =======  =======  =============

(and likewise ``plpa``, ``plpa+``, ``plba-rp``, ``plba-ops`` on the absorption rule).
"""

from __future__ import annotations

from app.dp.local.plpa import PLPA
from app.dp.local.plpd import PLPD

_SECTIONS = """
    Paper
    -----
    L. Du et al., *PLDP-IDS*, §VI.D (ablation study, Figs. 4-5); spec
    ``docs/specs/seed-002-pldp-ids.md`` §3.7 (code legend "{legend}").

    Parameters
    ----------
    d, groups, users, buckets, split_rule, dis_on_raw{extra}
        As in :class:`~app.dp.local.{module}.{parent}`.

    State
    -----
    t, last_release, ledger, population, open{state}
        As in :class:`~app.dp.local.{module}.{parent}`.

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    {privacy}

    Deviations
    ----------
    * Those of :class:`~app.dp.local.{module}.{parent}`; the name follows the paper's text
      (spec A21).

    Examples
    --------
    >>> from app.dp.types import Group
    >>> m = {cls}(d=2, groups=[Group(4, 1.0), Group(8, 2.0)], users=[60, 40])
    >>> m.window, m.unit, m.shares
    {example}

    References
    ----------
    L. Du et al., PLDP-IDS, §VI.D.
"""

_NO_OPS = (
    "Personalized w-event LDP as :class:`~app.dp.local.plpd.PLPD` (Thm IV.2): ``W = w_max``, "
    "full ``eps_i`` per report, at most one report per ``W`` slots; PUE is post-processing."
)
_NO_PUE = (
    "Personalized w-event LDP as the parent (Thm V.3, Lemma IX.3): at most one report per "
    "``W`` slots at ``eps_i / s_i`` with ``s_i >= ceil(w_i / W)``."
)


class PLBDRP(PLPD):
    __doc__ = "PLBD-RP: PLPD+ without OPS (PUE only)." + _SECTIONS.format(
        legend="PLPD-RP",
        extra=", min_users",
        module="plpd_plus",
        parent="PLPDPlus",
        state=", pub_users",
        privacy=_NO_OPS,
        cls="PLBDRP",
        example="(8, 6, (1, 1))",
    )
    name = "plbd-rp"
    version = 1
    use_ops = False
    use_pue = True
    candidate_err = True

    def describe(self) -> str:
        return "PLBD-RP: PLPD+ without OPS (W = w_max, full eps_i), PUE on; " + (
            self.describe_levels()
        )


class PLBDOPS(PLPD):
    __doc__ = "PLBD-OPS: PLPD+ without PUE (OPS only)." + _SECTIONS.format(
        legend="PLPD-OPS",
        extra=", min_users",
        module="plpd_plus",
        parent="PLPDPlus",
        state=", pub_users",
        privacy=_NO_PUE,
        cls="PLBDOPS",
        example="(4, 12, (1, 2))",
    )
    name = "plbd-ops"
    version = 1
    use_ops = True
    use_pue = False
    candidate_err = True

    def describe(self) -> str:
        return "PLBD-OPS: PLPD+ without PUE (OPS split budgets, plain PFO); " + (
            self.describe_levels()
        )


class PLBARP(PLPA):
    __doc__ = "PLBA-RP: PLPA+ without OPS (PUE only)." + _SECTIONS.format(
        legend="PLPA-RP",
        extra="",
        module="plpa_plus",
        parent="PLPAPlus",
        state=", l, k",
        privacy=_NO_OPS,
        cls="PLBARP",
        example="(8, 6, (1, 1))",
    )
    name = "plba-rp"
    version = 1
    use_ops = False
    use_pue = True
    candidate_err = True

    def describe(self) -> str:
        return "PLBA-RP: PLPA+ without OPS (W = w_max, full eps_i), PUE on; " + (
            self.describe_levels()
        )


class PLBAOPS(PLPA):
    __doc__ = "PLBA-OPS: PLPA+ without PUE (OPS only)." + _SECTIONS.format(
        legend="PLPA-OPS",
        extra="",
        module="plpa_plus",
        parent="PLPAPlus",
        state=", l, k",
        privacy=_NO_PUE,
        cls="PLBAOPS",
        example="(4, 12, (1, 2))",
    )
    name = "plba-ops"
    version = 1
    use_ops = True
    use_pue = False
    candidate_err = True

    def describe(self) -> str:
        return "PLBA-OPS: PLPA+ without PUE (OPS split budgets, plain PFO); " + (
            self.describe_levels()
        )
