"""The README's mechanism table is the registry, and its code map is the tree of ``app/``.

Both are read from the README as a newcomer reads them: the first column's names in backticks.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.dp.registry import get, names

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
TICKED = re.compile(r"`([^`]+)`")


def table_after(header: str) -> list[list[str]]:
    """The rows (cells stripped) of the Markdown table whose header line starts with ``header``."""
    lines = README.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.strip().startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_the_mechanism_table_lists_every_registered_mechanism_with_its_model():
    listed = {
        name: row[1] for row in table_after("| name | model |") for name in TICKED.findall(row[0])
    }
    assert sorted(listed) == sorted(names())
    assert {n: m for n, m in listed.items() if get(n).kind != m} == {}


def test_the_code_map_is_the_tree_of_app():
    listed = {path for row in table_after("| path | what |") for path in TICKED.findall(row[0])}
    app = ROOT / "app"
    tree = {f"app/{d.name}/" for d in app.iterdir() if (d / "__init__.py").is_file()}
    tree |= {f"app/{f.name}" for f in app.glob("*.py") if f.name != "__init__.py"}
    assert listed == tree
