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
    from app.bench.papers import module_parser

    args = parse(argv)
    assert args.func.__name__ == "_module_paper" and args.paper == argv[1]
    assert args.rest == argv[2:]
    imported, own = module_parser(args.paper)
    assert imported.__name__ == module
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
    """Issues 25 and 35: every headline column runs strict periods, the default noise and the
    library's calibration (features at w Delta, ES in halves); aligned periods or the paper's
    calibration only in columns labelled not private (the service's parser: test_headline)."""
    for figure in ((False, False), (False, True), (True, False)):
        columns = optstream.figure_mechanisms(*figure, extras=True)
        for label, (_, params) in columns.items():
            weaker = (
                params.get("feature_sensitivity") == "paper"
                or params.get("strict") is False
                or params.get("noise", "geometric") != "geometric"
            )
            assert weaker == (not optstream.private(label)), label
            assert weaker == ("private)" in label), label
        headline = optstream.figure_mechanisms(*figure, extras=False)
        assert all(optstream.private(label) for label in headline)
    es = optstream.FIG3["OptStream_ES"][1]
    assert (es["feature_sensitivity"], es["es_split"], es["strict"]) == ("rigorous", "halves", True)


def test_optstream_figure_6_refuses_options_it_does_not_take(capsys, monkeypatch):
    """Issue 35 §3: a figure takes the verb's options or refuses them, never ignores them."""
    from app.bench.engine import datasets

    monkeypatch.setattr(datasets, "require", lambda name: None)
    for extra in (["--k", "4"], ["--eps", "1", "0.1"], ["--data", "tdrive"], ["--alpha", "10"]):
        args = parse(["bench", "optstream", "--figure", "6", *extra])
        assert args.func(args) == 2, extra
        assert "--figure 6 does not take --" + extra[0][2:] in capsys.readouterr().err
    args = parse(["bench", "optstream", "--figure", "thm11", "--aligned"])
    assert args.func(args) == 2
    assert "does not take --aligned" in capsys.readouterr().err


def test_optstream_figure_6_takes_the_verbs_options(monkeypatch):
    from app.bench.engine import datasets
    from app.bench.optstream import forecast as optstream_forecast

    seen: list[tuple] = []
    monkeypatch.setattr(datasets, "require", lambda name: None)
    monkeypatch.setattr(optstream_forecast, "write_fig6", lambda *a, **k: seen.append((a, k)) or 0)
    argv = ["--figure", "6", "--eps", "1", "--aligned", "--no-extras", "--data", "rte2013"]
    args = parse(["bench", "optstream", *argv, "--trials", "2"])
    assert args.func(args) == 0
    assert seen == [((2, None), {"eps": 1.0, "aligned": True, "extras": False})]


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
