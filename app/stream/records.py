"""The public wire: decode and validate events, preferences and reports; encode releases, audit
records, collection requests and dead letters (the internal wire is :mod:`app.stream.internal`).

Every value is a msgpack map whose fields ``topics/*.yaml`` documents. Decoding an event is on
the hot path, so :func:`decode_event` is a plain function doing the minimum, and raises
:class:`~app.stream.errors.BadEvent` with a short reason for anything unusable.

>>> from app.stream.config import load_streams, DEFAULT_STREAMS
>>> domains = {s.id: Domain.of(s) for s in load_streams(DEFAULT_STREAMS)}
>>> raw = msgpack.packb({"stream": "clicks", "user": "u1", "ts": 10.5, "value": "news"})
>>> decode_event(raw, domains)
('clicks', 'u1', 10.5, 1)
>>> decode_event(msgpack.packb({"stream": "clicks", "user": 1, "ts": 1, "value": 10}), domains)
Traceback (most recent call last):
...
app.stream.errors.BadEvent: out_of_domain: index not in [0, 10)
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import msgpack

from app.dp import registry
from app.dp.types import Release, WindowSpend
from app.dp.wn import wn_neighbours
from app.stream.config import StreamConfig
from app.stream.errors import BadEvent

REASONS = (
    "undecodable",
    "not_a_map",
    "missing_field",
    "wrong_type",
    "unknown_stream",
    "out_of_domain",
    "bad_time",
    "key_mismatch",
    "wrong_partition",
    "bad_amount",
    "too_large",
)
"""Every dead-letter reason; the ``reason`` label of ``dpstream_dead_letters``."""


@dataclass(frozen=True)
class Domain:
    """What the hot path needs to validate a stream's values."""

    d: int
    index: dict[str, int]
    sums: bool = False
    """A sum stream: events carry ``amount`` and decode to ``(value index, amount)``."""

    @classmethod
    def of(cls, stream: StreamConfig) -> Domain:
        return cls(stream.d, {label: i for i, label in enumerate(stream.labels)}, stream.sums)


def decode_event(
    raw: bytes | None, domains: dict[str, Domain]
) -> tuple[str, str, float, int | tuple[int, float]]:
    """``(stream, user, ts, value)`` of one ``events`` value, or :class:`BadEvent`.

    ``value`` is the value's index, or for a sum stream ``(index, amount)`` with ``amount`` a
    finite number ``>= 0`` (anything else is ``bad_amount``; clipping is the collector's).

    >>> sums = {"energy": Domain(2, {"north": 0, "south": 1}, sums=True)}
    >>> ev = {"stream": "energy", "user": "u1", "ts": 5, "value": "south", "amount": 7}
    >>> decode_event(msgpack.packb(ev), sums)
    ('energy', 'u1', 5.0, (1, 7.0))
    >>> decode_event(msgpack.packb({**ev, "amount": -1.5}), sums)
    Traceback (most recent call last):
    ...
    app.stream.errors.BadEvent: bad_amount: amount must be a finite number >= 0, got -1.5
    """
    if raw is None:
        raise BadEvent("undecodable", "null value")
    if len(raw) > MAX_EVENT_BYTES:
        raise BadEvent("too_large", f"{len(raw)} bytes, more than {MAX_EVENT_BYTES}")
    try:
        ev = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
        raise BadEvent("undecodable", type(exc).__name__) from None
    if type(ev) is not dict:
        raise BadEvent("not_a_map", type(ev).__name__)
    try:
        stream, user, ts, value = ev["stream"], ev["user"], ev["ts"], ev["value"]
    except KeyError as exc:
        raise BadEvent("missing_field", str(exc.args[0])) from None
    if type(stream) is not str:
        raise BadEvent("wrong_type", "stream must be a string")
    domain = domains.get(stream)
    if domain is None:
        raise BadEvent("unknown_stream", stream[:64])
    tu = type(user)
    if tu is int:
        user = str(user)
    elif tu is not str or not user:
        raise BadEvent("wrong_type", "user must be a non-empty string or an int")
    tt = type(ts)
    if tt is int:
        ts = float(ts)
    elif tt is not float:
        raise BadEvent("wrong_type", "ts must be a number")
    if not (0.0 <= ts < 1e11) or math.isnan(ts):
        raise BadEvent("bad_time", f"ts {ts!r} is not a plausible Unix time")
    tv = type(value)
    if tv is int:
        if not 0 <= value < domain.d:
            raise BadEvent("out_of_domain", f"index not in [0, {domain.d})")
    elif tv is str:
        value = domain.index.get(value)
        if value is None:
            raise BadEvent("out_of_domain", "label not in the stream's labels")
    else:
        raise BadEvent("wrong_type", "value must be an int or a label")
    return stream, user, ts, (value, _amount(ev)) if domain.sums else value


def _amount(ev: dict[str, Any]) -> float:
    """A sum stream event's ``amount``: a finite number ``>= 0``, or :class:`BadEvent`."""
    try:
        amount = ev["amount"]
    except KeyError:
        raise BadEvent("missing_field", "amount") from None
    ta = type(amount)
    if ta is not float and ta is not int:
        raise BadEvent("wrong_type", "amount must be a number")
    amount = float(amount)
    if not (0.0 <= amount < math.inf):  # NaN fails both comparisons
        raise BadEvent("bad_amount", f"amount must be a finite number >= 0, got {amount!r}")
    return amount


def decode_preference(raw: bytes | None) -> str | None:
    """The level name of a ``preferences`` value; ``None`` for a tombstone or a bad value
    (both mean: back to the stream's default level, through the exclusion gap)."""
    if raw is None:
        return None
    try:
        pref = msgpack.unpackb(raw, raw=False)
        level = pref["level"]
    except Exception:  # noqa: BLE001 - a bad preference means the default level
        return None
    return level if isinstance(level, str) else None


MAX_DEAD_LETTER_BYTES = 64 << 10
"""Rejected values larger than this are kept truncated, with their size and sha256."""
MAX_EVENT_BYTES = 64 << 10
"""An ``events`` value larger than this is ``too_large``, refused before it is decoded (an
event is about 100 bytes; junk must cost neither a decode nor memory)."""
MAX_REPORT_BYTES = 1 << 20
"""A ``reports`` value larger than this is ``too_large`` (OUE over 2^16 buckets is ~200 KB)."""
TOO_LARGE_KEEP_BYTES = 1 << 10
"""What a ``too_large`` dead letter keeps of the value (with its size and sha256): every
rejected record queued for the dead-letter topic is thus bounded by a few KB."""
MAX_DEAD_LETTER_KEY_BYTES = 1 << 10
"""A rejected record's key is kept up to this many bytes."""


def encode_dead_letter(
    reason: str, detail: str, topic: str, partition: int, offset: int, value: bytes | None
) -> bytes:
    """A ``dead-letter`` value: why, where from, and the rejected bytes (the first
    :data:`MAX_DEAD_LETTER_BYTES` of them, with the whole value's size and sha256, so a dead
    letter always fits the producer's request size)."""
    out: dict[str, Any] = {
        "reason": reason,
        "detail": detail[:512],
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "value": value,
    }
    keep = TOO_LARGE_KEEP_BYTES if reason == "too_large" else MAX_DEAD_LETTER_BYTES
    if value is not None and len(value) > keep:
        out.update(
            value=value[:keep],
            truncated=True,
            size=len(value),
            sha256=hashlib.sha256(value).hexdigest(),
        )
    return msgpack.packb(out)


def pack(obj: dict[Any, Any]) -> bytes:
    """Encode a release, audit or ledger map (msgpack, floats as float64)."""
    out: bytes = msgpack.packb(obj, use_single_float=False)
    return out


def unpack(raw: bytes) -> dict[str, Any]:
    """Decode what :func:`pack` wrote."""
    out: dict[str, Any] = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    return out


RELEASE_SCHEMA = 1
"""Layout version of a ``releases`` record (``topics/releases.yaml``); readers check it."""

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
    if len(stream.levels) > 1:
        out["default_level"] = default.name
        out["levels"] = {lv.name: {"eps": lv.eps, "w": lv.w} for lv in stream.levels}
    return out


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
    **audit_extra: Any,
) -> tuple[bytes, bytes, list[Any]]:
    """The ``releases`` and ``audit`` values of one released slot, and the ledger's new list
    of recent releases (``window``: per level, what its ledger spent in the window of ``w``
    slots ending at the slot whose closing computed this release).

    ``released_at`` is when the release was computed (Unix seconds; None: now); ``delayed`` is
    true when the slot was held back and released at the close of a later slot (a period
    mechanism's earlier slots, published at the period's end); ``deployment`` is the identity
    the slot's noise was derived with (audit only)."""
    names = stream.level_names
    spent = {n: float(x) for n, x in zip(names, rel.spent, strict=True)}
    released_at = time.time() if released_at is None else released_at
    record = pack(
        {
            "stream": stream.id,
            "slot": slot,
            "start": stream.slots.start(slot),
            "end": stream.slots.end(slot),
            "histogram": [float(x) for x in rel.histogram],
            "fresh": bool(rel.fresh),
            "mechanism": rel.mechanism,
            "spent_by_group": spent,
            "version": rel.version,
            "schema": RELEASE_SCHEMA,
            "released_at": float(released_at),
            "delayed": bool(delayed),
            "guarantee": guarantee(stream),
        }
    )
    audit: dict[str, Any] = {
        "stream": stream.id,
        "slot": slot,
        "mechanism": rel.mechanism,
        "describe": describe,
        "neighbours": "replace" if stream.local else stream.neighbours,
        **_graph_relation(stream),
        "noise": DEVICE_NOISE if stream.local else stream.noise,
        "deployment": deployment,
        "status": rel.status,
        "fresh": bool(rel.fresh),
        "released_at": float(released_at),
        "delayed": bool(delayed),
        "weaker_guarantee": stream.weaker_guarantee,
        "privacy_unit": stream.unit.as_json() if stream.unit else None,
        "spent_by_group": spent,
        "spent_dc_by_group": dict(zip(names, map(float, rel.spent_dc), strict=True)),
        "spent_pub_by_group": dict(zip(names, map(float, rel.spent_pub), strict=True)),
        "window_spent_by_group": {n: float(w.spent) for n, w in zip(names, window, strict=True)},
        "window_spent_exact_by_group": {
            n: _exact(w.spent) for n, w in zip(names, window, strict=True)
        },
        "eps_by_group": {n: w.eps for n, w in zip(names, window, strict=True)},
        "w_by_group": {n: w.w for n, w in zip(names, window, strict=True)},
        **audit_extra,
    }
    if rel.spent_exact is not None:
        audit["spent_exact_by_group"] = {
            n: _exact(x) for n, x in zip(names, rel.spent_exact, strict=True)
        }
    recent = [*recent, [slot, bool(rel.fresh), rel.status, spent]][-RECENT:]
    return record, pack(audit), recent


# -- local mode ---------------------------------------------------------------------------------

ROUND_INDEX = {"dissimilarity": 0, "publication": 1}
"""Local mode: the two rounds of a slot, in order (``round`` field of requests and reports)."""


def encode_request(
    stream: StreamConfig, slot: int, deadline: float, request: dict[str, Any]
) -> bytes:
    """A ``collection-requests`` value: the mechanism's request for the stream's ``slot``."""
    return pack(
        {
            "stream": stream.id,
            "slot": slot,
            "start": stream.slots.start(slot),
            "end": stream.slots.end(slot),
            "deadline": deadline,
            "users": stream.users,
            "request": request,
        }
    )


def decode_report(raw: bytes | None) -> tuple[str, int, int, int, int, list[int]]:
    """``(stream, slot, round index, user, group, payload)`` of a ``reports`` value.

    Only the shape is checked here; whether the user was asked, and whether the payload fits
    the request's oracle, is the collector's business (:mod:`app.stream.collect.tally`).
    """
    if raw is None:
        raise BadEvent("undecodable", "null value")
    if len(raw) > MAX_REPORT_BYTES:
        raise BadEvent("too_large", f"{len(raw)} bytes, more than {MAX_REPORT_BYTES}")
    try:
        rep = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
        raise BadEvent("undecodable", type(exc).__name__) from None
    if type(rep) is not dict:
        raise BadEvent("not_a_map", type(rep).__name__)
    try:
        stream, slot, rnd = rep["stream"], rep["slot"], rep["round"]
        user, group, payload = rep["user"], rep["group"], rep["payload"]
    except KeyError as exc:
        raise BadEvent("missing_field", str(exc.args[0])) from None
    if type(stream) is not str:
        raise BadEvent("wrong_type", "stream must be a string")
    r = ROUND_INDEX.get(rnd) if type(rnd) is str else None
    if r is None:
        raise BadEvent("wrong_type", "round must be dissimilarity or publication")
    if not all(type(x) is int and _INT64_MIN <= x <= _INT64_MAX for x in (slot, user, group)):
        raise BadEvent("wrong_type", "slot, user and group must be 64-bit signed integers")
    if type(payload) is not list or not all(
        type(x) is int and _INT64_MIN <= x <= _INT64_MAX for x in payload
    ):
        raise BadEvent("wrong_type", "payload must be a list of 64-bit signed integers")
    return stream, slot, r, user, group, payload


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
"""What a report's integers must fit: the collector counts them in ``int64`` arrays (msgpack
also carries unsigned 64-bit integers, which would not convert)."""
