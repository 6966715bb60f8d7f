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
    assert [h for h, _ in split_sections(OLD)] == ["", "## PWSM", "## (w,n)-DP", "## OptStream",
                                                   "## Runs"]  # fmt: skip


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
