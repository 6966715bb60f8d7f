"""RESULTS.md as text: the claims tables, the runs, the figures, the cost section.

Everything here turns values into Markdown lines; nothing runs a benchmark. The machine is
named once, in the header, from the facts the runs recorded
(:func:`app.bench.engine.store.machine`); the cost section adds only what the cost run
measured differently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from app.bench.engine.claims import MAGNITUDE_TOLERANCE, Claim, Means, Verdict, best
from app.bench.engine.markdown import claims_table, not_reproduced, rel
from app.bench.engine.presets import summarize, sweep_means
from app.bench.engine.runs import Done
from app.bench.engine.store import find, read_rows
from app.bench.ldp_ids import paper as ldp_ids_paper
from app.bench.pwsm import paper as pwsm_paper

__all__ = [
    "HEADLINE_FIGURES",
    "closing_note",
    "cost_section",
    "machine_line",
    "ratio_table",
    "render",
    "summary",
]

HEADLINE_FIGURES = (
    ("pwsm-eps", "tdrive"),
    ("pwsm-w", "tdrive"),
    ("pwsm-eps", "sin"),
    ("pwsm-ratio-eps", "sin"),
    ("pwsm-ratio-w", "sin"),
    ("ldp-ids-eps", "sin"),
    ("ldp-ids-w", "sin"),
    ("ldp-ids-cfpu", "sin"),
)
"""Runs whose main figure RESULTS.md shows inline (the others are linked)."""

MACHINE_KEYS = ("platform", "cpus", "python", "numpy")

PWSM_INTRO = (
    "AMRE is the paper's Eq. 15 (a per-cell squared error); percentages are the mean over the "
    "sweep points of 1 - AMRE_new / AMRE_base, as in spec §6.4. Taxi = the 600-taxi T-Drive "
    "sample (10 x 10 grid, 1-minute slots, T = 8,889); synthetic streams at the paper's "
    "N = T = 10,000; users in 10 types drawing (eps_i, w_i) from the grid (§6.3). PLBU (the "
    "figures' local baseline, reconstructed per spec §2.11, A29) runs offline through "
    "`run_local` on the same per-user values with the types' requirement groups (GRR at "
    "eps_g/w_g per slot); it releases frequencies, scaled by N to counts for its AMRE. The "
    "ratio runs (Figs. 12-13) put the first round(10 o) of the 10 types (a share o of users) "
    "in the special group; BD and BA run at (0.6, 120), so their curves are flat by "
    "construction."
)
LDP_INTRO = (
    "MRE with floor 1e-3 on frequencies (spec §7.5); synthetic streams at the paper's "
    "N = 200,000, T = 800 (LNS, Sin, Log); Taxi = the T-Drive sample in 5 random regions, "
    "10-minute slots. CFPU = mean over full windows of reports per user per slot (A25)."
)


def machine_line(machines: Sequence[tuple[Mapping[str, str], Sequence[str]]]) -> str:
    """The machines the runs measured on, from the facts they recorded, each with its runs
    when there is more than one.

    >>> linux = {"platform": "Linux-x", "cpus": "2", "python": "3.11.9", "numpy": "2.1"}
    >>> machine_line([(linux, ["pwsm-eps-sin"])])
    'Machine of the runs (recorded when they ran): Linux-x, 2 CPUs, Python 3.11.9, numpy 2.1.'
    >>> two = machine_line([(linux, ["a"]), ({**linux, "cpus": "16"}, ["b", "c"])])
    >>> two.startswith("Machines of the runs"), two.split("numpy 2.1 ")[1:]
    (True, ['(a); Linux-x, 16 CPUs, Python 3.11.9, ', '(b, c).'])
    """
    if not machines:
        return "Machine of the runs: not recorded (the runs predate their records in `runs.json`)."

    def facts(m: Mapping[str, str]) -> str:
        return f"{m['platform']}, {m['cpus']} CPUs, Python {m['python']}, numpy {m['numpy']}"

    if len(machines) == 1:
        return f"Machine of the runs (recorded when they ran): {facts(machines[0][0])}."
    each = "; ".join(f"{facts(m)} ({', '.join(runs)})" for m, runs in machines)
    return f"Machines of the runs (recorded when they ran): {each}."


def _sizes(done: Done) -> list[str]:
    lines = [
        "| run | paper figure | sweep | seeds | dataset options | wall time |",
        "|---|---|---|---|---|---|",
    ]
    for (name, ds), (p, _, wall) in done.items():
        opts = p.dataset_options or "defaults"
        lines.append(
            f"| `{name}` on {ds} | {p.paper} {p.figure} | {p.sweep_text()} | {list(p.seeds)} | "
            f"{opts} | {wall:.0f} s |"
        )
    return lines


def _csv_rows(path: Path) -> list[dict[str, str]] | None:
    """The rows of ``path`` or of its ``.gz`` (the run store's form); None if neither exists."""
    found = find(path)
    return read_rows(found) if found else None


def _cost_host(host: Mapping[str, str], machine: Mapping[str, str] | None) -> str:
    """The cost run's load, and its machine only where it differs from the runs'."""
    differs = [k for k in MACHINE_KEYS if not machine or str(host.get(k)) != machine.get(k)]
    names = {"cpus": "{} CPUs", "platform": "{}", "python": "Python {}", "numpy": "numpy {}"}
    facts = [names[k].format(host[k]) for k in differs if k in host]
    where = ", ".join(facts) if facts else "the machine above"
    return f"{where}, load {host.get('load1', 'not recorded')}"


def _slopes_table(slopes: list[dict[str, str]]) -> list[str]:
    lines = ["| mechanism | slope d | slope m | slope N | holds |", "|---|---|---|---|---|"]
    for m in dict.fromkeys(r["mechanism"] for r in slopes):
        mine = {r["axis"]: r for r in slopes if r["mechanism"] == m}
        cells = [f"{mine[a]['slope']} / {mine[a]['slope_top']}" for a in ("d", "m", "N")]
        holds = all(mine[a]["holds"] == "True" for a in ("d", "m", "N"))
        lines.append(f"| {m} | " + " | ".join(cells) + f" | {'yes' if holds else 'no'} |")
    return lines


def _replay_table(replay: list[dict[str, str]]) -> list[str]:
    r0 = replay[0]
    return [
        f"Full T-Drive sample replay (T = {r0['T']} one-minute slots, N = {r0['N']} taxis, "
        f"d = {r0['d']}, m = {r0['m']} groups; load {r0['load_s']} s, aggregation "
        f"{r0['aggregate_s']} s):",
        "",
        "| mechanism | replay s | us per slot | publications |",
        "|---|---|---|---|",
        *(
            f"| {r['mechanism']} | {r['replay_s']} | {r['step_us']} | {r['publications']} |"
            for r in replay
        ),
        "",
    ]


def cost_section(
    cost_dir: Path, figures: Path, link_root: Path, machine: Mapping[str, str] | None = None
) -> list[str]:
    """Slopes and the full T-Drive replay from ``dpstream bench cost`` (CSV files in
    ``cost_dir``), linking the plots found in ``figures``."""
    slopes = _csv_rows(cost_dir / "cost_slopes.csv")
    if not slopes:
        return ["No cost run found: run `dpstream bench cost` first.", ""]
    lines = [
        f"Step time of each central mechanism against the number of cells d, of requirement "
        f"groups m and of users N (`dpstream bench cost`, seed {slopes[0]['seed']}; "
        f"{_cost_host(slopes[0], machine)}). Slope = log-log fit over the sweep / between its "
        "two largest points; the claim is slope <= 1 in d and m, ~0 in N (tolerance 0.25).",
        "",
        *_slopes_table(slopes),
        "",
    ]
    for axis in ("d", "m", "N"):
        png = figures / f"cost_{axis}.png"
        if png.exists():
            lines.append(f"![step time vs {axis}]({rel(png, link_root)})")
    lines.append("")
    if replay := _csv_rows(cost_dir / "tdrive_replay.csv"):
        lines += _replay_table(replay)
    return lines


def _tally(mechanisms: Sequence[str], means: Means) -> str:
    """How often each mechanism is the lowest: ``"SAMPLE 2/5, PBA 3/5"``."""
    winners = best(means, [m for m in mechanisms if any(k[2] == m for k in means)])
    tally = {m: winners.count(m) for m in dict.fromkeys(winners)}
    return ", ".join(f"{m.upper()} {k}/{len(winners)}" for m, k in tally.items())


def _best_lines(done: Done, kind: str, measure: str) -> list[str]:
    """Which mechanism (of all the preset ran, baselines included) is lowest, per run."""
    lines = [
        f"`{name}` on {ds}: {_tally(p.mechanisms, summarize(rows, measure))}"
        for (name, ds), (p, rows, _) in done.items()
        if p.kind == kind and p.sweep not in ("points", "ratio") and rows
    ]
    if not lines:
        return []
    head = (
        f"Lowest mean {measure.upper()} per sweep point among every mechanism run "
        "(baselines not in the paper's figures included):"
    )
    return [head, "", *(f"- {x}" for x in lines), ""]


def ratio_table(done: Done) -> list[str]:
    """ln AMRE of PBD and PBA per ratio o, one line per (ratio preset, dataset, mechanism)."""
    lines: list[str] = []
    for (name, ds), (p, rows, _) in done.items():
        if p.sweep != "ratio" or not rows:
            continue
        means = sweep_means(rows, "amre", ("ratio",))
        ratios = sorted({k[0] for k in means})
        if not lines:
            lines = [
                "| run | mechanism | " + " | ".join(f"o = {o:g}" for o in ratios) + " |",
                "|---|---|" + "---|" * len(ratios),
            ]
        for m in ("pbd", "pba"):
            cells = [f"{math.log(means[(o, m)][0]):.2f}" if (o, m) in means else "" for o in ratios]
            lines.append(f"| `{name}` on {ds} | {m.upper()} | " + " | ".join(cells) + " |")
    return lines


def _ratio_section(done: Done) -> list[str]:
    table = ratio_table(done)
    if not table:
        return []
    return ["ln AMRE (mean over seeds) of the two-group ratio runs, claim 8:", "", *table, ""]


def closing_note(
    cost_dir: Path, total_s: float, quick: bool, absent: Sequence[str] = ()
) -> list[str]:
    """The replay time of the full T-Drive sample, the wall time of this report's runs and
    the public data sets that were ``absent`` (their runs left out)."""
    lines = ["## Closing note", ""]
    if replay := _csv_rows(cost_dir / "tdrive_replay.csv"):
        total = sum(float(r["replay_s"]) for r in replay)
        slow = max(replay, key=lambda r: float(r["replay_s"]))
        r0 = replay[0]
        lines.append(
            f"Replaying the whole T-Drive sample ({r0['T']} one-minute slots, about 6 days, "
            f"{r0['N']} taxis, d = {r0['d']}, m = {r0['m']} requirement groups) takes "
            f"{total:.1f} s for all {len(replay)} central mechanisms together, plus "
            f"{float(r0['load_s']):.1f} s to load and {float(r0['aggregate_s']):.1f} s to "
            f"aggregate; the slowest, {slow['mechanism']}, needs {slow['replay_s']} s "
            f"({slow['step_us']} us per slot), far below the 60 s slot length."
        )
    lines.append(
        f"All {'quick ' if quick else ''}runs behind this report (the preset grid and the papers' "
        f"stored runs) took {total_s / 60:.1f} min of wall time."
    )
    if absent:
        lines.append(
            f"The public data sets {', '.join(absent)} were not under the data root "
            "(docs/datasets.md): the runs on them were left out, their claims read not run, and "
            "a paper verb whose default data was missing ran its generated stand-in instead."
        )
    return lines + [""]


def summary(items: Sequence[Claim]) -> str:
    """The header's count of verdicts, in total and paper by paper (agree/partly/disagree, and
    not run where some are).

    >>> a = Claim("P", "1", "c", "p", "m", Verdict.AGREE)
    >>> summary([a, a, Claim("Q", "1", "c", "p", "m", Verdict.NOT_RUN)]).split("(")[1]
    'agree/partly/disagree per paper: P 2/0/0; Q 0/0/0/1).'
    """
    papers = list(dict.fromkeys(c.paper for c in items))

    def counts(mine: Sequence[Claim]) -> list[int]:
        return [sum(c.verdict == v for c in mine) for v in Verdict]

    total = counts(items)
    per = []
    for paper in papers:
        a, p, d, n = counts([c for c in items if c.paper == paper])
        per.append(f"{paper} {a}/{p}/{d}" + (f"/{n}" if n else ""))
    return (
        f"Summary: {total[0]} agree, {total[1]} partly, {total[2]} disagree, {total[3]} not run, "
        f"over all {len(papers)} papers (agree/partly/disagree per paper: {'; '.join(per)})."
    )


def _header(
    done: Done,
    items: Sequence[Claim],
    command: str,
    total_s: float,
    machines: Sequence[tuple[Mapping[str, str], Sequence[str]]],
) -> list[str]:
    quick = any(p.quick for p, _, _ in done.values())
    return [
        "# RESULTS: the papers' headline claims, reproduced by dpstream",
        "",
        f"Regenerated by `{command}` (every number below comes from its runs and, in the cost "
        "section, from `dpstream bench cost`; "
        f"{'QUICK grids, not for citing; ' if quick else ''}wall time {total_s / 60:.1f} min). "
        "Means over seeds; every seed's row is in the run's `results.csv.gz` in the run store "
        "(each run's command, commit and machine in its `runs.json`). Verdicts: **agree** "
        "(direction at every point, and the paper's percentage "
        f"within {MAGNITUDE_TOLERANCE:g} points where it gives one), partly (direction holds at "
        "most points or everywhere but with another magnitude), **disagree**, not run.",
        "",
        "Neighbouring relation: **add-remove**, as in the papers (noise calibrated to a "
        "histogram sensitivity of 1); the service's default, `replace`, draws twice the noise "
        "for the same eps (README, 'What is protected').",
        "",
        machine_line(machines),
        "",
        summary(items),
        "",
        "Every section is rendered from stored runs: the PWSM and LDP-IDS sections, Runs, "
        "Figures and Cost from the preset grid above, the PLDP-IDS, (w,n)-DP and OptStream "
        "sections from the stored runs of `dpstream bench pldp | wn | optstream` (each with its "
        "command, load and wall time; `app/bench/report/stored.py`), and every verdict by code "
        "from the numbers (`app/bench/<paper>/claims.py`). One verb per paper: `dpstream bench "
        "pwsm | ldp-ids | pldp | optstream | wn` (`--figure`, `--quick`, `--out`); `dpstream "
        "bench results --reuse` rebuilds this file from the stored runs.",
        "",
    ]


def _figures(done: Done, figures: Path, link_root: Path) -> list[str]:
    lines = ["## Figures", ""]
    for (_, ds), (p, _, _) in done.items():
        pngs = sorted(figures.glob(f"{p.name}-{ds}/*.png"))
        links = " ".join(f"[{png.stem}]({rel(png, link_root)})" for png in pngs)
        if pngs:
            lines.append(f"- {p.paper} {p.figure}, {ds}: {links}")
    lines += ["", "Headline figures:", ""]
    for key in HEADLINE_FIGURES:
        if key in done:
            p = done[key][0]
            for png in sorted(figures.glob(f"{key[0]}-{key[1]}/{p.measure}*.png"))[:1]:
                lines.append(f"![{key[0]} on {key[1]}]({rel(png, link_root)})")
    return lines


def render(
    done: Done,
    items: Sequence[Claim],
    *,
    figures: Path,
    link_root: Path,
    cost_lines: Sequence[str],
    closing: Sequence[str] = (),
    command: str,
    total_s: float,
    machines: Sequence[tuple[Mapping[str, str], Sequence[str]]] = (),
    sections: Sequence[Sequence[str]] = (),
) -> str:
    """The whole RESULTS.md text; ``sections`` are the other papers' sections, rendered by
    their modules (``app.bench.<paper>.section``), placed after LDP-IDS."""
    lines = [
        *_header(done, items, command, total_s, machines),
        "## PWSM (Du et al., PVLDB 2025; spec seed-000 §6.6)",
        "",
        PWSM_INTRO,
        "",
        *claims_table([c for c in items if c.paper == "PWSM"]),
        "",
        *_best_lines(done, "central", "amre"),
        *_ratio_section(done),
        *not_reproduced(pwsm_paper.NOT_REPRODUCED),
        "## LDP-IDS (Ren et al., SIGMOD 2022; spec seed-004 §7.8)",
        "",
        LDP_INTRO,
        "",
        *claims_table([c for c in items if c.paper == "LDP-IDS"]),
        "",
        *_best_lines(done, "local", "mre"),
        *not_reproduced(ldp_ids_paper.NOT_REPRODUCED),
        *(line for section in sections for line in section),
        "## Runs",
        "",
        *_sizes(done),
        "",
        *_figures(done, figures, link_root),
        "",
        "## Cost",
        "",
        *cost_lines,
        *closing,
    ]
    return "\n".join(lines) + "\n"
