"""Plots in the style of the papers' figures: error against eps, w or o, one line per mechanism.

PWSM Figs. 10-13 plot ln(AMRE) (Figs. 12-13 against the ratio o of the two-group runs); LDP-IDS
Figs. 4-5 plot MRE on a log axis. Both are drawn here as the measure on a log y axis (a log axis
of AMRE reads like a linear axis of ln AMRE), with the mean over seeds as the line and the seed
range as a shaded band. Every figure's title names the dataset and preset, and its footer the
seeds and the dataset options. matplotlib runs on the Agg backend (no display needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.bench.engine.presets import Preset

__all__ = ["plot_bars", "plot_preset", "plot_sweep"]

MARKERS = "osD^v<>xP*"

LABELS = {
    "amre": "AMRE (log scale; paper: ln AMRE)",
    "mre": "MRE (log scale)",
    "cfpu": "CFPU (reports per user per slot)",
}


RATIO_LABELS = {"two-eps": "ε = 1.0", "two-w": "w = 40"}
"""The special group of each two-group setting (:mod:`app.bench.engine.grid`), for the x label."""


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: str | Path, footer: str, dpi: int) -> Path:
    """Write ``fig`` as a PNG at ``path`` with ``footer`` (how the figure was made) in small grey
    type under it, then close it; every bench figure ends here."""
    fig.text(0.01, 0.01, footer, fontsize=6, color="0.3")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    out = Path(path)
    fig.savefig(out, dpi=dpi)
    _pyplot().close(fig)
    return out


def _by_mechanism(
    rows: Sequence[dict[str, Any]], x: str, measure: str
) -> dict[str, dict[float, list[float]]]:
    out: dict[str, dict[float, list[float]]] = {}
    for r in rows:
        out.setdefault(str(r["mechanism"]), {}).setdefault(float(r[x]), []).append(
            float(r[measure])
        )
    return out


def plot_sweep(
    rows: Sequence[dict[str, Any]],
    path: str | Path,
    *,
    x: str,
    measure: str,
    title: str,
    footer: str,
    log_y: bool = True,
    mechanisms: Sequence[str] | None = None,
    xlabel: str | None = None,
) -> Path:
    """``measure`` against ``x`` (``"eps"``, ``"w"`` or ``"ratio"``), one line per mechanism;
    write a PNG."""
    plt = _pyplot()
    data = _by_mechanism(rows, x, measure)
    order = [m for m in (mechanisms or data) if m in data]
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for k, name in enumerate(order):
        xs = sorted(data[name])
        means = [sum(data[name][v]) / len(data[name][v]) for v in xs]
        ax.plot(xs, means, marker=MARKERS[k % len(MARKERS)], label=name.upper())
        lo = [min(data[name][v]) for v in xs]
        hi = [max(data[name][v]) for v in xs]
        ax.fill_between(xs, lo, hi, alpha=0.15)
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel or {"eps": "ε", "w": "w", "ratio": "o"}.get(x, x))
    ax.set_ylabel(LABELS.get(measure, measure))
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    return save(fig, path, footer, dpi=90)


def _point_values(
    rows: Sequence[dict[str, Any]], measure: str
) -> dict[tuple[float, int, str], list[float]]:
    """``(eps, w, mechanism) -> [measure of each seed]``."""
    acc: dict[tuple[float, int, str], list[float]] = {}
    for r in rows:
        key = (float(r["eps"]), int(r["w"]), str(r["mechanism"]))
        acc.setdefault(key, []).append(float(r[measure]))
    return acc


def _bar_height(
    acc: dict[tuple[float, int, str], list[float]], key: tuple[float, int, str]
) -> float:
    """The mean over seeds at ``key``, NaN where the mechanism did not run."""
    values = acc.get(key)
    return sum(values) / len(values) if values else float("nan")


def _log_room(ax: Any, log_y: bool) -> None:
    """A log y axis with room for the legend above the bars."""
    if log_y:
        ax.set_yscale("log")
        low, high = ax.get_ylim()
        ax.set_ylim(low, high * 6)


def plot_bars(
    rows: Sequence[dict[str, Any]],
    path: str | Path,
    *,
    measure: str,
    title: str,
    footer: str,
    log_y: bool = True,
    mechanisms: Sequence[str] | None = None,
) -> Path:
    """Grouped bars: one group per ``(eps, w)`` point, one bar per mechanism (Table 2 style)."""
    plt = _pyplot()
    points = list(dict.fromkeys((float(r["eps"]), int(r["w"])) for r in rows))
    names = [m for m in (mechanisms or dict.fromkeys(r["mechanism"] for r in rows))]
    acc = _point_values(rows, measure)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    width = 0.8 / max(len(names), 1)
    for k, name in enumerate(names):
        heights = [_bar_height(acc, (e, w, name)) for e, w in points]
        ax.bar([p + k * width for p in range(len(points))], heights, width, label=name.upper())
    ax.set_xticks([p + 0.4 - width / 2 for p in range(len(points))])
    ax.set_xticklabels([f"ε={e:g}, w={w}" for e, w in points])
    _log_room(ax, log_y)
    ax.set_ylabel(LABELS.get(measure, measure))
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, ncol=4)
    return save(fig, path, footer, dpi=90)


def plot_preset(rows: Sequence[dict[str, Any]], out_dir: str | Path, preset: Preset) -> list[Path]:
    """The preset's figure(s): ``<measure>_vs_<x>.png`` (and CFPU for local sweeps)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    quick = " (quick)" if preset.quick else ""
    title = f"{preset.dataset}: {preset.paper} {preset.figure}, preset {preset.name}{quick}"
    footer = f"seeds {list(preset.seeds)}; options {preset.dataset_options}"
    if preset.sweep == "points":
        return [
            plot_bars(
                rows,
                out / f"{preset.measure}.png",
                measure=preset.measure,
                title=title,
                footer=footer,
                log_y=preset.log_y,
                mechanisms=preset.mechanisms,
            )
        ]
    fixed = f"w = {preset.w_values[0]}" if preset.sweep == "eps" else f"ε = {preset.eps_values[0]}"
    xlabel = None
    if preset.sweep == "ratio":
        fixed = f"others ε = {preset.eps_values[0]}, w = {preset.w_values[0]}"
        special = RATIO_LABELS.get(preset.setting, preset.setting)
        xlabel = f"o = share of users with {special}"
    measures = [preset.measure] + (["cfpu"] if preset.kind == "local" else [])
    return [
        plot_sweep(
            rows,
            out / f"{m}_vs_{preset.sweep}.png",
            x=preset.sweep,
            measure=m,
            title=f"{title}, {fixed}",
            footer=footer,
            log_y=preset.log_y,
            mechanisms=preset.mechanisms,
            xlabel=xlabel,
        )
        for m in measures
    ]
