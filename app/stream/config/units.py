"""The streams file's ``privacy:`` section: which streams share users, over what interval.

A deployment's streams often count the same people (page views, purchases, searches). Streams
that share a user id space form one *privacy unit*; for each unit the service computes what one
user can lose in any interval of ``interval_s`` seconds across all its streams
(:mod:`app.dp.units`), shows it in ``/budget``, on the status page and in every audit record,
and refuses to start when it exceeds the unit's ``cap_eps`` (or, for a unit holding open-domain
streams, whose bound is ``(eps, delta)``, its delta exceeds ``cap_delta``)::

    privacy:
      interval_s: 86400             # H: the interval the bound is stated for (default: one day)
      units:
        - name: shoppers            # streams sharing one user id space
          streams: [clicks, purchases]
          cap_eps: 20               # optional: refuse a configuration whose bound exceeds it
          cap_delta: 1.0e-4         # optional: the same for the bound's delta (open streams)

Without ``units``, every central stream belongs to one unit named ``central`` (the streams of
one deployment are assumed to count the same people unless the file says otherwise). A stream
no unit lists forms a unit of its own, named after it, so every stream carries a bound.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from app.dp.units import StreamTerm, UnitBound, relation_factor, slots_touched, stream_loss
from app.stream.config.model import StreamConfig
from app.stream.errors import ConfigError

DEFAULT_INTERVAL_S = 86_400.0
"""The interval a unit's bound is stated for when the file gives none: one day."""
INTERVAL_BOUNDS = (1.0, 366 * 86_400.0)
DEFAULT_UNIT = "central"
PRIVACY_KEYS = frozenset({"interval_s", "units"})
UNIT_KEYS = frozenset({"name", "streams", "cap_eps", "cap_delta"})
CAP_EPS_BOUNDS = (1e-6, 1e9)
CAP_DELTA_BOUNDS = (1e-15, 1.0)


def _positive(where: str, raw: Any, low: float, high: float) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not low <= raw <= high:
        raise ConfigError(f"{where} must be a number in [{low:g}, {high:g}], got {raw!r}")
    return float(raw)


def _cap(where: str, raw: Any, bounds: tuple[float, float]) -> float | None:
    return None if raw is None else _positive(where, raw, *bounds)


def _mapping(where: str, raw: Any, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a mapping, got {raw!r}")
    unknown = sorted(set(map(str, raw)) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    return raw


def stream_term(stream: StreamConfig, interval_s: float) -> StreamTerm:
    """What one user can lose in ``stream`` in an interval of ``interval_s`` seconds; an open
    stream's delta composes as its eps does (the argument: :mod:`app.dp.units`)."""
    slots = slots_touched(Fraction(str(interval_s)), Fraction(str(stream.slot_s)))
    factor = relation_factor("replace" if stream.local else stream.neighbours)
    if stream.is_open:  # a ledger per level, each within its (w, eps, delta) (app.dp.open.ledger)
        default = stream.default_level
        loss = stream_loss(slots, [(lv.w, lv.eps) for lv in stream.levels], default)
        delta = stream_loss(slots, [(lv.w, lv.delta) for lv in stream.levels], default)
        return StreamTerm(stream.id, slots, loss * factor, delta * factor)
    mechanism = stream.build_mechanism()
    pairs = [(spend.w, spend.eps) for spend in mechanism.window_report()]
    loss = stream_loss(slots, pairs, stream.default_level, mechanism.ledger_per_group())
    return StreamTerm(stream.id, slots, loss * factor)


Listed = tuple[str, Mapping[str, Any], tuple[str, ...]]
"""A unit as the file lists it: its name, its entry (for the caps), its streams."""


def _members(where: str, raw: Any, known: Sequence[str], taken: dict[str, str]) -> Listed:
    unit = _mapping(where, raw, UNIT_KEYS)
    name = unit.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name must be a non-empty string, got {name!r}")
    ids = unit.get("streams")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise ConfigError(f"{where}.streams must be a non-empty list of stream ids, got {ids!r}")
    for sid in ids:
        if sid not in known:
            raise ConfigError(f"{where}.streams: no stream {sid!r} (streams: {list(known)})")
        if sid in taken:
            raise ConfigError(f"{where}.streams: {sid!r} is already in unit {taken[sid]!r}")
        taken[sid] = name
    return name, unit, tuple(ids)


def units(raw: Any, streams: Sequence[StreamConfig], where: str) -> tuple[UnitBound, ...]:
    """The privacy units of ``streams`` from the file's ``privacy:`` value (None: defaults),
    each with its bound; a bound above its cap is one :class:`ConfigError` line."""
    section = _mapping(where, {} if raw is None else raw, PRIVACY_KEYS)
    interval = _positive(
        f"{where}.interval_s", section.get("interval_s", DEFAULT_INTERVAL_S), *INTERVAL_BOUNDS
    )
    by_id = {s.id: s for s in streams}
    taken: dict[str, str] = {}
    listed: list[Listed] = []
    if "units" in section:
        if not isinstance(section["units"], list):
            raise ConfigError(f"{where}.units must be a list, got {section['units']!r}")
        for i, unit in enumerate(section["units"]):
            listed.append(_members(f"{where}.units[{i}]", unit, list(by_id), taken))
    else:
        central = tuple(s.id for s in streams if not s.local)
        if central:
            listed.append((DEFAULT_UNIT, {}, central))
            taken.update(dict.fromkeys(central, DEFAULT_UNIT))
    names = [name for name, _, _ in listed]
    listed += [(sid, {}, (sid,)) for sid in by_id if sid not in taken and sid not in names]
    if len(set(n for n, _, _ in listed)) != len(listed):
        raise ConfigError(f"{where}.units: duplicate unit names in {[n for n, _, _ in listed]}")
    out = []
    for name, entry, ids in listed:
        cap = _cap(f"{where} {name}.cap_eps", entry.get("cap_eps"), CAP_EPS_BOUNDS)
        cap_delta = _cap(f"{where} {name}.cap_delta", entry.get("cap_delta"), CAP_DELTA_BOUNDS)
        terms = tuple(stream_term(by_id[i], interval) for i in ids)
        bound = UnitBound(name, interval, terms, cap, cap_delta)
        if not bound.within_cap:
            raise ConfigError(
                f"{where} {name}: one user can lose up to eps {bound.eps:g} in {interval:g} s "
                f"across {list(ids)}, above cap_eps {cap:g}; lower the streams' eps, raise "
                "their w or slot_s, or split the unit if the streams do not share users"
            )
        if not bound.within_cap_delta:
            raise ConfigError(
                f"{where} {name}: one user can lose up to delta {bound.delta:g} in {interval:g} s "
                f"across {list(ids)}, above cap_delta {cap_delta:g}; lower the open streams' "
                "delta, raise their w or slot_s, or split the unit if the streams do not share "
                "users"
            )
        out.append(bound)
    return tuple(out)


def with_units(streams: Sequence[StreamConfig], raw: Any, path: Path) -> tuple[StreamConfig, ...]:
    """``streams``, each carrying the bound of the unit it belongs to."""
    of = {t.stream: unit for unit in units(raw, streams, f"{path}: privacy") for t in unit.terms}
    return tuple(dataclasses.replace(s, unit=of[s.id]) for s in streams)
