"""Markdown pieces every section of RESULTS.md shares: the claims table, the closing
"Not reproduced" list, links relative to the report, table cells.

>>> not_reproduced(["Fig. 7"])
['Not reproduced:', '', '- Fig. 7', '']
>>> cell("a | b")
'a \\\\| b'
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from app.bench.engine.claims import Claim, Verdict

__all__ = ["cell", "claims_table", "not_reproduced", "rel"]


def rel(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` (the report's folder), for Markdown links."""
    return os.path.relpath(path, root)


def cell(text: str) -> str:
    """``text`` safe inside a table cell: pipes escaped, one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def claims_table(items: Sequence[Claim]) -> list[str]:
    """Markdown rows: # | claim | paper | dpstream | verdict | why."""
    marks = {Verdict.AGREE: "**agree**", Verdict.DISAGREE: "**disagree**"}
    lines = ["| # | claim | paper | dpstream | verdict | why |", "|---|---|---|---|---|---|"]
    for c in items:
        lines.append(
            f"| {c.ref} | {cell(c.claim)} | {cell(c.paper_value)} | {cell(c.measured)} | "
            f"{marks.get(c.verdict, str(c.verdict))} | {cell(c.why)} |"
        )
    return lines


def not_reproduced(items: Sequence[str]) -> list[str]:
    """The closing list of a paper's section: what of its evaluation is not reproduced."""
    return ["Not reproduced:", "", *(f"- {item}" for item in items), ""]
