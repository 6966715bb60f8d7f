"""Named benchmark presets: one paper figure's grid each, and a quick reduction of it.

A :class:`Preset` is a small frozen value: which paper and figure it reproduces, the mechanisms,
the sweep (``eps_values x w_values``, one of them a single value), the seeds, and the dataset
options per dataset. :func:`resolve` picks one by name, applies the dataset choice and, with
``quick=True``, the reduction (fewer seeds, slots, users and sweep points; under a minute on
two cores). :func:`app.bench.engine.runner.run_preset` runs it and writes ``results.csv``,
``results.md`` and the PNGs.

=============== ======= =========================== =====================================
name            paper   figure                      sweep
=============== ======= =========================== =====================================
pwsm-eps        PWSM    Fig. 10 (ln AMRE vs eps)    eps 0.2..1.0 at w = 120
pwsm-w          PWSM    Fig. 11 (ln AMRE vs w)      w 40..200 at eps = 0.6
pwsm-ratio-eps  PWSM    Fig. 12 (ln AMRE vs o)      o 0.1..0.9 of users at eps 1.0, rest 0.6
pwsm-ratio-w    PWSM    Fig. 13 (ln AMRE vs o)      o 0.1..0.9 of users at w 40, rest 120
ldp-ids-eps     LDP-IDS Fig. 4 (MRE vs eps)         eps 0.5..3 at w = 20
ldp-ids-w       LDP-IDS Fig. 5 (MRE vs w)           w 10..50 at eps = 1
ldp-ids-cfpu    LDP-IDS Table 2 (CFPU)              eps {1, 2} x w {20, 40}
=============== ======= =========================== =====================================

Grids follow the specs: PWSM Table 3 (spec seed-000 §6.2, user types §6.3); LDP-IDS §7.4 (its
proposed eps and w grids, the paper printing none; eps 2.5 and 1.5 are left out to fit the
time budget). PLBU, the PWSM figures' local baseline, runs in ``pwsm-eps`` and ``pwsm-w`` on the
same per-user values and requirement groups as PBD/PBA (:mod:`app.bench.engine.grid`; its
frequencies
scaled by N to counts). The ratio presets (PWSM §5.5, spec §6.3) sweep ``o``, the share of users
in the special group (two-group settings of :mod:`app.bench.engine.grid`; 10 types, so
o = 0.1..0.9 is
exactly ``round(n o)`` users in order); BD and BA run at (0.6, 120).

>>> p = resolve("pwsm-eps", dataset="sin", quick=True)
>>> p.dataset, p.seeds, p.eps_values, p.w_values, p.dataset_options["N"]
('sin', (0,), (0.2, 0.6, 1.0), (120,), 2000)
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

__all__ = [
    "PRESETS",
    "Preset",
    "names",
    "resolve",
    "summarize",
    "sweep_means",
    "write_tables",
]

PWSM_MECHANISMS = ("uniform", "sample", "bd", "ba", "pbd", "pba", "plbu")
RATIO_MECHANISMS = ("bd", "ba", "pbd", "pba")
RATIOS = (0.1, 0.3, 0.5, 0.7, 0.9)
LDP_MECHANISMS = ("lbu", "lbd", "lba", "lsp", "lpu", "lpd", "lpa")
PWSM_DATASETS = ("tdrive", "tlns", "sin", "log")
LDP_DATASETS = ("lns", "sin", "log", "tdrive")

_PWSM_OPTIONS: dict[str, dict[str, Any]] = {
    "tdrive": {},  # 10 x 10 grid, 1-minute slots, carry (T = 8,889)
    **{s: {"paper": "pwsm"} for s in ("tlns", "sin", "log")},  # N = T = 10,000
}
_PWSM_QUICK: dict[str, dict[str, Any]] = {
    "tdrive": {"T": 2000},
    **{s: {"N": 2000, "T": 2000} for s in ("tlns", "sin", "log")},
}
_LDP_OPTIONS: dict[str, dict[str, Any]] = {
    **{s: {"users": 200_000, "slots": 800} for s in ("lns", "sin", "log")},
    "tdrive": {"regions": 5, "slot": "10min"},  # d = 5, T = 889 on the sample
}
_LDP_QUICK: dict[str, dict[str, Any]] = {
    **{s: {"users": 20_000, "slots": 200} for s in ("lns", "sin", "log")},
    "tdrive": {"regions": 5, "slot": "10min", "T": 300},
}


@dataclass(frozen=True)
class Reduction:
    """What ``--quick`` changes: seeds, sweep values and dataset options (merged)."""

    seeds: tuple[int, ...] = (0,)
    eps_values: tuple[float, ...] | None = None
    w_values: tuple[int, ...] | None = None
    dataset_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    ratios: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Preset:
    """One paper figure's grid on one dataset.

    ``kind`` is ``"central"`` (run by :func:`app.bench.engine.grid.run_grid`, measure AMRE) or
    ``"local"`` (run by :func:`app.bench.ldp_ids.runs.run_points`, measures MRE and CFPU).
    ``sweep`` names the plotted x axis: ``"eps"``, ``"w"``, ``"ratio"`` (the share ``o`` of
    users in the special group of the two-group ``setting``, over ``ratios``) or ``"points"``
    (CFPU table).
    """

    name: str
    paper: str
    figure: str
    kind: str
    sweep: str
    measure: str
    log_y: bool
    mechanisms: tuple[str, ...]
    eps_values: tuple[float, ...]
    w_values: tuple[int, ...]
    seeds: tuple[int, ...]
    datasets: tuple[str, ...]
    dataset: str
    options: Mapping[str, Mapping[str, Any]]
    reduction: Reduction
    quick: bool = False
    setting: str = "types"
    ratios: tuple[float, ...] = ()

    @property
    def dataset_options(self) -> dict[str, Any]:
        """Options of the chosen dataset (after the quick reduction, if any)."""
        return dict(self.options.get(self.dataset, {}))

    def points(self) -> list[tuple[float, int]]:
        """Every ``(eps, w)`` of the grid, in sweep order."""
        return [(e, w) for e in self.eps_values for w in self.w_values]

    def sweep_text(self) -> str:
        """The grid in words: ``eps [..] x w [..]`` and, for ratio sweeps, the ratios."""
        text = f"eps {list(self.eps_values)} x w {list(self.w_values)}"
        if self.sweep == "ratio":
            text += f" x o {list(self.ratios)} ({self.setting})"
        return text

    def describe(self) -> str:
        """One line: paper, figure, dataset, sweep, seeds."""
        q = " (quick)" if self.quick else ""
        return (
            f"{self.name}{q}: {self.paper} {self.figure} on {self.dataset}, "
            f"{self.sweep_text()}, seeds {list(self.seeds)}, options {self.dataset_options}"
        )


PRESETS: dict[str, Preset] = {
    "pwsm-eps": Preset(
        "pwsm-eps",
        "PWSM",
        "Fig. 10",
        "central",
        "eps",
        "amre",
        True,
        PWSM_MECHANISMS,
        (0.2, 0.4, 0.6, 0.8, 1.0),
        (120,),
        (0, 1, 2),
        PWSM_DATASETS,
        "tdrive",
        _PWSM_OPTIONS,
        Reduction((0,), (0.2, 0.6, 1.0), None, _PWSM_QUICK),
    ),
    "pwsm-w": Preset(
        "pwsm-w",
        "PWSM",
        "Fig. 11",
        "central",
        "w",
        "amre",
        True,
        PWSM_MECHANISMS,
        (0.6,),
        (40, 80, 120, 160, 200),
        (0, 1, 2),
        PWSM_DATASETS,
        "tdrive",
        _PWSM_OPTIONS,
        Reduction((0,), None, (40, 120, 200), _PWSM_QUICK),
    ),
    "pwsm-ratio-eps": Preset(
        "pwsm-ratio-eps",
        "PWSM",
        "Fig. 12",
        "central",
        "ratio",
        "amre",
        True,
        RATIO_MECHANISMS,
        (0.6,),
        (120,),
        (0, 1, 2),
        PWSM_DATASETS,
        "tdrive",
        _PWSM_OPTIONS,
        Reduction((0,), None, None, _PWSM_QUICK, (0.1, 0.5, 0.9)),
        setting="two-eps",
        ratios=RATIOS,
    ),
    "pwsm-ratio-w": Preset(
        "pwsm-ratio-w",
        "PWSM",
        "Fig. 13",
        "central",
        "ratio",
        "amre",
        True,
        RATIO_MECHANISMS,
        (0.6,),
        (120,),
        (0, 1, 2),
        PWSM_DATASETS,
        "tdrive",
        _PWSM_OPTIONS,
        Reduction((0,), None, None, _PWSM_QUICK, (0.1, 0.5, 0.9)),
        setting="two-w",
        ratios=RATIOS,
    ),
    "ldp-ids-eps": Preset(
        "ldp-ids-eps",
        "LDP-IDS",
        "Fig. 4",
        "local",
        "eps",
        "mre",
        True,
        LDP_MECHANISMS,
        (0.5, 1.0, 2.0, 3.0),
        (20,),
        (0, 1, 2),
        LDP_DATASETS,
        "lns",
        _LDP_OPTIONS,
        Reduction((0,), (0.5, 1.0, 3.0), None, _LDP_QUICK),
    ),
    "ldp-ids-w": Preset(
        "ldp-ids-w",
        "LDP-IDS",
        "Fig. 5",
        "local",
        "w",
        "mre",
        True,
        LDP_MECHANISMS,
        (1.0,),
        (10, 20, 30, 40, 50),
        (0, 1, 2),
        LDP_DATASETS,
        "lns",
        _LDP_OPTIONS,
        Reduction((0,), None, (10, 20, 50), _LDP_QUICK),
    ),
    "ldp-ids-cfpu": Preset(
        "ldp-ids-cfpu",
        "LDP-IDS",
        "Table 2",
        "local",
        "points",
        "cfpu",
        True,
        LDP_MECHANISMS,
        (1.0, 2.0),
        (20, 40),
        (0, 1),
        ("sin", "log", "tdrive"),
        "sin",
        _LDP_OPTIONS,
        Reduction((0,), None, None, _LDP_QUICK),
    ),
}
"""Preset name -> its full-size definition (default dataset)."""


def names() -> list[str]:
    """Preset names.

    >>> names()  # doctest: +NORMALIZE_WHITESPACE
    ['ldp-ids-cfpu', 'ldp-ids-eps', 'ldp-ids-w', 'pwsm-eps', 'pwsm-ratio-eps', 'pwsm-ratio-w',
     'pwsm-w']
    """
    return sorted(PRESETS)


def resolve(name: str, dataset: str | None = None, quick: bool = False) -> Preset:
    """The preset ``name`` on ``dataset`` (default: the preset's), reduced if ``quick``.

    >>> resolve("pwsm-w", dataset="msnbc")
    Traceback (most recent call last):
    ...
    ValueError: pwsm-w runs on one of ('tdrive', 'tlns', 'sin', 'log'), got 'msnbc'
    """
    try:
        preset = PRESETS[name]
    except KeyError:
        raise ValueError(f"preset must be one of {names()}, got {name!r}") from None
    chosen = dataset or preset.dataset
    if chosen not in preset.datasets:
        raise ValueError(f"{name} runs on one of {preset.datasets}, got {chosen!r}")
    preset = replace(preset, dataset=chosen)
    if not quick:
        return preset
    r = preset.reduction
    merged = {
        k: {**preset.options.get(k, {}), **r.dataset_options.get(k, {})} for k in preset.datasets
    }
    return replace(
        preset,
        seeds=r.seeds,
        eps_values=r.eps_values or preset.eps_values,
        w_values=r.w_values or preset.w_values,
        ratios=r.ratios or preset.ratios,
        options=merged,
        quick=True,
    )


def run_rows(
    preset: Preset, jobs: int | None = None, progress: bool = True
) -> list[dict[str, Any]]:
    """Run ``preset`` and return its rows (every row has ``dataset``, ``eps``, ``w``,
    ``mechanism``, ``seed`` and the preset's ``measure``; ratio sweeps also ``ratio``)."""
    if preset.kind == "central":
        from app.bench.engine.grid import Grid, run_grid

        grid = Grid(
            dataset=preset.dataset,
            mechanisms=preset.mechanisms,
            eps_values=preset.eps_values,
            w_values=preset.w_values,
            seeds=preset.seeds,
            setting=preset.setting,
            ratios=preset.ratios,
            dataset_options=preset.dataset_options,
        )
        return run_grid(grid, jobs=jobs, progress=progress)
    from app.bench.ldp_ids.runs import run_points

    return run_points(
        preset.dataset,
        preset.mechanisms,
        preset.points(),
        preset.seeds,
        preset.dataset_options,
        jobs=jobs,
        progress=progress,
    )


def summarize(
    rows: list[dict[str, Any]], measure: str
) -> dict[tuple[float, int, str], tuple[float, float, int]]:
    """``(eps, w, mechanism) -> (mean, sample std, seeds)`` of ``measure`` over seeds."""
    return {
        (float(k[0]), int(k[1]), str(k[2])): v
        for k, v in sweep_means(rows, measure, ("eps", "w")).items()
    }


def sweep_means(
    rows: list[dict[str, Any]], measure: str, keys: tuple[str, ...]
) -> dict[tuple[Any, ...], tuple[float, float, int]]:
    """``(*row[keys], mechanism) -> (mean, sample std, seeds)`` of ``measure`` over seeds; e.g.
    ``keys=("ratio",)`` for a ratio sweep (``eps`` and ``w`` are fixed there)."""
    acc: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for r in rows:
        point = tuple(int(r[k]) if k == "w" else float(r[k]) for k in keys)
        acc[(*point, str(r["mechanism"]))].append(float(r[measure]))
    out = {}
    for key, v in acc.items():
        mean = sum(v) / len(v)
        std = math.sqrt(sum((x - mean) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
        out[key] = (mean, std, len(v))
    return out


def _table(
    rows: list[dict[str, Any]], measure: str, mechanisms: tuple[str, ...], ratio: bool = False
) -> list[str]:
    keys = ("ratio", "eps", "w") if ratio else ("eps", "w")
    means = sweep_means(rows, measure, keys)
    points = list(dict.fromkeys(k[:-1] for k in means))
    lines = [
        "| "
        + " | ".join("o" if k == "ratio" else k for k in keys)
        + " | "
        + " | ".join(mechanisms)
        + " |",
        "|" + "---|" * (len(keys) + len(mechanisms)),
    ]
    for point in points:
        cells = []
        for m in mechanisms:
            mean, std, _ = means.get((*point, m), (math.nan, math.nan, 0))
            cells.append(f"{mean:.4g} ± {std:.2g}")
        lines.append("| " + " | ".join(str(x) for x in point) + " | " + " | ".join(cells) + " |")
    return lines


def write_tables(
    rows: list[dict[str, Any]], out_dir: str | Path, preset: Preset, seconds: float
) -> list[Path]:
    """``results.csv`` (every row, with its seed) and ``results.md`` (mean ± std over seeds)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / "results.csv", out / "results.md"
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    measures = ("amre",) if preset.kind == "central" else ("mre", "cfpu")
    lines = [
        f"# {preset.name} on {preset.dataset}: {preset.paper} {preset.figure}",
        "",
        preset.describe() + f". Wall time {seconds:.0f} s.",
        "",
    ]
    for measure in measures:
        lines += [f"## mean {measure.upper()} ± std over seeds {list(preset.seeds)}", ""]
        lines += _table(rows, measure, preset.mechanisms, preset.sweep == "ratio") + [""]
    md_path.write_text("\n".join(lines))
    return [csv_path, md_path]
