"""The service's side of the public wire: what a stream's records say, built from its config.

Every public record's type and codec is :mod:`app.wire` (``docs/wire.md``); this module fills
them from a :class:`~app.stream.config.StreamConfig` (a release's ``guarantee``, an audit
record's relation and ledgers, a request's slot span) and gives the collect stage the short
forms it uses. :func:`pack`/:func:`unpack` are the map codec of the service's own changelog
tables (internal, like :mod:`app.stream.internal`), never of a public topic.
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import msgpack

from app.dp import registry
from app.dp.local.wire import CollectionRequest
from app.dp.open import OpenRelease
from app.dp.open.release import OpenWindowSpend
from app.dp.types import Release, WindowSpend
from app.dp.wn import wn_neighbours
from app.stream.config import Level, StreamConfig
from app.wire import audit, dead_letters, preferences, releases, reports, requests
from app.wire.errors import REASONS
from app.wire.events import Domain

__all__ = ["REASONS", "ROUND_INDEX", "Domain"]

ROUND_INDEX = reports.ROUND_INDEX
"""Local mode: the two rounds of a slot, in order (``round`` field of requests and reports)."""


def decode_preference(raw: bytes | None) -> str | None:
    """The level name of a ``preferences`` value; ``None`` for a tombstone or a bad value
    (both mean: back to the stream's default level, through the exclusion gap)."""
    return preferences.decode(raw).level


def decode_report(raw: bytes | None) -> tuple[str, int, int, int, int, list[int]]:
    """``(stream, slot, round index, user, group, payload)`` of a ``reports`` value, or
    :class:`~app.wire.errors.BadEvent` (:func:`app.wire.reports.decode`)."""
    r = reports.decode(raw)
    return r.stream, r.slot, ROUND_INDEX[r.round], r.user, r.group, list(r.payload)


def encode_dead_letter(
    reason: str, detail: str, topic: str, partition: int, offset: int, value: bytes | None
) -> bytes:
    """A ``dead-letter`` value (:mod:`app.wire.dead_letters`)."""
    return dead_letters.encode(
        dead_letters.DeadLetter(reason, detail, topic, partition, offset, value)
    )


MAX_DEAD_LETTER_KEY_BYTES = dead_letters.MAX_KEY_BYTES
"""A rejected record's key is kept up to this many bytes."""


def pack(obj: dict[Any, Any]) -> bytes:
    """Encode a changelog table's map (msgpack, floats as float64; internal)."""
    out: bytes = msgpack.packb(obj, use_single_float=False)
    return out


def unpack(raw: bytes) -> dict[str, Any]:
    """Decode what :func:`pack` wrote."""
    out: dict[str, Any] = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    return out


RECENT = 20
"""How many recent releases a ledger entry keeps for ``dpstream ledger show``."""


def _exact(x: Fraction) -> str:
    """An exact budget as text: ``"3/40"`` (what the floats beside it round)."""
    return f"{x.numerator}/{x.denominator}"


def _graph_relation(stream: StreamConfig) -> dict[str, Any]:
    """A (w,n) stream's audit fields: its relation (``neighbours``, overriding the base one:
    :data:`~app.dp.wn.base.WN_RELATION`) and the spatial window ``spatial_n``; none otherwise."""
    if stream.local or stream.mechanism not in registry.names("graph"):
        return {}
    n = stream.graph.n if stream.graph is not None else 1  # rescuedp: place level, no graph
    return {"neighbours": wn_neighbours(stream.neighbours), "spatial_n": n}


DEVICE_NOISE = "device"
"""The ``noise`` a local stream's records name: each device randomizes its own report."""


def relation(stream: StreamConfig) -> str:
    """The neighbouring relation one user's privacy covers: the stream's ``neighbours``, a
    graph stream's (w,n) restriction of it, or ``replace`` for a local stream (a device's
    value, whatever it is)."""
    if stream.local:
        return "replace"
    return str(_graph_relation(stream).get("neighbours", stream.neighbours))


def guarantee(stream: StreamConfig) -> dict[str, Any]:
    """The ``guarantee`` of every ``releases`` record of ``stream`` (``topics/releases.yaml``):
    ``eps``-DP over any ``w`` consecutive slots at the default level (users with no
    preference), the relation, the noise, and whether the stream runs with a weaker guarantee
    (``weaker``, with ``weaker_reason``); a personalized stream adds every level it offers,
    a graph stream its spatial window ``spatial_n``, a sum stream its clip bound ``alpha``."""
    default = stream.levels[stream.default_level]
    out: dict[str, Any] = {
        "eps": default.eps,
        "w": default.w,
        **_graph_relation(stream),
        "relation": relation(stream),
        "noise": DEVICE_NOISE if stream.local else stream.noise,
        "weaker": stream.weaker_guarantee is not None,
        "weaker_reason": stream.weaker_guarantee,
    }
    out.pop("neighbours", None)  # named ``relation`` here
    if stream.alpha is not None:
        out["alpha"] = stream.alpha
    if stream.is_open:
        out["delta"] = default.delta
    if len(stream.levels) > 1:
        out["default_level"] = default.name
        out["levels"] = {lv.name: _level_guarantee(stream, lv) for lv in stream.levels}
    return out


def _level_guarantee(stream: StreamConfig, level: Level) -> dict[str, Any]:
    """A level in a ``guarantee``: its ``eps`` and ``w``, and an open stream's ``delta``."""
    out: dict[str, Any] = {"eps": level.eps, "w": level.w}
    if stream.is_open:
        out["delta"] = level.delta
    return out


def _slot_fields(
    stream: StreamConfig, slot: int, mechanism: str, version: int, released_at: float
) -> dict[str, Any]:
    """The fields every ``releases`` record of a slot carries whatever the stream's layout."""
    return {
        "stream": stream.id,
        "slot": slot,
        "start": stream.slots.start(slot),
        "end": stream.slots.end(slot),
        "mechanism": mechanism,
        "version": version,
        "released_at": released_at,
        "guarantee": guarantee(stream),
    }


def encode_release(
    stream: StreamConfig,
    slot: int,
    rel: Release,
    describe: str,
    window: list[WindowSpend],
    recent: list[Any],
    released_at: float | None = None,
    delayed: bool = False,
    deployment: str = "",
    users_dc: int | None = None,
    users_pub: int | None = None,
) -> tuple[bytes, bytes, list[Any]]:
    """The ``releases`` and ``audit`` values of one released slot, and the ledger's new list
        of recent releases (``window``: per level, what its ledger spent in the window of ``w``
        slots ending at the slot whose closing computed this release).

        ``released_at`` is when the release was computed (Unix seconds; None: now); ``delayed`` is
        true when the slot was held back and released at the close of a later slot (a period
        mechanism's earlier slots, published at the period's end); ``deployment`` is the identity
        the slot's noise was derived with, ``users_dc``/``users_pub`` a local round's users asked
    (audit only)."""
    names = stream.level_names
    spent = {n: float(x) for n, x in zip(names, rel.spent, strict=True)}
    released_at = float(time.time() if released_at is None else released_at)
    record = releases.SlotRelease(
        **_slot_fields(stream, slot, rel.mechanism, rel.version, released_at),
        histogram=tuple(float(x) for x in rel.histogram),
        fresh=bool(rel.fresh),
        spent_by_group=spent,
        schema=releases.LABELS_SCHEMA,
        delayed=bool(delayed),
    )
    graph = _graph_relation(stream)
    entry = audit.AuditRecord(
        stream=stream.id,
        slot=slot,
        mechanism=rel.mechanism,
        describe=describe,
        neighbours=graph.get("neighbours", "replace" if stream.local else stream.neighbours),
        spatial_n=graph.get("spatial_n"),
        noise=DEVICE_NOISE if stream.local else stream.noise,
        deployment=deployment,
        status=rel.status,
        fresh=bool(rel.fresh),
        released_at=released_at,
        delayed=bool(delayed),
        weaker_guarantee=stream.weaker_guarantee,
        privacy_unit=stream.unit.as_json() if stream.unit else None,
        spent_by_group=spent,
        spent_dc_by_group=dict(zip(names, map(float, rel.spent_dc), strict=True)),
        spent_pub_by_group=dict(zip(names, map(float, rel.spent_pub), strict=True)),
        window_spent_by_group={n: float(w.spent) for n, w in zip(names, window, strict=True)},
        window_spent_exact_by_group={
            n: _exact(w.spent) for n, w in zip(names, window, strict=True)
        },
        eps_by_group={n: w.eps for n, w in zip(names, window, strict=True)},
        w_by_group={n: w.w for n, w in zip(names, window, strict=True)},
        users_dc=users_dc,
        users_pub=users_pub,
        spent_exact_by_group=None
        if rel.spent_exact is None
        else {n: _exact(x) for n, x in zip(names, rel.spent_exact, strict=True)},
    )
    recent = [*recent, [slot, bool(rel.fresh), rel.status, spent]][-RECENT:]
    return releases.encode(record), audit.encode(entry), recent


def encode_open_release(
    stream: StreamConfig,
    slot: int,
    rel: OpenRelease,
    describe: str,
    window: list[WindowSpend],
    recent: list[Any],
    released_at: float | None = None,
    deployment: str = "",
) -> tuple[bytes, bytes, list[Any]]:
    """The ``releases`` (layout 2: a key -> count map) and ``audit`` values of one released
    slot of an open-domain stream, and the ledger's new list of recent releases (``window``:
    per level, the :class:`~app.dp.open.release.OpenWindowSpend` after this slot).

    Every figure is public: noisy counts of released keys, the keys themselves (selected
    through the noisy threshold, or public before), the threshold, and budgets that follow
    from the configuration and released decisions; never a true count, nor how many keys,
    users or dropped contributions the slot had."""
    names = stream.level_names
    spent = {n: float(x) for n, x in zip(names, rel.eps_spent, strict=True)}
    delta = {n: float(x) for n, x in zip(names, rel.delta_spent, strict=True)}
    exact_eps = {n: _exact(x) for n, x in zip(names, rel.eps_spent, strict=True)}
    exact_delta = {n: _exact(x) for n, x in zip(names, rel.delta_spent, strict=True)}
    released_at = float(time.time() if released_at is None else released_at)
    record = releases.SlotRelease(
        **_slot_fields(stream, slot, rel.mechanism, rel.version, released_at),
        histogram=tuple(float(x) for x in rel.counts),
        fresh=bool(rel.fresh),
        spent_by_group=spent,
        schema=releases.OPEN_SCHEMA,
        delayed=False,
        keys=rel.keys,
        new_keys=tuple(k for k, new in zip(rel.keys, rel.new, strict=True) if new),
        status=rel.status,
        threshold=rel.threshold,
        retired=rel.retired,
        spent_exact_by_group=exact_eps,
        delta_spent_by_group=delta,
        delta_spent_exact_by_group=exact_delta,
    )
    levels = list(zip(names, window, stream.levels, strict=True))
    windows = {n: w for n, w, _ in levels if isinstance(w, OpenWindowSpend)}
    entry = audit.AuditRecord(
        stream=stream.id,
        slot=slot,
        mechanism=rel.mechanism,
        describe=describe,
        neighbours=stream.neighbours,
        spatial_n=None,
        noise=stream.noise,
        deployment=deployment,
        status=rel.status,
        fresh=bool(rel.fresh),
        released_at=released_at,
        delayed=False,
        weaker_guarantee=stream.weaker_guarantee,
        privacy_unit=stream.unit.as_json() if stream.unit else None,
        spent_by_group=spent,
        spent_dc_by_group={},  # one total per level: selection, dissimilarity, publication
        spent_pub_by_group={},
        window_spent_by_group={n: float(w.spent) for n, w, _ in levels},
        window_spent_exact_by_group={n: _exact(w.spent) for n, w, _ in levels},
        eps_by_group={n: w.eps for n, w, _ in levels},
        w_by_group={n: w.w for n, w, _ in levels},
        spent_exact_by_group=exact_eps,
        delta_by_group={n: lv.delta for n, _, lv in levels},
        delta_spent_by_group=delta,
        delta_spent_exact_by_group=exact_delta,
        window_delta_spent_by_group={n: float(w.delta_spent) for n, w in windows.items()},
        window_delta_spent_exact_by_group={n: _exact(w.delta_spent) for n, w in windows.items()},
    )
    recent = [*recent, [slot, bool(rel.fresh), rel.status, spent]][-RECENT:]
    return releases.encode(record), audit.encode(entry), recent


# -- local mode ---------------------------------------------------------------------------------


def encode_request(
    stream: StreamConfig, slot: int, deadline: float, request: CollectionRequest
) -> bytes:
    """A ``collection-requests`` value: the mechanism's request for the stream's ``slot``."""
    return requests.encode(
        requests.RequestRecord(
            stream.id,
            slot,
            stream.slots.start(slot),
            stream.slots.end(slot),
            deadline,
            stream.users,
            request,
        )
    )
