"""Hypothesis strategies for hostile public records: any msgpack value in any field.

Every public decoder and ingest path is fuzzed with these (``tests/fuzz``): values nest lists and
maps, carry binary, the widest integers msgpack holds, NaN and infinities, booleans and nil where
numbers or strings belong, maps with non-string keys, strings that are not UTF-8, truncated or
oversized values, and plain garbage. :func:`records` mixes them into well-formed records of a
stream, field by field, so a decoder is driven past its first check as often as it is stopped
there.
"""

from __future__ import annotations

from typing import Any

import msgpack
from hypothesis import strategies as st

INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(INT64_MIN, UINT64_MAX),
    st.sampled_from([INT64_MIN, -1, 0, 2**31, 2**53 + 1, 2**63 - 1, 2**63, UINT64_MAX]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), -0.0, 1e300, 5e-324]),
    st.text(max_size=12),
    st.binary(max_size=12),
)
"""One msgpack scalar of any type."""

values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=6), st.integers(-5, 5), st.binary(max_size=4)),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)
"""Any msgpack value: scalars, nested lists and maps (keys of several types)."""

edges = st.sampled_from(
    [
        None,
        True,
        False,
        INT64_MIN,
        -1,
        2**63,
        UINT64_MAX,
        float("nan"),
        float("inf"),
        -0.0,
        "",
        b"",
        b"\xff",
        [],
        [1],
        {},
        {"a": 1},
        [[]],
        {1: [None]},
    ]
)
"""The values each decoder is likeliest to mishandle, drawn often."""

NOT_UTF8 = b"\xa2\xff\xfe"
"""A msgpack str of two bytes that are not UTF-8."""


def pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def _with_bad_key(fields: dict[str, Any]) -> bytes:
    """``fields`` as a msgpack map with one more entry whose key is a str that is not UTF-8."""
    body = pack(fields)
    head = len(fields) + 1
    assert head < 16  # a fixmap: one header byte
    return bytes([0x80 | head]) + body[1:] + NOT_UTF8 + pack(1)


@st.composite
def records(draw: st.DrawFn, good: dict[str, st.SearchStrategy[Any]]) -> bytes | None:
    """One hostile value for a topic whose well-formed records have the fields of ``good``.

    One field is replaced by any value and the others are well formed; or each field is kept,
    replaced or dropped, and extra fields may come;
    or the whole value is another kind of hostile: garbage, a truncated record, a non-map, a
    non-UTF-8 key, a non-UTF-8 string in a field, nil.
    """
    kind = draw(
        st.sampled_from(
            ["one"] * 6 + ["fields"] * 6 + ["garbage", "truncated", "value", "key", "text", "nil"]
        )
    )
    if kind == "garbage":
        return draw(st.binary(max_size=40))
    if kind == "value":
        return pack(draw(values))
    if kind == "nil":
        return None
    fields: dict[str, Any] = {name: draw(ok) for name, ok in good.items()}
    if kind == "one" and good:  # one field off, the others well formed: past the first checks
        fields[draw(st.sampled_from(sorted(good)))] = draw(st.one_of(edges, values))
        return pack(fields)
    for name in good:
        how = draw(st.sampled_from(["ok", "ok", "ok", "any", "edge", "drop"]))
        if how == "drop":
            del fields[name]
        elif how == "any":
            fields[name] = draw(values)
        elif how == "edge":
            fields[name] = draw(edges)
    fields.update(draw(st.dictionaries(st.text(max_size=6), values, max_size=2)))
    if kind == "key" and len(fields) < 15:
        return _with_bad_key(fields)
    raw = pack(fields)
    if kind == "truncated" and len(raw) > 1:
        return raw[: draw(st.integers(1, len(raw) - 1))]
    if kind == "text" and good:
        name = draw(st.sampled_from(sorted(good)))
        fields[name] = "\x00"  # a placeholder of one byte, replaced by a non-UTF-8 str
        return pack(fields).replace(b"\xa1\x00", NOT_UTF8, 1)
    return raw
