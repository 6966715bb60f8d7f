"""OptStream offline claims: regional half-hourly load, the paper's settings, mean L1 error.

Runs the period mechanisms through the registry on

* ``rte2013``: RTE's regional consumption (12 metropolitan regions, half-hourly, January and
  February 2013), read from ``<data root>/rte_regional_2013/`` (``$DPSTREAM_DATA`` or
  ``../shared/data/raw``; see SOURCE.md there). It stands in for the paper's 2016 data (spec
  seed-001 §5.1): its two months replace Feb/Jun/Oct 2016. The 12 records of 2013-01-01 00:00
  without a value take the next half-hour's value.
* ``synthetic``: a documented generator with the regional means of the paper's Table 2, a
  daily shape (night trough, morning and evening peaks), a weekly cycle (weekends -8%) and
  AR(1) noise.
* ``tdrive``: T-Drive taxi counts per region of a coarse grid, half-hourly, five whole days
  (:mod:`app.bench.optstream.tdrive`); counts, so ``Delta = 1`` is exact there.

Every region is its own stream (``d = 1``), as in the paper; the error of a run is the
per-point mean ``|x^ - x|`` over the month (spec §5.5, item 18), averaged over regions and
trials, reported as log10 with the standard error over trials (of the per-trial means over
regions, carried to log10 by ``se / (mean ln 10)``). Paper setting (spec §5.3): ``w = 48``,
``k = 10``, ``theta = 1000``.

Every headline column runs as the service would (a test loads each through the service's
stream-config parser, which accepts it without ``accept_weaker_guarantee``): strict periods
(``eps / 2`` per period, so that every sliding window of ``w`` slots spends at most ``eps``),
the service's default noise (``geometric``: exact for counts, on a grid for real values),
OptStream's feature queries at the w-event sensitivity ``w Delta``
(``feature_sensitivity="rigorous"``) and ES spending eps in halves (perturbation, features;
``es_split="halves"``, spec §2.3). The paper's settings appear only in extra columns whose
label says they are not private (:func:`private`): aligned periods (``strict=False``, eps per
period: a window straddling two periods loses up to ``2 eps``), "(aligned periods, not
w-event private)" (:data:`ALIGNED`); the paper's whole calibration (aligned periods, features
at ``Delta``: ``w`` times too little noise, ES in thirds, numpy's float Laplace), "(paper Δ,
not private)" (:data:`NP`). ES in thirds alone (private) is the "(thirds)" column. The plots
draw the extra columns dashed. ``--aligned`` runs every column with aligned periods.

``dpstream bench optstream [--figure F] [--trials N] [--data NAME ...] [--out DIR]`` prints
Markdown tables for H1-H3 (and H6 with ``--alpha``) and writes ``optstream.csv`` with one row
per run (dataset, month, region, mechanism, eps, delta, seed, error) and the figure's PNG
(``fig3_eps.png``, ``fig4_hierarchy.png``, ``fig8_ablations.png`` or ``fig10_alpha.png``,
:mod:`app.bench.optstream.plots`).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from app.bench.engine.datasets.base import data_root
from app.bench.optstream.plots import plot_optstream
from app.bench.optstream.tdrive import tdrive_regions
from app.dp.interfaces import as_period
from app.dp.registry import create
from app.dp.types import Group

W = 48
TABLE2_MW = {  # the paper's Table 2, daily average MW in 2016
    "Auvergne-Rhône-Alpes": 7717.58,
    "Bourgogne-Franche-Comté": 2498.23,
    "Bretagne": 2554.23,
    "Centre-Val de Loire": 2157.97,
    "Grand Est": 5286.24,
    "Hauts-de-France": 5832.26,
    "Île-de-France": 8315.13,
    "Normandie": 3267.22,
    "Nouvelle-Aquitaine": 4985.68,
    "Occitanie": 4314.7,
    "Pays de la Loire": 3174.17,
    "Provence-Alpes-Côte d'Azur": 4782.4,
}

SETTINGS = {"k": 10, "theta": 1000.0}
"""The paper's k and theta (spec §5.3)."""
OPT = {**SETTINGS, "strict": True, "feature_sensitivity": "rigorous", "es_split": "halves"}
"""OptStream as the service runs it: strict periods, default noise, features at ``w Delta``."""
NOT_PRIVATE = {
    **SETTINGS,
    "strict": False,
    "noise": "laplace",
    "feature_sensitivity": "paper",
    "es_split": "thirds",
}
"""The paper's calibration: aligned periods, float Laplace, features at ``Delta``, ES in
thirds. Not w-event private."""
NP = " (paper Δ, float Laplace, not private)"
"""The label suffix of every column that runs :data:`NOT_PRIVATE`."""
ALIGNED = " (aligned periods, not w-event private)"
"""The label suffix of every column run with the paper's aligned periods (``strict=False``)."""
NOT_HEADLINE = (NP, ALIGNED, " (parallel regions, not private if a user moves)")
"""The label suffixes of the columns the service refuses: shown, never judged."""
MECHANISMS: dict[str, tuple[str, dict[str, Any]]] = {
    "Laplace": ("optstream", {**OPT, "sampling": "none", "postprocess": False}),
    "DFT": ("dft", {"strict": True, "k": 10}),
    "OptStream_ES": ("optstream", {**OPT, "sampling": "es"}),
    "OptStream_LS": ("optstream", {**OPT, "sampling": "ls"}),
}
FIG3 = {**MECHANISMS, "PeGaSus": ("pegasus", {})}
"""Fig. 3's comparison: the baselines, OptStream, and PeGaSus-w (H7; spec §2.11 B3; it
releases every slot at ``eps / w``, so periods do not apply)."""
ALIGNED_COLUMNS: dict[str, tuple[str, dict[str, Any]]] = {
    x + ALIGNED: ("optstream", {**OPT, "sampling": s, "strict": False})
    for x, s in (("OptStream_ES", "es"), ("OptStream_LS", "ls"))
}
"""OptStream ES and LS with aligned periods (eps per period), all else as the headline."""
EXTRAS: dict[str, tuple[str, dict[str, Any]]] = {
    **ALIGNED_COLUMNS,
    "OptStream_ES (thirds)": ("optstream", {**OPT, "sampling": "es", "es_split": "thirds"}),
    "OptStream_ES" + NP: ("optstream", {**NOT_PRIVATE, "sampling": "es"}),
    "OptStream_LS" + NP: ("optstream", {**NOT_PRIVATE, "sampling": "ls"}),
}
"""Extra columns beside the headline ones: aligned periods (not private), ES with the paper's
thirds (private), and the paper's whole calibration (not private)."""
ABLATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "<P,o,o>": ("optstream", {**OPT, "sampling": "none", "postprocess": False}),
    "<P,o,O>": ("optstream", {**OPT, "sampling": "none", "postprocess": True}),
    "<P,S,o>": ("optstream", {**OPT, "sampling": "ls", "postprocess": False}),
    "<P,S,O>": ("optstream", {**OPT, "sampling": "ls", "postprocess": True}),
}
ABLATION_EXTRAS: dict[str, tuple[str, dict[str, Any]]] = {
    "<P,S,O>" + ALIGNED: ("optstream", {**OPT, "sampling": "ls", "strict": False}),
    "<P,o,O>" + NP: ("optstream", {**NOT_PRIVATE, "sampling": "none", "postprocess": True}),
    "<P,S,O>" + NP: ("optstream", {**NOT_PRIVATE, "sampling": "ls", "postprocess": True}),
}
"""Fig. 8's extra columns: ``<P,S,O>`` with aligned periods, and the two post-processed
ablations with the paper's calibration (not private)."""


HIERS: dict[str, tuple[str, dict[str, Any]]] = {
    "OptStream_h": ("optstream_h", OPT),
    "OptStream_h per-region": ("optstream_hr", {**OPT, "region_split": "sequential"}),
    "OptStream_h per-region" + NOT_HEADLINE[2]: (
        "optstream_hr",
        {**OPT, "region_split": "parallel"},
    ),
    "OptStream_h" + ALIGNED: ("optstream_h", {**OPT, "strict": False}),
    "OptStream_h" + NP: ("optstream_h", NOT_PRIVATE),
}
"""Fig. 4's hierarchical columns: one sample set shared by the regions (``optstream_h``), one
per region (``optstream_hr``) at eps/(2d) per region (sequential over the regions: private for
any user) or at eps/2 per region (the paper's parallel composition: private only when a user
stays in one region, as the per-region baselines assume; the service refuses it), and the
shared one with aligned periods and with the paper's calibration."""


def private(label: str) -> bool:
    """Whether the column ``label`` is a headline one: w-event private as the service runs it.

    >>> private("OptStream_LS"), private("OptStream_LS" + NP), private("DFT" + ALIGNED)
    (True, False, False)
    """
    return not label.endswith(NOT_HEADLINE)


def load_rte(month: str, root: Path | None = None) -> tuple[list[str], np.ndarray]:
    """``(regions, (slots, 12) MW)`` for ``month`` in ``"2013-01"``, ``"2013-02"``."""
    path = (root or data_root()) / "rte_regional_2013" / f"{month}.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        records = json.load(fh)
    cells: dict[tuple[str, str], float] = {}
    for rec in records:
        f = rec["fields"]
        value = f.get("consommation_brute_electricite_rte")
        cells[(f["date_heure"], f["region"])] = math.nan if value is None else float(value)
    stamps = sorted({s for s, _ in cells})
    regions = sorted({r for _, r in cells})
    x = np.array([[cells.get((s, r), math.nan) for r in regions] for s in stamps])
    for t in range(len(x) - 2, -1, -1):  # a missing value takes the next half-hour's
        x[t] = np.where(np.isnan(x[t]), x[t + 1], x[t])
    if np.isnan(x).any() or len(x) % W:
        raise ValueError(f"{path}: incomplete half-hourly grid")
    return regions, x


def synthetic_load(days: int, seed: int) -> tuple[list[str], np.ndarray]:
    """Half-hourly regional loads: Table 2 means x (daily shape) x (weekly cycle) + AR(1)."""
    rng = np.random.default_rng(seed)
    t = np.arange(days * W)
    hour = (t % W) / 2
    daily = (
        1
        - 0.18 * np.cos(2 * np.pi * (hour - 4) / 24)  # night trough near 04:00
        + 0.06 * np.exp(-((hour - 19.5) ** 2) / 4)  # evening peak
        + 0.04 * np.exp(-((hour - 12.0) ** 2) / 6)  # midday shoulder
    )
    weekly = np.where((t // W) % 7 >= 5, 0.92, 1.0)
    regions = list(TABLE2_MW)
    means = np.array([TABLE2_MW[r] for r in regions])
    ar = np.zeros((len(t), len(regions)))
    shocks = rng.normal(0, 0.01, ar.shape)
    for i in range(1, len(t)):
        ar[i] = 0.97 * ar[i - 1] + shocks[i]
    return regions, means * (daily * weekly)[:, None] * (1 + ar)


DATASETS: dict[str, Callable[[argparse.Namespace], dict[str, tuple[list[str], np.ndarray]]]] = {
    "rte2013": lambda a: {m: load_rte(m) for m in ("2013-01", "2013-02")},
    "synthetic": lambda a: {f"{a.synthetic_days}d": synthetic_load(a.synthetic_days, seed=2016)},
    "tdrive": lambda a: {"2008-02": tdrive_regions()},
}
"""``--data`` names: each gives ``{month: (regions, (slots, regions) values)}``."""


def with_periods(params: dict[str, Any], aligned: bool) -> dict[str, Any]:
    """A column's parameters, with aligned periods (``strict=False``) when ``aligned``.

    >>> with_periods({"k": 10}, True), with_periods({"k": 10}, False)
    ({'k': 10, 'strict': False}, {'k': 10})
    """
    return {**params, "strict": False} if aligned else dict(params)


def released(
    name: str, params: dict[str, Any], x: np.ndarray, eps: float, alpha: float | None, seed: int
) -> np.ndarray:
    """One run's release of one region's series ``x`` (slots,), slot by slot; counts
    (``alpha`` None) are ``x`` rounded."""
    m = as_period(create(name, d=1, groups=[Group(W, eps)], alpha=alpha, **params))
    rng = np.random.default_rng(seed)
    out = np.empty(len(x))
    for v in x.reshape(-1, 1, 1):
        for r in m.step(v if alpha is not None else np.rint(v).astype(np.int64), rng):
            out[r.slot - 1] = r.histogram[0]
    return out


def mean_l1(
    name: str, params: dict[str, Any], x: np.ndarray, eps: float, alpha: float | None, seed: int
) -> float:
    """Per-point mean L1 error of one run on one region's series ``x`` (slots,)."""
    truth = x if alpha is not None else np.rint(x)
    return float(np.abs(released(name, params, x, eps, alpha, seed) - truth).mean())


def run(
    datasets: dict[str, dict[str, tuple[list[str], np.ndarray]]],
    mechanisms: dict[str, tuple[str, dict[str, Any]]],
    eps_grid: list[float],
    alphas: list[float | None],
    trials: int,
    aligned: bool,
    rows: list[dict[str, Any]],
    k: int | None = None,
    progress: bool = False,
) -> dict[tuple[str, str, str, float, float | None], float]:
    """Mean error (over regions and trials) per (dataset, month, mechanism, eps, alpha); ``k``
    (samples, Fourier coefficients) overrides the paper's 10, or 5 when alpha = 100;
    ``aligned`` runs every column with aligned periods; ``progress`` draws a progress bar on
    stderr."""
    acc: dict[tuple[str, str, str, float, float | None], list[float]] = defaultdict(list)
    total = sum(len(regions) for months in datasets.values() for regions, _ in months.values())
    bar = tqdm(
        total=total * len(mechanisms) * len(eps_grid) * len(alphas) * trials,
        desc="optstream",
        unit="run",
        disable=not progress,
    )
    for ds, months in datasets.items():
        for month, (regions, x) in months.items():
            for label, (name, params) in mechanisms.items():
                p = with_periods(params, aligned)
                if "k" in p and k is not None:
                    p["k"] = k
                elif "k" in p and alphas and alphas[0] == 100.0:
                    p["k"] = 5  # spec §5.3: k = 5 when alpha = 100
                for eps in eps_grid:
                    for alpha in alphas:
                        for r, region in enumerate(regions):
                            for seed in range(trials):
                                err = mean_l1(name, p, x[:, r], eps, alpha, seed)
                                bar.update()
                                acc[(ds, month, label, eps, alpha)].append(err)
                                rows.append(
                                    {
                                        "dataset": ds,
                                        "month": month,
                                        "region": region,
                                        "mechanism": label,
                                        "registry": name,
                                        "eps": eps,
                                        "alpha": alpha,
                                        "strict": p.get("strict", True),
                                        "seed": seed,
                                        "params": json.dumps(p, sort_keys=True),
                                        "error": err,
                                    }
                                )
    bar.close()
    return {key: float(np.mean(v)) for key, v in acc.items()}


def standard_errors(
    rows: list[dict[str, Any]], by_level: bool = False
) -> dict[tuple[str, str, str, float, float | None], float]:
    """Standard error of each mean of :func:`run` (or :func:`hierarchy` with ``by_level``) from
    its ``rows``: the per-seed means over regions, their sample deviation over sqrt(trials);
    NaN with one trial."""
    acc: dict[tuple[str, str, str, float, float | None], dict[int, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in rows:
        month = f"{r['month']} {r['region']}" if by_level else r["month"]
        key = (r["dataset"], month, r["mechanism"], r["eps"], r["alpha"])
        acc[key][r["seed"]].append(r["error"])
    out = {}
    for key, seeds in acc.items():
        means = np.array([np.mean(v) for v in seeds.values()])
        out[key] = float(means.std(ddof=1) / math.sqrt(len(means))) if len(means) > 1 else math.nan
    return out


def hierarchy(
    datasets: dict[str, dict[str, tuple[list[str], np.ndarray]]],
    alphas: list[float],
    trials: int,
    aligned: bool,
    rows: list[dict[str, Any]],
    extras: bool = True,
) -> dict[tuple[str, str, str, float, float | None], float]:
    """H4: national and regional mean L1 at eps = 1 (eps/2 per level, spec §2.9, B1); without
    ``extras`` only the headline columns.

    OptStream_h releases the 12 regions from one joint program (national = their sum), with
    one L1 sample set shared by the regions (``optstream_h``), privately and, in the extra
    column, with the paper's calibration (not private). The per-region columns
    (:data:`HIERS`, ``optstream_hr``) sample each region on its own as the paper: at eps/24
    per region (sequential composition over the regions, private for any user) and, labelled
    "parallel", at eps/2 per region (the paper's parallel composition: private only when a
    user stays in one region, the assumption under which the baselines release each region at
    eps / 2). Laplace, DFT and OptStream_LS release the national series and every region
    separately with eps / 2 each; their national figure is their own national release.
    """
    acc: dict[tuple[str, str, str, float, float | None], list[float]] = defaultdict(list)
    hiers = {label: m for label, m in HIERS.items() if extras or private(label)}
    strict = {
        label: with_periods(params, aligned).get("strict", True)
        for label, (_, params) in {**HIERS, **MECHANISMS}.items()
    }
    for ds, months in datasets.items():
        for month, (_, x) in months.items():
            national = x.sum(axis=1)
            for alpha in alphas:
                k = 5 if alpha == 100.0 else 10
                for seed in range(trials):
                    errs: dict[tuple[str, str], float] = {}
                    for hier_label, (hier_name, calibration) in hiers.items():
                        hier = as_period(
                            create(
                                hier_name,
                                d=x.shape[1],
                                groups=[Group(W, 1.0)],
                                alpha=alpha,
                                **{**with_periods(calibration, aligned), "k": k},
                            )
                        )
                        rng = np.random.default_rng(seed)
                        out = np.array([r.histogram for v in x for r in hier.step([v], rng)])
                        nat = float(np.abs(out.sum(axis=1) - national).mean())
                        errs[(hier_label, "national")] = nat
                        errs[(hier_label, "regional")] = float(np.abs(out - x).mean())
                    for label, (name, params) in MECHANISMS.items():
                        p = with_periods(params, aligned)
                        if "k" in p:
                            p["k"] = k
                        errs[(label, "national")] = mean_l1(name, p, national, 0.5, alpha, seed)
                        errs[(label, "regional")] = float(
                            np.mean(
                                [
                                    mean_l1(name, p, x[:, r], 0.5, alpha, seed)
                                    for r in range(x.shape[1])
                                ]
                            )
                        )
                    for (label, level), err in errs.items():
                        acc[(ds, f"{month} {level}", label, 1.0, alpha)].append(float(err))
                        rows.append(
                            {
                                "dataset": ds,
                                "month": month,
                                "region": level,
                                "mechanism": label,
                                "registry": label,
                                "eps": 1.0,
                                "alpha": alpha,
                                "strict": strict[label],
                                "seed": seed,
                                "params": json.dumps({"k": k}),
                                "error": float(err),
                            }
                        )
    return {key: float(np.mean(v)) for key, v in acc.items()}


def theorem11(eps: float, lipschitz: list[float], ks: list[int], trials: int) -> str:
    """H9: ES sampling without post-processing (``<P,S,o>`` with ES) on a smooth series of
    Lipschitz constant ``L`` (a sine of amplitude ``L P / (2 pi)``, ``P = 4 w``): mean L1 per
    k, against Thm 11's ``m* = sqrt(w / (eps L))`` (``k* = w / m*``) and plain Laplace."""
    lines = [
        f"### H9: ES without post-processing, eps = {eps:g}, w = {W}",
        "",
        "| L | k* (Thm 11) | best k | " + " | ".join(f"k={k}" for k in ks) + " | Laplace |",
        "|---|---|---|" + "---|" * (len(ks) + 1),
    ]
    t = np.arange(W * 20)
    for lip in lipschitz:
        period = 4 * W
        x = 10_000 + lip * period / (2 * np.pi) * np.sin(2 * np.pi * t / period)
        errs = []
        for k in [*ks, W]:
            p = {**OPT, "sampling": "es", "postprocess": False, "k": k, "es_split": "halves"}
            errs.append(np.mean([mean_l1("optstream", p, x, eps, 1.0, s) for s in range(trials)]))
        k_star = W / math.sqrt(W / (eps * lip))
        best = ks[int(np.argmin(errs[:-1]))]
        cells = " | ".join(f"{e:.1f}" for e in errs)
        lines.append(f"| {lip:g} | {k_star:.1f} | {best} | {cells} |")
    return "\n".join(lines)


def table(
    results: dict[tuple[str, str, str, float, float | None], float],
    labels: list[str],
    title: str,
    se: dict[tuple[str, str, str, float, float | None], float] | None = None,
) -> str:
    """Markdown: one row per (dataset, month, eps, alpha), log10 mean L1 per mechanism, with
    its standard error in log10 units (``se / (mean ln 10)``) when ``se`` is given."""
    keys = sorted(
        {(d, m, e, a) for d, m, _, e, a in results}, key=lambda k: (k[0], k[1], -k[2], k[3] or 0)
    )
    lines = [
        f"### {title}",
        "",
        "| data | month | eps | alpha | " + " | ".join(labels) + " |",
        "|---|---|---|---|" + "---|" * len(labels),
    ]
    for d, m, e, a in keys:
        cells = []
        for lab in labels:
            mean = results[(d, m, lab, e, a)]
            cells.append(f"{math.log10(mean):.2f}")
            if se is not None:
                cells[-1] += f" ± {se[(d, m, lab, e, a)] / (mean * math.log(10)):.3f}"
        lines.append(
            f"| {d} | {m} | {e:g} | {a if a is not None else 1} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def figure_mechanisms(
    ablations: bool, alpha: bool, extras: bool
) -> dict[str, tuple[str, dict[str, Any]]]:
    """The columns of Fig. 8 (``ablations``), Fig. 10 (``alpha``) or Fig. 3: the private
    headline ones, then (``extras``) the labelled extra ones.

    >>> list(figure_mechanisms(False, True, True))[-1]
    'OptStream_LS (paper Δ, float Laplace, not private)'
    """
    if ablations:
        return {**ABLATIONS, **(ABLATION_EXTRAS if extras else {})}
    if alpha:
        last = "OptStream_LS" + NP
        return {**MECHANISMS, **({last: EXTRAS[last]} if extras else {})}
    return {**FIG3, **(EXTRAS if extras else {})}


def _run(args: argparse.Namespace) -> int:
    if args.from_csv:
        return _replot(args)
    datasets = {name: DATASETS[name](args) for name in args.data}
    mechanisms = figure_mechanisms(args.ablations, bool(args.alpha), not args.no_extras)
    rows: list[dict[str, Any]] = []
    plot: tuple[str, str, str] | None = None
    res: dict[tuple[str, str, str, float, float | None], float] = {}
    start = time.time()
    if args.theorem11:
        text = theorem11(1.0, [0.1, 1.0, 10.0], [2, 3, 4, 6, 8, 12, 16, 24], args.trials)
    elif args.hierarchy:
        alphas = args.alpha or [10.0, 50.0, 100.0]
        extras = not args.no_extras
        res = hierarchy(datasets, alphas, args.trials, args.aligned, rows, extras)
        se = standard_errors(rows, by_level=True)
        mechanisms = {
            **{label: m for label, m in HIERS.items() if private(label)},
            **MECHANISMS,
            **{label: m for label, m in HIERS.items() if extras and not private(label)},
        }
        text = table(res, list(mechanisms), "H4: hierarchy, eps = 1", se)
        plot = ("alpha", "Fig. 4, hierarchy, eps = 1", "fig4_hierarchy.png")
    elif args.alpha:
        out: list[str] = []
        for alpha in args.alpha:
            one = run(
                datasets,
                mechanisms,
                [1.0],
                [alpha],
                args.trials,
                args.aligned,
                rows,
                args.k,
                progress=True,
            )
            se = standard_errors([r for r in rows if r["alpha"] == alpha])
            out.append(table(one, list(mechanisms), f"alpha = {alpha:g}, eps = 1", se))
            res.update(one)
        text = "\n\n".join(out)
        plot = ("alpha", "Fig. 10, (w, alpha) sums, eps = 1", "fig10_alpha.png")
    else:
        res = run(
            datasets,
            mechanisms,
            args.eps,
            [None],
            args.trials,
            args.aligned,
            rows,
            args.k,
            progress=True,
        )
        se = standard_errors(rows)
        title = "log10 mean L1 error (Delta = 1; private unless marked)"
        text = table(res, list(mechanisms), title, se)
        plot = (
            ("eps", "Fig. 8, ablations", "fig8_ablations.png")
            if args.ablations
            else ("eps", "Fig. 3", "fig3_eps.png")
        )
    print(text)
    print(
        f"\n{len(rows)} runs, {args.trials} trials, aligned={args.aligned}, "
        f"{time.time() - start:.0f} s",
        file=sys.stderr,
    )
    if args.out and rows:  # (Thm 11 prints its table only)
        args.out.mkdir(parents=True, exist_ok=True)
        with open(args.out / "optstream.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        if plot:
            _plot(res, args.out, plot, list(mechanisms), args.trials, args.aligned)
    return 0


def _plot(
    res: dict[tuple[str, str, str, float, float | None], float],
    out: Path,
    plot: tuple[str, str, str],
    mechanisms: list[str],
    trials: int,
    aligned: bool,
) -> Path:
    x, title, name = plot
    return plot_optstream(
        res,
        out / name,
        x=x,
        mechanisms=mechanisms,
        dashed=[m for m in mechanisms if not private(m)],
        title=f"OptStream {title}, log10 mean L1 ({trials} trials)",
        footer=f"seeds 0..{trials - 1}; w = {W}; solid: w-event private (strict periods, "
        "geometric noise, features at w Delta), dashed: not private (aligned periods, or the "
        "paper's Delta and float Laplace)"
        + ("; every column run with aligned periods (--aligned)" if aligned else ""),
    )


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a run's ``optstream.csv`` (or ``.csv.gz``), typed back."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["eps"] = float(r["eps"])
        r["alpha"] = float(r["alpha"]) if r["alpha"] else None
        r["seed"] = int(r["seed"])
        r["error"] = float(r["error"])
    return rows


def row_means(
    rows: list[dict[str, Any]], by_level: bool = False
) -> dict[tuple[str, str, str, float, float | None], float]:
    """The means :func:`run` (or :func:`hierarchy`, ``by_level``) returned for these rows."""
    acc: dict[tuple[str, str, str, float, float | None], list[float]] = defaultdict(list)
    for r in rows:
        month = f"{r['month']} {r['region']}" if by_level else r["month"]
        acc[(r["dataset"], month, r["mechanism"], r["eps"], r["alpha"])].append(r["error"])
    return {key: float(np.mean(v)) for key, v in acc.items()}


def _replot(args: argparse.Namespace) -> int:
    """``--from-csv``: the table and the figure of a stored run, nothing run."""
    rows = read_rows(args.from_csv)
    res = row_means(rows, by_level=args.hierarchy)
    se = standard_errors(rows, by_level=args.hierarchy)
    labels = list(dict.fromkeys(r["mechanism"] for r in rows))
    trials = len({r["seed"] for r in rows})
    print(table(res, labels, f"log10 mean L1 error, {args.from_csv}", se))
    if args.out:
        plot = (
            ("alpha", "Fig. 4, hierarchy, eps = 1", "fig4_hierarchy.png")
            if args.hierarchy
            else ("alpha", "Fig. 10, (w, alpha) sums, eps = 1", "fig10_alpha.png")
            if args.alpha
            else ("eps", "Fig. 8, ablations", "fig8_ablations.png")
            if args.ablations
            else ("eps", "Fig. 3", "fig3_eps.png")
        )
        args.out.mkdir(parents=True, exist_ok=True)
        aligned = all(r["strict"] == "False" for r in rows)
        print(f"wrote {_plot(res, args.out, plot, labels, trials, aligned)}")
    return 0
