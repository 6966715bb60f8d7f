"""The packed level histories (issue 23, item 7) keep the rules of the list-of-changes ones:
the same changes kept, the same truncation, the same group for every slot (checked against the
verifier's own restatement of the rules, :mod:`app.verify.rules`)."""

from __future__ import annotations

import random

from app.dp.levels import MAX_LEVEL_CODES
from app.stream.collect.preferences import KEEP_CHANGES, Change, History, Preferences
from app.stream.config.streams import parse_stream
from app.verify import rules

STREAM = parse_stream(
    {
        "id": "s",
        "labels": ["a", "b"],
        "slot_s": 10.0,
        "grace_s": 1.0,
        "mechanism": {"name": "pba"},
        "levels": [
            {"name": "strict", "w": 4, "eps": 0.5},
            {"name": "loose", "w": 2, "eps": 1.0},
            {"name": "mid", "w": 3, "eps": 0.8},
        ],
    },
    "doc",
    {},
)
LEVELS = tuple(rules.Level(lv.name, lv.w, lv.eps) for lv in STREAM.levels)
NAMES = [None, "strict", "loose", "mid", "junk", "other junk"]


def reference_change(
    model: list[tuple[float, str | None]], level: str | None, at: float, floor: float
) -> bool:
    """The rule as the list-of-changes code applied it; whether it appended a change."""
    when = max(at, floor)
    if model and model[-1][1] == level:
        return False
    if model and when < model[-1][0]:
        when = model[-1][0]
    model.append((when, level))
    return True


def test_random_histories_match_the_list_rule_and_the_verifier():
    rng = random.Random(23)
    for trial in range(300):
        prefs = Preferences(lv.name for lv in STREAM.levels)
        model: list[tuple[float, str | None]] = []
        dropped = False
        floor = 0.0
        for _ in range(rng.randrange(1, 40)):
            floor += rng.choice([0.0, 0.0, 5.0, 10.0, 40.0])
            level = rng.choice(NAMES)
            at = floor + rng.uniform(-30.0, 30.0)
            changed = prefs.change("u", level, at, floor)
            assert (changed is not None) == reference_change(model, level, at, floor), trial
            if len(model) > KEEP_CHANGES:
                del model[0]
                dropped = True
        hist = prefs.history("u")
        assert hist == History([Change(at, lv) for at, lv in model], dropped), trial
        verified = rules.History(tuple(model), dropped)
        for slot in range(int(floor // 10) + 30):
            expected = rules.group_of(verified, slot, LEVELS, STREAM.default_level, 10.0)
            assert prefs.group(STREAM, "u", slot) == expected, (trial, slot)


def test_a_history_survives_the_levels_topic_round_trip():
    prefs = Preferences(["strict", "loose"])
    prefs.change("u", "loose", 12.5, 0.0)
    prefs.change("u", None, 31.0, 20.0)
    hist = prefs.history("u")
    assert hist is not None
    other = Preferences()
    other.restore("u", History.from_dict(hist.to_dict()))
    assert other.history("u") == hist
    assert [u for u, _ in other.histories()] == ["u"]


def test_junk_level_names_past_the_codes_read_as_the_default_level():
    prefs = Preferences(["strict", "loose", "mid"])
    for i in range(MAX_LEVEL_CODES + 10):
        prefs.change(f"junk{i}", f"name{i}", 0.0, 0.0)
    # A configured name keeps its code whatever junk came first.
    prefs.change("u", "loose", 5.0, 0.0)
    assert prefs.group(STREAM, "u", 1) is None  # the change's gap: max(w_strict, w_loose)
    assert prefs.group(STREAM, "u", 5) == 1
    # A junk name past the codes is the default level, as an unknown name always was.
    last = f"name{MAX_LEVEL_CODES + 9}"
    hist = prefs.history(f"junk{MAX_LEVEL_CODES + 9}")
    assert hist is not None and hist.changes[0].level is None and last not in str(hist)
    assert prefs.group(STREAM, f"junk{MAX_LEVEL_CODES + 9}", 9) == STREAM.default_level


def test_one_users_history_is_a_few_dozen_bytes():
    prefs = Preferences(["strict", "loose"])
    prefs.change("user-123456", "loose", 10.0, 0.0)
    assert len(prefs.users["user-123456"]) == 1 + 9


def test_a_settled_book_answers_every_slot_as_the_whole_history_does():
    """Local mode: :meth:`LevelBook.settle` folds histories whose gaps are over into one byte
    per user; opened slot after slot, with records read as each opens, a book that settles
    gives the same levels as one that keeps every history, also through a round trip of the
    ledger entry."""
    import msgpack
    import numpy as np

    from app.stream.release.local_levels import LevelBook, PreferenceRecord

    local = parse_stream(
        {
            "id": "l",
            "mode": "local",
            "labels": ["a", "b"],
            "slot_s": 10.0,
            "round_s": 1.0,
            "release_timeout_s": 1.0,
            "mechanism": {"name": "plpa", "params": {"users": [6, 6]}},
            "levels": [
                {"name": "strict", "w": 4, "eps": 1.0},
                {"name": "open", "w": 2, "eps": 2.0},
            ],
        },
        "doc",
        {},
    )
    names = [lv.name for lv in local.levels]
    rng = random.Random(7)
    settled_seen = 0
    for trial in range(40):
        whole, folded = LevelBook(local.users, names), LevelBook(local.users, names)
        offset = 0
        for slot in range(100, 160):
            records = []
            for _ in range(rng.choice([0, 0, 1, 2, 4])):
                level = rng.choice([None, "strict", "open", "open", "junk"])
                value = None if level is None else msgpack.packb({"level": level})
                ts_ms = int((slot - 1) * 10_000 + rng.uniform(-20_000, 9_000))
                user = str(rng.randrange(local.users)).encode()
                records.append(PreferenceRecord(0, offset, user, value, ts_ms))
                offset += 1
            floor = local.slots.start(slot - 1)
            whole.apply(records, floor, initial=slot == 100)
            folded.apply(records, floor, initial=slot == 100)
            expected = whole.vector(local, slot)
            assert np.array_equal(folded.vector(local, slot), expected), (trial, slot)
            folded.settle(local, slot)
            assert np.array_equal(folded.vector(local, slot), expected), (trial, slot)
            stored = msgpack.unpackb(msgpack.packb(folded.to_dict()))
            folded = LevelBook.from_dict(local.users, stored, names)
            settled_seen += folded.settled is not None and bool((folded.settled == 1).any())
        assert len(folded.preferences) <= len(whole.preferences)
    assert settled_seen > 100  # users settled at the non-default level, then changed again
