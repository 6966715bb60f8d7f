"""The packages of ``app`` form no import loop, and ``app.dp`` imports nothing from ``app``.

Every ``import``/``from ... import`` is read with :mod:`ast` (also those inside functions, which
run lazily but are arrows all the same); an arrow goes from the package of the importing module
to the package of the imported one (``app.stream.cli`` -> ``stream``; top-level modules such as
``app.cli`` or ``app.metrics`` are their own package). ``app.cli`` (the composition root that
registers every package's verbs) and the ``__main__`` entry points are left out: nothing imports
them.
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
