"""``dpstream ledger show``: read a stream's ledger from its changelog topic and print it.

The ledger table's changelog (compacted, keyed by stream id) is the durable copy of the
ledger, so this works from any machine with broker access, while a worker holds the RocksDB
files. The window figures come from the mechanism's own exact ledger.
"""

from __future__ import annotations

import base64
import json
import logging
import sys
import time
from typing import Any

from app.dp.interfaces import GraphWindow, LedgerView, as_view
from app.dp.local.wire import mask_users
from app.dp.open import OpenMechanism
from app.dp.open.release import OpenWindowSpend
from app.stream.config import Settings, StreamConfig
from app.stream.kafka import confluent_config
from app.stream.ops.budget_view import budget_json
from app.stream.release.entry import LedgerEntry
from app.stream.release.protocol import continued
from app.stream.topics import load_topics
from app.utc import utc
from app.wire import requests

log = logging.getLogger(__name__)


def read_ledger(settings: Settings, stream_id: str, timeout_s: float = 10.0) -> LedgerEntry | None:
    """The last ledger entry of ``stream_id`` in the changelog, or ``None``."""
    return read_ledgers(settings, timeout_s).get(stream_id)


def read_ledgers(settings: Settings, timeout_s: float = 10.0) -> dict[str, LedgerEntry]:
    """The last ledger entry of every stream in the changelog (one pass over it)."""
    from confluent_kafka import Consumer, TopicPartition

    topic = load_topics(settings.topic_prefix).name("ledger-changelog")
    consumer = Consumer(
        confluent_config(
            settings, **{"group.id": "dpstream-ledger-show", "enable.auto.commit": False}
        )
    )
    entries: dict[str, LedgerEntry] = {}
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        for p in meta.partitions if meta is not None else ():
            lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            if hi <= lo:
                continue
            consumer.assign([TopicPartition(topic, p, lo)])
            pos = lo
            while pos < hi:
                msg = consumer.poll(timeout_s)
                if msg is None:
                    break
                if msg.error() or msg.key() is None:
                    continue
                pos = (msg.offset() or 0) + 1
                try:  # a record the worker could not have written: refused, as on restore
                    sid = json.loads(msg.key() or b'""')
                    value = msg.value()
                    raw = base64.b64decode(json.loads(value), validate=True) if value else None
                    entry = LedgerEntry.decode(raw, str(sid)) if raw else None
                except (ValueError, TypeError) as exc:  # JSON, base64, StateError
                    log.error("ledger changelog record refused offset=%s: %s", pos - 1, exc)
                    continue
                if entry is not None:
                    entries[str(sid)] = entry
                else:
                    entries.pop(str(sid), None)
    finally:
        consumer.close()
    return entries


def check_ledgers(settings: Settings, timeout_s: float = 10.0) -> None:
    """Refuse to start (:class:`~app.stream.release.protocol.StateMismatch`, one line) when a
    configured stream's stored ledger was written by another mechanism or other parameters."""
    entries = read_ledgers(settings, timeout_s)
    for stream in settings.streams:
        entry = entries.get(stream.id)
        if entry is not None and entry.state is not None:
            continued(stream, entry.state)


def render(stream: StreamConfig, entry: LedgerEntry) -> str:
    """Human-readable ledger: the rule, window budget per level, and the last releases.

    Local streams add the population ledger (users used and available over the current
    window, per slot of it; it replaces the budget table for population-division mechanisms,
    whose users report with their whole ``eps``) and the pending collection request (slot,
    round, cohort size, deadline, whether the broker acknowledged it).
    """
    mechanism = _view(stream, entry)
    population = mechanism.population_window()
    lines = [
        f"stream {stream.id}: {mechanism.describe()}",
        f"next slot {entry.next_slot} (last release published: {entry.published})",
    ]
    if population is None:  # else: users, not budget
        report = mechanism.window_report()
        opened = all(isinstance(s, OpenWindowSpend) for s in report)
        delta_head = f"{'delta':>10}{'delta spent':>14}{'fraction':>10}" if opened else ""
        lines += [
            "",
            f"{'level':<12}{'w':>6}{'eps':>10}{'window spent':>15}{'fraction':>10}{delta_head}",
        ]
        for level, spend in zip(stream.levels, report, strict=True):
            delta = ""
            if isinstance(spend, OpenWindowSpend):  # an open stream's (eps, delta) window
                delta = (
                    f"{spend.delta:>10.3g}{float(spend.delta_spent):>14.4g}"
                    f"{spend.delta_fraction:>10.1%}"
                )
            lines.append(
                f"{level.name:<12}{spend.w:>6}{spend.eps:>10.4g}{float(spend.spent):>15.6g}"
                f"{spend.fraction:>10.1%}{delta}"
            )
    else:  # an asked user spends its whole eps (or an OPS share): the per-user figure
        spends = zip(stream.levels, mechanism.window_report(), strict=True)
        lines += [
            "",
            "max per-user spend in the last w slots (the figure eps bounds): "
            + ", ".join(
                f"{lv.name} {float(s.spent):.4g} of eps {s.eps:g} (w={s.w})" for lv, s in spends
            ),
        ]
    if (window := mechanism.graph_window()) is not None:
        lines.append(wn_line(stream, window))
    if stream.local:
        lines += _local_lines(stream, mechanism, entry)
    lines += ["", f"{'slot':>12}  {'start (UTC)':<22}{'fresh':<6}{'status':<10}spent by level"]
    for slot, fresh, status, spent in entry.recent:
        spent_txt = " ".join(f"{k}={v:.4g}" for k, v in spent.items())
        start = utc(stream.slots.start(slot))
        lines.append(f"{slot:>12}  {start:<22}{fresh!s:<6}{status:<10}{spent_txt}")
    if entry.recent:
        lines += STATUS_LEGEND
    return "\n".join(lines)


STATUS_LEGEND = [
    "status: publish = a newly noised histogram was released;",
    "        skip = the last release was repeated, no publication budget spent (the",
    "        change looked too small; for sample: not the window's sampling slot; local",
    "        mode: also when no report of the round came in time);",
    "        nullified = (BA, PBA, LBA, LPA, PLPA) an earlier publication used this slot's",
    "        share in advance, so the last release was repeated without looking at the data.",
]
"""What ``ledger show`` prints under the last releases, once."""


def to_json(stream: StreamConfig, entry: LedgerEntry) -> dict[str, Any]:
    """``ledger show --json``: :func:`~app.stream.ops.budget_view.budget_json` (the figures of
    ``GET /budget``) plus the last releases with their slot times in UTC."""
    mechanism = _view(stream, entry)
    last = entry.next_slot - 1 if entry.next_slot is not None else None
    out = budget_json(stream, mechanism.window_report(), last)
    out["describe"] = mechanism.describe()
    out["published"] = entry.published
    if (window := mechanism.graph_window()) is not None:
        out["wn_window"] = wn_window(stream, window)
    if rows := level_rows(stream, mechanism):
        out["level_population"] = rows
    out["recent"] = [
        {
            "slot": slot,
            "start_utc": utc(stream.slots.start(slot)),
            "end_utc": utc(stream.slots.end(slot)),
            "fresh": fresh,
            "status": status,
            "spent_by_group": spent,
        }
        for slot, fresh, status, spent in entry.recent
    ]
    return out


def _view(stream: StreamConfig, entry: LedgerEntry) -> LedgerView:
    """The stream's mechanism continued from ``entry``, as the views read it."""
    built = continued(stream, entry.state) if entry.state is not None else stream.build_mechanism()
    return built if isinstance(built, OpenMechanism) else as_view(built)


def wn_window(stream: StreamConfig, window: GraphWindow) -> dict[str, Any]:
    """A (w,n) stream's most loaded window: the centre (a label) whose n-range window spent
    the most over the ``w`` slots ending at the last release, and that budget (exact)."""
    return {
        "graph": stream.graph.describe() if stream.graph is not None else None,
        "n": window.n,
        "w": window.w,
        "eps": window.eps,
        "centre": stream.labels[window.centre],
        "spent": float(window.spent),
        "fraction": window.fraction,
    }


def wn_line(stream: StreamConfig, window: GraphWindow) -> str:
    """:func:`wn_window` as one line of ``ledger show``."""
    v = wn_window(stream, window)
    return (
        f"(w,n) window, {v['graph']}: most loaded centred at {v['centre']!r} (pages within "
        f"{v['n'] - 1} hops), spent {v['spent']:.6g} of eps {v['eps']:g} over the last "
        f"{v['w']} slots ({v['fraction']:.1%})"
    )


def level_rows(stream: StreamConfig, mechanism: LedgerView) -> list[dict[str, Any]]:
    """Per level of a personalized local stream, its users and those available now (none for
    other streams); the levels are public, as the requests name them."""
    use = mechanism.level_use()
    if use is None:
        return []
    return [
        {"level": lv.name, "w": lv.w, "eps": lv.eps, "users": n, "available": a}
        for lv, n, a in zip(stream.levels, use.users, use.available, strict=True)
    ]


def _local_lines(stream: StreamConfig, mechanism: LedgerView, entry: LedgerEntry) -> list[str]:
    """The population ledger's window and the pending request of a local stream."""
    lines = [""]
    pop = mechanism.population_window()
    if pop is not None:
        offset = entry.local.offset or 0
        lines.append(
            f"population: {pop.users} users in {pop.buckets} buckets, w={pop.w}; at slot "
            f"{offset + pop.t}: used {pop.users - pop.available}, available {pop.available}"
        )
        for row in level_rows(stream, mechanism):
            lines.append(
                f"{'':>4}level {row['level']} (w={row['w']}, eps={row['eps']:g}): "
                f"{row['users']} users, available {row['available']}"
            )
        if (use := mechanism.level_use()) is not None:
            lines.append(f"{'':>4}sitting out a change of level: {use.sitting_out} users")
        for k, used in enumerate(pop.reported):  # the slots of the current window, newest first
            lines.append(f"{'':>4}slot {offset + pop.t - k:>12}: {used} users reported")
    else:
        lines.append(f"population: every one of {stream.users} users reports a share each slot")
    raw = entry.local.request
    if raw is None:
        lines.append("pending request: none")
    else:
        pending = requests.decode(raw)
        request = pending.request
        cohort = int(mask_users(request, stream.users).sum())
        lines.append(
            f"pending request: slot {pending.slot} round {request.round} cohort {cohort} "
            f"users, deadline {pending.deadline:.3f}, sent: {entry.local.sent}"
        )
    return lines


def watch(
    settings: Settings, stream: StreamConfig, timeout_s: float, as_json: bool, every_s: float
) -> int:
    """``ledger show [--json] [--watch S]``: print the ledger once, or every ``every_s``
    seconds (a UTC time line before each text view; the screen is cleared only on a
    terminal). Returns the exit code: 1 when the stream has no ledger yet (once only)."""
    while True:
        entry = read_ledger(settings, stream.id, timeout_s=timeout_s)
        if entry is None and not every_s:
            print(f"no ledger for stream {stream.id!r} yet", file=sys.stderr)
            return 1
        if as_json:
            body = json.dumps(
                to_json(stream, entry) if entry else {"stream": stream.id, "levels": None}
            )
        else:
            body = render(stream, entry) if entry else f"no ledger for stream {stream.id!r} yet"
        if every_s and not as_json:
            clear = "\x1b[H\x1b[2J" if sys.stdout.isatty() else ""
            body = f"{clear}-- {utc(time.time())} (every {every_s:g} s; Ctrl-C stops)\n{body}\n"
        print(body, flush=True)
        if not every_s:
            return 0
        time.sleep(every_s)
