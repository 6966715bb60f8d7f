"""The worker's live status page (``GET /``) and budget view (``GET /budget``).

A :class:`StatusBoard` listens to the release protocol: each time it reports a stream's ledger
(at start and after every published release, :meth:`app.stream.release.protocol.Publisher.report`)
the board keeps the last :data:`RING` releases of each stream in memory, with the stream's
window budget per level. A stream shows from its first report by this worker process.

``GET /budget`` is :func:`app.stream.ops.budget_view.budget_json` for every stream (the same
figures as ``dpstream ledger show --json``). ``GET /`` is one self-contained HTML page (inline
SVG and CSS, no script, nothing fetched; it reloads itself every 5 s): per stream, the last
slots' released histograms as a bar chart (fresh releases in blue, repeated ones in grey), how
many were fresh or repeated, and per level the most any one user spent in the window of ``w``
slots ending at the last slot (the figure ``eps`` bounds) as bars; then per stream the slots
that lost values as late and the release lag, the consumer lag per topic and the dead letters
by reason, read from the worker's own metrics.

An open-domain stream's (``domain: open``) releases are key -> count maps: the page shows, for
its last :data:`OPEN_SLOTS` slots, the :data:`OPEN_TOP` keys of largest released count as a
table of bars (a key selected at that slot marked ``+``), and its levels' window spend of
delta beside eps. The ranking is of the released (noised) counts only.

Everything shown is public or an operator figure that ``/metrics`` already exposes: released
(noised) histograms, budgets, lag, rejected-message counts. No exact count of the data (events
accepted, late or duplicate) appears here, whatever ``DPSTREAM_EXPOSE_DATA_COUNTS`` says.
"""

from __future__ import annotations

import html
import json
import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from app.dp.types import Release, WindowSpend
from app.dp.units import UnitBound
from app.metrics import REGISTRY
from app.stream.config import StreamConfig
from app.stream.ops.budget_view import budget_json
from app.stream.release.protocol import ReleaseListener
from app.utc import utc, utc_time
from app.wire.releases import decode as decode_release

RING = 12
"""Releases kept per stream for the page."""

FRESH_COLOR = "#1f77b4"
REPEAT_COLOR = "#a0a0a0"
BUDGET_COLOR = "#9467bd"
"""A level's bar, full or not: a mechanism spending its window's eps is working as designed."""
BUDGET_OVER_COLOR = "#d62728"
"""Red is for alerts: only a window spent beyond eps (which the ledger refuses) is drawn red."""

REFRESH_S = 5
OPEN_SLOTS = 6
"""An open stream's slots drawn (the most recent)."""
OPEN_TOP = 10
"""An open stream's keys drawn per slot: the largest released counts."""
OPEN_KEY_CHARS = 32
"""A key longer than this is cut on the page (its whole text is in the bar's tooltip)."""


@dataclass
class _Stream:
    config: StreamConfig
    window: Sequence[WindowSpend]
    last_slot: int | None
    releases: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RING))


class StatusBoard(ReleaseListener):
    """What the status page and ``/budget`` show: per stream, the last releases and the window
    budget. The worker builds one, hands it to the release protocol as a listener
    (:class:`~app.stream.release.protocol.ReleaseListener`) and to the HTTP service, which
    serves it from its own thread (hence the lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[str, _Stream] = {}

    # -- the listener -------------------------------------------------------------------------
    def on_report(
        self, stream: StreamConfig, window: Sequence[WindowSpend], records: Sequence[bytes]
    ) -> None:
        """Keep ``records`` (published ``releases`` values) and the stream's window budget
        (``window_report()`` after them). A slot seen again (re-published after a restart)
        replaces its earlier copy."""
        with self._lock:
            state = self._streams.get(stream.id)
            if state is None:
                state = self._streams[stream.id] = _Stream(stream, window, None)
            state.config, state.window = stream, window
            for record in records:
                release = decode_release(record).to_json()
                slot = int(release["slot"])
                kept = [r for r in state.releases if r["slot"] != slot]
                state.releases.clear()
                state.releases.extend(sorted([*kept, release], key=lambda r: int(r["slot"])))
                last = state.last_slot
                state.last_slot = max(slot, last if last is not None else slot)

    def on_release(self, stream: StreamConfig, released: Sequence[tuple[int, Release]]) -> None:
        """Nothing: the page shows published records, which :meth:`on_report` receives."""

    # -- the views ----------------------------------------------------------------------------
    def budget_document(self) -> dict[str, Any]:
        """The ``GET /budget`` body."""
        with self._lock:
            streams = [budget_json(s.config, s.window, s.last_slot) for s in self._streams.values()]
            units = {
                s.config.unit.unit: s.config.unit for s in self._streams.values() if s.config.unit
            }
        return {
            "as_of_utc": utc(time.time()),
            "streams": streams,
            "privacy_units": [unit.as_json() for unit in units.values()],
        }

    async def budget(self, request: web.Request) -> web.Response:
        """``GET /budget``: the window budget of every stream as JSON."""
        return web.Response(
            text=json.dumps(self.budget_document(), indent=1) + "\n",
            content_type="application/json",
        )

    async def page(self, request: web.Request) -> web.Response:
        """``GET /``: the status page."""
        return web.Response(text=self.render_page(), content_type="text/html", charset="utf-8")

    def render_page(self) -> str:
        """The whole page as HTML (see the module docstring)."""
        with self._lock:
            streams = [
                (s.config, list(s.releases), s.window, s.last_slot) for s in self._streams.values()
            ]
        return _render(streams)


# -- the page -----------------------------------------------------------------------------------
def _samples(family_name: str) -> list[tuple[dict[str, str], float]]:
    """The samples of one metric family of the worker's registry (labels, value)."""
    for family in REGISTRY.collect():
        if family.name == family_name:
            return [
                (dict(s.labels), s.value) for s in family.samples if not s.name.endswith("_created")
            ]
    return []


def _render(
    streams: list[tuple[StreamConfig, list[dict[str, Any]], Sequence[WindowSpend], int | None]],
) -> str:
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<meta http-equiv='refresh' content='{REFRESH_S}'>",
        "<title>dpstream status</title><style>",
        "body{font-family:sans-serif;margin:1.5em;color:#222;background:#fff}",
        "table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left}",
        "h2{margin-top:1.4em}.note{color:#555;font-size:90%}",
        "</style></head><body>",
        "<h1>dpstream status</h1>",
        f"<p class='note'>as of {e(utc(time.time()))}; reloads every {REFRESH_S} s. "
        "Histograms are the released (noised) ones; a <b>fresh</b> release is newly noised, a "
        "<b>repeat</b> publishes the last one again and spends no publication budget.</p>",
    ]
    if not streams:
        parts.append("<p>No stream released yet by this worker.</p>")
    for config, releases, window, last_slot in streams:
        parts += _stream_section(config, releases, window, last_slot)
    parts += _operations_section()
    parts.append("</body></html>")
    return "\n".join(parts)


def _unit_line(unit: UnitBound) -> str:
    """The stream's privacy unit: what one user can lose across the unit's streams."""
    e = html.escape
    streams = ", ".join(t.stream for t in unit.terms)
    cap = f" (cap eps {unit.cap_eps:g})" if unit.cap_eps is not None else ""
    delta = ""
    if unit.states_delta:
        cap_delta = f" (cap delta {unit.cap_delta:g})" if unit.cap_delta is not None else ""
        delta = f" and delta <b>{unit.delta:g}</b>{cap_delta}"
    return (
        f"<p>Privacy unit <b>{e(unit.unit)}</b>: one user loses at most eps "
        f"<b>{unit.eps:g}</b>{cap}{delta} in any {unit.interval_s:g} s across {e(streams)}.</p>"
    )


def _stream_section(
    config: StreamConfig,
    releases: list[dict[str, Any]],
    window: Sequence[WindowSpend],
    last_slot: int | None,
) -> list[str]:
    e = html.escape
    fresh = sum(1 for r in releases if r["fresh"])
    out = [
        f"<h2>stream {e(config.id)}</h2>",
        f"<p>{e(config.mechanism)}, {config.slot_s:g} s slots, "
        f"{'local' if config.local else 'central'} mode. Last {len(releases)} releases: "
        f"<b>{fresh}</b> fresh, <b>{len(releases) - fresh}</b> repeated.</p>",
        *(
            [f"<p><b>Not w-event private</b> (accepted): {e(config.weaker_guarantee)}</p>"]
            if config.weaker_guarantee
            else []
        ),
        *([_unit_line(config.unit)] if config.unit else []),
        _open_chart(releases) if config.is_open else _chart(config, releases),
        "<table><tr><th>level</th><th>w</th><th>eps</th>"
        f"<th colspan='2'>{e(WINDOW_LABEL)}</th><th>window (UTC)</th>"
        f"{'<th>delta spent in the window</th>' if config.is_open else ''}</tr>",
    ]
    view = budget_json(config, window, last_slot)
    cohorts = _asks_cohorts(config)
    for row in view["levels"]:
        frac = max(0.0, min(1.0, row["fraction"]))
        color = BUDGET_OVER_COLOR if row["fraction"] > 1 else BUDGET_COLOR
        bar = (
            f"<svg width='160' height='14' role='img'><rect width='160' height='14' "
            f"fill='#eeeeee'/><rect width='{160 * frac:.1f}' height='14' fill='{color}'/></svg>"
        )
        span = (
            f"{row['window_start_utc'][11:19]} - {row['window_end_utc'][11:19]}"
            if "window_start_utc" in row
            else "-"
        )
        out.append(
            f"<tr><td>{e(row['level'])}</td><td>{row['w']}</td><td>{row['eps']:g}</td>"
            f"<td>{bar}</td><td>{row['window_spent']:.4g} of eps {row['eps']:g} "
            f"({row['fraction']:.0%})</td><td>{span}</td>"
            f"{_delta_cell(row) if config.is_open else ''}</tr>"
        )
    out.append("</table>")
    note = (
        "The bar is the figure <b>eps</b> bounds: the most any one user of the level spent in "
        "the w slots ending at the last released slot, as a fraction of eps. A full bar is "
        "the mechanism using its budget, as designed; only a spend beyond eps would be red."
    )
    if cohorts:
        note += (
            " Each round asks a cohort of users not asked within w slots; an asked user "
            "spends its whole eps (or an OPS share of it), so the bar reaches eps as soon as "
            "anybody was asked: that is the mechanism working, not the budget running out."
        )
    elif config.local:
        note += " Every user reports in every round, each with a share of eps."
    else:
        note += " Every user of the level spends what the release spent."
    out.append(f"<p class='note'>{note}</p>")
    return out


def _delta_cell(row: dict[str, Any]) -> str:
    """An open stream's level (a :func:`budget_json` row): the delta spent in the window ending
    at the last slot, of the level's delta."""
    if "delta" not in row:
        return "<td>-</td>"
    return (
        f"<td>{row['window_delta_spent']:.3g} of delta {row['delta']:g} "
        f"({row['delta_fraction']:.0%})</td>"
    )


def _open_chart(releases: list[dict[str, Any]]) -> str:
    """An open stream's last :data:`OPEN_SLOTS` releases: per slot (a column) the
    :data:`OPEN_TOP` keys of largest released count (ties by key), each a bar scaled to the
    largest count shown (negative counts: no bar), fresh in blue, repeated in grey."""
    e = html.escape
    if not releases:
        return "<p class='note'>no release yet</p>"
    shown = releases[-OPEN_SLOTS:]
    columns: list[list[tuple[str, float, bool]]] = []
    for rel in shown:
        pairs = sorted(
            zip(rel.get("keys") or [], rel["histogram"], strict=False),
            key=lambda kv: (-float(kv[1]), kv[0]),
        )[:OPEN_TOP]
        new = set(rel.get("new_keys") or [])
        columns.append([(str(k), float(x), k in new) for k, x in pairs])
    hi = max([x for col in columns for _, x, _ in col] + [1.0])
    head = "".join(
        f"<th>{e(utc_time(float(rel['start'])))} ({len(rel.get('keys') or [])} keys"
        f"{', repeat' if not rel['fresh'] else ''})</th>"
        for rel in shown
    )
    rows = []
    for rank in range(max(len(col) for col in columns)):
        cells = []
        for rel, col in zip(shown, columns, strict=True):
            if rank >= len(col):
                cells.append("<td></td>")
                continue
            key, x, selected = col[rank]
            color = FRESH_COLOR if rel["fresh"] else REPEAT_COLOR
            width = 80 * max(0.0, x) / hi
            name = key if len(key) <= OPEN_KEY_CHARS else key[: OPEN_KEY_CHARS - 1] + "\u2026"
            cells.append(
                f"<td><svg width='80' height='10' role='img'><rect width='{width:.1f}' "
                f"height='10' fill='{color}'><title>slot {rel['slot']} {e(key)} = {x:g}</title>"
                f"</rect></svg> {e(name)}{'<b>+</b>' if selected else ''} {x:.0f}</td>"
            )
        rows.append(f"<tr><td>{rank + 1}</td>{''.join(cells)}</tr>")
    return (
        f"<table><tr><th>rank</th>{head}</tr>{''.join(rows)}</table>"
        f"<p class='note'>The {OPEN_TOP} keys of largest released (noised) count per slot "
        "(slot start, UTC); <b>+</b>: selected at that slot (its noisy count reached the "
        "threshold), the others were public before it and are released whether or not anybody "
        "sent them. Nothing here is exact.</p>"
    )


WINDOW_LABEL = "max per-user spend in the last w slots"
"""The status page's name for a level's :class:`~app.dp.types.WindowSpend` (the figure ``eps``
bounds, :data:`app.dp.budget.PEAK_LABEL`, in the window ending at the last slot)."""


def _asks_cohorts(config: StreamConfig) -> bool:
    """A local stream whose rounds ask cohorts that spend their whole eps (population
    division); False for an unknown mechanism."""
    if not config.local:
        return False
    from app.dp.errors import DPError

    try:
        return bool(config.build_local().population_division)
    except DPError:
        return False


DEMO_TRUTH_ENV = "DPSTREAM_DEMO_TRUTH_FILE"
"""Set by ``dpstream demo`` only: a JSON file ``{stream: {slot: histogram}}`` of the synthetic
events' exact counts (local streams: the simulated devices' true frequencies), written by the
demo process and drawn over the releases so a newcomer sees what the noise costs. Exact data:
never set it for a real stream."""
DEMO_NOTES_KEY = "demo notes"
"""The demo's truth file also holds ``{DEMO_NOTES_KEY: {stream: {slot: text}}}``: what went
wrong with a slot's simulated devices (local demo), shown under the chart. Stream ids have no
spaces, so the key is never a stream's."""
TRUTH_COLOR = "#000000"


def demo_truth(stream_id: str) -> dict[int, list[float]]:
    """The demo's exact counts of ``stream_id`` by slot ({} outside the demo or if unreadable)."""
    path = os.environ.get(DEMO_TRUTH_ENV)
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            slots = json.load(f).get(stream_id, {})
        return {int(k): [float(x) for x in v] for k, v in slots.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def demo_notes(stream_id: str) -> dict[int, str]:
    """The demo's notes on ``stream_id``'s slots ({} outside the demo or if unreadable)."""
    path = os.environ.get(DEMO_TRUTH_ENV)
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            notes = json.load(f).get(DEMO_NOTES_KEY, {}).get(stream_id, {})
        return {int(k): str(v) for k, v in notes.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def _chart(config: StreamConfig, releases: list[dict[str, Any]]) -> str:
    """Bars of the last releases: one group per slot, one bar per category, zero line; in the
    demo, a black tick per bar at the slot's synthetic truth (:func:`demo_truth`)."""
    width, height, top, bottom, left = 760, 240, 10, 40, 40
    if not releases:
        return "<p class='note'>no release yet</p>"
    labels = list(config.labels) or [str(i) for i in range(config.d)]
    truth = demo_truth(config.id)
    values = [float(x) for r in releases for x in r["histogram"]]
    values += [x for r in releases for x in truth.get(int(r["slot"]), [])]
    hi, lo = max(0.0, *values), min(0.0, *values)
    span = (hi - lo) or 1.0
    plot_h = height - top - bottom

    def y(v: float) -> float:
        return top + (hi - v) / span * plot_h

    group_w = (width - left) / len(releases)
    bar_w = max(1.0, (group_w - 6) / max(1, len(labels)))
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"role='img' aria-label='released histograms of {html.escape(config.id)}'>",
        f"<rect x='0' y='0' width='{width}' height='{height}' fill='#ffffff'/>",
    ]
    for i, rel in enumerate(releases):
        x0 = left + i * group_w + 3
        color = FRESH_COLOR if rel["fresh"] else REPEAT_COLOR
        for j, v in enumerate(rel["histogram"]):
            y0, y1 = sorted((y(float(v)), y(0.0)))
            name = html.escape(labels[j] if j < len(labels) else str(j))
            out.append(
                f"<rect x='{x0 + j * bar_w:.1f}' y='{y0:.1f}' width='{bar_w * 0.9:.1f}' "
                f"height='{max(0.5, y1 - y0):.1f}' fill='{color}'>"
                f"<title>slot {rel['slot']} {name} = {float(v):.3g}</title></rect>"
            )
        for j, t in enumerate(truth.get(int(rel["slot"]), [])[: len(rel["histogram"])]):
            out.append(
                f"<line x1='{x0 + j * bar_w:.1f}' x2='{x0 + (j + 0.9) * bar_w:.1f}' "
                f"y1='{y(t):.1f}' y2='{y(t):.1f}' stroke='{TRUTH_COLOR}' stroke-width='2'>"
                f"<title>slot {rel['slot']} truth = {t:g}</title></line>"
            )
        stamp = utc_time(float(rel["start"]))
        out.append(f"<text x='{x0:.1f}' y='{height - bottom + 14}' font-size='10'>{stamp}</text>")
    out += [
        f"<line x1='{left}' x2='{width}' y1='{y(0.0):.1f}' y2='{y(0.0):.1f}' stroke='#333'/>",
        f"<text x='2' y='{top + 10}' font-size='10'>{hi:.3g}</text>",
        f"<text x='2' y='{y(0.0) + 4:.1f}' font-size='10'>0</text>",
        f"<text x='2' y='{y(lo):.1f}' font-size='10'>{lo:.3g}</text>" if lo < 0 else "",
        f"<rect x='{left}' y='{height - 16}' width='10' height='10' fill='{FRESH_COLOR}'/>",
        f"<text x='{left + 14}' y='{height - 7}' font-size='11'>fresh</text>",
        f"<rect x='{left + 60}' y='{height - 16}' width='10' height='10' fill='{REPEAT_COLOR}'/>",
        f"<text x='{left + 74}' y='{height - 7}' font-size='11'>repeat (slot start, UTC; "
        f"bars in label order: {html.escape(', '.join(labels))})</text>",
        "</svg>",
    ]
    if truth:
        what = (
            "the true frequencies of the simulated devices' values"
            if config.local
            else "the exact counts of the demo's synthetic events"
        )
        out.append(
            f"<p class='note'>Black ticks: the <b>truth</b>, {what} in that slot (shown by "
            "<code>dpstream demo</code> only, on data it made up): the gap to each bar is what "
            "the noise, or a repeat's staleness, costs.</p>"
        )
    notes = demo_notes(config.id)
    shown = [notes[int(r["slot"])] for r in releases if int(r["slot"]) in notes]
    out += [f"<p class='note'><b>Devices:</b> {html.escape(text)}</p>" for text in shown]
    return "\n".join(out)


def _operations_section() -> list[str]:
    lag = _samples("dpstream_consumer_lag_seconds")
    dead = _samples("dpstream_dead_letters")
    out = _late_section()
    out.append("<h2>consumer lag</h2>")
    if lag:
        out.append("<table><tr><th>topic</th><th>lag (s)</th></tr>")
        out += [
            f"<tr><td>{html.escape(lb.get('topic', ''))}</td><td>{v:.1f}</td></tr>" for lb, v in lag
        ]
        out.append("</table>")
    else:
        out.append("<p class='note'>not measured yet</p>")
    total = sum(v for _, v in dead)
    out.append(f"<h2>dead letters: {total:g}</h2>")
    nonzero = [(lb.get("reason", ""), v) for lb, v in dead if v > 0]
    if nonzero:
        out.append("<table><tr><th>reason</th><th>messages</th></tr>")
        out += [f"<tr><td>{html.escape(r)}</td><td>{v:g}</td></tr>" for r, v in nonzero]
        out.append("</table>")
    out.append(
        "<p class='note'>Dead letters are rejected input messages (bad encoding, unknown "
        "stream, value outside the domain...), kept on the dead-letter topic.</p>"
    )
    return out


def _late_section() -> list[str]:
    """Per stream: slots that lost values as late, and the release lag (never a count of
    values: ``dpstream_late_slots`` counts slots)."""
    late = {lb.get("stream", ""): v for lb, v in _samples("dpstream_late_slots")}
    behind = {lb.get("stream", ""): v for lb, v in _samples("dpstream_release_lag_seconds")}
    slots = {lb.get("stream", ""): v for lb, v in _samples("dpstream_release_lag_slots")}
    out = ["<h2>late data and release lag</h2>"]
    names = sorted(set(late) | set(behind))
    if not names:
        return [
            *out,
            "<p class='note'>no slot lost values as late; no release lag measured yet</p>",
        ]
    out.append("<table><tr><th>stream</th><th>slots with late data</th><th>release lag</th></tr>")
    for sid in names:
        lag = f"{behind[sid]:.1f} s ({slots.get(sid, 0):g} slots)" if sid in behind else "-"
        out.append(
            f"<tr><td>{html.escape(sid)}</td><td>{late.get(sid, 0):g}</td><td>{lag}</td></tr>"
        )
    out.append(
        "<p class='note'>Slots with late data: slots of the stream in which this worker "
        "dropped any value because it arrived after its slot closed (each slot once; how many "
        "values is not shown). Release lag: how long the oldest due slot has waited.</p>"
    )
    return out
