"""The key-selection audit of open-domain streams: a key held by one user vs by none.

An open-domain mechanism (:mod:`app.dp.open`) releases a key absent from its public set only when
the key's noisy count passes the threshold ``tau``. For the pair "the target user holds a key
nobody else holds" (A) against "the target is absent" (B), the key is never released under B, so
``P_A(released) <= e**eps P_B(released) + delta`` reads ``P_A(released) <= delta``: the release
frequency of a one-user key is the mechanism's delta for that pair, and no eps can cover it. With
``max_keys = 1`` under add/remove the slot's ``delta_t`` covers exactly one such key.

One slot with ``n`` users, each the only holder of its own key, is ``n`` independent trials of
that release (each key's noise is its own, and the other users' keys do not move its count);
side B releases none of them by construction, which the case checks on the mechanism too. The
verdict compares the one-sided Clopper-Pearson lower bound of the release frequency with the
``delta_t`` the mechanism *recorded* for the slot (``OpenRelease.delta_spent``): a lower bound
above it proves, at the stated confidence, that the selection leaks more than the ledger says.

The power control :class:`ThresholdOffByOne` forgets the key's own count: it sets ``tau`` one
lower (``P(Z >= tau)`` where the bound needs ``P(Z >= tau - 1)``), releasing one-user keys about
``1 / a = e**eps_t`` times too often, while recording the same ``delta_t``.

=========================  =======================================  =====================
case                       configuration                            release probability
=========================  =======================================  =====================
``open_uniform``           ``Level(1, 1.0, 1e-3)``, ``max_keys=1``  ``6.7e-4 <= 1e-3``
``open_pba``               the same, ``selection_share=1/2``        ``9.4e-4 <= 1e-3``
``open-threshold-low``     OpenUniform, ``tau - 1``                 ``1.8e-3 > 1e-3``
=========================  =======================================  =====================

``KEYS_PER_TRIAL`` one-user keys per audit trial: 50,000 with ``--quick`` (200 trials), where the
control's expected 90 releases leave a lower bound below 1e-3 with probability about 0.002.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from app.audit.bounds import clopper_pearson_lower, clopper_pearson_upper
from app.audit.verdict import Verdict
from app.dp.open import Level, OpenMechanism, OpenPBA, OpenUniform
from app.dp.open.base import UNCAPPED

LEVEL = Level(1, 1.0, 1e-3)
"""One slot per window, so the slot's delta is the level's, the largest allowed: a frequency of
order 1e-3 is measurable in one slot of tens of thousands of keys."""
KEYS_PER_TRIAL = 250
"""One-user keys per trial of the audit's ``trials``."""
MIN_TRIALS = 200
"""The fewest trials a selection case runs with (``--trials 20`` would leave the control
without power, as the other controls run at their own trial counts)."""
KIND = "open"
SCENARIO = "one-user key vs none"


class ThresholdOffByOne(OpenUniform):
    """OpenUniform whose threshold forgets the key's own count (``tau - 1``). Never used by the
    service: a power control of :mod:`app.audit.selection`."""

    def _threshold(self) -> int:
        return super()._threshold() - 1


@dataclass(frozen=True)
class SelectionCase:
    """A mechanism (or a control) whose one-user-key release frequency is audited."""

    name: str
    build: Callable[[], OpenMechanism]
    control: bool = False
    bug: str = ""


CASES: tuple[SelectionCase, ...] = (
    SelectionCase("open_uniform", lambda: OpenUniform([LEVEL], 10**7, max_released_keys=UNCAPPED)),
    SelectionCase("open_pba", lambda: OpenPBA([LEVEL], 10**7, max_released_keys=UNCAPPED)),
)
CONTROLS: tuple[SelectionCase, ...] = (
    SelectionCase(
        "open-threshold-low",
        lambda: ThresholdOffByOne([LEVEL], 10**7, max_released_keys=UNCAPPED),
        control=True,
        bug="selection threshold one too low (the key's own count forgotten)",
    ),
)


def audit_selection(
    case: SelectionCase, trials: int, alpha: float, rng: np.random.Generator
) -> Verdict:
    """One slot of ``trials * KEYS_PER_TRIAL`` one-user keys on side A, none on side B."""
    n = trials * KEYS_PER_TRIAL
    users = np.arange(n, dtype=np.int64)
    keys = np.char.add("solo-", users.astype(str))
    m = case.build()
    release = m.step(users, keys, rng)
    released = int(release.new.sum())
    delta_t = float(release.delta_spent[0])
    empty = case.build().step(np.zeros(0, np.int64), np.zeros(0, str), rng)
    if empty.keys:  # side B: the target absent, its key cannot show
        raise AssertionError(f"{case.name} released keys nobody sent: {empty.keys[:3]}")
    level = 1.0 - alpha / 2.0
    low = float(clopper_pearson_lower(released, n, level))
    high = float(clopper_pearson_upper(released, n, level))
    exceeds = low > delta_t
    if case.control:
        status = "caught" if exceeds else "MISSED"
    else:
        status = "VIOLATION" if exceeds else "ok"
    return Verdict(
        mechanism=case.name,
        kind=KIND,
        relation="add/remove",
        scenario=SCENARIO,
        group=0,
        w=LEVEL.w,
        eps=LEVEL.eps,
        sensitivity=m.sensitivity,
        event=f"one-user key released: rate in [{low:.2e}, {high:.2e}] vs delta_t {delta_t:.2e}",
        counts=[released, n, 0, n],
        trials=n,
        confidence=1.0 - alpha,
        noise="geometric",
        control=case.control,
        status=status,
        note=case.bug or f"tau={m.tau}",
    )


def selection_verdicts(
    trials: int, alpha: float, rng: np.random.Generator, controls: Sequence[str] | None
) -> list[Verdict]:
    """The key-selection cases and the named (or, with ``None``, every) control; nothing when
    ``controls`` is empty (``--no-controls``) or names only other controls: the cases run with
    their control, as a pair."""
    chosen = [c for c in CONTROLS if controls is None or c.name in controls]
    if not chosen:
        return []
    return [audit_selection(c, max(trials, MIN_TRIALS), alpha, rng) for c in (*CASES, *chosen)]
