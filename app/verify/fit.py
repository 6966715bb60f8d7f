"""When ``verify`` refuses to judge: a configuration that is not the one the topics were
written with, and a judgement over no value at all.

Both would otherwise print a verdict about nothing: a streams file with other levels or labels
than the deployment's reads none of its values (or puts them in the wrong groups) and reports
"no violation" with 0 values accounted, a false all-clear. So the configuration is checked
against what the release agent wrote (every ``audit`` record of the stream names its levels,
every ``releases`` record of a labels stream has ``d`` bins; the ledger's fingerprint, checked by
:func:`app.verify.run.verify`, covers the mechanism and its parameters), and a verdict that
accounts for no value is refused. Both are :class:`CannotJudge` (one line, exit 2).
"""

from __future__ import annotations

from app.stream.config import StreamConfig
from app.stream.errors import ServiceError
from app.verify.account import malformed, records_of
from app.verify.read import Snapshot
from app.verify.verdict import Verdict

HINT = "check --config (or DPSTREAM_CONFIG) and DPSTREAM_TOPIC_PREFIX"


class CannotJudge(ServiceError):
    """``verify`` refuses to judge (the message says why): point it at the deployment's own
    streams file and topics."""


def check_fit(stream: StreamConfig, snap: Snapshot) -> None:
    """:class:`CannotJudge` when an ``audit`` record of the stream names other levels, or a
    ``releases`` record has another number of labels, than ``stream`` has. (Their ``w`` and
    ``eps`` are the mechanism's parameters, which the ledger's fingerprint covers: the audit's
    window figures are the mechanism's, not always the level's own ``w``.)"""
    names = [lv.name for lv in stream.levels]
    for m, rec in records_of(snap.audit, "audit", stream.id):
        spent = rec.get("spent_by_group")
        if not isinstance(spent, dict):
            raise malformed(m, "audit", "no spent_by_group")
        if sorted(map(str, spent)) != sorted(names):
            raise CannotJudge(
                f"stream {stream.id}: the topics were written with levels "
                f"{', '.join(map(str, spent))} (audit slot {rec.get('slot')}), this "
                f"configuration has {', '.join(names)}; {HINT}"
            )
    if stream.is_open:
        return  # a key -> count map: no number of labels to compare
    for m, rec in records_of(snap.releases, "releases", stream.id):
        histogram = rec.get("histogram")
        if not isinstance(histogram, list):
            raise malformed(m, "releases", "no histogram")
        if len(histogram) != stream.d:
            raise CannotJudge(
                f"stream {stream.id}: the topics hold releases of {len(histogram)} labels "
                f"(slot {rec.get('slot')}), this configuration has {stream.d}; {HINT}"
            )


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
