"""The open-domain partial on the internal wire (issue 36): its bytes, its round trip, and every
hostile value refused as an :class:`InternalError`, never another exception."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.stream.internal import (
    MAX_CELLS,
    MAX_CHUNKS,
    MAX_COUNT,
    MAX_KEY_CHARS,
    InternalError,
    OpenPartial,
    decode,
)


def _str(text: str) -> bytes:
    """A msgpack fixstr (under 32 bytes), written by hand from the spec."""
    raw = text.encode()
    assert len(raw) < 32
    return bytes([0xA0 | len(raw)]) + raw


def test_the_bytes_are_the_documented_map():
    """Written by hand from the msgpack spec: a map of 9 fields in the class's order."""
    p = OpenPartial("urls", 7, 1, 4, ("a", "bc"), [3, 0, 1, 2])
    want = (
        b"\x89"
        + _str("kind")
        + _str("open_partial")
        + _str("stream")
        + _str("urls")
        + _str("slot")
        + b"\x07"
        + _str("partition")
        + b"\x01"
        + _str("partitions")
        + b"\x04"
        + _str("keys")
        + b"\x92"
        + _str("a")
        + _str("bc")
        + _str("counts")
        + b"\x94\x03\x00\x01\x02"
        + _str("chunk")
        + b"\x00"
        + _str("chunks")
        + b"\x01"
    )
    assert p.encode() == want
    assert decode(want) == p


KEYS = st.lists(st.text(min_size=1, max_size=20), max_size=30, unique=True).map(sorted)


@settings(max_examples=200, deadline=None)
@given(
    keys=KEYS,
    groups=st.integers(1, 4),
    slot=st.integers(0, 2**40),
    partitions=st.integers(1, 64),
    chunks=st.integers(1, 9),
    data=st.data(),
)
def test_every_well_formed_partial_round_trips(keys, groups, slot, partitions, chunks, data):
    cells = groups * len(keys)
    counts = data.draw(st.lists(st.integers(0, MAX_COUNT), min_size=cells, max_size=cells))
    p = OpenPartial(
        "s",
        slot,
        data.draw(st.integers(0, partitions - 1)),
        partitions,
        tuple(keys),
        counts,
        data.draw(st.integers(0, chunks - 1)),
        chunks,
    )
    assert decode(p.encode()) == p


def _raw(**change):
    fields = {
        "kind": "open_partial",
        "stream": "s",
        "slot": 1,
        "partition": 0,
        "partitions": 2,
        "keys": ["a", "b"],
        "counts": [1, 2],
        "chunk": 0,
        "chunks": 1,
    }
    fields.update(change)
    return msgpack.packb({k: v for k, v in fields.items() if v is not ...})


@pytest.mark.parametrize(
    "change",
    [
        {"keys": ["b", "a"]},  # not sorted
        {"keys": ["a", "a"]},  # not distinct
        {"keys": ["", "a"]},  # empty key
        {"keys": ["a", "x" * (MAX_KEY_CHARS + 1)]},
        {"keys": ["a", 3]},
        {"keys": ["a", b"b"]},
        {"keys": "ab"},
        {"keys": ...},
        {"counts": [1, 2, 3]},  # not groups x keys
        {"counts": []},  # keys without counts
        {"keys": [], "counts": [1]},  # counts without keys
        {"counts": [1, -1]},
        {"counts": [1, 1.5]},  # counts of users are whole
        {"counts": [1, MAX_COUNT + 1]},
        {"counts": [1, True]},
        {"counts": [1, None]},
        {"counts": ...},
        {"chunk": 1},  # chunk out of 0 .. chunks - 1
        {"chunk": -1},
        {"chunks": 0},
        {"chunks": MAX_CHUNKS + 1},
        {"chunks": ...},
        {"slot": -1},
        {"slot": "1"},
        {"partition": 2**16},
        {"partitions": 0},
        {"stream": ""},
        {"stream": "x" * 300},
    ],
)
def test_a_hostile_open_partial_is_an_internal_error(change):
    with pytest.raises(InternalError):
        decode(_raw(**change))


def test_too_many_cells_are_refused():
    keys = [f"{i:08d}" for i in range(MAX_CELLS // 2 + 1)]
    with pytest.raises(InternalError, match="counts"):
        decode(_raw(keys=keys, counts=[0] * (2 * len(keys))))


def test_an_empty_slot_is_one_chunk_without_keys():
    p = OpenPartial("s", 3, 0, 1, (), [])
    assert decode(p.encode()) == p


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            ["stream", "slot", "partition", "partitions", "keys", "counts", "chunk", "chunks"]
        ),
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**64 - 1)
        | st.floats()
        | st.text(max_size=5)
        | st.lists(st.integers(-3, 3) | st.text(max_size=3), max_size=4),
    )
)
def test_any_map_of_the_kind_decodes_or_is_an_internal_error(fields):
    raw = msgpack.packb({"kind": "open_partial", **fields})
    try:
        p = decode(raw)
    except InternalError:
        return
    assert isinstance(p, OpenPartial) and list(p.keys) == sorted(set(p.keys))
