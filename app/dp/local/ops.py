"""OPS: Optimal Population Selection (PLDP-IDS Alg. 1), with the spec's privacy fix.

Paper: L. Du et al., *PLDP-IDS*, §V.A, Algorithm 1 (lines 1-10), Eqs. 6-7, Lemma IX.3,
Thm V.3. Reading aid: ``docs/specs/seed-002-pldp-ids.md`` §3.1, A9, A10, A14, Example 2 and
Example 4 in §6.5.

Every user ``i`` has a unit population ``z_i = floor(n / (2 w_i))``. OPS tries each distinct
``z~`` (ascending) as the per-slot dissimilarity sample: the recycling window becomes
``W = max{w_i : z_i = z~}`` (A9), and every user whose ``z_i < z~`` (so ``w_i > W``) splits its
budget into ``s_i`` shares and reports with ``eps_i / s_i``. The candidate with the smallest
reporting error ``err = (V_smpl + V_PLDP) / d`` (Eq. 7, :func:`app.dp.local.pfo.report_error`)
wins; ties go to the first (smaller) candidate (strict ``<``, Alg. 1 l.9).

The split rule is a privacy matter (spec A10). The paper splits by ``ceil(z~ / z_i)``; the proof
(Lemma IX.3) needs ``s_i >= ceil(w_i / W)``, because a user recycled every ``W`` slots reports
up to ``ceil(w_i / W)`` times in a window of its own ``w_i``. The two differ off the paper's
grid because of the floors: with ``n = 10269``, ``W = 62`` (``z~ = 82``) a user with
``w_i = 125`` (``z_i = 41``) gets 2 shares from the paper but can report at slots 1, 63 and 125,
i.e. ``1.5 eps_i`` in one window. The default ``split_rule="safe_max"`` uses
``s_i = max(ceil(z~ / z_i), ceil(w_i / W))``, which equals the paper on its grid and is always
safe; ``"paper_ceil_z"`` is kept only to show the failure and to reproduce Example 2, whose
input has no windows. The candidate errors are computed with the shares each rule would use.

>>> from app.dp.types import Group
>>> levels = [Group(w, e) for e in (0.2, 0.4, 0.6, 0.8) for w in (1, 2, 3, 4)]
>>> table = [29, 59, 92, 56, 98, 176, 273, 207, 62, 124, 188, 114, 64, 115, 202, 141]
>>> r = ops(levels, table, d=5)
>>> r.candidates, [round(e, 4) for e in r.errors], r.z_opt, r.window
((250, 333, 500, 1000), [0.0348, 0.0328, 0.0351, 0.0421], 333, 3)
>>> [r.shares[k] for k in (3, 7, 11, 15)], set(r.shares[k] for k in range(16) if k % 4 != 3)
([2, 2, 2, 2], {1})
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from app.dp import validate
from app.dp.budget import exact
from app.dp.errors import ParameterError
from app.dp.local.pfo import report_error
from app.dp.types import Group

SplitRule = Literal["safe_max", "paper_ceil_z"]
SPLIT_RULES: tuple[SplitRule, ...] = ("safe_max", "paper_ceil_z")


@dataclass(frozen=True)
class OPSResult:
    """What OPS chose (Alg. 1 l.10) and what it compared.

    ``shares[i]`` is ``s_i`` of entry ``i`` (a user or a level): it reports with
    ``eps_i / s_i``. ``window`` is ``W`` (None when the input has no windows). ``candidates``
    and ``errors`` are the distinct ``z~`` in ascending order and their Eq. 7 errors.
    """

    z_opt: int
    window: int | None
    shares: tuple[int, ...]
    candidates: tuple[int, ...]
    errors: tuple[float, ...]
    err_opt: float


def shares_for(
    z: Sequence[int], w: Sequence[int] | None, z_cand: int, rule: SplitRule
) -> tuple[tuple[int, ...], int | None]:
    """``s_i`` of every entry and ``W`` when ``z~ = z_cand`` (Alg. 1 l.4-6, spec A9, A10)."""
    window = None if w is None else max(wi for zi, wi in zip(z, w, strict=True) if zi == z_cand)
    out = []
    for i, zi in enumerate(z):
        if zi >= z_cand:
            out.append(1)  # l.6: w_i <= W, the whole budget per report
            continue
        s = -(-z_cand // zi)  # l.5: ceil(z~ / z_i)
        if rule == "safe_max":
            assert w is not None and window is not None
            s = max(s, -(-w[i] // window))  # spec A10: ceil(w_i / W) as Lemma IX.3 needs
        out.append(s)
    return tuple(out), window


def select(
    z: Sequence[int],
    eps: Sequence[float],
    counts: Sequence[int],
    n: int,
    d: int,
    w: Sequence[int] | None = None,
    split_rule: SplitRule = "safe_max",
) -> OPSResult:
    """Alg. 1 over entries ``i`` with unit population ``z[i]``, budget ``eps[i]``, ``counts[i]``
    users (1 for per-user input) and window ``w[i]``; ``n`` users in total."""
    validate.choice("split_rule", split_rule, SPLIT_RULES)
    if split_rule == "safe_max" and w is None:
        raise ParameterError("split_rule 'safe_max' needs the windows w")
    if not z or min(z) < 1:
        raise ParameterError(f"z must be a non-empty sequence of integers >= 1, got {z!r}")
    best: tuple[float, int] | None = None
    errors = []
    candidates = sorted(set(z))  # l.2, ascending
    for z_cand in candidates:  # l.3
        shares, _ = shares_for(z, w, z_cand, split_rule)  # l.4-6
        pooled: dict[Fraction, int] = {}
        for e, c, s in zip(eps, counts, shares, strict=True):  # l.7: Unique(eps'), g'
            key = exact(e) / s
            pooled[key] = pooled.get(key, 0) + int(c)
        budgets = sorted(pooled)
        err = report_error(  # l.8 (Eq. 7; the group sizes are z~ g'_k)
            [float(b) for b in budgets], [z_cand * pooled[b] / n for b in budgets], n, d
        )
        errors.append(err)
        if best is None or err < best[0]:  # l.9, strict: the first minimum wins
            best = (err, z_cand)
    assert best is not None
    shares, window = shares_for(z, w, best[1], split_rule)
    return OPSResult(best[1], window, shares, tuple(candidates), tuple(errors), best[0])


def ops(
    levels: Sequence[Group], users: Sequence[int], d: int, split_rule: SplitRule = "safe_max"
) -> OPSResult:
    """Alg. 1 over requirement levels: ``users[k]`` users hold ``levels[k]``.

    ``z_k = floor(n / (2 w_k))`` with ``n = sum(users)``; needs ``n >= 2 max w_k``.
    """
    n = sum(int(u) for u in users)
    w = [g.w for g in levels]
    if n < 2 * max(w):
        raise ParameterError(f"users must total at least 2 max(w)={2 * max(w)}, got {n}")
    z = [n // (2 * wk) for wk in w]
    return select(z, [g.eps for g in levels], list(users), n, d, w, split_rule)


def worst_window_spend(share: int, window: int, w: int) -> Fraction:
    """The most a user with ``s`` shares, recycled every ``W`` slots, spends in a window of its
    own ``w`` slots, as a fraction of its ``eps``: ``ceil(w / W) / s`` (Lemma IX.3).

    >>> worst_window_spend(2, 62, 125), worst_window_spend(3, 62, 125)
    (Fraction(3, 2), Fraction(1, 1))
    """
    return Fraction(math.ceil(w / window), share)
