"""RESULTS.md sections the report does not render survive a rewrite, in place."""

from __future__ import annotations

from app.bench.report.sections import keep_foreign, split_sections

OLD = """# RESULTS
old header

## PWSM
old pwsm

## (w,n)-DP
hand wn
```
## not a heading (fenced)
```

## OptStream
hand opt

## Runs
old runs
"""

NEW = """# RESULTS
new header

## PWSM
new pwsm
## Runs
new runs

## Cost
new cost
"""


def test_split_sections_ignores_headings_in_fenced_blocks():
    assert [h for h, _ in split_sections(OLD)] == [
        "",
        "## PWSM",
        "## (w,n)-DP",
        "## OptStream",
        "## Runs",
    ]


def test_hand_written_sections_follow_the_rendered_section_they_followed():
    out = keep_foreign(OLD, NEW)
    assert out == (
        "# RESULTS\nnew header\n\n## PWSM\nnew pwsm\n\n## (w,n)-DP\nhand wn\n```\n"
        "## not a heading (fenced)\n```\n\n## OptStream\nhand opt\n\n## Runs\nnew runs\n\n"
        "## Cost\nnew cost\n"
    )
    assert "old" not in out  # rendered sections and the header are replaced whole


def test_a_hand_section_before_every_rendered_one_stays_before_them():
    out = keep_foreign("# R\n## Mine\nhand\n## PWSM\nold\n", "# R\n## PWSM\nnew\n")
    assert out == "# R\n\n## Mine\nhand\n\n## PWSM\nnew\n"


def test_nothing_foreign_or_no_old_file_gives_the_rendered_text_unchanged():
    assert keep_foreign("", NEW) == NEW
    assert keep_foreign(NEW, NEW) == NEW
    assert keep_foreign(OLD.replace("hand", "x"), OLD) == OLD


def test_summary_counts_every_paper_kept_sections_included():
    """Issue 25 item 2: the header's counts cover all five papers, hand sections too."""
    from app.bench.report.sections import tally, with_summary

    text = (
        "# RESULTS\n\nSummary: 1 agree, 0 partly, 0 disagree, 0 not run.\n\n"
        "## PWSM (rendered)\n| # | claim | verdict | why |\n|---|---|---|---|\n"
        "| 1 | a | **agree** | |\n| 2 | b | partly | x |\n\n"
        "## OptStream (hand)\n| claim | verdict | why (measured) |\n|---|---|---|\n"
        "| H1 | disagree | 2 of 6 points |\n| H2 | disagree on loads, agree on counts | y |\n\n"
        "| data | eps | Laplace |\n|---|---|---|\n| agree | 1 | 2 |\n\n"  # no verdict column
        "## Runs\n| run | seeds |\n|---|---|\n"
    )
    assert tally(text) == {
        "PWSM": {"agree": 1, "partly": 1, "disagree": 0, "not run": 0},
        "OptStream": {"agree": 0, "partly": 0, "disagree": 2, "not run": 0},
    }
    summary = [line for line in with_summary(text).splitlines() if line.startswith("Summary")]
    assert summary == [
        "Summary: 1 agree, 1 partly, 2 disagree, 0 not run, over all 2 papers "
        "(agree/partly/disagree per paper: PWSM 1/1/0; OptStream 0/0/2)."
    ]
