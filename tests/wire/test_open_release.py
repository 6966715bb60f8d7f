"""An open stream's ``releases`` record (layout 2): what the decoder refuses, and that a labels
stream's record is still layout 1 with the bytes it always had (``test_golden.py`` pins both)."""

from __future__ import annotations

from dataclasses import replace

import msgpack
import pytest

from app.wire import releases
from app.wire.errors import BadRecordError

OPEN = releases.SlotRelease(
    "urls", 3, 0.0, 60.0, (5.0, 9.0, 0.0), True, "open_uniform", {"s": 0.25}, 1, 2,
    keys=("/a", "/b", "/c"), new_keys=("/c",), status="publish", threshold=9, retired=(),
    spent_exact_by_group={"s": "1/4"}, delta_spent_by_group={"s": 1e-6},
    delta_spent_exact_by_group={"s": "1/1000000"},
)  # fmt: skip


def _raw(**change) -> bytes:
    fields = msgpack.unpackb(releases.encode(OPEN), raw=False)
    fields.update(change)
    for name in [k for k, v in change.items() if v is None]:
        del fields[name]
    return msgpack.packb(fields, use_single_float=False)


def test_an_open_record_round_trips_as_a_key_count_map() -> None:
    got = releases.decode(releases.encode(OPEN))
    assert got == OPEN and got.is_open
    assert got.key_counts() == {"/a": 5.0, "/b": 9.0, "/c": 0.0}
    assert list(got.to_json()["keys"]) == ["/a", "/b", "/c"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"keys": ["/b", "/a", "/c"]}, "sorted and distinct"),
        ({"keys": ["/a", "/a", "/c"]}, "sorted and distinct"),
        ({"keys": ["/a", "/b"]}, "2 keys for 3 counts"),
        ({"new_keys": ["/z"]}, "new_keys among them"),
        ({"keys": ["/a", 2, "/c"]}, "strings"),
        ({"threshold": None}, "'threshold' missing"),
        ({"threshold": True}, "'threshold' missing or mistyped"),
        ({"delta_spent_by_group": {"s": "x"}}, "spending maps"),
    ],
)
def test_a_malformed_open_record_is_refused(change, why) -> None:
    with pytest.raises(BadRecordError, match=why):
        releases.decode(_raw(**change))


def test_a_labels_record_stays_layout_1() -> None:
    labels = replace(
        OPEN, keys=None, new_keys=None, status=None, threshold=None, retired=None,
        spent_exact_by_group=None, delta_spent_by_group=None, delta_spent_exact_by_group=None,
        schema=releases.LABELS_SCHEMA,
    )  # fmt: skip
    fields = msgpack.unpackb(releases.encode(labels), raw=False)
    assert fields["schema"] == 1 and not set(releases.OPEN_FIELDS) & set(fields)
    assert releases.decode(releases.encode(labels)).key_counts() == {}
