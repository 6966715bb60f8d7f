"""The packages of ``app`` form no import loop, ``app.dp`` imports nothing from ``app``, and
the wings of ``app.stream`` import each other only in the directions of :data:`WING_ALLOWED`.

Every ``import``/``from ... import`` is read with :mod:`ast` (also those inside functions, which
run lazily but are arrows all the same); an arrow goes from the package of the importing module
to the package of the imported one (``app.stream.cli`` -> ``stream``; top-level modules such as
``app.cli`` or ``app.metrics`` are their own package). ``app.cli`` (the composition root that
registers every package's verbs) and the ``__main__`` entry points are left out: nothing imports
them.

Inside ``app.stream`` the nodes are its sub-packages and top-level modules (``app.stream.release.
central`` -> ``release``, ``app.stream.internal`` -> ``internal``). Each is a wing
(:data:`WING_ALLOWED`), a shared module (:data:`SHARED`: any wing may import it; it imports no
wing but ``config``) or the composition root (:data:`ROOTS`: it puts the wings together, nothing
imports it). The operations wing watches the others from above (listeners the worker registers);
``collect`` and ``release`` meet only through the internal wire and the core (``app.dp``).

Left at the top level, outside this test's walls: ``tools -> bench`` (the simulator draws values
from the bench's data sets) and ``bench -> stream`` (the capacity benches run the service).
"""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"
ENTRY_POINTS = {"app.cli", "app.stream.__main__"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {m for m in found if m == "app" or m.startswith("app.")}


def package_graph() -> dict[str, set[str]]:
    """``package -> packages it imports`` over every module of ``app``."""
    graph: dict[str, set[str]] = {}
    for path in sorted(APP.rglob("*.py")):
        module = _module_name(path)
        if module in ENTRY_POINTS:
            continue
        source = _package(module)
        targets = {_package(m) for m in _imports(path)} - {source, "app"}
        graph.setdefault(source, set()).update(targets)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path, or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


STREAM = APP / "stream"
WING_ALLOWED: dict[str, set[str]] = {
    "config": set(),  # the streams file and the environment: below every wing
    "collect": {"config"},  # the input topics' consumers
    "release": {"config"},  # the release agent; never told who watches it
    "ops": {"config", "collect", "release"},  # what operators see: watches from above
}
"""Per wing of ``app.stream``, the wings it may import (shared modules aside)."""
SHARED = {
    "agent_transport",
    "broker",
    "errors",
    "internal",
    "kafka",
    "records",
    "slots",
    "tables",
    "topics",
}
"""Modules every wing may import; each may import ``config``, no other wing."""
ROOTS = {"worker", "cli", "__main__"}
"""The composition root and the verb: they import the wings, nothing in ``app.stream`` imports
them."""


def _stream_node(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["app", "stream"] else None


def stream_graph() -> dict[str, set[str]]:
    """``node -> nodes it imports`` inside ``app.stream`` (see the module docstring)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(STREAM.rglob("*.py")):
        source = _stream_node(_module_name(path))
        if source is None:  # app/stream/__init__.py: a docstring
            continue
        targets = {_stream_node(m) for m in _imports(path)} - {None, source}
        graph.setdefault(source, set()).update(t for t in targets if t is not None)
    return graph


def _violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for node, targets in sorted(graph.items()):
        if node in ROOTS:
            continue
        allowed = WING_ALLOWED.get(node, {"config"}) | SHARED
        out += [f"{node} -> {t}" for t in sorted(targets - allowed)]
    return out


def _two_way(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((a, b) for a, ts in graph.items() for b in ts if a < b and a in graph.get(b, ()))


def test_every_stream_node_has_a_place() -> None:
    placed = set(WING_ALLOWED) | SHARED | ROOTS
    assert set(stream_graph()) <= placed, set(stream_graph()) - placed


def test_stream_wings_import_in_the_allowed_directions() -> None:
    assert _violations(stream_graph()) == []


def test_stream_import_map_has_no_two_way_tie() -> None:
    graph = stream_graph()
    assert _two_way(graph) == []
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_wall_checks_catch_a_wrong_arrow() -> None:
    assert _violations({"release": {"ops", "internal"}, "collect": {"release"}}) == [
        "collect -> release",
        "release -> ops",
    ]
    assert _violations({"records": {"config", "collect"}, "worker": {"ops"}}) == [
        "records -> collect"
    ]
    assert _two_way({"ops": {"release"}, "release": {"ops"}}) == [("ops", "release")]


def test_no_package_loop() -> None:
    graph = package_graph()
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_dp_imports_nothing_from_app() -> None:
    assert package_graph()["dp"] == set()


def test_tools_are_on_top() -> None:
    graph = package_graph()
    assert not [p for p, targets in graph.items() if "tools" in targets]
    assert {"stream", "client", "bench"} <= graph["tools"]


def test_cycle_finder_finds_a_loop() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_offline_bench_does_not_import_the_service() -> None:
    """Issue 35 §4: the capacity benchmarks, which drive the service, live in ``app.tools``."""
    assert "stream" not in package_graph()["bench"]
