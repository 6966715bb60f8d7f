"""What the service calls: one small interface per kind of mechanism, and the helpers to narrow.

The service (:mod:`app.stream`) drives three kinds of mechanism and asks each only what its
interface declares; it never inspects a class or reads an attribute that is not declared here.

* :class:`SlotStepped` (central and graph families): ``step(counts, rng, population)`` gives
  one :class:`~app.dp.types.Release`, for the slot just stepped.
* :class:`PeriodStepped` (period family): ``step`` gives the releases that became known (none
  inside a period), and ``placed(slot, out)`` the stream slot each of them belongs to.
* :class:`RoundDriven` (local family): ``open_slot``, ``on_tally``, ``close_slot``, ``pending``
  and the capabilities below.

The ledger views (``dpstream ledger show``, ``/budget``, the status page) read a mechanism only
through :class:`LedgerView`, which every interface implements: ``describe()``,
``window_report()``, and three views with neutral defaults here (None):
:meth:`~LedgerView.level_use`, :meth:`~LedgerView.population_window` (a population-division
local mechanism's :class:`PopulationWindow`) and :meth:`~LedgerView.graph_window` (a (w,n)
mechanism's most loaded :class:`GraphWindow`). :func:`as_view` narrows a mechanism to it.

A local mechanism's capabilities have neutral defaults here, so a plain one declares nothing:
:meth:`RoundDriven.takes_levels` (False: the mechanism runs every user at one level, so the
service never reads ``preferences`` for it), :meth:`RoundDriven.level_use` (None: no levels to
show) and :meth:`RoundDriven.available_users` (None: budget division, everybody reports every
slot). :meth:`RoundDriven.report_windows` (how often a user may report, the DP rule a collector
enforces) has no neutral value: the local base implements it.

:func:`app.dp.registry.create` returns a :class:`~app.dp.mechanism.Mechanism`;
:func:`as_slotted`, :func:`as_period` and :func:`as_round` narrow it to the interface a driver
needs, or raise :class:`~app.dp.errors.ParameterError` naming the mechanism and its kind.

>>> from app.dp.registry import create
>>> m = as_round(create("lpd", d=3, eps=1.0, w=4, users=48))
>>> m.takes_levels(), m.level_use(), m.available_users()
(False, None, 48)
>>> as_slotted(m)
Traceback (most recent call last):
app.dp.errors.ParameterError: mechanism lpd is local, not slot-stepped (central or graph)
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np
import numpy.typing as npt

from app.dp.errors import ParameterError
from app.dp.mechanism import Mechanism
from app.dp.types import IntArray, Release, WindowSpend

if TYPE_CHECKING:  # annotations only: app.dp.local's base derives from RoundDriven
    from app.dp.local.wire import CollectionRequest, Tally


@dataclass(frozen=True)
class LevelUse:
    """Per level of a personalized local mechanism: its users and those available now."""

    users: list[int]
    """Users at each level (those sitting out a change of level are at none)."""
    available: list[int]
    """Of them, those who may report at the current slot."""
    sitting_out: int
    """Users at no level: sitting out a change of level."""


@dataclass(frozen=True)
class PopulationWindow:
    """A population-division mechanism's population ledger (public: it follows from the
    collection requests)."""

    users: int
    """Registered users."""
    buckets: int
    """Buckets the users are split in (a cohort is a set of buckets)."""
    w: int
    """Slots a user waits between two reports."""
    t: int
    """The population ledger's slot (the mechanism numbers its slots from 1)."""
    available: int
    """Users who may report at slot ``t``."""
    reported: list[int]
    """Users who reported in each slot of the current window, newest (``t``) first."""


@dataclass(frozen=True)
class GraphWindow:
    """A (w,n) mechanism's most loaded window: the centre whose ``n``-range window spent the
    most over the ``w`` slots ending at the last slot."""

    n: int
    w: int
    eps: float
    centre: int
    """The label index of the window's centre."""
    spent: Fraction
    """What that window spent (in eps, exact)."""
    fraction: float
    """``spent`` as a fraction of the window's whole budget."""


class LedgerView(Protocol):
    """What the ledger views read of a mechanism; every interface below implements it."""

    @property
    def name(self) -> str: ...

    def describe(self) -> str: ...

    def window_report(self) -> list[WindowSpend]: ...

    def level_use(self) -> LevelUse | None:
        """Users per level and those available now; None when it runs no levels."""

    def population_window(self) -> PopulationWindow | None:
        """The population ledger; None unless a cohort reports with the whole ``eps``."""

    def graph_window(self) -> GraphWindow | None:
        """The most loaded (w,n) window; None unless a (w,n) mechanism."""


class _Viewed(Mechanism):
    """The neutral defaults of :class:`LedgerView`'s optional views."""

    def level_use(self) -> LevelUse | None:
        return None

    def population_window(self) -> PopulationWindow | None:
        return None

    def graph_window(self) -> GraphWindow | None:
        return None


class SlotStepped(_Viewed):
    """A mechanism that releases every stream slot as it is stepped (central, graph)."""

    t: int
    """Slots stepped so far."""

    @abstractmethod
    def step(
        self,
        counts: npt.ArrayLike,
        rng: np.random.Generator,
        population: Sequence[int] | IntArray | None = None,
    ) -> Release:
        """Release one slot from its ``(groups, d)`` true counts (not modified); noise only
        from ``rng``; ``population`` is the public number of users per group."""


class PeriodStepped(_Viewed):
    """A mechanism that takes one slot per step and releases whole periods (period family)."""

    t: int
    """Slots stepped so far; the mechanism numbers them from 1."""

    @abstractmethod
    def step(
        self,
        counts: npt.ArrayLike,
        rng: np.random.Generator,
        population: Sequence[int] | IntArray | None = None,
    ) -> list[Release]:
        """Take one slot; return the releases that became known at it, in slot order."""

    def placed(self, slot: int, out: Sequence[Release]) -> list[tuple[int, Release]]:
        """``(stream slot, release)`` pairs of the step just taken at stream ``slot``.

        The mechanism stepped once per stream slot since the stream's first, so its slot ``r``
        is stream slot ``slot - (t - r)``.

        >>> from app.dp.period import OptStream
        >>> from app.dp.types import Group
        >>> m = OptStream(d=2, groups=[Group(2, 1.0)])
        >>> rng = np.random.default_rng(0)
        >>> m.placed(100, m.step([[1, 2]], rng))
        []
        >>> [s for s, _ in m.placed(101, m.step([[3, 4]], rng))]
        [100, 101]
        """
        return [(slot - (self.t - rel.slot), rel) for rel in out]


class RoundDriven(_Viewed):
    """A local mechanism: one or two collection rounds per slot (:mod:`app.dp.local.base`)."""

    t: int
    """Slots closed so far (the mechanism numbers its slots from 1)."""
    users: int
    """Registered users (indices ``0 .. users - 1``): the mechanism states it, the service
    never derives it from the parameters."""
    population_division: ClassVar[bool]
    """True: a cohort reports with the whole ``eps``; False: everybody reports a share."""
    group_users: list[int]
    """Registered users per requirement group (indices assigned in blocks, in group order)."""

    @property
    @abstractmethod
    def pending(self) -> CollectionRequest | None:
        """The request awaiting its tally, if any (to re-send after a restart)."""

    @abstractmethod
    def open_slot(self, rng: np.random.Generator) -> CollectionRequest | None:
        """Start slot ``t + 1``; return its first request, or None if nobody reports."""

    @abstractmethod
    def on_tally(self, tally: Tally, rng: np.random.Generator) -> CollectionRequest | None:
        """Consume the answer to the pending request; return the next request or None."""

    @abstractmethod
    def close_slot(self) -> Release:
        """Finish the slot: its release, after recording it on the ledger."""

    @abstractmethod
    def report_windows(self) -> tuple[IntArray, IntArray]:
        """Per requirement group ``k``, ``(w_k, s_k)``: a user of group ``k`` may report at
        most ``s_k`` times in any ``w_k`` slots (the rule a report collector enforces)."""

    def user_groups(self) -> IntArray:
        """Per registered user (by index), its requirement group: :attr:`group_users` in
        contiguous blocks, in group order (the assignment the mechanism's tallies assume)."""
        return np.repeat(np.arange(len(self.group_users), dtype=np.int64), self.group_users)

    def takes_levels(self) -> bool:
        """Whether the service gives it every user's level before each slot (:meth:`assign`)."""
        return False

    def assign(self, levels: npt.ArrayLike) -> None:
        """Take every user's level for the next slot (only if :meth:`takes_levels`)."""
        raise ParameterError(f"mechanism {self.name} takes no levels")

    def available_users(self) -> int | None:
        """Users who may report at the current slot; None when everybody reports each slot."""
        return None

    def report_budget(self, level: int) -> float | None:
        """The budget one report of a user at ``level`` spends; None: the level's whole eps."""
        return None


def as_slotted(mechanism: Mechanism) -> SlotStepped:
    """``mechanism`` as a :class:`SlotStepped` one, or :class:`ParameterError`."""
    if not isinstance(mechanism, SlotStepped):
        raise _not(mechanism, "slot-stepped (central or graph)")
    return mechanism


def as_period(mechanism: Mechanism) -> PeriodStepped:
    """``mechanism`` as a :class:`PeriodStepped` one, or :class:`ParameterError`."""
    if not isinstance(mechanism, PeriodStepped):
        raise _not(mechanism, "period-stepped")
    return mechanism


def as_round(mechanism: Mechanism) -> RoundDriven:
    """``mechanism`` as a :class:`RoundDriven` (local) one, or :class:`ParameterError`."""
    if not isinstance(mechanism, RoundDriven):
        raise _not(mechanism, "round-driven (local)")
    return mechanism


def as_view(mechanism: Mechanism) -> LedgerView:
    """``mechanism`` as the ledger views read it, or :class:`ParameterError`."""
    if not isinstance(mechanism, _Viewed):
        raise _not(mechanism, "one of the service's kinds")
    return mechanism


def _not(mechanism: Mechanism, what: str) -> ParameterError:
    return ParameterError(f"mechanism {mechanism.name} is {mechanism.kind}, not {what}")
