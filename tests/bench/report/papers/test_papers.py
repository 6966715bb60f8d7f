"""The papers' numbers kept as data match the specs that quote them (``docs/specs``)."""

from __future__ import annotations

import re
from pathlib import Path

from app.bench.ldp_ids import paper as ldp_ids
from app.bench.pwsm import paper as pwsm

SPECS = Path(__file__).resolve().parents[4] / "docs" / "specs"


def test_pwsm_reductions_are_the_specs():
    text = (SPECS / "seed-000-pwsm.md").read_text()
    for r in pwsm.REDUCTIONS.values():
        quote = rf"\*\*−{r.amre_pct}%\*\*[^(]*\(−{r.ln_pct}% (in )?ln\)"
        assert re.search(quote, text), r
    assert f"= {pwsm.SYNTHETIC_OVERALL_PCT}." in text and "= 67.975" in text


def test_ldp_ids_table2_is_the_specs():
    text = (SPECS / "seed-004-ldp-ids.md").read_text()
    for (eps, w), rows in ldp_ids.TABLE2.items():
        block = text.split(f"ε = {eps:g}, w = {w}\n", 1)[1].split("\n\n", 1)[0]
        for mech, values in rows.items():
            row = re.search(rf"\| [BP] {mech.upper()} \|(.*)\|", block)
            assert row is not None
            cells = [float(x) for x in row.group(1).split("|")]
            assert tuple(cells[:3]) == values, (eps, w, mech)


def test_every_reduction_has_a_figure_and_the_ratio_groups_their_budgets():
    assert {sweep for _, sweep in pwsm.REDUCTIONS} == set(pwsm.FIGURES)
    assert set(pwsm.SCALE) <= set(pwsm.REDUCTIONS)
    assert all(g.special != pwsm.DEFAULT_GROUP for g in pwsm.RATIO_GROUPS.values())
