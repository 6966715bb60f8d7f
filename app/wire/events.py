"""The ``events`` topic (central mode): the instrumented applications' raw events.

Key: the user id (UTF-8); value: a msgpack map (:class:`Event`). The rules an event must follow
are stated once, here, over a whole batch at a time (:func:`decode_batch`: numpy and ``map``
over columns, never a Python loop per event on a good batch); :func:`decode` is a batch of one.
The collector's fast path and its event-by-event reference path both start from the columns
:func:`decode_batch` returns, so they cannot disagree on what is valid.

The rules, in the order a refusal is named (the first that fails gives the reason):

1. a value is present (``undecodable``) and at most :data:`MAX_BYTES` long (``too_large``);
2. it decodes as msgpack (``undecodable``) to a map (``not_a_map``);
3. ``stream``, ``user``, ``ts`` and ``value`` are present, first missing named
   (``missing_field``);
4. ``stream`` is a string (``wrong_type``) naming a known stream (``unknown_stream``);
5. ``user`` is a non-empty string or an int (``wrong_type``; an int becomes its decimal text);
6. ``ts`` is an int or a float (``wrong_type``) in ``[0, 1e11)`` (``bad_time``);
7. ``value`` is an index in ``[0, d)`` or one of the stream's labels (``out_of_domain``), and
   nothing else (``wrong_type``); an open-domain stream's (``domain: open``) is the key, a
   non-empty string (``wrong_type``) of at most the stream's ``max_key_chars`` characters
   (``key_too_long``);
8. a sum stream's event has ``amount`` (``missing_field``), a number (``wrong_type``), finite
   and ``>= 0`` (``bad_amount``).

>>> domains = {"clicks": Domain(3, {"news": 0, "sport": 1, "music": 2})}
>>> decode(encode(Event("clicks", "u1", 10.5, "news")), domains)
Event(stream='clicks', user='u1', ts=10.5, value=0, amount=None)
>>> decode(encode(Event("clicks", 1, 1, 10)), domains)
Traceback (most recent call last):
...
app.wire.errors.BadEvent: out_of_domain: index not in [0, 3)
>>> urls = {"urls": Domain(0, {}, open=True, max_key_chars=8)}
>>> decode(encode(Event("urls", "u1", 10.5, "a.com/x")), urls)
Event(stream='urls', user='u1', ts=10.5, value='a.com/x', amount=None)
>>> decode(encode(Event("urls", "u1", 10.5, "a.com/xyz")), urls)
Traceback (most recent call last):
...
app.wire.errors.BadEvent: key_too_long: key of 9 characters, more than 8
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from operator import is_, itemgetter
from typing import Any, Protocol, cast

import msgpack
import numpy as np
import numpy.typing as npt

from app.wire.codec import pack
from app.wire.errors import REASONS, BadEvent

VERSION = 1
"""The ``events`` layout (no ``schema`` field: events are the hot path)."""
MAX_BYTES = 64 << 10
"""A value larger than this is ``too_large``, refused before it is decoded (an event is about
100 bytes; junk must cost neither a decode nor memory)."""
TIME_LIMIT = 1e11
"""Event times are Unix seconds in ``[0, TIME_LIMIT)``."""
FIELDS = ("stream", "user", "ts", "value")
"""The fields every event carries, in the order a missing one is named."""


@dataclass(frozen=True, slots=True)
class Event:
    """One event: ``user`` saw ``value`` (an index or a label) at ``ts`` in ``stream``;
    ``amount`` for a sum stream. Decoded, ``user`` is a string and ``value`` an index."""

    stream: str
    user: str | int
    ts: float
    value: int | str
    amount: float | None = None


def encode(event: Event) -> bytes:
    """The bytes of one ``events`` value (``amount`` only when given)."""
    fields: dict[str, Any] = {
        "stream": event.stream,
        "user": event.user,
        "ts": event.ts,
        "value": event.value,
    }
    if event.amount is not None:
        fields["amount"] = event.amount
    return pack(fields)


class _Stream(Protocol):
    @property
    def d(self) -> int: ...

    @property
    def labels(self) -> Sequence[str]: ...

    @property
    def sums(self) -> bool: ...

    @property
    def is_open(self) -> bool: ...

    @property
    def max_key_chars(self) -> int: ...


@dataclass(frozen=True)
class Domain:
    """What validating a stream's values needs: ``d``, the label index, whether events
    carry ``amount`` (a sum stream: a value decodes to ``(index, amount)``), and for an
    open-domain stream (``open``) the longest key."""

    d: int
    index: dict[str, int]
    sums: bool = False
    open: bool = False
    max_key_chars: int = 0

    @classmethod
    def of(cls, stream: _Stream) -> Domain:
        index = {label: i for i, label in enumerate(stream.labels)}
        return cls(stream.d, index, stream.sums, stream.is_open, stream.max_key_chars)


CODE = {reason: i + 1 for i, reason in enumerate(REASONS)}
"""A reason's code in :attr:`EventBatch.codes` (0: valid)."""
_unpackb = partial(msgpack.unpackb, raw=False, strict_map_key=False)
_EMPTY: dict[str, Any] = {}
_NO = object()
"""A field's place holder where it is missing."""


@dataclass(frozen=True, slots=True)
class EventBatch:
    """A decoded batch, as columns: for record ``i``, ``codes[i]`` is 0 when it is a valid
    event (else its reason's :data:`CODE`) and then ``streams[i]``, ``users[i]`` (a string),
    ``ts[i]``, ``values[i]`` (an index) and, for a sum stream, ``amounts[i]`` are its fields;
    an open-domain stream's event has its key in ``keys[i]`` (and 0 in ``values[i]``).
    Invalid records hold place holders; :meth:`error` says what is wrong with one."""

    streams: list[str]
    users: list[str]
    ts: npt.NDArray[np.float64]
    values: list[int]
    amounts: npt.NDArray[np.float64]
    codes: npt.NDArray[np.int8]
    details: dict[int, str]
    kinds: set[str]
    """The stream ids of the batch (``""`` among them when a record is refused)."""
    keys: list[str] | None = None
    """The keys of the open-domain streams' events (``""`` at other records); None when the
    batch holds no open-domain stream."""

    def error(self, i: int) -> BadEvent:
        """The refusal of record ``i`` (which must be invalid)."""
        return BadEvent(REASONS[int(self.codes[i]) - 1], self.details.get(i, ""))

    def refuse(self, where: npt.NDArray[np.bool_], reason: str, detail: Any = "") -> None:
        """Refuse the records of ``where`` not refused yet, for a rule of the reader's own
        (the service's: the key, the partition, the clock)."""
        refuse(self.codes, self.details, where, reason, detail)

    def event(self, i: int) -> Event:
        """Record ``i`` as an :class:`Event`, or its :class:`BadEvent` raised."""
        if self.codes[i]:
            raise self.error(i)
        amount = float(self.amounts[i])
        key = self.keys[i] if self.keys is not None else ""
        return Event(
            self.streams[i],
            self.users[i],
            float(self.ts[i]),
            key or self.values[i],
            None if math.isnan(amount) else amount,
        )


class _Rules:
    """One batch's refusals, first reason first (see the module)."""

    def __init__(self, n: int) -> None:
        self.codes = np.zeros(n, dtype=np.int8)
        self.details: dict[int, str] = {}

    def fail(self, bad: npt.NDArray[np.bool_], reason: str, detail: Any = "") -> list[int]:
        """Refuse the records of ``bad`` not refused yet (see :func:`refuse`)."""
        return refuse(self.codes, self.details, bad, reason, detail)

    def fail_one(self, i: int, reason: str, detail: str) -> None:
        """Refuse record ``i`` (not refused yet)."""
        self.codes[i] = CODE[reason]
        self.details[i] = detail

    def clean(self, column: list[Any], holder: Any) -> None:
        """Put ``holder`` in ``column`` at every refused record, so later rules can read every
        record (refusals are rare: a loop over them)."""
        if self.details:
            for i in self.details:
                column[i] = holder


def refuse(
    codes: npt.NDArray[np.int8],
    details: dict[int, str],
    where: npt.NDArray[np.bool_],
    reason: str,
    detail: Any,
) -> list[int]:
    """Give the records of ``where`` not refused yet ``reason`` and ``detail`` (a text, or a
    function of the record's index); return their indices."""
    new: list[int] = np.flatnonzero(where & (codes == 0)).tolist()
    if new:
        codes[new] = CODE[reason]
        for i in new:
            details[i] = detail(i) if callable(detail) else detail
    return new


def _mask(items: Sequence[Any], want: Any) -> npt.NDArray[np.bool_]:
    """Elementwise ``item is want``, as a bool array."""
    return np.fromiter(map(is_, items, repeat(want)), dtype=bool, count=len(items))


def _typed(column: list[Any], kinds: tuple[type, ...]) -> npt.NDArray[np.bool_] | None:
    """Where ``column``'s exact types are not among ``kinds`` (None: nowhere)."""
    if set(map(type, column)) <= set(kinds):
        return None
    types = list(map(type, column))
    out = _mask(types, kinds[0])
    for kind in kinds[1:]:
        out |= _mask(types, kind)
    return ~out


def _fields(
    raws: Sequence[bytes | None], rules: _Rules
) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """Rules 1-3: each value's map and the columns of the four fields (place holders where
    refused): over the whole batch at once, or, when some value breaks a rule, one by one."""
    try:
        if max(map(len, raws)) <= MAX_BYTES:  # type: ignore[arg-type] # None: TypeError
            # msgpack's defaults (string keys only) are faster; other keys go one by one
            maps = list(map(msgpack.unpackb, cast(Sequence[bytes], raws)))
            return maps, [list(map(get, maps)) for get in _GETTERS]  # not a map: TypeError
    except Exception:  # noqa: BLE001, S110 - some value breaks a rule: record by record
        pass
    maps = _maps(raws, rules)
    out = []
    for name in FIELDS:
        column = list(map(dict.get, maps, repeat(name), repeat(_NO)))
        rules.fail(_mask(column, _NO), "missing_field", name)
        out.append(column)
    return maps, out


_GETTERS = tuple(map(itemgetter, FIELDS))


def _maps(raws: Sequence[bytes | None], rules: _Rules) -> list[dict[str, Any]]:
    """Rules 1-2, record by record: each value's map (an empty one where refused)."""
    out: list[dict[str, Any]] = [_EMPTY] * len(raws)
    for i, raw in enumerate(raws):
        if raw is None:
            rules.fail_one(i, "undecodable", "null value")
        elif len(raw) > MAX_BYTES:
            rules.fail_one(i, "too_large", f"{len(raw)} bytes, more than {MAX_BYTES}")
        else:
            try:
                value = _unpackb(raw)
            except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
                rules.fail_one(i, "undecodable", type(exc).__name__)
                continue
            if type(value) is dict:
                out[i] = value
            else:
                rules.fail_one(i, "not_a_map", type(value).__name__)
    return out


def decode_batch(raws: Sequence[bytes | None], domains: Mapping[str, Domain]) -> EventBatch:
    """Decode and check a batch of ``events`` values (the rules of the module, over columns)."""
    n = len(raws)
    rules = _Rules(n)
    maps, (streams, users, stamps, values) = _fields(raws, rules)
    # 4. stream: a known stream's id (typed before anything hashes it: a list is unhashable)
    if (bad := _typed(streams, (str,))) is not None:
        rules.fail(bad, "wrong_type", "stream must be a string")
    rules.clean(streams, "")
    kinds = set(streams)
    if not kinds <= domains.keys():
        known = np.fromiter(map(domains.__contains__, streams), dtype=bool, count=n)
        rules.fail(~known, "unknown_stream", lambda i: streams[i][:64])
        rules.clean(streams, "")
    # 5. user: a non-empty string, or an int (its decimal text)
    users = _users(users, rules)
    # 6. ts: a number in [0, TIME_LIMIT)
    if (bad := _typed(stamps, (float, int))) is not None:
        rules.fail(bad, "wrong_type", "ts must be a number")
    rules.clean(stamps, 0.0)
    ts = np.array(stamps, dtype=np.float64)
    plausible = (ts >= 0.0) & (ts < TIME_LIMIT)
    if not plausible.all():
        rules.fail(
            ~plausible, "bad_time", lambda i: f"ts {float(ts[i])!r} is not a plausible Unix time"
        )
        ts[~plausible] = 0.0
    # 7. value: an index in [0, d) or a label (an open stream's: a key); 8. a sum's amount
    keys = None
    if any(domains[s].open for s in kinds if s in domains):  # kinds: refused ids too
        keys = _keys(values, streams, domains, rules)
    values = _values(values, streams, domains, rules, keys)
    amounts = _amounts(maps, streams, domains, rules)
    kinds = set(streams) if rules.details else kinds
    if keys is not None and rules.details:
        rules.clean(keys, "")
    return EventBatch(streams, users, ts, values, amounts, rules.codes, rules.details, kinds, keys)


def _users(users: list[Any], rules: _Rules) -> list[str]:
    """Rule 5 over the ``user`` column: every valid user as a string."""
    if set(map(type, users)) == {str}:
        numbers = None
    else:
        if (bad := _typed(users, (str, int))) is not None:
            rules.fail(bad, "wrong_type", _USER)
        rules.clean(users, "")
        numbers = _typed(users, (str,))
    if numbers is not None:  # ints become their decimal text
        if not numbers.all():
            for i in np.flatnonzero(numbers).tolist():
                users[i] = str(users[i])
        else:
            users = list(map(str, users))
    if not all(users):
        empty = ~np.fromiter(map(bool, users), dtype=bool, count=len(users))
        rules.fail(empty, "wrong_type", _USER)
    return users


_USER = "user must be a non-empty string or an int"


def _keys(
    values: list[Any], streams: list[str], domains: Mapping[str, Domain], rules: _Rules
) -> list[str]:
    """Rule 7 of the open-domain streams' records: their keys (``""`` elsewhere), each
    checked, and a 0 in ``values`` where they were (the rest of rule 7 passes over them).
    Columnar when the batch is one open stream's, else a loop over its open records."""
    n = len(values)
    kinds = set(streams)
    if len(kinds) == 1 and set(map(type, values)) == {str}:  # one open stream: the whole column
        keys, limit = values[:], domains[streams[0]].max_key_chars
        values[:] = repeat(0, n)
        lengths = np.fromiter(map(len, keys), dtype=np.int64, count=n)
        if lengths.min() < 1 or lengths.max() > limit:
            rules.fail(lengths < 1, "wrong_type", _KEY)
            rules.fail(lengths > limit, "key_too_long", lambda i: _too_long(int(lengths[i]), limit))
        return keys
    keys = [""] * n
    opens = {s for s in kinds if s and domains[s].open}
    at = np.flatnonzero(np.fromiter(map(opens.__contains__, streams), bool, count=n)).tolist()
    wrong = np.zeros(n, dtype=bool)
    for i in at:  # (mixed batches: the reference path's, and refusals)
        key, values[i] = values[i], 0
        if rules.codes[i]:
            continue
        limit = domains[streams[i]].max_key_chars
        if type(key) is not str or not key:
            wrong[i] = True
        elif len(key) > limit:
            rules.fail_one(i, "key_too_long", _too_long(len(key), limit))
        else:
            keys[i] = key
    rules.fail(wrong, "wrong_type", _KEY)
    return keys


_KEY = "value must be a key: a non-empty string"


def _too_long(length: int, limit: int) -> str:
    return f"key of {length} characters, more than {limit}"


def _values(
    values: list[Any],
    streams: list[str],
    domains: Mapping[str, Domain],
    rules: _Rules,
    keys: list[str] | None = None,
) -> list[int]:
    """Rule 7 over the ``value`` column: every valid value as its index (an open stream's
    records, whose ``keys`` are checked already, hold 0)."""
    n = len(values)
    rules.clean(values, 0)
    types = set(map(type, values))
    kinds = set(streams)  # refused records: ""
    if keys is not None and not any(not domains[s].open for s in kinds if s):
        return values  # open streams only: their keys are checked, values are 0
    if types == {str} and len(kinds) == 1 and streams[0]:  # one stream's labels: one map
        values = list(map(domains[streams[0]].index.get, values, repeat(-1)))
        if -1 in values:
            rules.fail(np.array(values) == -1, "out_of_domain", _LABEL)
            rules.clean(values, 0)
        return values  # a label's index is in [0, d)
    if str in types:  # labels among other values, or of several streams
        at = np.flatnonzero(_mask(list(map(type, values)), str)).tolist()
        miss = np.zeros(n, dtype=bool)
        for i in at:  # (the reference path's batches)
            domain = domains.get(streams[i])
            values[i] = -1 if domain is None else domain.index.get(values[i], -1)
            miss[i] = values[i] == -1
        rules.fail(miss, "out_of_domain", _LABEL)
        types = set(map(type, values))
    if types != {int} and (bad := _typed(values, (int,))) is not None:
        rules.fail(bad, "wrong_type", "value must be an int or a label")
    rules.clean(values, 0)
    ds = {s: max(domains[s].d, domains[s].open) for s in kinds if s}  # open: value 0
    d: Any = next(iter(ds.values())) if len(kinds) == 1 and ds else None
    if d is None:  # several streams, or refused records: d per record
        d = np.fromiter(map(ds.get, streams, repeat(0)), dtype=np.int64, count=n)
    vals = np.array(values, dtype=np.float64)  # exact for the indices it must tell apart
    inside = (vals >= 0) & (vals < d)
    if not inside.all():
        rules.fail(
            ~inside, "out_of_domain", lambda i: f"index not in [0, {np.broadcast_to(d, n)[i]})"
        )
        rules.clean(values, 0)
    return values


_LABEL = "label not in the stream's labels"


def _amounts(
    maps: list[dict[str, Any]], streams: list[str], domains: Mapping[str, Domain], rules: _Rules
) -> npt.NDArray[np.float64]:
    """Rule 8: each sum stream event's amount (NaN for other records)."""
    n = len(maps)
    out = np.full(n, np.nan)
    sums = {s for s in set(streams) if s and domains[s].sums}
    if not sums:
        return out
    mine = np.fromiter(map(sums.__contains__, streams), dtype=bool, count=n)
    column = list(map(dict.get, maps, repeat("amount"), repeat(_NO)))
    missing = mine & _mask(column, _NO)
    rules.fail(missing, "missing_field", "amount")
    bad = _typed(column, (float, int))
    if bad is not None:
        rules.fail(mine & bad, "wrong_type", "amount must be a number")
    at = np.flatnonzero(mine & (rules.codes == 0)).tolist()
    out[at] = [float(column[i]) for i in at]
    wrong = np.zeros(n, dtype=bool)
    wrong[at] = ~((out[at] >= 0.0) & (out[at] < math.inf))
    rules.fail(
        wrong,
        "bad_amount",
        lambda i: f"amount must be a finite number >= 0, got {float(out[i])!r}",
    )
    out[~mine | (rules.codes != 0)] = np.nan
    return out


def decode(raw: bytes | None, domains: Mapping[str, Domain]) -> Event:
    """One ``events`` value as a decoded :class:`Event`, or :class:`BadEvent`."""
    return decode_batch([raw], domains).event(0)
