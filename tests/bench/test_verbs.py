"""``dpstream bench <paper>``: one verb per paper, its options, and OptStream's columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.bench.optstream import runs as optstream
from app.cli import parse


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "pwsm", "--quick", "--figure", "eps"],
        ["bench", "ldp-ids", "--figure", "cfpu", "--dataset", "sin"],
    ],
)
def test_the_grid_papers_have_a_verb(argv: list[str]):
    args = parse(argv)
    assert args.func.__name__ == "_grid_paper" and args.rest == []


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["bench", "pldp", "--quick", "--datasets", "sin"], "app.bench.pldp.runs"),
        (["bench", "optstream", "--figure", "4", "--trials", "3"], "app.bench.optstream.cli"),
        (["bench", "wn", "--quick", "--figure", "table1"], "app.bench.wn.figs"),
    ],
)
def test_the_module_papers_hand_their_options_to_the_module(argv: list[str], module: str):
    """Their modules are heavy: the parser keeps the options for the module's own parser."""
    import argparse
    import importlib

    args = parse(argv)
    assert args.func.__name__ == "_module_paper" and args.paper == argv[1]
    assert args.rest == argv[2:]
    own = argparse.ArgumentParser()
    importlib.import_module(module).add_arguments(own)
    assert own.parse_args(args.rest).quick == ("--quick" in argv)


def test_another_verb_refuses_unknown_options():
    with pytest.raises(SystemExit):
        parse(["bench", "pwsm", "--no-such-option"])


def test_grid_paper_refuses_a_run_that_does_not_exist(capsys):
    args = parse(["bench", "pwsm", "--dataset", "msnbc"])
    assert args.func(args) == 2
    assert "no run of figure any on dataset 'msnbc'" in capsys.readouterr().err


def test_optstream_figure_presets_set_the_old_flags(monkeypatch):
    seen = {}
    monkeypatch.setattr(optstream, "_run", lambda a: seen.update(vars(a)) or 0)
    args = parse(["bench", "optstream", "--figure", "10", "--quick"])
    assert args.func(args) == 0
    assert seen["alpha"] == [10.0, 50.0, 100.0] and seen["trials"] == 2
    assert not seen["hierarchy"] and not seen["ablations"]


def test_optstream_headline_columns_are_private_and_extras_are_labelled():
    """Issue 25 item 1: the library's calibration (features at w Delta, ES in halves) in
    every headline column; the paper's only in columns labelled "not private"."""
    for figure in ((False, False), (False, True), (True, False)):
        columns = optstream.figure_mechanisms(*figure, extras=True)
        for label, (_, params) in columns.items():
            paper_cal = params.get("feature_sensitivity") == "paper"
            assert paper_cal == (not optstream.private(label)), label
            assert paper_cal == ("not private" in label), label
        headline = optstream.figure_mechanisms(*figure, extras=False)
        assert all(optstream.private(label) for label in headline)
    es = optstream.FIG3["OptStream_ES"][1]
    assert (es["feature_sensitivity"], es["es_split"]) == ("rigorous", "halves")


def test_wn_figure_runs_only_that_sweep(monkeypatch, tmp_path: Path):
    from types import SimpleNamespace

    from app.bench.wn import figs

    calls = []
    graph = SimpleNamespace(nodes=3, edge_count=2)
    toy = SimpleNamespace(graph=graph, clipped_share=0.0, counts=[0] * 4)
    monkeypatch.setattr(figs, "LOADERS", {"toy": lambda cap: toy})
    monkeypatch.setattr(figs, "plots", lambda rows, out, name: [])

    def fake_run(name, data, quick, seeds, cap, figures):
        calls.append(list(figures))
        return [{"dataset": name, "figure": f} for f in figures]

    monkeypatch.setattr(figs, "run", fake_run)
    out = tmp_path / "wn"
    args = parse(["bench", "wn", "--data", "toy", "--figure", "fig9", "--out", str(out)])
    assert args.func(args) == 0
    assert calls == [["fig9"]]
    assert (out / "trajectory.csv").read_text().splitlines()[1] == "toy,fig9"
