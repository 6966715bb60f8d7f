"""The methods and the grid of ``bench open-domain``: one row per (dataset, method, eps, w,
seed, trial), the per-slot measures averaged over the slots.

Methods, all at the same window budget ``(eps, delta)`` over ``w`` slots, one level:

* ``open_uniform``, ``open_pba``: :class:`app.dp.open.OpenUniform` and
  :class:`app.dp.open.OpenPBA`, keys selected privately and carried over as public keys;
* ``label_uniform``, ``label_pba``: the registry's ``uniform`` and ``pba`` (geometric noise)
  given the run's whole true key set as labels before the first slot: what the same budget
  buys when the domain is known (baseline (a), the price of not knowing it). They release every
  label at every slot and spend no delta;
* ``threshold``: DP partition selection at every slot with no public set (baseline (b),
  the anchors' rule): a fresh ``OpenUniform`` per slot, so each slot spends ``eps/w`` and
  ``delta/w`` and releases only the keys whose noisy count passed the threshold.

``seed`` draws the bounding of the events to ``max_keys`` per user and slot, ``trial`` the
noise; generators are ``default_rng([seed, trial])``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.bench.open_domain.data import Events, Slot, bounded, domain, truth
from app.bench.open_domain.measures import mae, precision, recall
from app.dp.errors import ParameterError
from app.dp.open import Level, OpenMechanism, OpenPBA, OpenUniform
from app.dp.open.base import UNCAPPED
from app.dp.registry import create
from app.dp.types import Group

METHODS = ("open_uniform", "open_pba", "label_uniform", "label_pba", "threshold")
"""The methods, in the tables' order."""

KS = (10, 100)
"""The top-k of the recall columns."""


@dataclass(frozen=True)
class Grid:
    """What one run covers."""

    datasets: tuple[str, ...]
    eps: tuple[float, ...]
    w: tuple[int, ...]
    delta: float = 1e-5
    max_keys: int = 1
    seeds: int = 2
    trials: int = 2
    methods: tuple[str, ...] = METHODS


PRESETS = {
    "quick": Grid(datasets=("gen-keys",), eps=(1.0, 4.0, 16.0), w=(2, 8), seeds=1, trials=1),
    "full": Grid(datasets=("tdrive", "diginetica"), eps=(1.0, 4.0, 16.0), w=(2, 8)),
}
"""The presets of ``dpstream bench open-domain``; ``--seeds`` and ``--trials`` override theirs."""


Released = dict[str, float]


def _open(cls: type[OpenMechanism], level: Level, population: int, max_keys: int) -> Any:
    """The mechanism without the service's release cap: the bench compares selection and
    counts (its stored runs predate the cap; ``dpstream replay`` shows a deployment's cap)."""
    return cls(levels=[level], population=population, max_keys=max_keys, max_released_keys=UNCAPPED)


def _open_run(
    make: Callable[[], OpenMechanism], slots: Sequence[Slot], rng: np.random.Generator, fresh: bool
) -> Iterator[Released]:
    mech = make()
    for slot in slots:
        if fresh:
            mech = make()
        out = mech.step(slot.users, slot.keys, rng)
        yield dict(zip(out.keys, (float(c) for c in out.counts), strict=True))


def _label_run(
    kind: str, eps: float, w: int, slots: Sequence[Slot], population: int, rng: np.random.Generator
) -> Iterator[Released]:
    labels = domain(slots)
    d, groups = max(labels.size, 1), [Group(w, eps)]
    mech = (
        create("uniform", d=d, groups=groups, noise="geometric")
        if kind == "uniform"
        else create("pba", d=d, groups=groups, noise="geometric")
    )
    names = [str(k) for k in labels]
    for slot in slots:
        counts = np.zeros((1, d), dtype=np.int64)
        np.add.at(counts[0], np.searchsorted(labels, slot.keys), 1)
        hist = mech.step(counts, rng, population=[population]).histogram
        yield dict(zip(names, (float(x) for x in hist), strict=False))


def releases(
    method: str,
    slots: Sequence[Slot],
    eps: float,
    w: int,
    delta: float,
    population: int,
    max_keys: int,
    rng: np.random.Generator,
) -> Iterator[Released]:
    """Each slot's released key -> count map under ``method`` (slots already bounded)."""
    level = Level(w, eps, delta)
    if method == "open_uniform":
        return _open_run(lambda: _open(OpenUniform, level, population, max_keys), slots, rng, False)
    if method == "open_pba":
        return _open_run(lambda: _open(OpenPBA, level, population, max_keys), slots, rng, False)
    if method == "threshold":
        return _open_run(lambda: _open(OpenUniform, level, population, max_keys), slots, rng, True)
    if method in ("label_uniform", "label_pba"):
        return _label_run(method.removeprefix("label_"), eps, w, slots, population, rng)
    raise ValueError(f"unknown method {method!r}; one of {METHODS}")


def _mean(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def measure(trues: Sequence[dict[str, int]], released: Sequence[Released]) -> dict[str, float]:
    """The per-slot measures averaged over the slots that hold at least one true key;
    ``mae_true`` is the MAE over the true keys only (what a key someone sent is off by);
    ``true_keys`` and ``top_count`` describe the data (keys sent, largest count per slot)."""
    pairs = [(t, r) for t, r in zip(trues, released, strict=True) if t]
    out = {f"recall{k}": _mean([recall(t, r, k) for t, r in pairs]) for k in KS}
    out["precision"] = _mean([precision(t, r) for t, r in pairs])
    out["mae"] = _mean([mae(t, r) for t, r in pairs])
    out["mae_true"] = _mean([mae(t, {k: r.get(k, 0.0) for k in t}) for t, r in pairs])
    out["released"] = _mean([float(len(r)) for _, r in pairs])
    out["true_keys"] = _mean([float(len(t)) for t, _ in pairs])
    out["top_count"] = _mean([float(max(t.values())) for t, _ in pairs])
    return out


def tau(method: str, eps: float, w: int, delta: float, population: int, max_keys: int) -> int:
    """The selection threshold ``method`` draws against at this budget (0 for the label
    baselines, which select nothing, and for a refused configuration)."""
    cls: dict[str, type[OpenUniform] | type[OpenPBA]] = {
        "open_pba": OpenPBA,
        "open_uniform": OpenUniform,
        "threshold": OpenUniform,
    }
    if method not in cls:
        return 0
    try:
        return int(_open(cls[method], Level(w, eps, delta), population, max_keys).tau)
    except ParameterError:
        return 0


def prepare(events: Events, max_keys: int, seed: int) -> tuple[list[Slot], list[dict[str, int]]]:
    """The slots bounded to ``max_keys`` per user by ``seed``, and their true counts."""
    prep = np.random.default_rng([seed, 2**20])
    slots = [bounded(s, max_keys, prep) for s in events.slots]
    return slots, [truth(s) for s in slots]


def run_cell(
    events: Events,
    prepared: tuple[list[Slot], list[dict[str, int]]],
    method: str,
    eps: float,
    w: int,
    grid: Grid,
    seed: int,
    trial: int,
) -> dict[str, Any]:
    """One row: ``method`` over the ``prepared`` slots of ``events`` (bounded by ``seed``) at
    ``(eps, w)``, noise of ``trial``."""
    slots, trues = prepared
    row: dict[str, Any] = {
        "dataset": events.name,
        "method": method,
        "eps": eps,
        "w": w,
        "delta": grid.delta,
        "max_keys": grid.max_keys,
        "seed": seed,
        "trial": trial,
        "slots": len(slots),
        "population": events.population,
        "tau": tau(method, eps, w, grid.delta, events.population, grid.max_keys),
    }
    began = time.perf_counter()
    rng = np.random.default_rng([seed, trial])
    try:
        rel = list(
            releases(method, slots, eps, w, grid.delta, events.population, grid.max_keys, rng)
        )
    except ParameterError as exc:
        return row | {"status": f"refused: {exc}", "seconds": 0.0}
    row |= measure(trues, rel)
    return row | {"status": "ok", "seconds": round(time.perf_counter() - began, 3)}


def run(
    grid: Grid, load: Callable[[str], Events], progress: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Every row of ``grid``; ``load`` reads a dataset by name."""
    rows = []
    for name in grid.datasets:
        events = load(name)
        for seed in range(grid.seeds):
            prepared = prepare(events, grid.max_keys, seed)
            for eps in grid.eps:
                for w in grid.w:
                    for method in grid.methods:
                        for trial in range(grid.trials):
                            rows.append(
                                run_cell(events, prepared, method, eps, w, grid, seed, trial)
                            )
                    if progress:
                        progress(f"{name} seed={seed} eps={eps} w={w}")
    return rows
