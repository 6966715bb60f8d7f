"""The audit's outputs: a readable table, JSON, and the exit code.

>>> v = Verdict("uniform", "central", "add/remove", "boundary", 0, 3, 1.0, 1, 0.12,
...             "loss_stat >= 1.4 (likelier on A)", [46, 200, 22, 200], 400)
>>> table([v]).splitlines()[2].split()[:11]
['uniform', 'central', '-', 'add/remove', 'boundary', '0', '3', '1.00', '1', '0.120', 'ok']
>>> exit_code([v])
0
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from app.audit.verdict import Verdict

COLUMNS = (
    "mechanism",
    "kind",
    "noise",
    "relation",
    "scenario",
    "group",
    "w",
    "eps",
    "sens",
    "lower",
    "verdict",
    "event counts (A vs B)",
    "event",
)


def _row(v: Verdict) -> list[str]:
    def opt(x: object, fmt: str = "{}") -> str:
        return "-" if x is None else fmt.format(x)

    counts = "-"
    if len(v.counts) == 4:
        counts = f"{v.counts[0]}/{v.counts[1]} vs {v.counts[2]}/{v.counts[3]}"
    return [
        v.mechanism,
        v.kind,
        v.noise or "-",
        v.relation or "-",
        v.scenario or "-",
        opt(v.group),
        opt(v.w),
        opt(v.eps, "{:.2f}"),
        opt(v.sensitivity),
        opt(v.lower_bound, "{:.3f}"),
        v.status,
        counts,
        v.event or v.note,
    ]


def table(verdicts: Sequence[Verdict]) -> str:
    """One line per verdict, aligned; controls after a separator line."""
    rows = [_row(v) for v in verdicts if not v.control]
    controls = [_row(v) for v in verdicts if v.control]
    widths = [
        max(len(r[i]) for r in [list(COLUMNS), *rows, *controls]) for i in range(len(COLUMNS))
    ]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(COLUMNS), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    if controls:
        out += ["", "power controls (deliberately broken, must be caught):"]
        out += [line(r) for r in controls]
    return "\n".join(out)


def summary(verdicts: Sequence[Verdict]) -> str:
    """One line: how many verdicts of each status."""
    statuses: dict[str, int] = {}
    for v in verdicts:
        statuses[v.status] = statuses.get(v.status, 0) + 1
    confidence = max((v.confidence for v in verdicts if v.trials), default=0.95)
    parts = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
    return f"{len(verdicts)} verdicts at {confidence:.0%} confidence: {parts}"


def to_json(verdicts: Sequence[Verdict]) -> str:
    return json.dumps(
        {"verdicts": [v.to_dict() for v in verdicts], "exit_code": exit_code(verdicts)}, indent=2
    )


def exit_code(verdicts: Sequence[Verdict]) -> int:
    """1 if a registered mechanism's lower bound exceeds its claim, a control was missed, or an
    audit raised; 0 otherwise ("no adapter" verdicts are reported, not failed)."""
    return 1 if any(v.failed for v in verdicts) else 0
