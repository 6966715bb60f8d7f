"""The ``reports`` topic (local mode): one perturbed report per asked device per round.

Key: the user's registration index (UTF-8 decimal); value: a msgpack map (:class:`Report`).
:func:`decode` checks the shape only (whether the user was asked and whether the payload fits
the request's oracle is the collector's business) and refuses with
:class:`~app.wire.errors.BadEvent` and a dead-letter reason.

>>> r = Report("loc", "lpu", 3, "publication", 7, 0, "grr", (2,))
>>> decode(encode(r)) == r, ROUND_INDEX[r.round]
(True, 1)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.dp.local.wire import ROUNDS
from app.wire.codec import pack, unpack
from app.wire.errors import BadEvent

VERSION = 1
"""The ``reports`` layout (no ``schema`` field)."""
MAX_BYTES = 1 << 20
"""A value larger than this is ``too_large`` (OUE over 2^16 buckets is ~200 KB)."""
ROUND_INDEX: dict[str, int] = {name: i for i, name in enumerate(ROUNDS)}
"""A round's index in a slot (:data:`~app.dp.local.wire.ROUNDS`, in order)."""
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
"""What a report's integers must fit: the collector counts them in ``int64`` arrays (msgpack
also carries unsigned 64-bit integers, which would not convert)."""


@dataclass(frozen=True, slots=True)
class Report:
    """One device's answer to a request: its ``payload`` for the request's ``mechanism``,
    ``slot`` and ``round``, as user ``user`` of requirement group ``group``, perturbed by
    ``oracle``."""

    stream: str
    mechanism: str
    slot: int
    round: str
    user: int
    group: int
    oracle: str
    payload: tuple[int, ...]


def encode(report: Report) -> bytes:
    """The bytes of one ``reports`` value."""
    return pack(
        {
            "mechanism": report.mechanism,
            "slot": report.slot,
            "round": report.round,
            "user": report.user,
            "group": report.group,
            "oracle": report.oracle,
            "payload": [int(x) for x in report.payload],
            "stream": report.stream,
        }
    )


def decode(raw: bytes | None) -> Report:
    """One ``reports`` value, or :class:`~app.wire.errors.BadEvent`. ``mechanism`` and
    ``oracle`` are not checked (``""`` when absent or not a string): the request of the round
    says which were asked."""
    if raw is None:
        raise BadEvent("undecodable", "null value")
    if len(raw) > MAX_BYTES:
        raise BadEvent("too_large", f"{len(raw)} bytes, more than {MAX_BYTES}")
    try:
        rep = unpack(raw)
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
    if type(rnd) is not str or rnd not in ROUND_INDEX:
        raise BadEvent("wrong_type", "round must be dissimilarity or publication")
    if not all(type(x) is int and _INT64_MIN <= x <= _INT64_MAX for x in (slot, user, group)):
        raise BadEvent("wrong_type", "slot, user and group must be 64-bit signed integers")
    if type(payload) is not list or not all(
        type(x) is int and _INT64_MIN <= x <= _INT64_MAX for x in payload
    ):
        raise BadEvent("wrong_type", "payload must be a list of 64-bit signed integers")
    return Report(
        stream,
        _text(rep, "mechanism"),
        slot,
        rnd,
        user,
        group,
        _text(rep, "oracle"),
        tuple(payload),
    )


def _text(rep: dict[str, Any], name: str) -> str:
    got = rep.get(name)
    return got if type(got) is str else ""
