"""Releases published before their slot ended (``released_early``).

A slot's release stands for every value of the slot, so it may only be computed once the slot
is over: a release published earlier was closed by a clock that ran ahead of the wall (an
event-time clock a producer or a forged message moved, docs/design.md invariant 7), and the slot's
values stamped after that moment reached no release. Each such slot is one finding, whatever
the stream's clock.

The slot's end comes from the slot rule (:mod:`app.verify.rules`: slot ``s`` covers
``[s * slot_s, (s + 1) * slot_s)``), never from the record's own ``end`` field; the publication
time is the release's ``released_at`` (the earliest of a slot's copies; the Kafka timestamp for
a record without one), as :func:`~app.verify.account.check_releases` gathers it.

>>> from app.verify.verdict import Verdict
>>> v = Verdict("s", "central")
>>> check_early(10.0, {7: 80.0, 8: 85.5, 9: 100.0}, first_slot=0, verdict=v)
>>> [(f.kind, f.slots, f.detail) for f in v.violations]
[('released_early', (8,), 'slot 8: released 4.5 s before it ended')]
"""

from __future__ import annotations

from collections.abc import Mapping

from app.verify.verdict import Verdict, Violation


def check_early(
    slot_s: float, released_at: Mapping[int, float], first_slot: int, verdict: Verdict
) -> None:
    """Add a ``released_early`` finding for each judged slot (``>= first_slot``) whose
    release time (``released_at``: slot -> Unix seconds) lies before its end."""
    for slot in sorted(s for s in released_at if s >= first_slot):
        ahead = (slot + 1) * slot_s - released_at[slot]
        if ahead > 0:
            detail = f"slot {slot}: released {ahead:.1f} s before it ended"
            verdict.add(Violation("released_early", (slot,), detail))
