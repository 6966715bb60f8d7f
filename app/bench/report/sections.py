"""Keep the RESULTS.md sections the report does not render when it rewrites the file.

Some sections are written by hand from benches outside the report's run grid (the (w,n)-DP and
OptStream sections). A section is a ``## `` heading and the lines up to the next one; the report
*owns* the headings it renders. :func:`keep_foreign` returns the rendered text with every other
section of the old file put back after the owned section it followed there (or before the first
owned section if it came before all of them), in the old order; owned sections are replaced
whole, so hand edits inside them are still lost (and a renamed rendered heading leaves its
old section behind, to delete by hand).

>>> old = "## A\\nold a\\n\\n## Mine\\nhand\\n\\n## B\\nold b\\n"
>>> print(keep_foreign(old, "## A\\nnew a\\n\\n## B\\nnew b\\n"), end="")
## A
new a
<BLANKLINE>
## Mine
hand
<BLANKLINE>
## B
new b
"""

from __future__ import annotations

__all__ = ["keep_foreign", "split_sections", "tally", "with_summary"]

VERDICTS = ("agree", "partly", "disagree", "not run")
SUMMARY = "Summary: "


def split_sections(text: str) -> list[tuple[str, list[str]]]:
    """``(heading, lines)`` per ``## `` section; the lines before the first one under ``""``.
    Headings inside fenced code blocks do not count."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if line.startswith("## ") and not fenced:
            sections.append((line.strip(), []))
        sections[-1][1].append(line)
    return sections


def keep_foreign(old: str, new: str) -> str:
    """``new`` with the sections of ``old`` whose headings ``new`` lacks put back in place."""
    rendered = split_sections(new)
    owned = {h for h, _ in rendered}
    after: dict[str, list[list[str]]] = {}
    anchor = ""
    for heading, lines in split_sections(old):
        if heading in owned:
            anchor = heading
        else:
            after.setdefault(anchor, []).append(_ended(lines))
    out: list[str] = []
    for heading, lines in rendered:
        out += _ended(lines) if after.get(heading) else lines
        for block in after.get(heading, []):
            out += block
    return "\n".join(out) + ("\n" if new.endswith("\n") else "")


def _ended(lines: list[str]) -> list[str]:
    """``lines`` ending with one blank line, so that the next heading stays apart."""
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return [*lines, ""]


def _verdict(cell: str) -> str | None:
    """The verdict a table cell starts with (``**agree**``, ``partly (...)``), or None."""
    text = cell.replace("*", "").strip().lower()
    return next((v for v in sorted(VERDICTS, key=len, reverse=True) if text.startswith(v)), None)


def tally(text: str) -> dict[str, dict[str, int]]:
    """Per paper section (the ``## `` heading up to `` (``), how many claims of each verdict
    its tables hold: every Markdown table with a ``verdict`` column counts, hand-written or
    rendered; a cell counts by the verdict it starts with ("disagree on loads, ..." is a
    disagree). Sections without such a table are left out.

    >>> tally("## P (x)\\n| claim | verdict |\\n|---|---|\\n| a | **agree** |\\n| b | partly |\\n")
    {'P': {'agree': 1, 'partly': 1, 'disagree': 0, 'not run': 0}}
    """
    out: dict[str, dict[str, int]] = {}
    for heading, lines in split_sections(text):
        column: int | None = None
        for line in lines:
            if not line.startswith("|"):
                column = None
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if column is None:
                column = cells.index("verdict") if "verdict" in cells else -1
                continue
            verdict = _verdict(cells[column]) if 0 <= column < len(cells) else None
            if verdict:
                paper = heading.removeprefix("## ").split(" (")[0]
                counts = out.setdefault(paper, dict.fromkeys(VERDICTS, 0))
                counts[verdict] += 1
    return out


def with_summary(text: str) -> str:
    """``text`` with its ``Summary:`` line counting the verdicts of every paper (:func:`tally`),
    the total first, then paper by paper."""
    papers = tally(text)
    total = {v: sum(c[v] for c in papers.values()) for v in VERDICTS}
    per = "; ".join(
        f"{p} {c['agree']}/{c['partly']}/{c['disagree']}"
        + (f"/{c['not run']}" if c["not run"] else "")
        for p, c in papers.items()
    )
    line = (
        f"{SUMMARY}{total['agree']} agree, {total['partly']} partly, {total['disagree']} "
        f"disagree, {total['not run']} not run, over all {len(papers)} papers (agree/partly/"
        f"disagree per paper: {per})."
    )
    lines = text.split("\n")
    for i, old in enumerate(lines):
        if old.startswith(SUMMARY):
            lines[i] = line
            break
    return "\n".join(lines)
