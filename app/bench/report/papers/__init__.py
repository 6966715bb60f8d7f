"""The papers' published numbers as plain data, one module per paper (no prose, no logic).

Each figure is copied from the paper or the spec that reads it (``shared/specs/``), with the
section it comes from; the claim modules (:mod:`app.bench.report.claims`) compare them with
dpstream's runs.
"""

from __future__ import annotations

__all__ = ["ldp_ids", "pwsm"]

from app.bench.report.papers import ldp_ids, pwsm
