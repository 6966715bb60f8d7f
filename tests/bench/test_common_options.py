"""Issue 35 §4: every ``dpstream bench <paper>`` takes the same options, with the same help,
and refuses in one line (exit 2) the one of ``--seeds`` / ``--trials`` that means nothing to it."""

from __future__ import annotations

import argparse

import pytest

from app.bench.papers import COMMON, MODULES, PAPERS, TAKES, module_parser
from app.cli import build_parser, parse

FLAGS = {"figure": "--figure", "quick": "--quick", "out": "--out", "seeds": "--seeds"}
FLAGS["trials"] = "--trials"


def _verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def paper_parser(paper: str) -> argparse.ArgumentParser:
    """The parser that reads ``dpstream bench <paper>``'s options (a module verb's is built
    when it runs)."""
    if paper in MODULES:
        return module_parser(paper)[1]
    return _verbs(_verbs(build_parser())["bench"])[paper]


def test_every_paper_is_a_bench_verb():
    assert set(PAPERS) <= set(_verbs(_verbs(build_parser())["bench"]))
    assert set(TAKES) == set(PAPERS)


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_every_paper_takes_the_common_options_first_with_the_same_help(paper: str):
    actions = [a for a in paper_parser(paper)._actions if a.dest != "help"]
    common = {a.dest: a for a in actions[: len(COMMON)]}
    assert list(common) == list(COMMON), "the common options come first, in one order"
    for dest, action in common.items():
        assert action.help == COMMON[dest], dest
        assert FLAGS[dest] in action.option_strings
    assert "--preset" in common["figure"].option_strings  # the alias open-domain had
    assert common["figure"].choices, "every paper names its presets"
    assert common["seeds"].default is None and common["trials"].default is None
    assert common["seeds"].type is int and common["trials"].type is int


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_the_common_options_parse_alike(paper: str):
    parser = paper_parser(paper)
    figure = sorted(next(a for a in parser._actions if a.dest == "figure").choices or ())[0]
    argv = ["--preset", figure, "--quick", "--out", "x", "--seeds", "4", "--trials", "2"]
    options = parser.parse_args(argv)
    assert (options.figure, options.quick, str(options.out)) == (figure, True, "x")
    assert (options.seeds, options.trials) == (4, 2)


REFUSED = [(p, k) for p in sorted(PAPERS) for k in ("seeds", "trials") if k not in TAKES[p]]


@pytest.mark.parametrize(("paper", "option"), REFUSED)
def test_an_option_without_meaning_is_refused_in_one_line(paper: str, option: str, capsys):
    args = parse(["bench", paper, f"--{option}", "2"])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"dpstream bench {paper}: --{option} has no meaning here")


def test_some_paper_refuses_each_of_seeds_and_trials():
    """The refusal test above covers both options (a registry change that drops one fails)."""
    assert {k for _, k in REFUSED} == {"seeds", "trials"}


def test_grid_papers_pass_seeds_to_the_runs(monkeypatch, tmp_path):
    from app.bench.engine import runs

    seen: dict[str, object] = {}
    monkeypatch.setattr(runs, "run_all", lambda out, **k: seen.update(k) or {})
    args = parse(["bench", "pwsm", "--figure", "eps", "--dataset", "sin", "--seeds", "3"])
    args.out = tmp_path
    assert args.func(args) == 0
    assert seen["seeds"] == 3 and seen["runs"] == [("pwsm-eps", "sin")]
