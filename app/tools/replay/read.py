"""Reading an events file: CSV or JSON lines, one row per event (or preference), any time zone.

A row has ``user``, ``ts`` and ``value``; a sum stream's rows also ``amount``; any row may
carry ``level``, the level the user chose at ``ts`` (what a ``preferences`` record says; an
empty ``level`` is no change, ``level`` without ``value`` a preference alone). ``ts`` is Unix
seconds or an ISO 8601 time; one without an offset is read in ``tz`` (default UTC). In a JSON
line ``value`` keeps its type as on the wire (an int is an index, a string a label); in a CSV
file a value that is not a label but an integer is an index.

A row that cannot be read is a :class:`BadRow` naming its line, never an exception: the caller
prints it, counts it and goes on (as the service dead-letters a bad event). What the service's
own decoder refuses (an unknown label, a bad amount) is refused there, by
the event rules of :mod:`app.wire.events` through the collector, not restated here.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

MAX_FIELD = 1 << 16
"""Longest CSV field read (the service refuses events over 64 KiB anyway)."""


@dataclass(frozen=True, slots=True)
class Row:
    """One usable row: an event (``value`` not None) and/or a preference (``level``)."""

    line: int
    user: str
    ts: float
    value: int | str | None
    amount: Any = None
    level: str | None = None


@dataclass(frozen=True)
class BadRow:
    """A row that could not be read: its line and why."""

    line: int
    reason: str
    detail: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}: {self.detail}"


def parse_ts(raw: Any, tz: tzinfo) -> float:
    """Unix seconds of ``raw`` (a number, a numeric string or an ISO 8601 time; naive times in
    ``tz``); :class:`ValueError` otherwise.

    >>> from datetime import timezone, timedelta
    >>> parse_ts("2024-01-01T05:30:00+05:30", timezone.utc)
    1704067200.0
    >>> parse_ts("2024-01-01 00:00", timezone(timedelta(hours=-1)))
    1704070800.0
    """
    if isinstance(raw, bool):
        raise ValueError("ts must be a number or a time, not a boolean")
    if isinstance(raw, int | float):
        ts = float(raw)
    elif isinstance(raw, str):
        text = raw.strip()
        try:
            ts = float(text)
        except ValueError:
            try:
                at = datetime.fromisoformat(text)
            except ValueError:
                raise ValueError(
                    f"ts {text[:40]!r} is neither Unix seconds nor an ISO 8601 time"
                ) from None
            ts = (at if at.tzinfo is not None else at.replace(tzinfo=tz)).timestamp()
    else:
        raise ValueError(f"ts must be a number or a time, got {type(raw).__name__}")
    if not math.isfinite(ts):
        raise ValueError(f"ts {raw!r} is not finite")
    return ts


def _text(raw: Any, name: str) -> str:
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise ValueError(f"{name} must be a string or an int")
    text = str(raw)
    text.encode("utf-8")  # surrogates (bytes that were not UTF-8) raise here
    return text


def _row(
    line: int, fields: dict[str, Any], tz: tzinfo, labels: frozenset[str] | None, csv_: bool
) -> Row:
    """A :class:`Row` from one record's fields; :class:`ValueError` or :class:`KeyError`."""
    user = _text(fields["user"], "user")
    if not user:
        raise ValueError("user is empty")
    ts = parse_ts(fields["ts"], tz)
    level = fields.get("level")
    level = _text(level, "level") if level not in (None, "") else None
    value = fields.get("value")
    if value in (None, ""):
        if level is None:
            raise KeyError("value")
        return Row(line, user, ts, None, None, level)
    if isinstance(value, str):
        value.encode("utf-8")
        if csv_ and labels is not None and value not in labels and _digits(value):
            value = int(value)
    amount = fields.get("amount")
    if csv_ and amount not in (None, ""):
        amount = float(amount)
    return Row(line, user, ts, value, amount, level)


def _digits(value: str) -> bool:
    return value.strip().lstrip("-").isdigit()


def _why(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, KeyError):
        return "missing_field", f"no {exc.args[0]!r}"
    if isinstance(exc, UnicodeError):
        return "undecodable", "not UTF-8"
    return "bad_field", str(exc)[:200]


def rows_csv(f: Iterable[str], tz: tzinfo, labels: frozenset[str] | None) -> Iterator[Row | BadRow]:
    """The rows of a CSV file with a header line naming its columns (``labels`` None: an
    open-domain stream, whose values are keys and stay strings)."""
    csv.field_size_limit(MAX_FIELD)
    reader = csv.reader(f)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        yield BadRow(1, "bad_header", str(exc))
        return
    names = [h.strip().lower() for h in header]
    if "user" not in names or "ts" not in names:
        yield BadRow(1, "bad_header", f"the header must name user and ts, got {header[:8]!r}")
        return
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield BadRow(reader.line_num, "undecodable", str(exc)[:200])
            continue
        if not cells:
            continue
        if len(cells) != len(names):
            yield BadRow(
                reader.line_num, "bad_row", f"{len(cells)} cells, the header names {len(names)}"
            )
            continue
        try:
            yield _row(reader.line_num, dict(zip(names, cells, strict=True)), tz, labels, True)
        except (ValueError, KeyError, UnicodeError, OverflowError) as exc:
            yield BadRow(reader.line_num, *_why(exc))


def rows_jsonl(f: Iterable[str], tz: tzinfo) -> Iterator[Row | BadRow]:
    """The rows of a JSON-lines file: one object per line; blank lines are skipped."""
    for line, text in enumerate(f, start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:
            yield BadRow(line, "undecodable", f"not JSON ({type(exc).__name__})")
            continue
        if not isinstance(obj, dict):
            yield BadRow(line, "not_a_map", f"a JSON {type(obj).__name__}, not an object")
            continue
        try:
            yield _row(line, obj, tz, frozenset(), False)
        except (ValueError, KeyError, UnicodeError, TypeError, OverflowError) as exc:
            yield BadRow(line, *_why(exc))


def file_format(path: Path, head: str) -> str:
    """``csv`` or ``jsonl``: by the extension, else by the first character of ``head``."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    return "jsonl" if head.lstrip().startswith("{") else "csv"


def read_rows(
    f: Iterable[str], fmt: str, tz: tzinfo, labels: frozenset[str] | None = frozenset()
) -> Iterator[Row | BadRow]:
    """The rows of an events file's lines (an open file) of format ``fmt`` (see
    :func:`file_format`); ``labels``: the stream's, None for an open-domain stream (a CSV
    value that looks like an integer is then a key, not an index)."""
    return rows_csv(f, tz, labels) if fmt == "csv" else rows_jsonl(f, tz)
