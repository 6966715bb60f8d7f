"""When ``verify`` refuses to judge: a configuration that is not the one the topics were
written with, and a judgement over no value at all.

Both would otherwise print a verdict about nothing: a streams file with other levels or labels
than the deployment's reads none of its values (or puts them in the wrong groups) and reports
"no violation" with 0 values accounted, a false all-clear. So the configuration is checked
against what the release agent wrote (every ``audit`` record of the stream names its levels
with their ``w`` and ``eps``, every ``releases`` record has ``d`` bins), and a verdict that
accounts for no value is refused. Both are :class:`CannotJudge` (one line, exit 2).
"""

from __future__ import annotations

import math
from typing import Any

from app.stream.config import StreamConfig
from app.stream.errors import ServiceError
from app.verify.account import malformed, record
from app.verify.read import Snapshot
from app.verify.verdict import Verdict

HINT = "check --config (or DPSTREAM_CONFIG) and DPSTREAM_TOPIC_PREFIX"


class CannotJudge(ServiceError):
    """``verify`` refuses to judge (the message says why): point it at the deployment's own
    streams file and topics."""


def check_fit(stream: StreamConfig, snap: Snapshot) -> None:
    """:class:`CannotJudge` when an ``audit`` or ``releases`` record of the stream was written
    with other levels or another number of labels than ``stream`` has."""
    levels = {lv.name: (int(lv.w), float(lv.eps)) for lv in stream.levels}
    for m in snap.audit:
        if m.value is None:
            continue
        rec = record(m, "audit")
        if rec.get("stream") != stream.id:
            continue
        theirs = _levels(rec, m)
        if theirs.keys() != levels.keys() or any(
            theirs[n][0] != w or not math.isclose(theirs[n][1], eps, rel_tol=1e-9)
            for n, (w, eps) in levels.items()
        ):
            raise CannotJudge(
                f"stream {stream.id}: the topics were written with levels {_show(theirs)} "
                f"(audit slot {rec.get('slot')}), this configuration has {_show(levels)}; {HINT}"
            )
    for m in snap.releases:
        if m.value is None:
            continue
        rec = record(m, "releases")
        if rec.get("stream") != stream.id:
            continue
        histogram = rec.get("histogram")
        if not isinstance(histogram, list):
            raise malformed(m, "releases", "no histogram")
        if len(histogram) != stream.d:
            raise CannotJudge(
                f"stream {stream.id}: the topics hold releases of {len(histogram)} labels "
                f"(slot {rec.get('slot')}), this configuration has {stream.d}; {HINT}"
            )


def _levels(rec: dict[str, Any], m: Any) -> dict[str, tuple[int, float]]:
    w, eps = rec.get("w_by_group"), rec.get("eps_by_group")
    if not isinstance(w, dict) or not isinstance(eps, dict) or w.keys() != eps.keys():
        raise malformed(m, "audit", "no levels with w and eps")
    try:
        return {str(n): (int(w[n]), float(eps[n])) for n in w}
    except (TypeError, ValueError, OverflowError) as exc:
        raise malformed(m, "audit", exc) from None


def _show(levels: dict[str, tuple[int, float]]) -> str:
    return ", ".join(f"{n} (w={w}, eps={eps:g})" for n, (w, eps) in levels.items())


def check_accounted(verdict: Verdict) -> None:
    """:class:`CannotJudge` when the verdict accounts for no value (no device answer)."""
    if verdict.released or verdict.unjudged or sum(verdict.not_released.values()):
        return
    what = "value" if verdict.mode == "central" else "device answer"
    since = "" if verdict.since is None else " since the time given"
    raise CannotJudge(
        f"stream {verdict.stream}: no {what} of the stream in the topics{since}, nothing to "
        f"judge; {HINT}"
    )
