"""One module per paper. :mod:`.pwsm` and :mod:`.ldp_ids` hold the papers' published numbers
as plain data (no prose, no logic), each copied from the paper or the spec that reads it
(``docs/specs/``) with the section it comes from; :mod:`app.bench.report.render` writes their
sections. :mod:`.pldp`, :mod:`.wn` and :mod:`.optstream` each render their paper's whole section
from its stored runs (:mod:`app.bench.report.stored`): the fixed prose as text, every number
from the rows, the claims from :mod:`app.bench.report.claims` (whose modules keep the numbers
they compare with). Import those three by name: they import the claims, so the package does not
import them.
"""

from __future__ import annotations

__all__ = ["ldp_ids", "pwsm"]

from app.bench.report.papers import ldp_ids, pwsm
