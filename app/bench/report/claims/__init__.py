"""The papers' headline claims against dpstream's runs: one module per paper, one function per
claim, each returning typed :class:`Claim` rows with a :class:`Verdict`.

:func:`claims` gathers the runs' means (:func:`app.bench.report.evidence.gather`) and lists
the claims of the preset grid, PWSM first (:mod:`.pwsm`, spec seed-000 §6.6), then LDP-IDS
(:mod:`.ldp_ids`, spec seed-004 §7.8). The other papers' claims (:mod:`.pldp`, :mod:`.wn`,
:mod:`.optstream`) read their stored runs and are called by their sections
(:mod:`app.bench.report.papers`).
"""

from __future__ import annotations

from app.bench.report.claims import ldp_ids, pwsm
from app.bench.report.claims.common import Claim, Verdict
from app.bench.report.evidence import gather
from app.bench.report.runs import Done

__all__ = ["Claim", "Verdict", "claims", "ldp_ids", "pwsm"]


def claims(
    done: Done,
    floors: dict[str, float] | None = None,
    populations: dict[str, int] | None = None,
) -> list[Claim]:
    """Every claim, PWSM first, from the runs' rows. ``floors`` (AMRE of an all-zero release)
    and ``populations`` (users), per dataset, only feed the explanations."""
    evidence = gather(done, floors, populations)
    return pwsm.claims(evidence) + ldp_ids.claims(evidence)
