"""What the service calls: one small interface per kind of mechanism, and the helpers to narrow.

The service (:mod:`app.stream`) drives three kinds of mechanism and asks each only what its
interface declares; it never inspects a class or reads an attribute that is not declared here.

* :class:`SlotStepped` (central and graph families): ``step(counts, rng, population)`` gives
  one :class:`~app.dp.types.Release`, for the slot just stepped.
* :class:`PeriodStepped` (period family): ``step`` gives the releases that became known (none
  inside a period), and ``placed(slot, out)`` the stream slot each of them belongs to.
* :class:`RoundDriven` (local family): ``open_slot``, ``on_tally``, ``close_slot``, ``pending``
  and the capabilities below.

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
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import numpy.typing as npt

from app.dp.errors import ParameterError
from app.dp.mechanism import Mechanism
from app.dp.types import IntArray, Release

if TYPE_CHECKING:  # annotations only: app.dp.local's base derives from RoundDriven
    from app.dp.local.wire import CollectionRequest, Tally


class SlotStepped(Mechanism):
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


class PeriodStepped(Mechanism):
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


@dataclass(frozen=True)
class LevelUse:
    """Per level of a personalized local mechanism: its users and those available now."""

    users: list[int]
    """Users at each level (those sitting out a change of level are at none)."""
    available: list[int]
    """Of them, those who may report at the current slot."""
    sitting_out: int
    """Users at no level: sitting out a change of level."""


class RoundDriven(Mechanism):
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

    def takes_levels(self) -> bool:
        """Whether the service gives it every user's level before each slot (:meth:`assign`)."""
        return False

    def assign(self, levels: npt.ArrayLike) -> None:
        """Take every user's level for the next slot (only if :meth:`takes_levels`)."""
        raise ParameterError(f"mechanism {self.name} takes no levels")

    def level_use(self) -> LevelUse | None:
        """Users per level and those available now; None when it runs no levels."""
        return None

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


def _not(mechanism: Mechanism, what: str) -> ParameterError:
    return ParameterError(f"mechanism {mechanism.name} is {mechanism.kind}, not {what}")
