"""The device's own clock decides which slot a collection request may ask for.

A device's ledger counts windows in the service's slot numbers. A compromised aggregator that
advances its slot counter faster than time passes (full-budget requests for slots 7, 10 and 13
sent back to back), or states slots of its own length (100 slots of 0.03 s in 3 s, issue 21),
would make a window of ``w`` slots last a fraction of ``w`` real slot lengths, and each device
would spend its whole budget many times per real window. So the device never learns the slot
grid from a request: it is **enrolled** with the stream's slot length ``slot_s`` and origin
``origin_s`` (the wall-clock start of the stream's slot 0; ``0.0`` for the service, whose slots
are aligned to the Unix epoch), and its own clock says which slot it is living in:
``floor((now - origin_s) / slot_s)``. Every request states its wall-clock slot (``start``,
``end`` in seconds since the epoch, in the ``collection-requests`` value next to the service's
slot number), and the device, before spending anything, checks:

1. the request carries a wall-clock slot, and it is a slot of the enrolled grid: it lasts
   ``slot_s`` and starts at ``origin_s + k slot_s`` for an integer ``k``;
2. ``k`` is the device's current slot, within the skew ``skew_s``: the slot of ``now - skew_s``
   at the earliest, the slot of ``now + skew_s`` at the latest, where ``now`` is the device's
   own clock. The skew is ``tolerance_s`` (default :data:`DEFAULT_TOLERANCE_S`, 2 s, capped at
   a quarter slot) and must stay below half a slot, so at any instant at most two adjacent
   slots are admissible;
3. against the last slot answered (service slot ``m_l`` in grid slot ``k_l``): a later slot
   ``m`` must lie at least ``m - m_l`` grid slots after ``k_l`` (slot numbers advance no faster
   than the device's clock); the same slot (its second round) must be in the same grid slot;
   an earlier slot is refused.

So a burst of requests received within a fraction of a slot is answered for at most two
adjacent slots, which the device's ledger counts in one window (``w >= 2``). A request that
fails raises :class:`ClockRefusedError` (a :class:`ReportRefusedError`): nothing is spent or
sent, and the SDK loop counts it (:class:`~app.client.fleet.Answer`).

>>> clock = DeviceClock(slot_s=60.0, origin_s=0.0, tolerance_s=2.0)
>>> clock.check(7, When(600.0, 660.0, now=601.0)); clock.record(7, When(600.0, 660.0, 601.0))
>>> clock.check(10, When(600.0, 660.0, now=602.0))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
app.client.clock.ClockRefusedError: slot 10 is 3 slots after slot 7 but starts 0 slots after it ...
>>> clock.check(10, When(780.0, 840.0, now=602.0))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
app.client.clock.ClockRefusedError: slot 10 states grid slot 13, the device's clock is in ...
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.client.errors import ReportRefusedError
from app.dp.errors import ParameterError
from app.wire.requests import RequestRecord

DEFAULT_TOLERANCE_S = 2.0
"""How far the device's clock may disagree with the service's (seconds), when the device is
built without ``tolerance_s``; capped at a quarter of the slot length."""

_REL = 1e-9  # float slack on stated times, relative to the slot length


class ClockRefusedError(ReportRefusedError):
    """The device refused a request whose wall-clock slot disagrees with its own clock.

    The request carried no wall-clock slot, states a slot off the device's enrolled grid
    (another length or origin), is for a slot other than the one the device's clock is in, or
    its slot number advanced faster than time (a compressed sequence of requests). An honest
    service with a synchronised clock never triggers this: check the service's and the
    device's clocks (NTP), ``tolerance_s`` and the enrollment's ``slot_s`` and ``origin_s``;
    otherwise the aggregator is compressing time.
    """


@dataclass(frozen=True)
class When:
    """A request's wall-clock slot as the service stated it (None: not stated), and the
    device's own clock when it received it."""

    start: float | None
    end: float | None
    now: float

    @classmethod
    def on_wire(cls, record: RequestRecord, now: float) -> When:
        """From a decoded ``collection-requests`` value (:func:`app.wire.requests.decode`; a
        missing or non-numeric time is None)."""
        return cls(record.start, record.end, now)

    @classmethod
    def offline(cls, slot: int, slot_s: float = 1.0) -> When:
        """Service and device in one process on one trusted clock (tests, bench, audit): slot
        ``slot`` spans ``[slot * slot_s, (slot + 1) * slot_s)`` and is received at its start."""
        return cls(slot * slot_s, (slot + 1) * slot_s, slot * slot_s)


class DeviceClock:
    """A device's slot grid, its skew, and its memory of the last slot it answered; see the
    module docstring.

    ``slot_s`` and ``origin_s`` come from the device's enrollment (never from a request).
    ``tolerance_s`` is the skew: None gives ``min(DEFAULT_TOLERANCE_S, slot_s / 4)``; an
    explicit value must lie in ``[0, slot_s / 2)``.
    """

    def __init__(self, slot_s: float, origin_s: float, tolerance_s: float | None = None):
        if isinstance(slot_s, bool) or not isinstance(slot_s, int | float) or not slot_s > 0:
            raise ParameterError(f"slot_s must be a number > 0, got {slot_s!r}")
        if (
            isinstance(origin_s, bool)
            or not isinstance(origin_s, int | float)
            or not math.isfinite(origin_s)
        ):
            raise ParameterError(f"origin_s must be a finite number, got {origin_s!r}")
        if tolerance_s is None:
            tolerance_s = min(DEFAULT_TOLERANCE_S, slot_s / 4)
        if not 0 <= tolerance_s < slot_s / 2:
            raise ParameterError(
                f"tolerance_s must lie in [0, slot_s / 2 = {slot_s / 2:g}), got {tolerance_s!r}"
            )
        self.slot_s = float(slot_s)
        self.origin_s = float(origin_s)
        self.tolerance_s = float(tolerance_s)
        self.last: tuple[int, float, float] | None = None  # (slot, stated start, answered at)

    def slot_at(self, t: float) -> int:
        """The grid slot holding time ``t``."""
        return math.floor((t - self.origin_s) / self.slot_s)

    def grid_slot(self, slot: int, when: When) -> int:
        """The grid slot a request states, or :class:`ClockRefusedError` if it states none or one
        off the enrolled grid (another length or a shifted start)."""
        start, end, length = when.start, when.end, self.slot_s
        if start is None or end is None or not end > start:
            raise ClockRefusedError(f"slot {slot}: the request carries no wall-clock slot")
        slack = _REL * length + 4 * math.ulp(max(abs(start), abs(end), abs(self.origin_s)))
        if abs((end - start) - length) > slack:
            raise ClockRefusedError(
                f"slot {slot} lasts {end - start:g} s, the stream's slots last {length:g} s"
            )
        k = round((start - self.origin_s) / length)
        if abs(start - (self.origin_s + k * length)) > slack:
            raise ClockRefusedError(
                f"slot {slot} starts at {start:.3f}, off the stream's slot grid "
                f"(origin {self.origin_s:g} s, slots of {length:g} s)"
            )
        return k

    def check(self, slot: int, when: When) -> None:
        """Raise :class:`ClockRefusedError` unless ``slot`` stated at ``when`` may be answered."""
        k, now, tol = self.grid_slot(slot, when), when.now, self.tolerance_s
        earliest, latest = self.slot_at(now - tol), self.slot_at(now + tol)
        if not earliest <= k <= latest:
            where = "in the future of" if k > latest else "over by"
            raise ClockRefusedError(
                f"slot {slot} states grid slot {k}, the device's clock is in slot "
                f"{self.slot_at(now)} ({now:.3f} s): {where} the device's clock"
            )
        if self.last is None:
            return
        last, last_start, _ = self.last
        k_last = round((last_start - self.origin_s) / self.slot_s)
        if slot < last:
            raise ClockRefusedError(f"slot {slot} is before slot {last}, answered already")
        if slot == last:
            if k != k_last:
                raise ClockRefusedError(f"slot {slot} stated another start than before")
            return
        if k - k_last < slot - last:
            raise ClockRefusedError(
                f"slot {slot} is {slot - last} slots after slot {last} but starts "
                f"{k - k_last} slots after it (grid slots {k_last} and {k}, of {self.slot_s:g} s)"
            )

    def record(self, slot: int, when: When) -> None:
        """Remember an answered slot (after :meth:`check` passed)."""
        assert when.start is not None
        self.last = (slot, when.start, when.now)

    def state_dict(self) -> dict[str, Any]:
        """Plain values (persisted with the device's ledger)."""
        return {
            "slot_s": self.slot_s,
            "origin_s": self.origin_s,
            "last": None if self.last is None else list(self.last),
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; refuses a state kept on another slot grid (a device
        state from before issue 21, whose grid came from a request, must be re-enrolled)."""
        grid = (state.get("slot_s"), state.get("origin_s"))
        if grid != (self.slot_s, self.origin_s):
            raise ParameterError(
                f"clock state on grid slot_s={grid[0]!r} origin_s={grid[1]!r}, the device is "
                f"enrolled with slot_s={self.slot_s!r} origin_s={self.origin_s!r}"
            )
        last = state["last"]
        self.last = None if last is None else (int(last[0]), float(last[1]), float(last[2]))
