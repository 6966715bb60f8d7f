"""The local accountant: every device's answers on ``reports``, against its own window.

In local mode the aggregator is untrusted: a device's report is out the moment it is on the
``reports`` topic, whatever the worker later keeps. So this accountant reads every report of the
stream (a byte-identical repeat of a report is one answer), prices each with the ``eps`` that
the ``collection-requests`` record it answers gave its group, and checks per device:

- in every window of ``w`` slots of the device's level, the answers' eps sum to at most the
  level's ``eps`` (``device_window``; a population-division device answering twice in its
  window is the typical case);
- a device answering at two levels has them more than ``max(w_a, w_b)`` slots apart
  (``two_groups``).

Slots here are the mechanism's slot counter ``t`` (the ``slot`` of requests and reports), which
advances by one per wall-clock slot, so windows of ``t`` are windows of slots. A report's level
is its ``group`` (the level a personalized request holds for the user, or PLBU's index block;
one level for the other mechanisms); a group the stream does not have counts at the default
level. A report that answers no request read is counted under ``unmatched`` (not priced).
"""

from __future__ import annotations

import numpy as np

from app.dp.local.wire import ROUNDS
from app.stream.config import StreamConfig
from app.verify.account import check_releases, levels_of, malformed, records_of
from app.verify.read import Snapshot
from app.verify.verdict import LevelSpend, Verdict, Violation
from app.verify.windows import Rows, two_groups, worst_windows
from app.wire import reports
from app.wire.errors import BadEvent
from app.wire.reports import ROUND_INDEX


def request_eps(stream: StreamConfig, snap: Snapshot) -> dict[tuple[int, int], list[float]]:
    """Per ``(mechanism slot, round index)`` of the stream, the eps per group of its first
    request."""
    out: dict[tuple[int, int], list[float]] = {}
    for m, rec in records_of(snap.requests, "collection-requests", stream.id):
        try:
            req = rec.get("request") or {}
            if req.get("round") not in ROUNDS:
                continue
            key = (int(req["slot"]), ROUND_INDEX[req["round"]])
            eps = [float(e) for e in req.get("eps", [])]
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise malformed(m, "collection-requests", exc) from None
        out.setdefault(key, eps)
    return out


def account_local(stream: StreamConfig, snap: Snapshot) -> Verdict:
    """Judge a local stream on a snapshot of its topics (see the module docstring)."""
    verdict = Verdict(stream.id, "local", since=snap.since)
    levels = levels_of(stream)
    check_releases(stream.id, snap.releases, verdict, _first_slot(stream, snap))
    eps = request_eps(stream, snap)
    seen: set[tuple[int, int, int, bytes]] = set()
    rows: list[tuple[int, int, int, float]] = []
    for m in snap.events:
        try:
            report = reports.decode(m.value)
        except BadEvent:
            continue
        if report.stream != stream.id or m.value is None:
            continue
        slot, rnd = report.slot, ROUND_INDEX[report.round]
        user, group = report.user, report.group
        key = (user, slot, rnd, m.value)
        if key in seen:
            continue
        seen.add(key)
        asked = eps.get((slot, rnd))
        if asked is None or not 0 <= group < len(asked):
            verdict.not_released["unmatched"] += 1
            continue
        level = group if group < len(levels) else stream.default_level
        rows.append((user, slot, level, asked[group]))
    verdict.released = len(rows)
    arr = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
    r = Rows.of(
        arr[:, 0].astype(np.int64),
        arr[:, 1].astype(np.int64),
        arr[:, 2].astype(np.int64),
        arr[:, 3],
    )
    for u, sa, ga, sb, gb in two_groups(r, levels):
        verdict.add(
            Violation(
                "two_groups",
                (sa, sb),
                f"device answered at level {levels[ga].name!r} in slot {sa} and "
                f"{levels[gb].name!r} in slot {sb}",
                (str(u),),
            )
        )
    worst, bad = worst_windows(r, levels)
    for lv, (n, frac) in zip(levels, worst, strict=True):
        verdict.levels.append(LevelSpend(lv.name, lv.w, lv.eps, n, frac))
    for o in bad:
        lv = levels[o.level]
        verdict.add(
            Violation(
                "device_window",
                (o.start,),
                f"level {lv.name!r}: {o.answers} answers spending {o.spent:.6g} in "
                f"the {lv.w} slots from slot {o.start}, eps {lv.eps:g}",
                (str(o.user),),
            )
        )
    return verdict


def _first_slot(stream: StreamConfig, snap: Snapshot) -> int:
    if snap.since is None:
        return -(1 << 62)
    return int(np.ceil(snap.since / stream.slot_s))
