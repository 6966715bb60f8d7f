"""Issue 31 §6: every public topic decoder, fed any msgpack value in any field, either decodes a
well-typed record or refuses it with a :class:`BadEvent` whose reason is a dead-letter reason;
nothing else escapes, so one record can never stop the worker that reads it."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from app.dp.local.wire import CollectionRequest
from app.stream.errors import BadEvent
from app.stream.records import REASONS, Domain, decode_preference, decode_report
from tests.fuzz.hostile import NOT_UTF8, pack, records, values
from tests.wire.shapes import decode_event

DOMAINS = {
    "c": Domain(3, {"a": 0, "b": 1, "c": 2}),
    "s": Domain(2, {"n": 0, "s": 1}, sums=True),
}
EVENT = {
    "stream": st.sampled_from(["c", "s", "nope"]),
    "user": st.sampled_from(["u1", "u2", 7]),
    "ts": st.sampled_from([0, 10.5, 1e10]),
    "value": st.sampled_from([0, 2, "a", "c"]),
    "amount": st.sampled_from([0, 1.5, 100]),
}
REPORT = {
    "stream": st.sampled_from(["loc", "x"]),
    "slot": st.integers(0, 100),
    "round": st.sampled_from(["dissimilarity", "publication"]),
    "user": st.integers(0, 60),
    "group": st.integers(0, 2),
    "payload": st.lists(st.integers(0, 5), max_size=3),
}
FUZZ = settings(max_examples=200, deadline=None)


@FUZZ
@given(raw=records(EVENT))
def test_an_event_decodes_well_typed_or_is_refused_with_a_reason(raw) -> None:
    try:
        stream, user, ts, value = decode_event(raw, DOMAINS)
    except BadEvent as exc:
        assert exc.reason in REASONS
        return
    assert stream in DOMAINS and type(user) is str and user
    assert type(ts) is float and 0.0 <= ts < 1e11
    if DOMAINS[stream].sums:
        index, amount = value  # type: ignore[misc]
        assert type(amount) is float and math.isfinite(amount) and amount >= 0
    else:
        index = value
    assert type(index) is int and 0 <= index < DOMAINS[stream].d


@FUZZ
@given(raw=records({"level": st.sampled_from(["strict", "loose"])}))
def test_a_preference_decodes_to_a_level_name_or_the_default(raw) -> None:
    level = decode_preference(raw)
    assert level is None or type(level) is str


@FUZZ
@given(raw=records(REPORT))
def test_a_report_decodes_well_typed_or_is_refused_with_a_reason(raw) -> None:
    try:
        stream, slot, r, user, group, payload = decode_report(raw)
    except BadEvent as exc:
        assert exc.reason in REASONS
        return
    assert type(stream) is str and r in (0, 1)
    for x in (slot, user, group, *payload):
        assert type(x) is int and -(2**63) <= x < 2**63  # fits the collector's int64 arrays


@FUZZ
@given(
    fields=st.dictionaries(
        st.sampled_from(
            [
                "round",
                "buckets",
                "cohort",
                "oracle",
                "eps",
                "units",
                "levels",
                "mechanism",
                "slot",
                "d",
            ]
        ),
        values,
        max_size=10,
    )
)
def test_a_collection_request_is_built_or_refused_with_an_exception(fields) -> None:
    """``collection-requests`` is read back by the reports service, which refuses (logs and
    skips) whatever raises: the decoder must raise, never hang or take the process down."""
    try:
        CollectionRequest.from_dict(fields)
    except Exception:  # noqa: BLE001, S110 - any exception is a refusal the service logs
        pass


def test_the_hostile_strategy_reaches_every_kind_of_refusal() -> None:
    """The strategy is not vacuous: hand-made members of each kind are refused as expected."""
    cases = {
        b"\xc1": "undecodable",
        pack([1, 2]): "not_a_map",
        pack({"stream": ["c"], "user": "u", "ts": 1, "value": 0}): "wrong_type",
        pack({"stream": {"c": 1}, "user": "u", "ts": 1, "value": 0}): "wrong_type",
        pack({"stream": "c", "user": "u", "ts": float("nan"), "value": 0}): "bad_time",
        pack({"stream": "c", "user": "u", "ts": 1, "value": 2**64 - 1}): "out_of_domain",
        b"\x81" + NOT_UTF8 + pack(1): "undecodable",
    }
    for raw, reason in cases.items():
        try:
            decode_event(raw, DOMAINS)
        except BadEvent as exc:
            assert exc.reason == reason, (raw, exc)
        else:
            raise AssertionError(f"{raw!r} decoded")
