"""The ledger entry: what the ``ledger`` table holds per stream, typed, with its codec.

One entry per stream, rewritten at every step of the slot release protocol
(:mod:`app.stream.release.protocol`). It is the proof of what was spent and published:

- ``state``: the mechanism's state envelope (``Mechanism.state_dict()``), which refuses to load
  into a mechanism built with other parameters;
- ``next_slot``: the first slot not released yet;
- ``outbox``: the encoded records of the last step, ``(topic role, value)`` pairs (roles of
  ``topics/``: ``releases``, ``audit``, ``collection-requests``) in the order
  they are produced (a release and its audit record; a period mechanism may add several
  releases at once); ``published`` says whether the broker acknowledged all of them;
- ``recent``: the last releases, for ``dpstream ledger show``;
- ``local`` (:class:`LocalRound`, local mode only): ``offset`` (wall slot = ``offset`` +
  mechanism slot), ``request`` (the encoded pending collection request, or None), ``sent``,
  ``deadline`` and, for a personalized stream, ``levels`` (the book of the users' level
  changes read from ``preferences``). The codec keeps one flat map, as earlier releases wrote.

The ledger's changelog is a topic: :meth:`LedgerEntry.decode` checks every field's type, so a
value that is not an entry is a :class:`~app.stream.internal.StateError` (the release agent then
stops serving the stream, readiness red: without its ledger it cannot know what was spent).

>>> e = LedgerEntry(state={"t": 1}, next_slot=5, outbox=[("releases", b"r")])
>>> LedgerEntry.decode(e.encode()) == e
True
>>> LedgerEntry.decode(b"\\xc1", "s")
Traceback (most recent call last):
...
app.stream.internal.StateError: ledger table: value of 's' refused: not msgpack: ...
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from app.stream.internal import MAX_SLOT, StateError
from app.stream.records import pack, unpack


@dataclass
class LocalRound:
    """The local-mode part of a ledger entry: where the stream's pending request stands."""

    offset: int | None = None
    """Wall slot = ``offset`` + mechanism slot."""
    request: bytes | None = None
    """The encoded pending collection request (None: no round is open)."""
    sent: bool = True
    deadline: float = 0.0
    levels: dict[str, Any] | None = None
    """Personalized local streams: the users' level histories
    (:mod:`app.stream.release.local_levels`)."""


@dataclass
class LedgerEntry:
    """One stream's ledger entry; see the module docstring."""

    state: dict[str, Any] | None = None
    next_slot: int | None = None
    outbox: list[tuple[str, bytes]] = field(default_factory=list)
    published: bool = True
    recent: list[Any] = field(default_factory=list)
    seq: int = 0
    """Bumped at every write: the driver's cached mechanism is valid while it matches."""
    local: LocalRound = field(default_factory=LocalRound)
    """Local mode only (a central stream keeps the defaults)."""

    def encode(self) -> bytes:
        """One flat map, as earlier releases wrote it (the local fields beside the others)."""
        out = {k: v for k, v in asdict(self).items() if k != "local"}
        out["outbox"] = [[role, value] for role, value in self.outbox]
        return pack({**out, **asdict(self.local)})

    @classmethod
    def decode(cls, raw: bytes, key: str = "") -> LedgerEntry:
        """The entry ``raw`` holds (``key``: its table key, for the error); a
        :class:`~app.stream.internal.StateError` if it is not one."""
        try:
            data = unpack(raw)
        except Exception as exc:  # noqa: BLE001 - any failure of the unpacker is a refusal
            raise StateError("ledger", key, f"not msgpack: {type(exc).__name__}") from None
        why = _malformed(data)
        if why:
            raise StateError("ledger", key, why)
        local = LocalRound(**{k: v for k, v in data.items() if k in LOCAL_FIELDS})
        known = {k: v for k, v in data.items() if k in CENTRAL_FIELDS}
        known["outbox"] = [(role, bytes(value)) for role, value in data.get("outbox", [])]
        return cls(**known, local=local)

    def record(self, role: str) -> bytes | None:
        """The last value of the outbox for ``role`` (e.g. the last release), if any."""
        found = [value for r, value in self.outbox if r == role]
        return found[-1] if found else None


LOCAL_FIELDS = frozenset(LocalRound.__dataclass_fields__)
CENTRAL_FIELDS = frozenset(LedgerEntry.__dataclass_fields__) - {"local"}


def _optional(value: Any, kind: type | tuple[type, ...]) -> bool:
    return value is None or (isinstance(value, kind) and not isinstance(value, bool))


def _malformed(data: Any) -> str:
    """Why ``data`` is not an entry's map ("" when it is)."""
    if not isinstance(data, dict):
        return "not a map"
    next_slot, deadline = data.get("next_slot"), data.get("deadline", 0.0)
    outbox = data.get("outbox", [])
    checks = [
        (_optional(data.get("state"), dict), "state"),
        (_optional(next_slot, int) and (next_slot is None or 0 <= next_slot <= MAX_SLOT), "slot"),
        (isinstance(data.get("published", True), bool), "published"),
        (isinstance(data.get("recent", []), list), "recent"),
        (isinstance(data.get("seq", 0), int), "seq"),
        (_optional(data.get("offset"), int), "offset"),
        (_optional(data.get("request"), bytes), "request"),
        (isinstance(data.get("sent", True), bool), "sent"),
        (_optional(deadline, (int, float)) and math.isfinite(deadline or 0.0), "deadline"),
        (_optional(data.get("levels"), dict), "levels"),
        (
            isinstance(outbox, list)
            and all(
                isinstance(o, list | tuple)
                and len(o) == 2
                and isinstance(o[0], str)
                and isinstance(o[1], bytes)
                for o in outbox
            ),
            "outbox",
        ),
    ]
    return next((f"{name} malformed" for ok, name in checks if not ok), "")
