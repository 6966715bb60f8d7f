"""The bench's layout (issue 35 §4): a folder per paper over one engine, no ``python -m`` entry
point (every run goes through ``dpstream bench``) and no import of the service."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "app" / "bench"
PAPERS = ("pwsm", "ldp_ids", "pldp", "optstream", "wn")


def _modules() -> list[Path]:
    return sorted(BENCH.rglob("*.py"))


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("paper", PAPERS)
def test_each_paper_is_a_folder_with_its_claims(paper: str) -> None:
    folder = BENCH / paper
    assert (folder / "__init__.py").exists() and (folder / "claims.py").exists()


def test_no_module_of_the_bench_is_a_script() -> None:
    scripts = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                scripts.append(str(path.relative_to(BENCH)))
    assert scripts == [], "run them through `dpstream bench` instead"


def test_the_bench_imports_no_service_module() -> None:
    found = {
        str(path.relative_to(BENCH)): sorted(n for n in _imports(ast.parse(path.read_text())))
        for path in _modules()
    }
    service = {k: [n for n in v if n.startswith("app.stream")] for k, v in found.items()}
    assert {k: v for k, v in service.items() if v} == {}


def test_the_engine_imports_no_paper_but_through_the_presets() -> None:
    """The engine sits under the papers: only the preset table reaches a paper's runner (the
    LDP-IDS local grid), lazily."""
    upward = {}
    for path in sorted((BENCH / "engine").rglob("*.py")):
        papers = [
            n
            for n in _imports(ast.parse(path.read_text()))
            if any(n.startswith(f"app.bench.{p}") for p in PAPERS)
        ]
        if papers:
            upward[path.name] = papers
    assert upward == {"presets.py": ["app.bench.ldp_ids.runs"]}
