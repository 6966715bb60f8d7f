"""A central stream's public graph over its labels, for the (w,n) mechanisms (kind ``graph``).

A stream running ``stbd`` or ``str`` names the graph of its domain and the spatial window ``n``
(the pages within ``n - 1`` hops of a centre) under one ``graph:`` key::

      - id: pages
        labels: [home, news, sport, ...]
        max_values: 20              # the papers' l: distinct pages per user per slot
        mechanism: {name: stbd, noise: laplace}
        graph:
          edges: site-links.txt     # one edge per line: two labels (space, tab or comma);
                                    # '#' starts a comment; relative to the streams file
          n: 2
      - id: cells
        d: 600
        mechanism: str
        graph: {grid: 20 x 30, neighbours: 8, n: 3}   # rows x cols = d; 4 (default) or 8

The graph is configuration, hence public: it is read and built once when the streams file is
loaded (:class:`StreamGraph`), and every mechanism the worker builds for the stream gets that
same :class:`~app.dp.graph.Graph`. ``rescuedp`` is place level (``n = 1``) and takes no graph.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.dp.errors import DPError
from app.dp.graph import Graph
from app.dp.registry import get
from app.stream.errors import ConfigError

GRAPH_KEYS = frozenset({"edges", "grid", "neighbours", "n"})
MECHANISM_GRAPH_PARAMS = frozenset({"edges", "grid", "neighbours", "n", "graph"})
"""Mechanism parameters the ``graph:`` key supplies (refused under ``mechanism.params``)."""
MAX_EDGES = 1_000_000
"""Most edges an edge-list file may hold (the ledger's window operators are O(n E) a slot)."""
MAX_N = 1_000
"""Largest ``n`` accepted (beyond the graph's diameter every window is a whole component)."""


@dataclass(frozen=True)
class StreamGraph:
    """The stream's public graph, how the configuration named it, and ``n``."""

    source: str
    """``edges <path>`` or ``grid <rows> x <cols>, <k>-neighbour``: for messages and views."""
    n: int
    graph: Graph = field(compare=False, repr=False)

    def describe(self) -> str:
        return f"{self.source}: {self.graph.nodes} nodes, {self.graph.edge_count} edges, n={self.n}"


def takes_graph(mechanism: str) -> bool:
    """Whether the registered mechanism's constructor takes a graph and ``n``."""
    return "n" in inspect.signature(get(mechanism)).parameters


def _int(where: str, raw: Any, low: int, high: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
        raise ConfigError(f"{where} must be an integer in [{low}, {high}], got {raw!r}")
    return raw


def _grid(where: str, raw: Any) -> tuple[int, int]:
    """``rows x cols`` (``"20 x 30"``, ``"20x30"``) or ``[rows, cols]``."""
    if isinstance(raw, str):
        match = re.fullmatch(r"\s*(\d+)\s*[xX×]\s*(\d+)\s*", raw)
        if match is None:
            raise ConfigError(f"{where} must be 'rows x cols' (e.g. 20 x 30), got {raw!r}")
        return int(match[1]), int(match[2])
    if isinstance(raw, list) and len(raw) == 2:
        return _int(f"{where}[0]", raw[0], 1, 10_000), _int(f"{where}[1]", raw[1], 1, 10_000)
    raise ConfigError(f"{where} must be 'rows x cols' or [rows, cols], got {raw!r}")


def read_edges(where: str, path: Path, labels: tuple[str, ...]) -> list[tuple[int, int]]:
    """The edge-list file as node pairs; every endpoint must be one of the stream's labels."""
    index = {label: i for i, label in enumerate(labels)}
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read edge list {path}: {exc.strerror}") from None
    edges = []
    for number, line in enumerate(text.splitlines(), start=1):
        body = line.split("#", 1)[0].replace(",", " ").split()
        if not body:
            continue
        if len(body) != 2:
            raise ConfigError(f"{where}: {path}:{number}: expected two labels, got {line!r}")
        unknown = [x for x in body if x not in index]
        if unknown:
            raise ConfigError(f"{where}: {path}:{number}: {unknown[0]!r} is not a label")
        edges.append((index[body[0]], index[body[1]]))
        if len(edges) > MAX_EDGES:
            raise ConfigError(f"{where}: {path} has more than {MAX_EDGES} edges")
    return edges


def parse_graph(
    where: str, raw: Any, mechanism: str, labels: tuple[str, ...], base_dir: Path
) -> StreamGraph | None:
    """The ``graph:`` key of one stream (``raw``; ``None`` when absent), checked against its
    mechanism and labels; the graph is built here, once."""
    if get(mechanism).kind != "graph":
        if raw is not None:
            raise ConfigError(f"{where}: only (w,n) mechanisms take a graph, not {mechanism!r}")
        return None
    if not takes_graph(mechanism):
        if raw is not None:
            raise ConfigError(f"{where}: {mechanism} is place level (n = 1) and takes no graph")
        return None
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{where}: {mechanism} needs a graph: {{edges: <file>, n: N}} or "
            f"{{grid: 'rows x cols', neighbours: 4|8, n: N}}, got {raw!r}"
        )
    unknown = sorted(set(map(str, raw)) - GRAPH_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(GRAPH_KEYS)}")
    if ("edges" in raw) == ("grid" in raw):
        raise ConfigError(f"{where}: give exactly one of `edges` (a file) or `grid` (rows x cols)")
    n = _int(f"{where}.n", raw.get("n"), 1, MAX_N)
    if "grid" in raw:
        rows, cols = _grid(f"{where}.grid", raw["grid"])
        neighbours = raw.get("neighbours", 4)
        if neighbours not in (4, 8) or isinstance(neighbours, bool):
            raise ConfigError(f"{where}.neighbours must be 4 or 8, got {neighbours!r}")
        if rows * cols != len(labels):
            raise ConfigError(
                f"{where}.grid {rows} x {cols} has {rows * cols} cells but the stream has "
                f"d = {len(labels)} labels"
            )
        try:
            graph = Graph.grid(rows, cols, neighbours)
        except DPError as exc:
            raise ConfigError(f"{where}.grid: {exc}") from None
        return StreamGraph(f"grid {rows} x {cols}, {neighbours}-neighbour", n, graph)
    if "neighbours" in raw:
        raise ConfigError(f"{where}.neighbours applies to a grid, not to an edge list")
    if not isinstance(raw["edges"], str) or not raw["edges"].strip():
        raise ConfigError(f"{where}.edges must be a file path, got {raw['edges']!r}")
    path = base_dir / raw["edges"]
    edges = read_edges(f"{where}.edges", path, labels)
    return StreamGraph(f"edges {raw['edges']}", n, Graph(len(labels), edges))


__all__ = ["MECHANISM_GRAPH_PARAMS", "StreamGraph", "parse_graph", "read_edges", "takes_graph"]
