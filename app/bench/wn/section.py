"""(w,n)-DP (Liu et al. 2021; spec seed-003 §5.7): its section of RESULTS.md, from the stored
runs of ``dpstream bench wn`` (Figs. 8-10, ``wn/trajectory.csv.gz``) and of Table 1
(``wn/table1.csv.gz``, ``table1`` of :mod:`app.bench.report.stored`).

Claims: :mod:`app.bench.wn.claims`. Tables list every mechanism the run holds, so a
mechanism added to the bench (the publish-every-timestamp contrast, RescueDP with its dynamic
grouping) shows up without a change here.

>>> claims, lines = section({}, Path("."))
>>> lines[0], {c.verdict for c in claims}
('## (w,n)-DP (Liu et al. 2021; spec seed-003 §5.7)', {<Verdict.NOT_RUN: 'not run'>})
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.bench.engine.claims import Claim
from app.bench.engine.markdown import claims_table, not_reproduced, rel
from app.bench.engine.store import Produced, read_rows
from app.bench.wn import claims

__all__ = ["HEADING", "NOT_REPRODUCED", "section"]

HEADING = "## (w,n)-DP (Liu et al. 2021; spec seed-003 §5.7)"

DATA = (
    "The WorldCup98 logs are not available. Stand-ins, read in place under the data root: "
    "msnbc (17 page categories, co-occurrence graph of held-out sessions; "
    "`app/bench/wn/trajectory.py`), T-Drive (the taxis on a 10 x 10 grid of the Beijing box, "
    "8 neighbours, 10-minute slots; `app/bench/wn/data.py`) and Diginetica (product "
    "pages, top-2 co-visit graph of the earliest 30% of days, most pages isolated; one-day "
    "slots). MAE of Eq. 19 (MRE too, with the floor 0.1% of a slot's true total: on T-Drive and "
    "Diginetica some slots have a true total of 0, so their MRE is unbounded and only MAE is "
    "read)."
)
NOT_REPRODUCED: tuple[str, ...] = (
    "WorldCup98 (the paper's data, 10k pages, 39 Louvain groups): stand-ins only (T5, T6 are "
    "graph-fidelity claims the stand-ins cannot meet).",
    "The paper's 50 runs a point.",
)
"""What of the paper's evaluation is not reproduced, beyond what the rows themselves say."""
GROUPING = (
    "RescueDP's dynamic grouping: the stored run has no grouped RescueDP, so the baseline runs "
    "without it (spec A7; `app/dp/wn/rescuedp.py`, Deviations). Grouping pools small pages so "
    "that each group's count carries less relative noise; without it RescueDP is at a "
    "disadvantage, so T2's RescueDP-first is conservative and the RescueDP-vs-STR gaps (T2, "
    "T4) are without the grouping's contribution."
)
CONTRAST = 'The "publish every timestamp" contrast of the n sweep (T4): not in the stored run.'


def _num(x: float) -> str:
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def _run_line(run: Produced) -> str:
    wall = "" if math.isnan(run.wall_s) else f", {run.wall_s:,.0f} s wall"
    load = "" if run.load is None else f", load {run.load:g}"
    return f"`{run.command}`{wall}{load}"


def _mechs(c: claims.Curves) -> list[str]:
    """Every mechanism of the run, the paper's four first."""
    seen = dict.fromkeys(m for mechs in c.values() for m in mechs)
    return [m for m in ("bd", "stbd", "str", "rescuedp") if m in seen] + [
        m for m in seen if m not in ("bd", "stbd", "str", "rescuedp")
    ]


def ordering(c: claims.Curves) -> list[str]:
    """The mechanisms at the paper's defaults (eps = 1 on Fig. 8), best first, per dataset."""
    lines = ["| data | ordering (MAE) |", "|---|---|"]
    for (ds, fig), m in c.items():
        if fig != "fig8":
            continue
        at = {x: dict(pts).get(1.0) for x, pts in m.items()}
        ranked = sorted((v, x) for x, v in at.items() if v is not None)
        order = " < ".join(f"{claims.label(x)} {_num(v)}" for v, x in ranked)
        lines.append(f"| {ds} | {order} |")
    return lines


def sweep_table(c: claims.Curves, figure: str, axis: str) -> list[str]:
    """MAE per mechanism over one figure's sweep, with each curve's spread around its mean."""
    keys = [k for k in c if k[1] == figure]
    if not keys:
        return []
    xs = sorted({x for k in keys for pts in c[k].values() for x, _ in pts})
    lines = [
        f"| data | mechanism | {' | '.join(f'{axis} = {x:g}' for x in xs)} | spread around the "
        "mean |",
        "|---|---|" + "---|" * (len(xs) + 1),
    ]
    for k in keys:
        for mech in _mechs({k: c[k]}):
            pts = dict(c[k][mech])
            lo, hi = claims.spread(list(pts.values()))
            cells = " | ".join(_num(pts[x]) if x in pts else "-" for x in xs)
            span = f"{100 * lo:+.1f}% .. {100 * hi:+.1f}%"
            lines.append(f"| {k[0]} | {claims.label(mech)} | {cells} | {span} |")
    return lines


def table1_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Table 1 on the stand-ins next to the paper's w = 120 column."""
    shares = claims.table1_shares(rows)
    other = {(str(r["dataset"]), int(r["w"])): float(r["share"]) for r in rows if r["n"] == "other"}
    cols = [(ds, w) for ds, by_w in shares.items() for w in sorted(by_w)]
    head = " | ".join(f"{ds} w={w}" for ds, w in cols)
    lines = [f"| n | {head} | paper w=120 |", "|---|" + "---|" * (len(cols) + 1)]
    for n in range(len(claims.PAPER_TABLE1[120])):
        cells = " | ".join(f"{shares[ds][w][n]:.2f}" for ds, w in cols)
        lines.append(f"| {n} | {cells} | {claims.PAPER_TABLE1[120][n]:g} |")
    cells = " | ".join(f"{other.get((ds, w), 0.0):.2f}" for ds, w in cols)
    lines.append(f"| other component | {cells} | 0 |")
    return lines


def _users(rows: Sequence[Mapping[str, Any]]) -> str:
    graphs = {str(r["dataset"]): (int(r["users"]), int(r["nodes"]), int(r["edges"])) for r in rows}
    return "; ".join(
        f"{ds} {u:,} released users, graph {n:,} nodes / {e:,} edges"
        for ds, (u, n, e) in graphs.items()
    )


def _read(produced: Mapping[str, Produced], key: str) -> list[dict[str, str]]:
    run = produced.get(key)
    return read_rows(run.path) if run and run.path else []


def section(
    produced: Mapping[str, Produced], link_root: Path, invariants: bool | None = None
) -> tuple[list[Claim], list[str]]:
    """The (w,n)-DP claims and section lines."""
    rows, table1 = _read(produced, "wn"), _read(produced, "wn-table1")
    items = claims.claims(rows, table1, invariants)
    lines = [HEADING, "", DATA, ""]
    c = claims.curves(rows)
    if rows:
        run = produced["wn"]
        assert run.path is not None
        r0 = rows[0]
        sizes = ", ".join(f"{ds} T = {t}" for ds, t in claims.slots(rows).items())
        pngs = sorted(run.path.parent.glob("trajectory-*-mae.png"))
        links = ", ".join(f"[{p.stem}]({rel(p, link_root)})" for p in pngs)
        lines += [
            f"Figs. 8-10 at l = {r0['l']}, seeds {r0['seeds_used']}, every slot of each stand-in "
            f"({sizes}): {_run_line(run)}; every row with its seeds and parameters in "
            f"[{run.path.name}]({rel(run.path, link_root)}). Plots: {links}.",
            "",
            "MAE at the papers' defaults (eps = 1, w = 120, n = 6), best first:",
            "",
            *ordering(c),
            "",
            "MAE over the w sweep (eps = 1, n = 6), the T3 profile:",
            "",
            *sweep_table(c, "fig9", "w"),
            "",
            "MAE over the n sweep (eps = 1, w = 120), T4:",
            "",
            *sweep_table(c, "fig10", "n"),
            "",
        ]
    lines += [*claims_table(items), ""]
    if table1:
        t1 = produced["wn-table1"]
        lines += [
            "Table 1 on the stand-ins: cumulative % of users whose spatial range (Definition 5, "
            "the graph 1-centre radius of the distinct values in the w slots from the user's "
            "first slot, each user clipped to l = 5 a slot) is <= n "
            f"({_users(table1)}; {_run_line(t1)}):",
            "",
            *table1_table(table1),
            "",
        ]
    mechs = _mechs(c)
    extra = [] if any("uniform" in m for m in mechs) else [CONTRAST]
    extra += [] if any(m.startswith("rescuedp") and m != "rescuedp" for m in mechs) else [GROUPING]
    short = [ds for ds, t in claims.slots(rows).items() if t < 3 * claims.MAX_W]
    if short:
        extra.append(
            f"A w sweep whose windows all slide on {', '.join(short)}: it has fewer than "
            f"3 x {claims.MAX_W} slots, so some windows never slide (T3 is not judged there)."
        )
    return items, [*lines, *not_reproduced([*NOT_REPRODUCED, *extra])]
