"""Uniform on the (w,n) ledger: publish every page at every slot with ``eps / w`` (Liu et al.
2021 §5.2 and Fig. 10's "publish the data at every timestamp"; Kellaris et al.'s Uniform)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from app.dp.types import Group, IntArray
from app.dp.wn.base import Edges, GraphMechanism, Spending


class WNUniform(GraphMechanism):
    """Uniform with the (w,n) ledger: every page, every slot, ``Lap(l w / eps)``.

    Paper
    -----
    X. Liu, Y. Guo, X. Tan, Y. Chen, Secur. Commun. Netw. 2021: §5.2 (Uniform, "which allocates
    the same budget to every timestamp", excluded from the paper's plots) and §5.3 on Fig. 10
    ("if we publish the data at every timestamp, data utility will significantly decrease as
    n increases"); spec ``seed-003-trajectory.md`` §A8 and claim T4's contrast check. Kellaris
    et al., PVLDB 7(12) 2014, Uniform.

    ======================  ======================================================
    paper                   here
    ======================  ======================================================
    (w, eps), n, l          ``requirement``, ``n``, ``sensitivity``
    eps_t^m = eps / w       ``ledger.total // w`` units on every page at every slot
    o_t = r_t + Lap(l w/eps)  the release, every page fresh
    ======================  ======================================================

    Parameters
    ----------
    d, groups, n, edges, grid, neighbours, noise, sensitivity
        As in :class:`~app.dp.wn.stbd.STBD`.

    State
    -----
    t, last_release, ledger
        As in STBD; nothing else (no decision reads the data).

    Privacy
    -------
    Neighbours: :data:`~app.dp.wn.base.WN_RELATION` at this ``n``.
    (w,n)-DP with ``eps = min eps_g`` over ``w = max w_g``: every page spends ``eps / w`` at
    every slot, so every n-range window's per-slot maximum ``BallMax(e_t)`` is ``eps / w``
    and any ``w`` slots sum to exactly ``eps`` (Theorem 5); the ledger checks it, exactly in
    integer units, before the draw. Noise at ``(eps / w) / l`` per page covers the ``l``
    values a user changes per slot (group privacy, :meth:`calibrated`).

    The spending does not depend on ``n``: a page's budget is the same whatever the size of
    the windows around it, so the release is the same for every ``n`` under one seed. Under
    Theorem 5's per-page accounting, publishing at every timestamp cannot degrade with ``n``;
    only mechanisms whose pages spend *unequally* (adaptive ones, where the busiest page of a
    window caps the others, Eq. 14) feel the window's size.

    Deviations
    ----------
    * None beyond the (w,n) ledger in place of Kellaris's per-slot w-event accounting (spec
      A8: "Uniform with the (w,n) ledger").

    Examples
    --------
    Every page is fresh and spends ``eps / w``:

    >>> import numpy as np
    >>> from app.dp.types import Group
    >>> m = WNUniform(d=4, groups=[Group(10, 1.0)], n=2, grid=[2, 2])
    >>> rel = m.step([[5, 0, 7, 1]], np.random.default_rng(0))
    >>> rel.fresh_cells.tolist(), rel.spent_cells.tolist()
    ([True, True, True, True], [0.1, 0.1, 0.1, 0.1])
    >>> rel.histogram.round(2).tolist()
    [8.2, -6.17, -18.02, -33.1]

    References
    ----------
    Kellaris et al., PVLDB 7(12), 2014; Liu et al., Secur. Commun. Netw. 2021.
    """

    name = "wn_uniform"
    version = 1
    publication_share = Fraction(1)

    def __init__(
        self,
        d: int,
        groups: Sequence[Group],
        n: int = 2,
        edges: Edges | None = None,
        grid: Sequence[int] | None = None,
        neighbours: int = 4,
        noise: str = "laplace",
        sensitivity: int = 1,
    ) -> None:
        graph = self._take_graph(d, n, edges, grid, neighbours)
        super().__init__(d, groups, graph, n, noise, sensitivity)

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {
            "d": 6,
            "groups": [Group(5, 1.0), Group(3, 0.5)],
            "n": 2,
            "edges": [[0, 1], [1, 2], [2, 3], [3, 4], [1, 5]],
        }

    def describe(self) -> str:
        return (
            f"Uniform (w,n)-DP, n={self.n}: every page publishes at every slot with eps/w "
            f"(w={self.requirement.w}), noise Lap(l w / eps)"
        )

    def _slot(self, t: int, r: IntArray, rng: np.random.Generator) -> Spending:
        units = np.full(self.d, self.ledger.total // self.requirement.w, dtype=np.int64)
        self.ledger.ensure(np.zeros(self.d, dtype=np.int64), units)  # Theorem 5, then noise
        out = r + self.draw(rng, self.calibrated(units))
        return Spending(out, np.ones(self.d, dtype=bool), np.zeros(self.d, dtype=np.int64), units)


__all__ = ["WNUniform"]
