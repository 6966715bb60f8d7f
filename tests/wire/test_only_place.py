"""``app/wire`` is the only place in ``app`` that encodes or decodes a public topic record.

Read with :mod:`ast`: outside ``app/wire``, only the modules of :data:`INTERNAL` may import
``msgpack``, each for a wire that is not public (the service's own processes and tables), and
only those of :data:`TABLES` may use :func:`app.stream.records.pack`/``unpack``, the changelog
tables' map codec. The internal wire between service processes (``app/stream/internal.py``) and
the changelog tables stay where they are on purpose: no pipeline reads them.
"""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"

INTERNAL = {
    "stream/internal.py": "the internal wire between the service's processes (partials, ticks)",
    "stream/records.py": "pack/unpack: the map codec of the changelog tables (ledger, slots)",
    "stream/collect/preferences.py": "the level-history changelog table",
    "dp/checks/core.py": "a mechanism state's round trip through msgpack (no topic)",
}
"""Modules outside ``app/wire`` that may import msgpack, and for which non-public wire."""

TABLES = {
    "stream/release/entry.py": "the ledger changelog table",
    "stream/release/central.py": "the slots changelog table",
    "stream/release/open.py": "the slots changelog table (open-domain slots' key counts)",
    "verify/levels.py": "reads the levels changelog table",
}
"""Modules that may use ``app.stream.records.pack``/``unpack``, and on which table."""


def _modules() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(APP)): ast.parse(p.read_text(), filename=str(p))
        for p in sorted(APP.rglob("*.py"))
        if p.relative_to(APP).parts[0] != "wire"
    }


def _imports_msgpack(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "msgpack" for a in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "msgpack":
            return True
    return False


def _uses_table_codec(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "app.stream.records":
            if {a.name for a in node.names} & {"pack", "unpack"}:
                return True
        if isinstance(node, ast.Attribute) and node.attr in {"pack", "unpack"}:
            if isinstance(node.value, ast.Name) and node.value.id == "records":
                return True
    return False


def test_only_app_wire_and_the_internal_wires_import_msgpack() -> None:
    found = {name for name, tree in _modules().items() if _imports_msgpack(tree)}
    assert found <= set(INTERNAL), sorted(found - set(INTERNAL))


def test_only_the_changelog_tables_use_the_table_codec() -> None:
    found = {name for name, tree in _modules().items() if _uses_table_codec(tree)}
    assert found <= set(TABLES), sorted(found - set(TABLES))


def test_the_lists_hold_no_stale_entry() -> None:
    """Each module named is still there and still needs its exception (else it is dropped)."""
    modules = _modules()
    assert {n for n in INTERNAL if _imports_msgpack(modules[n])} == set(INTERNAL)
    assert {n for n in TABLES if _uses_table_codec(modules[n])} == set(TABLES)


def test_the_scan_sees_an_offender() -> None:
    """The scan is not vacuous: a module packing a release by hand is caught."""
    bad = ast.parse("import msgpack\nfrom app.stream.records import unpack\n")
    assert _imports_msgpack(bad) and _uses_table_codec(bad)
