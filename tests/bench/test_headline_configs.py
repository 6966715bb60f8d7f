"""Issue 35 §1: every headline configuration of every paper's bench is one the service runs.

Each configuration a bench judges a claim on (PWSM, LDP-IDS, PLDP, OptStream, (w,n)) is
written as the stream entry that would run it and loaded through the service's stream-config
parser (:func:`app.stream.config.parse_stream`): it must be accepted without
``accept_weaker_guarantee`` (no ``weaker_guarantee`` set). OptStream's extra columns, labelled
not private, must be refused: the label says what the parser says.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from app.bench.engine import presets
from app.bench.engine.grid import LOCAL_PERSONALIZED, Grid, tasks
from app.bench.optstream import runs as optstream
from app.bench.pldp import runs as pldp
from app.bench.wn import figs as trajectory_figs
from app.bench.wn import trajectory
from app.dp.types import Group
from app.stream.config import parse_stream
from app.stream.errors import ConfigError

Entry = dict[str, Any]


def _levels(groups: Sequence[Group]) -> list[dict[str, Any]]:
    """The levels of ``groups``, with the strictest ``(max w, min eps)`` added when none
    satisfies all (the parser would add it; a local mechanism needs its user count)."""
    out = [{"name": f"l{i}", "w": g.w, "eps": g.eps} for i, g in enumerate(groups)]
    w, eps = max(g.w for g in groups), min(g.eps for g in groups)
    if not any(g.w == w and g.eps == eps for g in groups):
        out.append({"name": "strictest", "w": w, "eps": eps})
    return out


def central(
    name: str,
    params: Mapping[str, Any],
    groups: Sequence[Group],
    d: int,
    *,
    alpha: float | None = None,
    max_values: int = 1,
    graph: Mapping[str, Any] | None = None,
) -> Entry:
    """A central stream running the bench's ``name(**params)``: its noise (the default when
    the bench names none) under ``mechanism.noise``, sensitivity 1 per value (add-remove)."""
    rest = {k: v for k, v in params.items() if k != "noise"}
    entry: Entry = {
        "id": "bench",
        "d": d,
        "neighbours": "add-remove",
        "max_values": max_values,
        "mechanism": {"name": name, "noise": params.get("noise", "geometric"), "params": rest},
        "levels": _levels(groups),
    }
    if alpha is not None:
        entry["sum"] = {"alpha": alpha}
    if graph is not None:
        entry["graph"] = dict(graph)
    return entry


def local(name: str, groups: Sequence[Group], users: int, d: int) -> Entry:
    """A local stream running ``name`` over ``groups`` with ``users`` registered users per
    level (one count for a one-level mechanism)."""
    levels = _levels(groups)
    count: int | list[int] = users if len(levels) == 1 else [users] * len(levels)
    return {
        "id": "bench",
        "mode": "local",
        "d": d,
        "mechanism": {"name": name, "params": {"users": count}},
        "levels": levels,
    }


def accepted(entry: Entry) -> None:
    stream = parse_stream(entry, "bench", {})
    assert stream.weaker_guarantee is None, entry
    assert not stream.accept_weaker_guarantee


# -- OptStream -------------------------------------------------------------------------------


def optstream_columns() -> Iterator[tuple[str, Entry]]:
    """Every column of every OptStream figure, as the stream that runs it: Fig. 3 and 8 count
    one region (``d = 1``) at each eps, Fig. 10 sums at each alpha (k = 5 at alpha = 100), Fig. 4
    runs the 12 regions in one stream (the hierarchical columns) at eps = 1."""
    for figure in ((False, False), (True, False)):
        for label, (name, params) in optstream.figure_mechanisms(*figure, True).items():
            for eps in (1.0, 0.1, 0.01):
                yield label, central(name, params, [Group(optstream.W, eps)], 1)
    for label, (name, params) in optstream.figure_mechanisms(False, True, True).items():
        for alpha in (10.0, 50.0, 100.0):
            p = {**params, "k": 5} if alpha == 100.0 and "k" in params else params
            yield label, central(name, p, [Group(optstream.W, 1.0)], 1, alpha=alpha)
    for label, (name, params) in optstream.HIERS.items():
        yield label, central(name, params, [Group(optstream.W, 1.0)], 12, alpha=10.0)
    yield (
        "Thm 11",
        central(
            "optstream",
            {**optstream.OPT, "sampling": "es", "postprocess": False, "k": 4},
            [Group(optstream.W, 1.0)],
            1,
            alpha=1.0,
        ),
    )


def test_optstream_headline_columns_are_accepted_and_extras_refused():
    seen = {True: 0, False: 0}
    for label, entry in optstream_columns():
        headline = label == "Thm 11" or optstream.private(label)
        seen[headline] += 1
        if headline:
            accepted(entry)
        else:
            with pytest.raises(ConfigError, match="not w-event private as implemented"):
                parse_stream(entry, "bench", {})
    assert seen[True] > 20 and seen[False] > 10


def test_optstream_headline_uses_strict_periods_and_the_default_noise():
    for label, (_, params) in optstream.FIG3.items():
        assert params.get("strict", True) and "noise" not in params, label


# -- PWSM, LDP-IDS, PLDP, (w,n) --------------------------------------------------------------


def test_pwsm_grid_tasks_are_accepted():
    """Every (mechanism, eps, w, ratio) task of the PWSM presets, with the requirement groups
    the grid assigns on each seed."""
    count = 0
    for preset in presets.PRESETS.values():
        if preset.kind != "central":
            continue
        grid = Grid(
            preset.dataset,
            preset.mechanisms,
            preset.eps_values,
            preset.w_values,
            preset.seeds,
            preset.setting,
            ratios=preset.ratios,
        )
        for seed in preset.seeds[:1]:
            for task in tasks(grid, seed):
                groups = list(task.groups)
                if task.mechanism in LOCAL_PERSONALIZED:
                    accepted(local(task.mechanism, groups, 100, 10))
                else:
                    accepted(central(task.mechanism, {}, groups, 10))
                count += 1
    assert count > 50


def test_ldp_ids_points_are_accepted():
    count = 0
    for preset in presets.PRESETS.values():
        if preset.kind != "local":
            continue
        for name in preset.mechanisms:
            for eps, w in preset.points():
                accepted(local(name, [Group(w, eps)], 1000, 5))
                count += 1
    assert count > 20


def test_pldp_points_are_accepted():
    """PLDP's personalized mechanisms at the level mix each sweep point draws, and its
    baselines at ``(max w, min eps)``."""
    count = 0
    for eps_values, w_values in pldp.SWEEPS.values():
        for eps in eps_values:
            for w in w_values:
                levels, _ = pldp.level_mix(eps, w, 10_000, np.random.default_rng(0))
                for name in pldp.PERSONALIZED:
                    accepted(local(name, levels, 100, 5))
                strictest = Group(max(g.w for g in levels), min(g.eps for g in levels))
                for name in pldp.BASELINES:
                    accepted(local(name, [strictest], 10_000, 5))
                count += 1
    assert count == sum(len(e) * len(w) for e, w in pldp.SWEEPS.values())


def test_wn_sweeps_are_accepted():
    """(w,n): every mechanism and contrast at each sweep's values (the others at the
    defaults), ``l = 20`` values per user, on a 3 x 3 grid graph."""
    count = 0
    for axis, values in trajectory_figs.PRESETS.values():
        for value in values:
            at = {**trajectory_figs.DEFAULTS, axis: value}
            group = [Group(int(at["w"]), float(at["eps"]))]
            for name in trajectory_figs.figure_mechanisms(axis):
                params: dict[str, Any] = {}
                graph = None
                if name in ("stbd", "str", "wn_uniform"):
                    graph = {"grid": "3 x 3", "n": int(at["n"])}
                if name == "stbd":
                    params["page_groups"] = [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
                if name in ("str", "rescuedp", "rescuedp_g"):
                    params["process_var"] = 1.0
                accepted(central(name, params, group, 9, max_values=20, graph=graph))
                count += 1
    run = {
        n
        for axis, _ in trajectory_figs.PRESETS.values()
        for n in trajectory_figs.figure_mechanisms(axis)
    }
    assert count > 20 and set(trajectory.MECHANISMS) <= run
