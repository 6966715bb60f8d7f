"""The (w,n) ledger: Theorem 5 of Liu et al. (2021), checked exactly before any noise is drawn.

A (w,n)-DP mechanism spends a budget ``e[t][m]`` on every cell (slot ``t``, page ``m``). It is
(w,n)-DP if, for every slot ``tau`` and every n-range window ``W_n(c)`` (the pages within
``n - 1`` hops of a centre ``c``),

    sum_{t = tau-w+1}^{tau}  max_{m in W_n(c)} e[t][m]  <=  eps          (Theorem 5)

(parallel composition over the disjoint pages of one slot, sequential over the ``w`` slots;
spec ``seed-003-trajectory.md`` §1.4). The ledger keeps, for the last ``w`` slots, the
per-centre maxima ``phi_t = BallMax_{n-1}(e_t)`` in a ring and their running sum, so checking a
proposed slot costs one ``BallMax`` and a comparison over the ``M`` centres (against the
previous ``w - 1`` slots), and the window of ``w`` slots ending at the last one is reported as
the other mechanisms report theirs (:meth:`GraphLedger.spent`).

Budgets are integer units of :class:`app.dp.budget.GroupBudget` (``eps`` is
``2 w 2**SHARE_BITS`` units), so every sum and comparison is exact, with no tolerance. A
``publication`` part may be capped separately (STBD keeps its perturbation at ``eps/2``).
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp import validate
from app.dp.budget import GroupBudget
from app.dp.errors import InsufficientBudgetError, StateMismatchError
from app.dp.graph import Graph
from app.dp.types import Group

Units = npt.NDArray[np.int64]


class GraphLedger:
    """Budget units spent per (w,n) window, for one requirement ``(w, eps)`` over a graph.

    Parameters
    ----------
    graph
        The public graph over the ``M`` pages.
    n
        Spatial window size: ``W_n(c)`` holds the pages within ``n - 1`` hops of ``c``.
    group
        The requirement ``(w, eps)``.
    publication_share
        Cap of the publication part per window, as a share of ``eps``.

    Examples
    --------
    A path 0-1-2 with ``n = 2``: spending on page 0 also loads the windows centred at 0 and 1.

    >>> ledger = GraphLedger(Graph(3, [[0, 1], [1, 2]]), 2, Group(2, 1.0), Fraction(1))
    >>> full = ledger.budget.total
    >>> ledger.record(np.zeros(3, np.int64), np.array([full // 2, 0, 0]))
    >>> (ledger.remaining() * 4 // full).tolist()   # quarters of eps left per centre
    [2, 2, 4]
    >>> ledger.eta().tolist() == [full // 2, full // 2, full // 2]
    True
    >>> ledger.ensure(np.zeros(3, np.int64), np.array([0, 0, full]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    app.dp.errors.InsufficientBudgetError: group 0: (w,n) window centred at page 1 (total) ...
    """

    def __init__(
        self, graph: Graph, n: int, group: Group, publication_share: Fraction = Fraction(1, 2)
    ) -> None:
        self.graph = graph
        self.n = validate.integer("n", n)
        self.radius = self.n - 1
        self.budget = GroupBudget(group)
        self.total = self.budget.total
        self.pub_limit = int(self.total * publication_share)
        size = graph.nodes
        self._total: deque[Units] = deque(maxlen=group.w)
        self._pub: deque[Units] = deque(maxlen=group.w)
        self._total_sum: Units = np.zeros(size, dtype=np.int64)
        self._pub_sum: Units = np.zeros(size, dtype=np.int64)

    # ------------------------------------------------------------------ queries
    def window(self) -> Units:
        """Units each window (by centre) spent in the previous ``w - 1`` slots."""
        return _previous(self._total, self._total_sum)

    def pub_window(self) -> Units:
        """Publication units each window spent in the previous ``w - 1`` slots."""
        return _previous(self._pub, self._pub_sum)

    def remaining(self) -> Units:
        """``psi^c = eps - sum phi^c``: what window ``c`` may still spend now (Alg. 4 l.4)."""
        return self.total - self.window()

    def remaining_pub(self) -> Units:
        """``psi^c = eps/2 - sum phi^c`` on the publication part (Alg. 2 l.3, Eq. 12-13)."""
        return self.pub_limit - self.pub_window()

    def eta(self, pub: bool = False) -> Units:
        """``eta^m = min over windows containing m of psi`` (Eq. 14): ``BallMin_{n-1}(psi)``.

        A page may spend ``eta^m`` this slot without taking any window containing it over.
        """
        psi = self.remaining_pub() if pub else self.remaining()
        return self.graph.ball_min(psi, self.radius)

    def most_loaded(self) -> tuple[int, int]:
        """The most loaded (w,n) window: the centre whose n-range window spent the most in the
        ``w`` slots ending at the last recorded slot, and those units (Theorem 5's left side)."""
        c = int(np.argmax(self._total_sum))
        return c, int(self._total_sum[c])

    def spent(self) -> Fraction:
        """What the most loaded (w,n) window spent (in eps, exact) over the ``w`` slots ending
        at the last recorded slot: 1 x eps means some window is exhausted."""
        return self.budget.to_fraction(self.most_loaded()[1])

    # ------------------------------------------------------------------ spending
    def _phi(self, units: Units) -> Units:
        return self.graph.ball_max(units, self.radius)

    def ensure(self, dc: Units, pub: Units) -> None:
        """Raise unless spending ``dc + pub`` per page this slot keeps every (w,n) window
        within ``eps`` (and its publication part within the publication cap)."""
        for name, a in (("dc", dc), ("pub", pub)):
            if a.shape != (self.graph.nodes,) or (a < 0).any():
                raise InsufficientBudgetError(0, 0.0, 0.0, 0.0, f"{name} malformed or negative")
        for what, sums, new, limit in (
            ("total", self.window(), self._phi(dc + pub), self.total),
            ("publication", self.pub_window(), self._phi(pub), self.pub_limit),
        ):
            over = sums + new > limit
            if over.any():
                c = int(np.argmax(over))
                raise InsufficientBudgetError(
                    0,
                    self.budget.to_eps(int(sums[c])),
                    self.budget.to_eps(int(new[c])),
                    self.budget.to_eps(limit),
                    f"(w,n) window centred at page {c} ({what})",
                )

    def record(self, dc: Units, pub: Units) -> None:
        """Append this slot's spending per page (checked again by :meth:`ensure`)."""
        self.ensure(dc, pub)
        for ring, sums, units in (
            (self._total, self._total_sum, dc + pub),
            (self._pub, self._pub_sum, pub),
        ):
            phi = self._phi(units)
            if len(ring) == ring.maxlen:
                sums -= ring[0]
            ring.append(phi)
            sums += phi

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {
            "total": [[int(x) for x in row] for row in self._total],
            "pub": [[int(x) for x in row] for row in self._pub],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        for key, ring, sums in (
            ("total", self._total, self._total_sum),
            ("pub", self._pub, self._pub_sum),
        ):
            rows = [np.array(r, dtype=np.int64) for r in state[key]]
            if len(rows) > (ring.maxlen or 0) or any(r.shape != sums.shape for r in rows):
                raise StateMismatchError(f"(w,n) ledger state {key!r} does not fit this graph")
            ring.clear()
            ring.extend(rows)
            sums[:] = np.sum(rows, axis=0) if rows else 0


def _previous(ring: deque[Units], sums: Units) -> Units:
    """The ring's sum without its oldest slot once it holds ``w``: the previous ``w - 1``."""
    return sums - ring[0] if len(ring) == ring.maxlen else sums.copy()


__all__ = ["GraphLedger"]
