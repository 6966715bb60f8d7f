"""The papers' headline claims against dpstream's runs: one module per paper, one function per
claim, each returning typed :class:`Claim` rows with a :class:`Verdict`.

:func:`claims` gathers the runs' means (:func:`app.bench.engine.evidence.gather`) and lists
the claims of the preset grid, PWSM first (:mod:`app.bench.pwsm.claims`, spec seed-000 §6.6), then
LDP-IDS (:mod:`app.bench.ldp_ids.claims`, spec seed-004 §7.8). The other papers' claims
(``app.bench.<paper>.claims``) read their stored runs and are called by their sections
(``app.bench.<paper>.section``).
"""

from __future__ import annotations

from app.bench.engine.claims import Claim, Verdict
from app.bench.engine.evidence import gather
from app.bench.engine.runs import Done
from app.bench.ldp_ids import claims as ldp_ids
from app.bench.pwsm import claims as pwsm

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
