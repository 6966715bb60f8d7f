"""What every (w,n) mechanism shares: the graph, the (w,n) ledger, ``step`` and the release.

A (w,n) mechanism sees, per slot, the true counts per requirement group (an ``(m, d)`` integer
matrix, as a central mechanism does) and runs at the conservative single requirement
``(max_g w_g, min_g eps_g)`` on their column sums, which satisfies every group. It spends a
budget per *page* (domain value), so its release carries the budget per page
(:class:`GraphRelease`); ``Release.spent_dc``/``spent_pub`` report the per-slot maximum over
pages, i.e. what the slot costs the most loaded window (not a per-slot cost to be summed over
any ``w`` slots: two far-apart windows may spend in turn; the (w,n) guarantee is per window).

A subclass implements :meth:`GraphMechanism._slot`, which must (1) compute what it may spend per
page, (2) ``ensure`` it on ``self.ledger``, and only then (3) draw noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from app.dp import validate
from app.dp.budget import exact
from app.dp.errors import ParameterError
from app.dp.graph import Graph
from app.dp.interfaces import GraphWindow, SlotStepped
from app.dp.noise import NoiseKind, check_kind, two_sided_geometric
from app.dp.types import FloatArray, Group, IntArray, Release, WindowSpend
from app.dp.wn.ledger import GraphLedger, Units

BoolArray = npt.NDArray[np.bool_]

WN_RELATION = "(w,n)"
"""The neighbouring relation every (w,n) mechanism protects (Liu et al. 2021, Definition 6;
spec ``seed-003`` §1.4). Two streams are (w,n)-neighbours when they differ only in one user's
values (at most ``l = max_values`` per slot), only in ``w`` consecutive slots, and only on pages
inside one spatial window ``W_n(c)``: the pages within ``n - 1`` hops of one centre page ``c`` of
the public graph (``n = 1``, RescueDP: one page). With ``add-remove`` the user's values are
added or removed (sensitivity ``l``); with ``replace`` they are changed, every page changed
(old or new) inside that window (sensitivity ``2 l``). Theorem 5 bounds the loss of such a pair
by ``eps``: per slot, per-page noise costs at most the largest page budget in the window, and
the ledger keeps the sum of those maxima over any ``w`` slots within ``eps``. Changes spread
over ``k`` spatial windows cost up to ``k eps``: a user whose pages in ``w`` slots fit in no
single window is protected per window, not as a whole. A graph stream's audit record writes
this name after the base relation (``"replace (w,n)"``, :func:`wn_neighbours`), with its ``n``."""


def wn_neighbours(base: str) -> str:
    """The relation a graph stream's audit record names: ``base`` (``replace`` or
    ``add-remove``) restricted to one (w,n) window (:data:`WN_RELATION`).

    >>> wn_neighbours("replace")
    'replace (w,n)'
    """
    return f"{base} {WN_RELATION}"


@dataclass(frozen=True)
class GraphRelease(Release):
    """A :class:`~app.dp.types.Release` with the budget spent on every page.

    Attributes
    ----------
    spent_cells
        ``(d,)`` budget (in eps, as claimed on the ledger) spent on each page this slot.
    fresh_cells
        ``(d,)`` True where the page was newly noised, False where its last output repeats.
    """

    spent_cells: FloatArray = field(default_factory=lambda: np.zeros(0))
    fresh_cells: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, dtype in (("spent_cells", np.float64), ("fresh_cells", np.bool_)):
            a = np.array(getattr(self, name), dtype=dtype)
            a.flags.writeable = False
            object.__setattr__(self, name, a)


@dataclass(frozen=True)
class Spending:
    """What one slot decided: outputs and budget units per page."""

    histogram: FloatArray  # the full output o_t (fresh and repeated pages)
    fresh: BoolArray
    dc: Units
    pub: Units


class GraphMechanism(SlotStepped):
    """Base of the (w,n) mechanisms; see the module docstring."""

    kind = "graph"
    publication_share: ClassVar[Fraction] = Fraction(1, 2)

    def __init__(
        self,
        d: int,
        groups: Sequence[Group],
        graph: Graph,
        n: int,
        noise: str = "laplace",
        sensitivity: int = 1,
    ) -> None:
        self.d = validate.integer("d", d)
        self.groups = groups = validate.sequence("groups", groups, Group)
        self.noise: NoiseKind = check_kind(noise)
        self.sensitivity = validate.integer("sensitivity", sensitivity)
        self.n = validate.integer("n", n)
        if graph.nodes != self.d:
            raise ParameterError(f"graph has {graph.nodes} nodes but d is {self.d}")
        self.graph = graph
        self.requirement = Group(max(g.w for g in groups), min(g.eps for g in groups))
        self._reset()

    def _reset(self) -> None:
        self.t = 0
        self.last_release: FloatArray = np.zeros(self.d)
        self.ledger = GraphLedger(self.graph, self.n, self.requirement, self.publication_share)
        budget = self.ledger.budget
        self.unit_eps = float(exact(self.requirement.eps) / budget.total)

    # ------------------------------------------------------------------ construction
    def _take_graph(
        self, d: int, n: int, edges: Edges | None, grid: Sequence[int] | None, neighbours: int
    ) -> Graph:
        """The graph of :func:`graph_params`, keeping its parameters as plain values."""
        graph, plain = graph_params(d, n, edges, grid, neighbours)
        self.edges, self.grid, self.neighbours = plain["edges"], plain["grid"], plain["neighbours"]
        return graph

    @classmethod
    def for_stream(
        cls, d: int, groups: Sequence[Group], graph: Graph | None = None, **params: Any
    ) -> GraphMechanism:
        """The stream's mechanism; ``graph`` is the public graph the service built once from
        the stream's configuration (handed over as ``edges``, not rebuilt)."""
        if graph is not None:
            params["edges"] = graph
        return cls(d=d, groups=groups, **params)

    # ------------------------------------------------------------------ units and noise
    def eps_of(self, units: Units) -> FloatArray:
        """Units as claimed budgets (eps), per page."""
        return np.asarray(units, dtype=np.float64) * self.unit_eps

    def calibrated(self, units: Units) -> FloatArray:
        """The budgets noise is drawn at: claimed budget / sensitivity ``l`` (spec §1.4).

        One user changes one slot's counts by at most ``l`` in L1 over all pages, so per-page
        noise of sensitivity 1 at ``beta^m / l`` costs at most ``max_m beta^m`` (group privacy
        over the ``l`` values, then the max over pages).
        """
        return self.eps_of(units) / self.sensitivity

    def draw(self, rng: np.random.Generator, eps: FloatArray) -> FloatArray:
        """One draw per entry of sensitivity-1 noise at budget ``eps[i] > 0``."""
        if self.noise == "laplace":
            return rng.laplace(0.0, 1.0 / eps)
        out = np.empty(eps.shape, dtype=np.float64)
        for budget in np.unique(eps):  # exact discrete Laplace, one call per distinct budget
            at = eps == budget
            out[at] = two_sided_geometric(rng, float(budget), int(at.sum()))
        return out

    def noise_variance(self, eps: FloatArray) -> FloatArray:
        """Variance of one :meth:`draw` at budget ``eps`` (the Kalman filter's ``R``)."""
        if self.noise == "laplace":
            return 2.0 / eps**2
        a = np.exp(-eps)
        return 2.0 * a / (1.0 - a) ** 2

    # ------------------------------------------------------------------ one slot
    def step(
        self,
        counts: npt.ArrayLike,
        rng: np.random.Generator,
        population: Sequence[int] | IntArray | None = None,
    ) -> GraphRelease:
        """Release one slot from the ``(groups, d)`` true counts (not modified).

        ``population`` is accepted for the central interface and ignored (no OBS here).
        """
        r = validate.counts(counts, len(self.groups), self.d).sum(axis=0)
        out = self._slot(self.t + 1, r, rng)
        self.ledger.record(out.dc, out.pub)
        self.t += 1
        self.last_release = np.asarray(out.histogram, dtype=np.float64)
        budget = self.ledger.budget
        m = len(self.groups)
        fresh = bool(out.fresh.any())
        return GraphRelease(
            slot=self.t,
            histogram=self.last_release,
            fresh=fresh,
            status="publish" if fresh else "skip",
            spent_dc=np.full(m, budget.to_eps(int(out.dc.max()))),
            spent_pub=np.full(m, budget.to_eps(int(out.pub.max()))),
            mechanism=self.name,
            version=self.version,
            spent_cells=self.eps_of(out.dc + out.pub),
            fresh_cells=out.fresh,
        )

    def _slot(self, t: int, r: IntArray, rng: np.random.Generator) -> Spending:
        """Decide slot ``t`` from the true counts ``r``: ensure, then draw; never mutate."""
        raise NotImplementedError

    def window_report(self) -> list[WindowSpend]:
        """Per declared group, what the most loaded (w,n) window spent over the ``w`` slots
        ending at the last slot (the strictest requirement accounts for every group)."""
        spend = WindowSpend(self.requirement.w, self.requirement.eps, self.ledger.spent())
        return [spend] * len(self.groups)

    def graph_window(self) -> GraphWindow:
        """The most loaded (w,n) window (:class:`~app.dp.interfaces.LedgerView`)."""
        ledger, group = self.ledger, self.requirement
        centre, _ = ledger.most_loaded()
        spent = ledger.spent()
        whole = ledger.budget.to_fraction(ledger.total)
        return GraphWindow(self.n, group.w, group.eps, centre, spent, float(spent / whole))

    # ------------------------------------------------------------------ state
    def _state(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "last_release": [float(x) for x in self.last_release],
            "ledger": self.ledger.state_dict(),
            **self._extra_state(),
        }

    def _load(self, state: dict[str, Any]) -> None:
        self.t = int(state["t"])
        self.last_release = np.array(state["last_release"], dtype=np.float64)
        self.ledger.load_state(state["ledger"])
        self._extra_load(state)

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _extra_load(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`_extra_state` wrote."""


Edges = Sequence[Sequence[int]] | Graph
"""A mechanism's ``edges``: node pairs, or a :class:`Graph` already built (used as is)."""


def graph_params(
    d: int,
    n: int,
    edges: Edges | None,
    grid: Sequence[int] | None,
    neighbours: int,
) -> tuple[Graph, dict[str, Any]]:
    """The graph a mechanism's configuration names, and those parameters as plain values (a
    built graph's parameters are its edge list, so ``create(**params())`` rebuilds it)."""
    if isinstance(edges, Graph):
        if grid is not None:
            raise ParameterError("give either edges or grid, not both")
        if edges.nodes != validate.integer("d", d):
            raise ParameterError(f"graph has {edges.nodes} nodes but d is {d}")
        graph, edges = edges, edges.edges()
    else:
        graph = Graph.from_config(validate.integer("d", d), edges, grid, neighbours)
    plain = {
        "n": n,
        "edges": None if edges is None else [[int(u), int(v)] for u, v in edges],
        "grid": None if grid is None else [int(x) for x in grid],
        "neighbours": neighbours,
    }
    return graph, plain


__all__ = [
    "WN_RELATION",
    "Edges",
    "GraphMechanism",
    "GraphRelease",
    "Spending",
    "graph_params",
    "wn_neighbours",
]
