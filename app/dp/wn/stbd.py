"""STBD: Spatial-Temporal Budget Distribution (Liu et al. 2021, Algs. 1-2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app.dp.errors import ParameterError
from app.dp.types import Group, IntArray
from app.dp.wn.base import BoolArray, Edges, GraphMechanism, Spending


class STBD(GraphMechanism):
    """Spatial-Temporal Budget Distribution: BD per page, with (w,n) windows over a graph.

    Paper
    -----
    X. Liu, Y. Guo, X. Tan, Y. Chen. *Differentially private web browsing trajectories over
    infinite streams* (Security and Communication Networks, 2021), Algorithm 1 (STBD) and
    Algorithm 2 (budget allocation); spec ``docs/specs/seed-003-trajectory.md`` §A4.

    ======================  ======================================================
    paper                   here
    ======================  ======================================================
    (w, eps)                ``requirement = (max_g w_g, min_g eps_g)``
    n, graph G              ``n``, ``graph`` (from ``edges`` or ``grid``)
    l                       ``sensitivity``
    groups x (Louvain)      ``page_groups`` (lists of pages)
    alpha_t^x = eps/(2w)    ``GroupBudget.share`` units, every page, every slot
    phi_t^win, psi^win      ``ledger.pub_window()``, ``ledger.remaining_pub()``
    eta^m, beta^m           ``ledger.eta(pub=True)``, ``eta // 2`` (units)
    o_{t-1}                 ``last_release``
    ======================  ======================================================

    Parameters
    ----------
    d, groups
        Domain size (pages) and requirement groups; STBD runs at ``(max w, min eps)``.
    n
        Spatial window size: windows hold the pages within ``n - 1`` hops of a centre.
    edges, grid, neighbours
        The public graph: an edge list (or a :class:`~app.dp.graph.Graph` already built, as
        the service passes it), or a grid ``[rows, cols]`` (``rows * cols == d``) with 4- or
        8-neighbour adjacency; neither gives isolated pages.
    page_groups
        Public partition of the pages for the evaluation (Alg. 1 l.2-6): disjoint lists of
        pages; the pages no list names form one more group. None puts every page in one group
        (Kellaris's BD dissimilarity).
    noise, sensitivity
        ``laplace`` or ``geometric``; ``l``, the most values one user holds per slot.

    State
    -----
    t, last_release, ledger
        Slot counter, ``o_{t-1}``, and the (w,n) ledger's rings of ``BallMax`` of the total and
        of the perturbation budgets over the previous ``w - 1`` slots.

    Privacy
    -------
    Neighbours: :data:`~app.dp.wn.base.WN_RELATION`, at ``n`` = the ``n`` parameter: one user's
    up to ``l`` values per slot, in ``w`` consecutive slots, changed only on pages within
    ``n - 1`` hops of one centre page, added or removed at ``sensitivity=l`` (the service passes
    ``2 l`` for ``neighbours: replace``: the values changed, old and new pages in that window).
    A user whose pages in ``w`` slots fit in no single such window is protected per window:
    ``k`` windows cost up to ``k eps``.
    (w,n)-DP with ``eps = min eps_g`` over ``w = max w_g``, hence for every group (Theorem 6).
    Every page spends ``alpha = eps/(2w)`` per slot on evaluation (disjoint groups; a user's
    ``l`` values change the group sums by ``l`` in total, noise ``Lap(l / alpha)`` on the sums)
    and ``beta^m <= eta^m / 2`` on perturbation, ``eta^m`` being the smallest remaining
    perturbation budget ``eps/2 - sum phi`` over the windows containing ``m`` (Eq. 12-15).
    So every window's perturbation part stays below ``eps/2`` and its total at most ``eps``;
    the ledger checks Theorem 5's sum of maxima exactly before any draw.

    Deviations
    ----------
    * Evaluation noise is added to a group's sum and then divided by ``|x|`` (same law as
      ``Lap((l/|x|)/alpha)`` on the mean; spec A4), which also serves geometric noise.
    * Initial ``o_0 = 0`` (spec A9.6); budgets are exact integer units, rounding ``beta`` down.
    * Neighbours add or remove one user with at most ``l`` values per slot (spec §1.4, A9.10);
      ingest must clip users to ``l`` values.
    * Page groups are an input: this core has no Louvain (spec A3); the default is one group.

    Examples
    --------
    One page, ``n = 1``, always publishing: perturbation halves, eps/4, eps/8, ... (spec §3.3).

    >>> import numpy as np
    >>> from app.dp.types import Group
    >>> m = STBD(d=1, groups=[Group(10, 1.0)], n=1)
    >>> rng = np.random.default_rng(0)
    >>> [float(m.step([[10**9 * (t % 2)]], rng).spent_pub[0]) for t in range(1, 5)]
    [0.25, 0.125, 0.0625, 0.03125]

    References
    ----------
    Liu et al., Secur. Commun. Netw. 2021; Kellaris et al., PVLDB 7(12) 2014 (BD).
    """

    name = "stbd"
    version = 1

    def __init__(
        self,
        d: int,
        groups: Sequence[Group],
        n: int = 2,
        edges: Edges | None = None,
        grid: Sequence[int] | None = None,
        neighbours: int = 4,
        page_groups: Sequence[Sequence[int]] | None = None,
        noise: str = "laplace",
        sensitivity: int = 1,
    ) -> None:
        graph = self._take_graph(d, n, edges, grid, neighbours)
        labels = np.full(graph.nodes, -1, dtype=np.int64)  # -1: the pages no group lists
        for i, pages in enumerate(page_groups or ()):
            idx = np.asarray(pages, dtype=np.int64).reshape(-1)
            if idx.size and (idx.min() < 0 or idx.max() >= graph.nodes or (labels[idx] >= 0).any()):
                raise ParameterError(
                    f"page_groups must be disjoint lists of pages in 0..{graph.nodes - 1}, "
                    f"got {pages!r} in group {i}"
                )
            labels[idx] = i
        self.page_groups = (
            None if page_groups is None else [[int(p) for p in pages] for pages in page_groups]
        )
        _, self._label, sizes = np.unique(labels, return_inverse=True, return_counts=True)
        self._label = self._label.astype(np.int64)
        self._sizes = sizes.astype(np.float64)
        super().__init__(d, groups, graph, n, noise, sensitivity)

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {
            "d": 6,
            "groups": [Group(5, 1.0), Group(3, 0.5)],
            "n": 2,
            "edges": [[0, 1], [1, 2], [2, 3], [3, 4], [1, 5]],
            "page_groups": [[0, 1, 2, 5], [3, 4]],
        }

    def describe(self) -> str:
        return (
            f"STBD (w,n)-DP, n={self.n}: eps/(2w) per slot on evaluation over "
            f"{self._sizes.size} page group(s); each published page spends half of the least "
            "perturbation budget (eps/2) left in the windows containing it"
        )

    def _publishes(self, a_err: np.ndarray, p_err: np.ndarray) -> BoolArray:
        """Alg. 1 l.12: publish the pages whose approximation error exceeds the perturbation's."""
        return np.asarray(a_err > p_err, dtype=bool)

    def _slot(self, t: int, r: IntArray, rng: np.random.Generator) -> Spending:
        alpha = np.full(self.d, self.ledger.budget.share, dtype=np.int64)  # Alg. 2 l.1
        beta = self.ledger.eta(pub=True) // 2  # Alg. 2 l.2-5 (Eq. 12-15)
        self.ledger.ensure(alpha, beta)  # Theorem 5 before any draw
        # Evaluation, Alg. 1 l.2-6 (Eq. 10): noisy mean deviation per page group
        deviation = np.abs(r - self.last_release)
        sums = np.bincount(self._label, weights=deviation, minlength=self._sizes.size)
        alpha_eps = self.calibrated(alpha[: self._sizes.size])
        a_err = ((sums + self.draw(rng, alpha_eps)) / self._sizes)[self._label]
        # Alg. 1 l.8-9 (Eq. 9): expected perturbation error l / beta
        beta_eps = self.calibrated(beta)
        with np.errstate(divide="ignore"):
            p_err = np.where(beta > 0, 1.0 / beta_eps, np.inf)
        publish = self._publishes(a_err, p_err) & (beta > 0)
        out = self.last_release.copy()  # Alg. 1 l.14: skipped pages repeat o_{t-1}
        out[publish] = r[publish] + self.draw(rng, beta_eps[publish])  # l.12 (Eq. 8)
        beta = np.where(publish, beta, 0)  # l.14: a skipped page spends nothing
        return Spending(out, publish, alpha, beta)


__all__ = ["STBD"]
