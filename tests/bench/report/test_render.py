"""RESULTS.md text: claims table, machine named once from recorded facts, cost section."""

from __future__ import annotations

import platform

from app.bench.engine import markdown
from app.bench.engine.claims import Claim, Verdict
from app.bench.report import render
from tests.bench.stubs import write_cost_slopes

MACHINE = {"platform": "Linux-test", "cpus": "2", "python": "3.11.9", "numpy": "2.1.0"}


def test_claims_table_marks_and_escapes():
    rows = markdown.claims_table(
        [
            Claim("PWSM", "1", "a | b", "p", "m", Verdict.AGREE),
            Claim("PWSM", "6", "c", "p", "not run", Verdict.NOT_RUN, "why"),
        ]
    )
    assert rows[2] == "| 1 | a \\| b | p | m | **agree** |  |"
    assert rows[3] == "| 6 | c | p | not run | not run | why |"


def test_machine_line_from_recorded_facts_or_says_it_is_missing():
    one = render.machine_line([(MACHINE, ["pwsm-eps-sin", "pwsm-w-sin"])])
    assert one.startswith("Machine of the runs") and "Linux-test, 2 CPUs, Python 3.11.9" in one
    assert "pwsm-eps-sin" not in one  # one machine measured every run: no need to list them
    assert "not recorded" in render.machine_line([])


def test_machine_line_names_each_machine_with_its_runs():
    other = {**MACHINE, "cpus": "16", "python": "3.12.3"}
    line = render.machine_line([(MACHINE, ["ldp-ids-eps-sin"]), (other, ["pwsm-eps-sin", "a"])])
    assert line.startswith("Machines of the runs")
    assert "2 CPUs, Python 3.11.9, numpy 2.1.0 (ldp-ids-eps-sin)" in line
    assert "16 CPUs, Python 3.12.3, numpy 2.1.0 (pwsm-eps-sin, a)" in line


def test_cost_section_names_only_what_differs_from_the_runs_machine(tmp_path):
    write_cost_slopes(tmp_path, seed=0, load1=0.5, **MACHINE)
    same = render.cost_section(tmp_path, tmp_path / "fig", tmp_path, MACHINE)
    assert "seed 0; the machine above, load 0.5)" in same[0]
    assert "| bd | 0.5 / 0.6 | 0.5 / 0.6 | 0.5 / 0.6 | yes |" in same
    other = render.cost_section(tmp_path, tmp_path / "fig", tmp_path, {**MACHINE, "cpus": "8"})
    assert "seed 0; 2 CPUs, load 0.5)" in other[0]
    assert render.cost_section(tmp_path / "none", tmp_path, tmp_path)[0].startswith("No cost run")


def test_render_has_no_machine_prose(tmp_path):
    text = render.render(
        {},
        [],
        figures=tmp_path,
        link_root=tmp_path,
        cost_lines=[],
        closing=render.closing_note(tmp_path, 120.0, False),
        command="cmd",
        total_s=120.0,
        machines=[(MACHINE, ["pwsm-eps-sin"])],
    )
    assert text.count("Linux-test") == 1 and "wall time 2.0 min)" in text
    assert "Summary: 0 agree, 0 partly, 0 disagree, 0 not run, over all 0 papers" in text
    for prose in ("shared with another engineer", "shared cores", platform.node() or "\0"):
        assert prose not in text
