"""The papers' synthetic binary streams as :class:`~app.bench.engine.datasets.base.Dataset` values.

A thin adapter over :mod:`app.bench.engine.synthetic` (the ``p_t`` laws TLNS/LNS, Sin, Log). What
differs between the papers is the size and how users are drawn (:data:`PAPERS`):

========== ======= ======= ============================================================
paper      N       T       users holding 1 at slot t
========== ======= ======= ============================================================
pwsm       10,000  10,000  each independently w.p. ``p_t`` (spec seed-000 §6.1, A24)
ldp-ids    200,000 800     exactly ``round(p_t N)``, uniformly without replacement
                           (spec seed-004 §7.1, A22)
pldp-ids   10,000  10,000  each independently w.p. ``p_t`` (spec seed-002 §6.1)
========== ======= ======= ============================================================

The laws' parameters are the same in all three (TLNS ``p_0 = 0.05``, ``sqrt(Q) = 0.0025``,
clipped to [0, 1]; Sin ``A = 0.05, b = 0.01, h = 0.075``; Log ``A = 0.25, b = 0.01``).
``code_compat=True`` reproduces the PWSM and PLDP-IDS authors' code instead (spec seed-000 A23,
seed-002 A27): TLNS starts at ``p_0 = 0.5`` and every ``p_t`` is rounded to 2 decimals, inside
the walk for TLNS. Users are drawn here in blocks of slots, so a seed gives other values than
:func:`app.bench.engine.synthetic.values` (same law).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from app.bench.engine import synthetic
from app.bench.engine.datasets.base import Dataset

PAPERS: dict[str, dict[str, Any]] = {
    "pwsm": {"N": 10_000, "T": 10_000, "draw": "bernoulli"},
    "ldp-ids": {"N": 200_000, "T": 800, "draw": "exact"},
    "pldp-ids": {"N": 10_000, "T": 10_000, "draw": "bernoulli"},
}
"""Paper -> synthetic sizes and user-drawing rule (see the module docstring)."""

STREAMS = tuple(sorted(synthetic.GENERATORS))
"""Stream names: ``lns`` (LDP-IDS's name), ``log``, ``sin``, ``tlns``."""

CODE_P0 = 0.5
"""TLNS start in the authors' code (spec seed-000 A23)."""

_BLOCK_CELLS = 1 << 23


def probabilities(
    stream: str, T: int, rng: np.random.Generator, code_compat: bool = False
) -> npt.NDArray[np.float64]:
    """``p_t`` for ``t = 1..T``: the paper's law, or the authors' code (``code_compat``).

    >>> p = probabilities("tlns", 400, np.random.default_rng(1), code_compat=True)
    >>> bool(np.all(np.round(p, 2) == p)), bool(abs(p[0] - 0.5) <= 0.01)
    (True, True)
    """
    if stream not in synthetic.GENERATORS:
        raise ValueError(f"stream must be one of {list(STREAMS)}, got {stream!r}")
    if not code_compat:
        return synthetic.probabilities(stream, T, rng)
    if synthetic.GENERATORS[stream] is not synthetic.tlns:
        return np.round(synthetic.probabilities(stream, T, rng), 2)
    p = np.empty(T)
    prev = CODE_P0
    steps = rng.normal(0.0, 0.0025, T)
    for t in range(T):  # rounding inside the walk makes it path-dependent
        prev = round(min(1.0, max(0.0, prev + steps[t])), 2)
        p[t] = prev
    return p


def draw(
    p: npt.NDArray[np.float64], N: int, rng: np.random.Generator, rule: str
) -> npt.NDArray[np.int8]:
    """Values ``(T, N)`` in {0, 1} for ``p_t`` under ``rule`` (``"bernoulli"`` or ``"exact"``).

    >>> v = draw(np.array([0.25, 0.5]), 8, np.random.default_rng(0), "exact")
    >>> v.sum(axis=1).tolist()
    [2, 4]
    """
    T = p.size
    out = np.zeros((T, N), dtype=np.int8)
    if rule == "exact":
        ones = np.rint(p * N).astype(np.int64)
        for t in range(T):  # one draw without replacement per slot
            out[t, rng.choice(N, size=ones[t], replace=False)] = 1
    elif rule == "bernoulli":
        step = max(1, _BLOCK_CELLS // max(N, 1))
        for lo in range(0, T, step):  # blocks of slots bound the uniform temporary
            block = p[lo : lo + step]
            out[lo : lo + block.size] = rng.random((block.size, N)) < block[:, None]
    else:
        raise ValueError(f"rule must be 'bernoulli' or 'exact', got {rule!r}")
    return out


def load_synthetic(
    stream: str = "tlns",
    *,
    paper: str = "pwsm",
    N: int | None = None,
    T: int | None = None,
    seed: int = 0,
    code_compat: bool = False,
) -> Dataset:
    """A synthetic binary stream with one paper's sizes and drawing rule.

    Parameters
    ----------
    stream
        ``"tlns"`` (``"lns"``), ``"sin"`` or ``"log"``.
    paper
        ``"pwsm"``, ``"ldp-ids"`` or ``"pldp-ids"`` (:data:`PAPERS`).
    N, T
        Override the paper's number of users and slots.
    seed
        Seed of the ``numpy`` generator drawing ``p_t`` (TLNS) and the users.
    code_compat
        The authors' code instead of the paper's formulas (see the module docstring).

    Examples
    --------
    >>> ds = load_synthetic("sin", paper="ldp-ids", N=1000, T=3)
    >>> ds.values.shape, ds.histograms()[:, 1].tolist()
    ((3, 1000), [75, 76, 76])
    """
    if paper not in PAPERS:
        raise ValueError(f"paper must be one of {sorted(PAPERS)}, got {paper!r}")
    spec = PAPERS[paper]
    n = spec["N"] if N is None else N
    t = spec["T"] if T is None else T
    for name, size in (("N", n), ("T", t)):
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {size!r}")
    rng = np.random.default_rng(seed)
    p = probabilities(stream, t, rng, code_compat)
    return Dataset(
        name="synthetic",
        values=draw(p, n, rng, spec["draw"]),
        d=2,
        labels=("0", "1"),
        slot_s=0,
        start=None,
        users=tuple(str(i) for i in range(n)),
        missing="absent",
        source="",
        options={
            "stream": stream,
            "paper": paper,
            "draw": spec["draw"],
            "seed": seed,
            "code_compat": code_compat,
        },
    )
