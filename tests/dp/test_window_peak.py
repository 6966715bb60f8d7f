"""Issue 23 item 11: the figure eps bounds is the largest spend of one user in any w-window.

A slot's rounds may ask disjoint cohorts, so what a slot spent in total (LPA: ``1.2`` at
``eps = 0.6``) is not what any user spent. These tests fix the per-user, per-window figure on
hand-computed sequences of rounds, and check that a local mechanism's ``window_report`` says
the same as the reports it asked for.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from app.bench.engine.replay import peak_line
from app.bench.engine.simulate import answer, user_groups
from app.dp import registry
from app.dp.budget import PEAK_LABEL, WindowPeak
from app.dp.local.base import LocalMechanism
from app.dp.local.simulate import drive
from app.dp.types import Group


def test_two_cohorts_in_one_slot_spend_eps_per_user_not_twice() -> None:
    """LPA's shape at w=3, eps=0.6: a dissimilarity and a publication round in slot 1 on
    disjoint cohorts (the slot spends 1.2 in total), user 0 again at slot 4.

    By hand: users 0-3 each spent 0.6 in the windows that hold slot 1; user 0's report at slot
    4 is in window [2, 4], which no longer holds slot 1: 0.6. Nobody ever spent more."""
    peak = WindowPeak(Group(3, 0.6))
    full = peak.budget.total
    peak.record(1, [0, 1], full)  # dissimilarity round
    peak.record(1, [2, 3], full)  # publication round, another cohort
    assert [peak.eps(peak.window(t)) for t in (1, 3, 4)] == [Fraction(3, 5)] * 2 + [0]
    peak.record(4, [0], full)
    assert peak.eps(peak.peak) == Fraction(3, 5)
    assert [peak.eps(peak.window(t)) for t in (4, 6, 7)] == [Fraction(3, 5)] * 2 + [0]
    line = peak_line([peak], ["standard"])
    assert line == "max per-user spend in any w-window: standard 0.6 of eps 0.6 (w=3)"
    assert line.startswith(PEAK_LABEL)


def test_shares_add_up_over_the_window_with_the_largest_sum_kept() -> None:
    """Budget division at w=3, eps=0.6 (a share eps/(2w) = 0.1): user 0 spends 0.1 at slots
    1, 3 and 4 and 0.3 at slot 2; user 1 spends 0.1 at slots 1-4.

    By hand, user 0's windows: [1, 3] 0.1 + 0.3 + 0.1 = 0.5, [2, 4] 0.3 + 0.1 + 0.1 = 0.5,
    [3, 5] 0.2, [4, 6] 0.1; user 1's: 0.3 at most. The peak is 0.5; the window ending at 5
    holds 0.2."""
    peak = WindowPeak(Group(3, 0.6))
    share = peak.budget.share
    for t in (1, 2, 3, 4):
        peak.record(t, [0, 1], share)
        if t == 2:
            peak.record(t, [0], 2 * share)  # a second round of the slot
    assert peak.eps(peak.peak) == Fraction(1, 2)
    assert peak.eps(peak.window(5)) == Fraction(1, 5)
    assert peak_line([peak], ["g"]) == "max per-user spend in any w-window: g 0.5 of eps 0.6 (w=3)"


def test_slots_never_go_back() -> None:
    peak = WindowPeak(Group(3, 0.6))
    peak.record(5, [0], 1)
    with pytest.raises(ValueError, match="must not go back"):
        peak.record(4, [0], 1)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("lpa", {"eps": 0.6, "w": 4, "users": 400}),
        ("lpd", {"eps": 0.6, "w": 4, "users": 400}),
        ("plpa+", {"groups": [Group(6, 0.6), Group(3, 1.0)], "users": [240, 160]}),
        ("plpd", {"groups": [Group(6, 0.6), Group(3, 1.0)], "users": [240, 160]}),
        ("lbd", {"eps": 0.6, "w": 4, "users": 400}),
    ],
)
def test_window_report_is_the_largest_spend_of_the_users_asked(
    name: str, params: dict[str, object]
) -> None:
    """After every slot, the service's figure per level equals the largest window sum of the
    users its requests actually asked (population division: no longer ``eps`` from slot 1 on,
    whatever was asked), and never exceeds ``eps``."""
    m = registry.create(name, d=2, **params)
    assert isinstance(m, LocalMechanism)
    rng = np.random.default_rng(7)
    values = (rng.random((16, m.users)) < 0.4).astype(np.int64)
    groups = user_groups(m)
    peaks = [WindowPeak(g) for g in m.groups]
    assert all(s.spent == 0 for s in m.window_report())
    for t in range(16):

        def devices(request, t=t):  # type: ignore[no-untyped-def]
            tally, sent = answer(request, values[t], groups, rng)
            assert sent.users is not None
            for g, peak in enumerate(peaks):
                mine = sent.users[groups[sent.users] == g]
                if mine.size:
                    peak.record(sent.slot, mine.tolist(), sent.units[g])
            return tally

        drive(m, devices, rng)
        report = m.window_report()
        for g, peak in enumerate(peaks):
            assert report[g].spent == peak.eps(peak.window(m.t)), (t, g)
            assert report[g].spent <= Fraction(repr(m.groups[g].eps))
