"""The replay's file readers against hostile rows (hypothesis): they never raise, every line
that holds something gives exactly one row or one named bad row, and times in any zone read
as the same instant."""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from app.tools.replay.read import BadRow, Row, file_format, parse_ts, read_rows

LABELS = frozenset({"a", "b", "7"})
JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
FIELDS = st.sampled_from(["user", "ts", "value", "level", "amount", "other"])


def _check(found: list[Row | BadRow]) -> None:
    for r in found:
        assert isinstance(r, Row | BadRow)
        assert r.line >= 1
        if isinstance(r, Row):
            assert r.user and isinstance(r.user, str)
            assert isinstance(r.ts, float) and math.isfinite(r.ts)
            assert r.value is not None or r.level is not None
        else:
            assert str(r).startswith(f"line {r.line}: {r.reason}")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_as_json_lines_gives_one_outcome_per_line(text: str) -> None:
    found = list(read_rows(io.StringIO(text), "jsonl", UTC))
    _check(found)
    lines = io.StringIO(text).readlines()
    assert [r.line for r in found] == [i for i, t in enumerate(lines, 1) if t.strip()]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(FIELDS, JSON, max_size=6), max_size=8))
def test_hostile_json_objects_are_rows_or_named_bad_rows(objs: list[dict]) -> None:
    text = "".join(json.dumps(o) + "\n" for o in objs)
    found = list(read_rows(io.StringIO(text), "jsonl", UTC))
    _check(found)
    assert len(found) == len(objs)
    for obj, r in zip(objs, found, strict=True):
        if "user" not in obj or "ts" not in obj:
            assert isinstance(r, BadRow)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_after_a_header_as_csv_never_raises(text: str) -> None:
    found = list(read_rows(io.StringIO("user,ts,value\n" + text), "csv", UTC, LABELS))
    _check(found)
    assert len(found) <= text.count("\n") + text.count("\r") + 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=8).filter(lambda u: u.strip() == u and u.isprintable()),
            st.floats(0, 4e9),
            st.sampled_from(["a", "b", "7", "3"]),
        ),
        max_size=10,
    )
)
def test_csv_rows_read_back_as_written(rows: list[tuple[str, float, str]]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["user", "ts", "value"])
    w.writerows((u, repr(t), v) for u, t, v in rows)
    found = list(read_rows(io.StringIO(buf.getvalue()), "csv", UTC, LABELS))
    assert [(r.user, r.ts, r.value) for r in found if isinstance(r, Row)] == [
        (u, t, v if v in LABELS else int(v)) for u, t, v in rows
    ]
    assert not [r for r in found if isinstance(r, BadRow)]


@given(
    st.datetimes(min_value=datetime(1971, 1, 2), max_value=datetime(2200, 1, 1)),
    st.integers(-14 * 60, 14 * 60),
)
def test_a_time_reads_as_the_same_instant_in_any_zone(naive: datetime, minutes: int) -> None:
    zone = timezone(timedelta(minutes=minutes))
    instant = naive.replace(tzinfo=zone).timestamp()
    assert parse_ts(naive.replace(tzinfo=zone).isoformat(), UTC) == instant
    assert parse_ts(naive.isoformat(), zone) == instant  # a naive time is read in --tz
    assert parse_ts(instant, zone) == instant  # Unix seconds have no zone


def test_bad_rows_name_their_line_and_reason() -> None:
    text = "user,ts,value\nu1,10,a\nu2,never,a\nu3,11\n,12,a\nu4,nan,b\nu5,13,,\n"
    found = list(read_rows(io.StringIO(text), "csv", UTC, LABELS))
    assert [(r.line, r.reason) for r in found if isinstance(r, BadRow)] == [
        (3, "bad_field"),
        (4, "bad_row"),
        (5, "bad_field"),
        (6, "bad_field"),
        (7, "bad_row"),
    ]
    assert [r.user for r in found if isinstance(r, Row)] == ["u1"]
    assert list(read_rows(io.StringIO("who,when\nx,1\n"), "csv", UTC))[0].reason == "bad_header"


def test_a_level_alone_is_a_preference_and_json_keeps_the_wire_types() -> None:
    text = '{"user": 5, "ts": 1, "level": "relaxed"}\n{"user": "u", "ts": "2", "value": 3}\n'
    pref, ev = read_rows(io.StringIO(text), "jsonl", UTC)
    assert (pref.user, pref.value, pref.level) == ("5", None, "relaxed")
    assert (ev.ts, ev.value) == (2.0, 3)


def test_the_format_follows_the_extension_then_the_content() -> None:
    from pathlib import Path

    assert file_format(Path("x.csv"), "{") == "csv"
    assert file_format(Path("x.ndjson"), "user") == "jsonl"
    assert file_format(Path("x.txt"), '  {"user"') == "jsonl"
    assert file_format(Path("x"), "user,ts") == "csv"
