"""The stored run of ``bench open-domain`` as tables, verdicts and the RESULTS.md section.

The run lives in ``docs/results/open_domain/``: ``open_domain.csv.gz`` (every row) and
``run.json`` (command, commit, machine, seconds). Every number and verdict below is computed
from those rows; nothing is typed in by hand.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.bench.open_domain.run import METHODS

ROWS = "open_domain.csv.gz"
META = "run.json"
MEASURES = ("tau", "released", "recall10", "recall100", "precision", "mae", "mae_true")
DATA = ("true_keys", "top_count")
LABELS = {
    "tau": "tau",
    "released": "keys released / slot",
    "recall10": "top-10 recall",
    "recall100": "top-100 recall",
    "precision": "precision",
    "mae": "MAE (true U released)",
    "mae_true": "MAE (true keys)",
}
Key = tuple[str, str, float, int]
"""(dataset, method, eps, w)."""
Means = dict[Key, dict[str, float]]


def write(rows: Sequence[Mapping[str, Any]], folder: Path, meta: Mapping[str, Any]) -> Path:
    """Write the rows (gzip CSV) and the run's facts into ``folder``; returns the rows' path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ROWS
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with gzip.open(path, "wt", newline="") as f:
        out = csv.DictWriter(f, fields)
        out.writeheader()
        out.writerows(rows)
    (folder / META).write_text(json.dumps(dict(meta), indent=2, sort_keys=True) + "\n")
    return path


def read(folder: Path) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """The stored rows and facts of ``folder`` (empty when no run is stored)."""
    if not (folder / ROWS).exists():
        return [], {}
    with gzip.open(folder / ROWS, "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    meta = json.loads((folder / META).read_text()) if (folder / META).exists() else {}
    return rows, meta


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def means(rows: Sequence[Mapping[str, Any]]) -> Means:
    """Per (dataset, method, eps, w), each measure's mean over seeds and trials (the rows that
    ran; NaN entries, e.g. precision with nothing released, are left out of the mean)."""
    acc: dict[Key, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["status"] != "ok":
            continue
        key = (str(r["dataset"]), str(r["method"]), _num(r["eps"]), int(_num(r["w"])))
        for m in MEASURES + DATA:
            v = _num(r.get(m))
            if not math.isnan(v):
                acc[key][m].append(v)
    return {
        k: {m: (sum(v[m]) / len(v[m]) if v[m] else math.nan) for m in MEASURES + DATA}
        for k, v in acc.items()
    }


def _fmt(v: float, digits: int = 2) -> str:
    return "-" if math.isnan(v) else f"{v:.{digits}f}"


def table(m: Means, dataset: str) -> list[str]:
    """One markdown table: a row per (eps, w, method), a column per measure."""
    head = "| eps | w | method | " + " | ".join(LABELS[x] for x in MEASURES) + " |"
    lines = [head, "|" + "---|" * (3 + len(MEASURES))]
    order = {name: i for i, name in enumerate(METHODS)}
    for ds, method, eps, w in sorted(m, key=lambda k: (k[2], k[3], order.get(k[1], 99))):
        if ds != dataset:
            continue
        v = m[(ds, method, eps, w)]
        cells = [_fmt(v["tau"], 0) if v["tau"] > 0 else "-", _fmt(v["released"], 1)]
        cells += [_fmt(v[x]) for x in ("recall10", "recall100", "precision")]
        cells += [_fmt(v[x], 3) for x in ("mae", "mae_true")]
        lines.append(f"| {eps:g} | {w} | `{method}` | " + " | ".join(cells) + " |")
    return lines


def _settings(m: Means, dataset: str, a: str, b: str) -> list[tuple[float, int]]:
    return sorted(
        {
            (k[2], k[3])
            for k in m
            if k[0] == dataset and (dataset, a, k[2], k[3]) in m and (dataset, b, k[2], k[3]) in m
        }
    )


LIVE = 1.0
"""Keys released per slot (mean) from which a method counts as releasing anything."""
POINT = 0.01
"""A recall difference within one point counts as equal."""


def _pts(x: float) -> str:
    return f"{round(100 * x) + 0:+d}"


def verdicts(m: Means) -> list[str]:
    """The verdicts, one bullet per dataset and question, from the means only."""
    out = []
    for ds in sorted({k[0] for k in m}):
        out += _price(m, ds) + _carry(m, ds) + _adaptive(m, ds)
    return out


def _price(m: Means, ds: str) -> list[str]:
    cells = _settings(m, ds, "open_uniform", "label_uniform")
    if not cells:
        return []
    gaps = [
        m[(ds, "label_uniform", *c)]["recall10"] - m[(ds, "open_uniform", *c)]["recall10"]
        for c in cells
    ]
    useful = [c for c in cells if m[(ds, "label_uniform", *c)]["recall10"] >= 0.5]
    close = [c for c, g in zip(cells, gaps, strict=True) if c in useful and g <= 0.1]
    silent = [c for c in cells if m[(ds, "open_uniform", *c)]["released"] < LIVE]
    text = (
        f"- **{ds}, the price of not knowing the domain** (`open_uniform` against "
        f"`label_uniform` given the run's key set, same eps and w): the labelled release's "
        f"top-10 recall minus the open one's is {_pts(min(gaps))} to {_pts(max(gaps))} points "
        f"(mean {_pts(sum(gaps) / len(gaps))}); MAE on the true keys, open over labelled, "
        f"{_ratio(m, ds, cells)}. Where the labelled release reaches top-10 recall 0.5 "
        f"({len(useful)} of {len(cells)} settings), the open one is within 10 points in "
        f"{len(close)}" + (f" ({_list(close)})" if close else "") + ". `open_uniform` releases "
        f"under {LIVE:g} key per slot in {len(silent)} of {len(cells)} settings"
        + (f" ({_list(silent)})" if silent else "")
        + f": the largest true count in a slot averages {_data(m, ds, 'top_count')} "
        f"(over {_data(m, ds, 'true_keys')} keys sent per slot), against tau "
        f"{_taus(m, ds, silent or cells)}."
    )
    return [text]


def _data(m: Means, ds: str, what: str) -> str:
    return _fmt(next(v[what] for k, v in m.items() if k[0] == ds), 1)


def _taus(
    m: Means, ds: str, cells: Sequence[tuple[float, int]], method: str = "open_uniform"
) -> str:
    taus = sorted({int(m[(ds, method, *c)]["tau"]) for c in cells})
    return f"{taus[0]} to {taus[-1]}" if len(taus) > 1 else str(taus[0])


def _ratio(m: Means, ds: str, cells: Sequence[tuple[float, int]]) -> str:
    r = [
        m[(ds, "open_uniform", *c)]["mae_true"] / m[(ds, "label_uniform", *c)]["mae_true"]
        for c in cells
        if m[(ds, "label_uniform", *c)]["mae_true"] > 0
    ]
    return f"{_times(min(r))} to {_times(max(r))}" if r else "-"


def _times(x: float) -> str:
    return f"x{x:.2g}" if x < 10 else f"x{x:.0f}"


def _carry(m: Means, ds: str) -> list[str]:
    cells = _settings(m, ds, "open_uniform", "threshold")
    if not cells:
        return []
    live = [
        c
        for c in cells
        if max(m[(ds, x, *c)]["released"] for x in ("open_uniform", "threshold")) >= LIVE
    ]
    if not live:
        return [
            f"- **{ds}, carry-over**: neither `open_uniform` nor `threshold` released "
            f"{LIVE:g} key per slot in any of the {len(cells)} settings: no verdict."
        ]

    def diff(measure: str) -> list[float]:
        return [
            m[(ds, "open_uniform", *c)][measure] - m[(ds, "threshold", *c)][measure] for c in live
        ]

    r100, r10, err = diff("recall100"), diff("recall10"), diff("mae_true")
    better = [c for c, d in zip(live, r100, strict=True) if d > POINT]
    worse = [c for c, d in zip(live, r100, strict=True) if d < -POINT]
    return [
        f"- **{ds}, where carry-over helps** (`open_uniform` against `threshold`, per-slot "
        f"selection with no public keys, same per-slot budget), over the {len(live)} settings "
        f"where either releases at least {LIVE:g} key per slot: top-100 recall higher by more "
        f"than a point in {len(better)} of {len(live)}"
        + (f" ({_list(better)})" if better else "")
        + f", lower in {len(worse)}; the difference (carry-over minus none) is "
        f"{_pts(min(r100))} to {_pts(max(r100))} points in top-100 recall and {_pts(min(r10))} "
        f"to {_pts(max(r10))} in top-10; MAE on the true keys lower in "
        f"{sum(1 for d in err if d < 0)} of {len(live)}. The price: precision "
        f"{_range(m, ds, 'open_uniform', 'precision', live)} against "
        f"{_range(m, ds, 'threshold', 'precision', live)} (public keys are released when "
        "nobody sent them)."
    ]


def _range(m: Means, ds: str, method: str, measure: str, cells: Sequence[Any]) -> str:
    v = [m[(ds, method, *c)][measure] for c in cells]
    v = [x for x in v if not math.isnan(x)]
    return "-" if not v else f"{min(v):.2f} to {max(v):.2f}"


def _adaptive(m: Means, ds: str) -> list[str]:
    cells = [
        c
        for c in _settings(m, ds, "open_pba", "open_uniform")
        if m[(ds, "open_uniform", *c)]["released"] >= LIVE
    ]
    if not cells:
        return []
    d10 = [
        m[(ds, "open_pba", *c)]["recall10"] - m[(ds, "open_uniform", *c)]["recall10"] for c in cells
    ]
    wins = [c for c, d in zip(cells, d10, strict=True) if d > POINT]
    return [
        f"- **{ds}, `open_pba` against `open_uniform`**: top-10 recall higher by more than a "
        f"point in {len(wins)} of {len(cells)} settings where `open_uniform` releases at least "
        f"{LIVE:g} key per slot"
        + (f" ({_list(wins)})" if wins else "")
        + f"; the difference is {_pts(min(d10))} to {_pts(max(d10))} points. `open_pba` "
        f"selects at tau {_taus(m, ds, cells, 'open_pba')} against "
        f"{_taus(m, ds, cells)} (its selection gets a share of the slot's eps)."
    ]


def _list(cells: Sequence[tuple[float, int]]) -> str:
    return ", ".join(f"eps {e:g} w {w}" for e, w in cells)


HEADING = "## Open-domain streams (issue 36): `dpstream bench open-domain`"
METHOD = (
    "Keys nobody listed: each slot's events are `(user, key)` pairs, each user bounded to "
    "`max_keys` distinct keys per slot once (seeded), so every method counts the same events. "
    "`open_uniform` and `open_pba` (`app/dp/open/`) select new keys privately (noisy count "
    "against tau) and carry released keys over as public keys. Baseline (a): the registry's "
    "`uniform` and `pba` (geometric noise) given the run's whole true key set as labels, the "
    "same (eps, w): what the budget buys when the domain is known; they release every label "
    "and spend no delta. Baseline (b): `threshold`, DP partition selection at every slot with "
    "no public set (a fresh `OpenUniform` per slot, eps/w and delta/w). Per slot: top-k recall "
    "(true top-k found in the released top-k), precision (released keys someone sent), MAE over "
    "the union of true and released keys, and MAE over the true keys only; then the mean over "
    "slots, seeds (bounding) and trials (noise)."
)


def section(folder: Path, link_root: Path) -> list[str]:
    """The RESULTS.md section from the run stored in ``folder``."""
    rows, meta = read(folder)
    if not rows:
        return [
            HEADING,
            "",
            "Not run: no stored run in "
            f"`{_rel(folder, link_root)}` (`dpstream bench open-domain --out {folder}`).",
            "",
        ]
    m = means(rows)
    lines = [HEADING, "", METHOD, "", _run_line(rows, meta, folder, link_root), "", "Verdicts:", ""]
    lines += verdicts(m) + [""]
    for ds in sorted({k[0] for k in m}):
        lines += [f"**{ds}**: {_facts(rows, m, ds)}", "", *table(m, ds), ""]
        for png in sorted(folder.glob(f"open-domain-{ds}*.png")):
            lines += [f"![open-domain on {ds}]({_rel(png, link_root)})", ""]
    return lines


KEYS = {
    "tdrive": "taxis are the users, the key is the cell of a 50 x 50 grid over the Beijing box "
    "(2,500 cells), 1-hour slots",
    "diginetica": "sessions are the users, the key is the item id, 7-day slots",
    "gen-keys": "generated: a Zipf law over 5,000 ids whose ranking drifts each slot",
}
"""What the key is, per dataset (the loaders of :mod:`app.bench.open_domain.data`)."""


def _facts(rows: Sequence[Mapping[str, str]], m: Means, ds: str) -> str:
    first = next(r for r in rows if r["dataset"] == ds)
    labels = [v["released"] for k, v in m.items() if k[0] == ds and k[1] == "label_uniform"]
    seen = f", {_fmt(labels[0], 0)} distinct keys over the run" if labels else ""
    return (
        f"{KEYS.get(ds, 'keys as loaded')}; {first['population']} users, {first['slots']} "
        f"slots{seen}, {_data(m, ds, 'true_keys')} keys sent per slot on average."
    )


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _run_line(
    rows: Sequence[Mapping[str, str]], meta: Mapping[str, Any], folder: Path, link_root: Path
) -> str:
    grid = {k: sorted({r[k] for r in rows}, key=_num) for k in ("eps", "w", "delta", "max_keys")}
    seeds = len({r["seed"] for r in rows})
    trials = len({r["trial"] for r in rows})
    return (
        f"Run: `{meta.get('command', '?')}` at commit `{meta.get('commit', '?')}` on "
        f"{meta.get('machine', 'an unrecorded machine')}, {_fmt(_num(meta.get('seconds')), 0)} s; "
        f"eps {', '.join(grid['eps'])}; w {', '.join(grid['w'])}; delta {grid['delta'][0]} per "
        f"window; max_keys {grid['max_keys'][0]}; {seeds} seeds x {trials} trials. Every row in "
        f"[{ROWS}]({_rel(folder / ROWS, link_root)})."
    )
