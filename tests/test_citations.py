"""Every citation points inside the repository: a clone has no ``../shared`` beside it.

* No tracked text file cites the design card, the ecosystem notes, the reading aids or the
  papers where they sat outside the repository (a path under ``shared/``, the bare file names
  of the old design card and ecosystem notes). The one exception is the benchmarks' runtime
  default for raw data (``../shared/data/raw``, overridden by ``$DPSTREAM_DATA``): it is not a
  citation, and a clone runs without it (docs/design.md, "What a clone holds").
* Every ``docs/...md`` path that the code or the tests cite exists.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()
# A path under a ``shared/`` folder (the data root excepted), or the old design card's and
# ecosystem notes' file names (also as "DESIGN invariant 6"), which only existed beside the
# repository.
OUTSIDE = re.compile(r"\bshared/(?!data/)[\w.-]|\b(?:DESIGN|ECOSYSTEM|STYLE)\.md\b|\bDESIGN\b")
CITED_DOC = re.compile(r"\bdocs/(?:specs/)?[\w.-]+\.md\b")


def _tracked() -> list[str]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        )
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [name for name in listed.stdout.decode().split("\0") if name]


def _text(name: str) -> str | None:
    try:
        return (ROOT / name).read_text(encoding="utf-8")
    except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
        return None


def _outside_citations(name: str) -> list[str]:
    text = _text(name)
    if text is None:
        return []
    return [
        f"{name}:{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if OUTSIDE.search(line)
    ]


def test_the_pattern_catches_what_it_must() -> None:
    cited = [
        "see ../shared/DESIGN.md",
        "(``shared/specs/seed-000-pwsm.md`` §2)",
        "``shared/seeds/000_…``",
        "DESIGN.md invariant 7",
        "see ``ECOSYSTEM.md``",
        "(DESIGN invariant 6)",
    ]
    fine = [
        "docs/design.md invariant 7",
        "``docs/specs/seed-000-pwsm.md``",
        "default ``<repository>/../shared/data/raw``",
        "docs/ecosystem.md",
    ]
    assert [line for line in cited if not OUTSIDE.search(line)] == []
    assert [line for line in fine if OUTSIDE.search(line)] == []


def test_no_tracked_file_cites_outside_the_repository() -> None:
    names = [n for n in _tracked() if n != THIS]
    assert len(names) > 100  # the listing worked
    found = [hit for name in names for hit in _outside_citations(name)]
    assert found == [], "citations of files outside the repository:\n" + "\n".join(found)


def test_cited_docs_exist() -> None:
    cited: dict[str, set[str]] = {}
    for name in _tracked():
        if name.startswith(("app/", "tests/")) and name != THIS and (text := _text(name)):
            for path in CITED_DOC.findall(text):
                cited.setdefault(path, set()).add(name)
    # The code cites the design, the ecosystem notes and the reading aids of four papers.
    assert {"docs/design.md", "docs/ecosystem.md"} <= cited.keys()
    assert sum(path.startswith("docs/specs/") for path in cited) >= 4
    missing = {path: sorted(by) for path, by in cited.items() if not (ROOT / path).is_file()}
    assert missing == {}
