"""``verify`` reports a release published before its slot ended (issue 31, section 2): planted
on hand-built topic contents, with the exact verdict; a release at or after the end is clean."""

from __future__ import annotations

import json
from pathlib import Path

from app.verify import judge
from app.verify.report import to_json, to_text
from tests.verify.build import CENTRAL, Topics, stream_of

SLOTS = range(100, 106)
EARLY = {102: 4.0, 104: 0.5}
"""Slot -> seconds before its end that its release was published (slot_s is 10 s)."""


def run_with(tmp_path: Path, early: dict[int, float]) -> Topics:
    """Releases of the slots, each 2 s after its end except those in ``early`` (one value per
    slot, not closed: verify refuses to judge a run without any value)."""
    t = Topics(stream_of(tmp_path, CENTRAL))
    for slot in SLOTS:
        end = (slot + 1) * 10.0
        t.event("u0", slot * 10.0 + 1.0, 0)
        t.release(slot, [0.0, 0.0, 0.0], at=end - early[slot] if slot in early else end + 2.0)
        t.audit(slot, {"strict": 1.0 / 5, "loose": 4.0 / 3})
    return t


def test_releases_published_before_their_slot_ended_are_reported(tmp_path: Path):
    t = run_with(tmp_path, EARLY)
    verdict = judge(t.stream, t.snap)
    assert dict(verdict.counts) == {"released_early": 2}
    assert [(v.kind, v.slots, v.detail) for v in verdict.violations] == [
        ("released_early", (102,), "slot 102: released 4.0 s before it ended"),
        ("released_early", (104,), "slot 104: released 0.5 s before it ended"),
    ]
    assert "slot released before it ended" in to_text(verdict)
    assert json.loads(to_json(verdict))["violations"] == {"released_early": 2}


def test_a_release_at_its_slots_end_or_later_is_clean(tmp_path: Path):
    t = run_with(tmp_path, {103: 0.0})  # published at the very end: nothing of it was running
    verdict = judge(t.stream, t.snap)
    assert verdict.ok, to_text(verdict)


def test_since_leaves_earlier_early_releases_unjudged(tmp_path: Path):
    t = run_with(tmp_path, EARLY)
    t.snap.since = 1030.0  # judge slots from 103 on
    verdict = judge(t.stream, t.snap)
    assert [v.slots for v in verdict.violations] == [(104,)]
