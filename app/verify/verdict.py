"""What ``dpstream verify`` finds: violations, per-level spend, and what became of the values."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from app.verify.units import UnitFinding, UserSpend

KINDS = {
    "wrong_group": "value counted in the wrong group",
    "no_gap": "level change without gap (a user counted inside its change gap)",
    "overcount": "more values counted than the events hold",
    "two_groups": "user in two groups within one window",
    "overspend": "user spent more than its eps in a window of its w",
    "delta_overspend": "user spent more than the level's delta in a window of its w (open)",
    "key_bound": "a user counted for more than max_keys distinct keys in a slot (open)",
    "device_window": "device answered beyond its eps in a window of its w",
    "release_differs": "slot released twice with different bytes",
    "release_missing": "slot never released between released slots",
    "released_early": "slot released before it ended",
    "level_missing": "a requested level change is not in the user's level history",
    "level_backdated": "a level change takes effect before it was requested",
    "unit_overspend": "user spent beyond its privacy unit's bound in an interval, across streams",
    "unit_delta_overspend": "user spent beyond its privacy unit's delta in an interval (open)",
}
"""Every violation kind, with the line the report prints for it."""

MAX_KEPT = 1000
"""Findings kept per kind (the count stays exact)."""


@dataclass(frozen=True)
class Violation:
    """One finding: its kind (a key of :data:`KINDS`), the slots involved, a line for the
    operator, and the user ids involved (printed only with ``--show-users``)."""

    kind: str
    slots: tuple[int, ...]
    detail: str
    users: tuple[str, ...] = ()


@dataclass(frozen=True)
class LevelSpend:
    """Per level: how many users were counted at it, and the worst window spend of any of
    them as a fraction of the level's eps (0.0 when nobody spent)."""

    name: str
    w: int
    eps: float
    users: int
    worst: float
    delta: float | None = None
    """An open stream's level: its window's delta (None: a labels stream, eps only)."""
    worst_delta: float = 0.0
    """The worst window's delta spend of any user, as a fraction of :attr:`delta`."""


@dataclass
class Verdict:
    """Everything ``verify`` found for one stream."""

    stream: str
    mode: str
    levels: list[LevelSpend] = field(default_factory=list)
    released: float = 0
    """Central: values that reached a release; local: device answers read."""
    not_released: Counter[str] = field(default_factory=Counter)
    """Central: values that did not, by reason; local: answers not accounted, by reason."""
    unjudged: int = 0
    """Central: values not judged because the level history the worker held for their slot
    was compacted away (see :data:`app.verify.account.UNKNOWN`)."""
    slots: tuple[int, int, int] | None = None
    """First and last released slot, and how many distinct slots were released."""
    since: float | None = None
    refused: Counter[str] = field(default_factory=Counter)
    """Internal messages the release agent refuses (skipped), by reason: not violations, but
    something other than the collect stage wrote them."""
    counts: Counter[str] = field(default_factory=Counter)
    """Violations per kind (exact, also beyond :data:`MAX_KEPT`)."""
    violations: list[Violation] = field(default_factory=list)
    spend_rows: UserSpend | None = None
    """Central: the slots each user was counted in and its group's spend there (for the
    privacy unit's check across streams, :mod:`app.verify.units`)."""
    unit: UnitFinding | None = None
    """The stream's privacy unit, judged across its central streams (None: not judged)."""

    def add(self, v: Violation) -> None:
        self.counts[v.kind] += 1
        if self.counts[v.kind] <= MAX_KEPT:
            self.violations.append(v)

    @property
    def ok(self) -> bool:
        return not self.counts

    def kinds(self) -> set[str]:
        return set(self.counts)
