"""Process CPU time per released histogram of the discrete noise at ``d`` cells (issue 33 §3).

Run from a checkout's root, before and after a change of the sampler, on the same machine::

    .venv/bin/python scripts/bench_noise.py                 # this checkout
    PYTHONPATH=/path/to/other .venv/bin/python scripts/bench_noise.py   # another one

Rows: the noise alone (``two_sided_geometric`` of ``d`` draws at a per-unit budget), and whole
releases as the service makes them (a keyed generator per slot, the registry's mechanism with
the service's ``geometric`` noise and ``sensitivity=2``): Uniform (one histogram per slot, noise
at ``eps / (2w)`` per unit), and the period mechanisms OptStream and PeGaSus on counts and on
sums (``alpha``: the grid), per released histogram (period time / ``W``). Each row is the median
and the minimum of ``--repeats`` measurements of ``--slots`` releases; timings on a shared
machine are noisy, so compare medians taken in the same run of both checkouts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import app
from app.dp.interfaces import as_period, as_slotted
from app.dp.noise import keyed_rng, two_sided_geometric
from app.dp.registry import create
from app.dp.types import Group

KEY = b"bench-noise-key-0123456789abcdef"


def cpu_per_call(run: Callable[[int], int], slots: int, repeats: int) -> tuple[float, float]:
    """Median and minimum over ``repeats`` of process CPU seconds per released histogram;
    ``run(t)`` does slot ``t`` and returns how many histograms it released."""
    run(0)  # imports and caches
    samples = []
    for r in range(repeats):
        began, released = time.process_time(), 0
        for t in range(1 + r * slots, 1 + (r + 1) * slots):
            released += run(t)
        samples.append((time.process_time() - began) / max(released, 1))
    return statistics.median(samples), min(samples)


def noise_only(d: int, gamma: float) -> Callable[[int], int]:
    def run(t: int) -> int:
        two_sided_geometric(keyed_rng(KEY, "noise", t), gamma, d)
        return 1

    return run


def uniform(d: int, w: int, eps: float) -> Callable[[int], int]:
    m = as_slotted(create("uniform", d=d, groups=[Group(w, eps)], noise="geometric", sensitivity=2))
    counts = np.random.default_rng(0).integers(0, 500, (1, d))

    def run(t: int) -> int:
        m.step(counts, keyed_rng(KEY, "uniform", t), [1000])
        return 1

    return run


def period(name: str, d: int, w: int, alpha: float | None) -> Callable[[int], int]:
    m = as_period(create(name, d=d, groups=[Group(w, 1.0)], sensitivity=2, alpha=alpha))
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 500, (1, d)) if alpha is None else rng.uniform(0, 500, (1, d))

    def run(t: int) -> int:
        return len(m.step(counts, keyed_rng(KEY, name, t), [1000]))

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    d, slots, repeats = args.d, args.slots, args.repeats
    print(f"code: {Path(app.__file__).resolve().parents[1]}  d={d}", file=sys.stderr)
    rows: list[tuple[str, Callable[[int], int], int]] = [
        ("noise gamma=0.5", noise_only(d, 0.5), slots),
        ("noise gamma=1/80", noise_only(d, 1 / 80), slots),
        ("noise gamma=2", noise_only(d, 2.0), slots),
        ("uniform w=40 eps=1 (gamma=1/80)", uniform(d, 40, 1.0), slots),
        ("uniform w=1 eps=1 (gamma=1/2)", uniform(d, 1, 1.0), slots),
        ("optstream W=10 counts", period("optstream", d, 10, None), 10 * 3),
        ("optstream W=10 sums alpha=5", period("optstream", d, 10, 5.0), 10 * 3),
        ("pegasus W=10 counts", period("pegasus", d, 10, None), slots),
    ]
    print(f"{'release':36s} {'median ms':>10s} {'min ms':>8s}")
    for label, run, n in rows:
        median, best = cpu_per_call(run, n, repeats)
        print(f"{label:36s} {median * 1e3:10.3f} {best * 1e3:8.3f}", flush=True)


if __name__ == "__main__":
    main()
