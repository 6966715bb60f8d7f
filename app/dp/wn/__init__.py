"""(w,n)-DP mechanisms over a public graph of the domain (Liu et al. 2021, seed 003).

A user's data inside any ``w`` consecutive slots times any n-range window of the graph (the
pages within ``n - 1`` hops of a centre) is protected with ``eps``: the relation
:data:`WN_RELATION` (a change spread over ``k`` such windows costs up to ``k eps``). STBD
distributes budget as Kellaris's BD does, per page, with the (w,n) ledger; STR adapts
RescueDP's adaptive sampling (PID controller, Kalman filter) to the same ledger; RescueDP
(Wang et al.) is the place-level ``n = 1`` case, with its dynamic grouping as a variant;
Uniform publishes every page at every slot with ``eps / w`` (the paper's publish-every-
timestamp contrast). Build them through :func:`app.dp.registry.create`; the graph is built
once from the configuration (:class:`app.dp.graph.Graph`).
"""

from __future__ import annotations

from app.dp.wn.base import WN_RELATION, GraphMechanism, GraphRelease, wn_neighbours
from app.dp.wn.ledger import GraphLedger
from app.dp.wn.rescuedp import RescueDP
from app.dp.wn.rescuedp_grouping import RescueDPGrouped
from app.dp.wn.stbd import STBD
from app.dp.wn.str_ import STR
from app.dp.wn.uniform import WNUniform

__all__ = [
    "STBD",
    "STR",
    "WN_RELATION",
    "GraphLedger",
    "GraphMechanism",
    "GraphRelease",
    "RescueDP",
    "RescueDPGrouped",
    "WNUniform",
    "wn_neighbours",
]
