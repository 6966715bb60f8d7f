"""``verify`` as a function: read a deployment's topics and judge one stream."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from app.stream.config import Settings, StreamConfig
from app.verify.account import account_central
from app.verify.fit import check_accounted, check_fit
from app.verify.local import account_local
from app.verify.open import account_open
from app.verify.read import Snapshot, read_snapshot
from app.verify.units import check_unit
from app.verify.verdict import Verdict, Violation


def judge(stream: StreamConfig, snap: Snapshot, others: Sequence[StreamConfig] = ()) -> Verdict:
    """The verdict on one stream of a snapshot (pure: no broker). A central stream's privacy
    unit is judged too, across the unit's central streams among ``others`` (the
    deployment's streams), on the same snapshot.

    Raises :class:`~app.verify.fit.CannotJudge` when the topics were written with another
    configuration or hold no value of the stream, and :class:`~app.verify.read.RecordError`
    for a malformed record it needs."""
    check_fit(stream, snap)
    if stream.local:
        verdict = account_local(stream, snap)
        check_accounted(verdict)
        return verdict
    verdict = _account(stream, snap)
    check_accounted(verdict)
    if stream.unit is not None and verdict.spend_rows is not None:
        rows = {stream.id: verdict.spend_rows}
        members = {t.stream for t in stream.unit.terms}
        for other in others:
            if other.id in members and other.id != stream.id and not other.local:
                check_fit(other, snap)  # judged with its own configuration, or not at all
                theirs = _account(other, snap).spend_rows
                if theirs is not None:
                    rows[other.id] = theirs
        verdict.unit = check_unit(stream.unit, rows)
        unit = stream.unit
        for user, start, spent in verdict.unit.over:
            verdict.add(
                Violation(
                    "unit_overspend",
                    (),
                    f"unit {unit.unit!r}: {spent:.6g} spent in {unit.interval_s:g} s from "
                    f"{start:.0f} across {sorted(rows)}, bound eps {unit.eps:g}",
                    (user,),
                )
            )
        for user, start, spent in verdict.unit.over_delta:
            verdict.add(
                Violation(
                    "unit_delta_overspend",
                    (),
                    f"unit {unit.unit!r}: delta {spent:.6g} spent in {unit.interval_s:g} s from "
                    f"{start:.0f} across {sorted(rows)}, bound delta {unit.delta:g}",
                    (user,),
                )
            )
    return verdict


def _account(stream: StreamConfig, snap: Snapshot) -> Verdict:
    """A central stream's accountant: the open-domain one or the labels one."""
    return account_open(stream, snap) if stream.is_open else account_central(stream, snap)


def verify(
    settings: Settings,
    stream_id: str,
    since: float | None = None,
    idle_s: float = 0.0,
    max_s: float = 300.0,
    progress: bool = False,
) -> Verdict:
    """Read the topics of ``settings``' deployment and judge ``stream_id``.

    Raises :class:`~app.stream.errors.ConfigError` for an unknown stream, and
    :class:`~app.verify.read.ReadError` when a topic cannot be read to its end in ``max_s``.
    """
    from app.stream.kafka import confluent_config
    from app.stream.ops.ledger_view import read_ledger
    from app.stream.release.protocol import continued
    from app.stream.topics import load_topics

    stream = settings.stream(stream_id)
    entry = read_ledger(settings, stream_id)
    if entry is not None and entry.state is not None:
        continued(stream, entry.state)  # StateMismatch: the ledger has another configuration
    bar = _bar if progress else None
    snap = read_snapshot(
        confluent_config(settings),
        load_topics(settings.topic_prefix),
        stream.local,
        since=since,
        idle_s=idle_s,
        max_s=max_s,
        progress=bar,
    )
    return judge(stream, snap, settings.streams)


def _bar(topic: str, total: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total or None, desc=topic, unit="rec", file=sys.stderr, leave=False)
