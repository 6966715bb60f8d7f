"""The docs say what the code does: their examples run, and what they name exists.

* Every ```` ```python ```` block of README.md and docs/*.md runs (in one namespace per file,
  in order). A block that needs a broker or a running service says so on its first line
  (``# needs: broker``); it is compiled and its imports run.
* Every ``app/...`` path, ``app.x.y`` module and ``Class`` / ``Class.member`` a doc names in
  backquotes exists (classes and their members are read from the source with :mod:`ast`), and
  every ``Dpstream...`` alert it names is in the chart's alert rules.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "charts/dpstream/README.md",
]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
KUBERNETES = {
    "ClusterIP",
    "IfNotPresent",
    "OnRootMismatch",
    "RollingUpdate",
    "RuntimeDefault",
    "ServiceMonitor",
    "PodDisruptionBudget",
    "StatefulSet",
    "ConfigMap",
}


def _members() -> dict[str, set[str]]:
    """Every class defined under app/, with the names its body defines (methods, attributes)."""
    out: dict[str, set[str]] = {}
    for path in ROOT.glob("app/**/*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                names = out.setdefault(node.name, set())
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        names.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        names.update(t.id for t in item.targets if isinstance(t, ast.Name))
    return out


def _module_exists(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 1, -1):
        base = ROOT.joinpath(*parts[:i])
        if base.with_suffix(".py").exists() or (base / "__init__.py").exists():
            return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(doc: Path) -> None:
    namespace: dict[str, object] = {}
    for block in BLOCK.findall(doc.read_text()):
        if block.startswith("# needs:"):
            compile(block, str(doc), "exec")
            imports = [ln for ln in block.splitlines() if re.match(r"(from \S+ )?import ", ln)]
            exec("\n".join(imports), namespace)  # noqa: S102 - the doc's own imports
        else:
            exec(compile(block, str(doc), "exec"), namespace)  # noqa: S102 - the doc's example


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_names_in_docs_exist(doc: Path) -> None:
    members = _members()
    alerts = set(
        re.findall(r"alert: (\w+)", (ROOT / "charts/dpstream/files/alerts.yaml").read_text())
    )
    missing = []
    for tok in re.findall(r"`([^`\n]+)`", doc.read_text()):
        for path in re.findall(r"\b(app/[\w/]*[\w.]*)", tok):
            if not (ROOT / path).exists():
                missing.append(tok)
        for mod in re.findall(r"\b(app(?:\.\w+)+)\b(?![./])", tok):
            if not _module_exists(mod):
                missing.append(tok)
        found = re.fullmatch(r"([A-Z][a-z0-9]+[A-Z]\w*)(?:\.(\w+))?(?:\(.*\))?", tok)
        if found is None or found.group(1) in KUBERNETES:
            continue
        cls, member = found.groups()
        if cls.startswith("Dpstream") and member is None:
            if cls not in alerts:
                missing.append(tok)
        elif cls not in members or (member is not None and member not in members[cls]):
            missing.append(tok)
    assert missing == [], f"{doc.name} names what does not exist: {sorted(set(missing))}"
