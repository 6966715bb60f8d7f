"""A public, undirected, unweighted graph over the domain, and its hop-ball window operators.

(w,n)-DP (Liu et al. 2021, seed 003) protects a user's data inside any ``w`` consecutive slots
times any *n-range spatial window* ``W_n(c) = {m : d(c, m) <= n - 1}`` of a graph over the
domain's values (pages of a site, cells of a map). The graph is configuration: it is built once,
from an edge list or a ``rows x cols`` grid, and treated as public (it never depends on the
released data).

The mechanisms only need two operators over a vector ``a`` indexed by node (spec
``seed-003-trajectory.md`` §A0):

* ``ball_max(a, r)[c] = max_{m : d(c, m) <= r} a[m]`` and ``ball_min`` likewise;
* both by ``r`` rounds of neighbourhood propagation over the CSR adjacency with
  ``numpy.maximum.reduceat``: ``O(r (M + 2E))`` per call, no ball is ever materialised and there
  is no Python loop over nodes.

Radius ``r = n - 1``; ``r = 0`` is the identity (place level, RescueDP), and a radius at or
beyond the graph's eccentricities gives the max over each connected component (whole level, BD).

>>> g = Graph.grid(2, 3)                 # 0 1 2 / 3 4 5, 4-neighbour
>>> g.nodes, g.edge_count
(6, 7)
>>> g.ball_max(np.array([5, 0, 0, 0, 0, 1]), 1).tolist()
[5, 5, 1, 5, 1, 1]
>>> g.ball_min(np.array([5, 0, 9, 9, 9, 1]), 1).tolist()
[0, 0, 0, 5, 0, 1]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from app.dp import validate
from app.dp.errors import ParameterError

T = TypeVar("T", bound=np.generic)
IndexArray = npt.NDArray[np.int64]


class Graph:
    """An undirected, unweighted graph on nodes ``0..nodes-1`` in CSR form (public, immutable).

    Parameters
    ----------
    nodes
        Number of nodes (the domain size ``d``).
    edges
        Pairs ``(u, v)`` of node indices. Self-loops are dropped, duplicates and both directions
        are merged.

    Attributes
    ----------
    indptr, indices
        The symmetric CSR adjacency: the neighbours of ``c`` are
        ``indices[indptr[c]:indptr[c + 1]]``, sorted. Read-only.
    """

    def __init__(self, nodes: int, edges: Iterable[Sequence[int]] = ()) -> None:
        self.nodes = validate.integer("d (graph nodes)", nodes)
        pairs = np.array([tuple(e) for e in edges], dtype=np.int64).reshape(-1, 2)
        if pairs.size and (pairs.min() < 0 or pairs.max() >= self.nodes):
            bad = pairs[(pairs < 0).any(axis=1) | (pairs >= self.nodes).any(axis=1)][0]
            raise ParameterError(
                f"edges must join nodes in 0..{self.nodes - 1}, got {bad.tolist()}"
            )
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        both = np.concatenate([pairs, pairs[:, ::-1]])
        keys = np.unique(both[:, 0] * self.nodes + both[:, 1])  # sorted by (source, target)
        src, dst = keys // self.nodes, keys % self.nodes
        self.indices: IndexArray = dst.astype(np.int64)
        self.indptr: IndexArray = np.concatenate(
            [[0], np.cumsum(np.bincount(src, minlength=self.nodes))]
        ).astype(np.int64)
        self.indices.flags.writeable = False
        self.indptr.flags.writeable = False
        degree = np.diff(self.indptr)
        self._starts = self.indptr[:-1][degree > 0]  # reduceat ranges of nodes with neighbours
        self._has_neighbours = degree > 0

    # ------------------------------------------------------------------ construction
    @classmethod
    def grid(cls, rows: int, cols: int, neighbours: int = 4) -> Graph:
        """The ``rows x cols`` grid, node ``r * cols + c``; 4- (rook) or 8- (king) adjacency.

        >>> Graph.grid(3, 3, neighbours=8).degree().tolist()
        [3, 5, 3, 5, 8, 5, 3, 5, 3]
        """
        for name, v in (("rows", rows), ("cols", cols)):
            validate.integer(f"grid {name}", v)
        if neighbours not in (4, 8):
            raise ParameterError(f"neighbours must be 4 or 8, got {neighbours!r}")
        ids = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols)
        steps = [(0, 1), (1, 0)] + ([(1, 1), (1, -1)] if neighbours == 8 else [])
        parts = []
        for dr, dc in steps:
            a = ids[: rows - dr, max(0, -dc) : cols - max(0, dc)]
            b = ids[dr:, max(0, dc) : cols - max(0, -dc)]
            parts.append(np.stack([a.ravel(), b.ravel()], axis=1))
        return cls(int(rows * cols), np.concatenate(parts).tolist())

    @classmethod
    def from_config(
        cls,
        d: int,
        edges: Sequence[Sequence[int]] | None = None,
        grid: Sequence[int] | None = None,
        neighbours: int = 4,
    ) -> Graph:
        """The graph a stream's configuration names: an edge list, or a grid ``[rows, cols]``
        whose size must be ``d``; neither gives ``d`` isolated nodes (place level only)."""
        if edges is not None and grid is not None:
            raise ParameterError("give either edges or grid, not both")
        if grid is None:
            return cls(d, edges or ())
        if len(grid) != 2:
            raise ParameterError(f"grid must be [rows, cols], got {grid!r}")
        rows, cols = int(grid[0]), int(grid[1])
        if rows * cols != d:
            raise ParameterError(f"grid {rows} x {cols} has {rows * cols} cells but d is {d}")
        return cls.grid(rows, cols, neighbours)

    # ------------------------------------------------------------------ properties
    @property
    def edge_count(self) -> int:
        """Number of undirected edges."""
        return int(self.indices.size // 2)

    def degree(self) -> IndexArray:
        """Number of neighbours of every node."""
        return np.diff(self.indptr)

    def edges(self) -> list[list[int]]:
        """The undirected edges ``[u, v]`` with ``u < v``, sorted (plain ints)."""
        src = np.repeat(np.arange(self.nodes), self.degree())
        keep = src < self.indices
        pairs: list[list[int]] = np.stack([src[keep], self.indices[keep]], axis=1).tolist()
        return pairs

    # ------------------------------------------------------------------ window operators
    def ball_max(self, a: npt.NDArray[T], radius: int) -> npt.NDArray[T]:
        """``out[c] = max of a over the nodes within ``radius`` hops of c`` (a new array)."""
        return self._propagate(a, radius, np.maximum)

    def ball_min(self, a: npt.NDArray[T], radius: int) -> npt.NDArray[T]:
        """``out[c] = min of a over the nodes within ``radius`` hops of c`` (a new array)."""
        return self._propagate(a, radius, np.minimum)

    def _propagate(self, a: npt.NDArray[T], radius: int, op: np.ufunc) -> npt.NDArray[T]:
        if a.shape != (self.nodes,):
            raise ParameterError(f"vector must have shape ({self.nodes},), got {a.shape}")
        if radius < 0:
            raise ParameterError(f"radius must be >= 0, got {radius}")
        out = a.copy()
        if not self._starts.size:
            return out
        for _ in range(radius):
            neighbour = op.reduceat(out[self.indices], self._starts)
            new = out.copy()
            new[self._has_neighbours] = op(out[self._has_neighbours], neighbour)
            if np.array_equal(new, out):  # every ball already covers its component
                break
            out = new
        return out

    def hop_distances(self, source: int) -> IndexArray:
        """Hop distance from ``source`` to every node (-1 if unreachable); a BFS by frontiers."""
        dist = np.full(self.nodes, -1, dtype=np.int64)
        dist[source] = 0
        frontier = np.zeros(self.nodes, dtype=bool)
        frontier[source] = True
        hop = 0
        while frontier.any():
            hop += 1
            reached = self.indices[np.repeat(frontier, self.degree())]
            frontier = np.zeros(self.nodes, dtype=bool)
            frontier[reached] = True
            frontier &= dist < 0
            dist[frontier] = hop
        return dist

    def __repr__(self) -> str:
        return f"Graph(nodes={self.nodes}, edges={self.edge_count})"


__all__ = ["Graph"]
