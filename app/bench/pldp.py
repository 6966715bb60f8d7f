"""PLDP-IDS experiments: AMSE of the personalized local mechanisms against LPD/LPA (offline).

Reproduces, at a configurable scale, the comparisons of Du et al., *PLDP-IDS*, §VI (spec
``shared/specs/seed-002-pldp-ids.md`` §6): every user draws its level uniformly from
``eps_i in {eps, eps + 0.5, ..., 2.5}`` and ``w_i in {40, 80, ..., w}`` (the authors' generator,
§6.2; the grid step is a parameter so small runs can scale it down), the personalized methods
run on those levels, and the non-personalized baselines LPD/LPA run at ``(max w_i, min eps_i)``
through their ``for_stream`` (spec A5: the paper's "LBD/LBA" are LPD/LPA in its code). The
measure is AMSE (§6.3): the mean over slots and values of the squared frequency error. Every
row records its seed and parameters; mechanisms are built through the registry by
:func:`app.bench.simulate.run_local`, which perturbs every asked device.

Run it as ``python -m app.bench.pldp --streams tlns sin log --users 10000 --slots 1000``.

>>> rows = point("sin", ["lpa", "plpa"], eps=1.5, w=8, users=400, slots=20, seed=0, step=4)
>>> [(r["mechanism"], r["levels"]) for r in rows]  # eps_i in {1.5, 2, 2.5}, w_i in {4, 8}
[('lpa', 1), ('plpa', 6)]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from app.bench.ldp_ids import dataset_values, frequencies
from app.bench.simulate import run_local
from app.dp import registry
from app.dp.types import Group

PERSONALIZED = (
    "plpd", "plpa", "plpd+", "plpa+", "plbd-rp", "plba-rp", "plbd-ops", "plba-ops",
)  # fmt: skip
BASELINES = ("lpd", "lpa")
EPS_TOP = 2.5
"""The largest personal budget of the paper's grid (Table IV)."""


def level_mix(
    eps: float, w: int, users: int, rng: np.random.Generator, step: int = 40
) -> tuple[list[Group], list[int]]:
    """The paper's personal levels: each user uniform over the ``(w_i, eps_i)`` grid.

    Returns the levels that got users and their counts (users are assigned in blocks).
    """
    budgets = np.arange(eps, EPS_TOP + 1e-9, 0.5) if eps <= EPS_TOP else np.array([eps])
    windows = list(range(step, w + 1, step)) or [w]
    grid = [Group(wi, round(float(e), 10)) for e in budgets for wi in windows]
    counts = rng.multinomial(users, np.full(len(grid), 1.0 / len(grid)))
    kept = [(g, int(c)) for g, c in zip(grid, counts, strict=True) if c > 0]
    return [g for g, _ in kept], [c for _, c in kept]


def amse(released: npt.NDArray[np.float64], truth: npt.NDArray[np.float64]) -> float:
    """``(1/(dT)) sum_t sum_j (f̂ - f)**2`` (spec §6.3)."""
    return float(np.mean((np.asarray(released) - np.asarray(truth)) ** 2))


def point(
    stream: str,
    mechanisms: Sequence[str],
    eps: float,
    w: int,
    users: int,
    slots: int,
    seed: int,
    step: int = 40,
    options: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One row per mechanism at one ``(eps, w)`` and seed: AMSE, publications, run time."""
    opts = {"users": users, "slots": slots, **(options or {})}
    values, d = dataset_values(stream, seed, opts)
    n = values.shape[1]
    levels, counts = level_mix(eps, w, n, np.random.default_rng([seed, 2]), step)
    truth = frequencies(values, d)
    rows = []
    for name in mechanisms:
        cls = registry.get(name)
        if name in BASELINES:  # (max w_i, min eps_i), for every user
            params: dict[str, Any] = {
                "eps": min(g.eps for g in levels),
                "w": max(g.w for g in levels),
                "users": n,
            }
        else:
            params = {"groups": levels, "users": counts}
        assert cls.kind == "local"
        began = time.perf_counter()
        run = run_local(values, d, name, params, np.random.default_rng([seed, 1]), keep="counts")
        rows.append({
            "stream": stream, "mechanism": name, "eps": eps, "w": w, "users": n,
            "slots": values.shape[0], "d": d, "seed": seed,
            "levels": len(params.get("groups", [0])),
            "amse": amse(run.histograms(), truth),
            "publications": sum(r.fresh for r in run.releases),
            "run_s": round(time.perf_counter() - began, 3),
        })  # fmt: skip
    return rows


def gaps(rows: list[dict[str, Any]], baseline: str = "lpa") -> dict[str, tuple[float, float]]:
    """Per mechanism: mean of ``R = 1 - AMSE_X / AMSE_base`` over (stream, eps, w, seed), and
    ``1 - mean(AMSE_X) / mean(AMSE_base)`` (spec §6.7, A31), in percent."""
    base = {(r["stream"], r["eps"], r["w"], r["seed"]): r["amse"] for r in rows
            if r["mechanism"] == baseline}  # fmt: skip
    out = {}
    for name in dict.fromkeys(r["mechanism"] for r in rows):
        mine = [r for r in rows if r["mechanism"] == name]
        ratio = [1 - r["amse"] / base[r["stream"], r["eps"], r["w"], r["seed"]] for r in mine]
        pooled = 1 - np.mean([r["amse"] for r in mine]) / np.mean(list(base.values()))
        out[name] = (100 * float(np.mean(ratio)), 100 * float(pooled))
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    """A table of mean AMSE per (stream, eps, w) and mechanism, and the gaps to LPA."""
    names = list(dict.fromkeys(r["mechanism"] for r in rows))
    keys = list(dict.fromkeys((r["stream"], r["eps"], r["w"]) for r in rows))
    lines = ["| stream | eps | w | " + " | ".join(names) + " |", "|---" * (3 + len(names)) + "|"]
    for s, e, w in keys:
        cells = []
        for name in names:
            vals = [r["amse"] for r in rows if (r["stream"], r["eps"], r["w"], r["mechanism"])
                    == (s, e, w, name)]  # fmt: skip
            cells.append(f"{np.mean(vals):.3e}")
        lines.append(f"| {s} | {e:g} | {w} | " + " | ".join(cells) + " |")
    if "lpa" in names:
        lines.append("")
        lines.append("| mechanism | mean R vs LPA (%) | pooled vs LPA (%) |")
        lines.append("|---|---|---|")
        for name, (r, pooled) in gaps(rows).items():
            lines.append(f"| {name} | {r:.1f} | {pooled:.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", nargs="+", default=["tlns", "sin", "log"])
    parser.add_argument("--mechanisms", nargs="+", default=[*BASELINES, *PERSONALIZED])
    parser.add_argument("--eps", nargs="+", type=float, default=[1.5])
    parser.add_argument("--w", nargs="+", type=int, default=[120])
    parser.add_argument("--step", type=int, default=40, help="grid step of the personal w_i")
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=1_000)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    rows = []
    for stream in args.streams:
        for eps in args.eps:
            for w in args.w:
                for seed in range(args.seeds):
                    rows += point(stream, args.mechanisms, eps, w, args.users, args.slots,
                                  seed, args.step)  # fmt: skip
                    print(f"{stream} eps={eps:g} w={w} seed={seed} done", flush=True)
    print(markdown(rows))


if __name__ == "__main__":
    main()
