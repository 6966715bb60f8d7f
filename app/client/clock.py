"""The device's own clock check: a collection request must be for the slot the device is living in.

A device's ledger counts windows in the service's slot numbers. A compromised aggregator that
advances its slot counter faster than time passes (full-budget requests for slots 7, 10 and 13
sent back to back) would make a window of ``w`` slots last a fraction of ``w`` slot lengths, and
each device would spend its whole budget several times per real window. So every request states
its wall-clock slot (``start``, ``end`` in seconds since the epoch, in the ``collection-requests``
value next to the service's slot number), and the device, before spending anything, checks it
against its own clock and its own memory of the last slot it answered:

1. the request carries a wall-clock slot (``start < end``), of the stream's slot length (from the
   enrollment, or pinned by the first request the device answered);
2. it is current: ``start - tolerance_s <= now <= end + tolerance_s`` (not from the future, not
   a slot long over), where ``now`` is the device's own clock;
3. against the last slot answered (slot ``m_l`` starting at ``s_l``, answered at ``a_l`` by the
   device's clock): a later slot ``m`` must start at least ``(m - m_l)`` slot lengths after
   ``s_l`` (the stated times advance as fast as the slot numbers), and the device's own clock
   must have advanced at least ``(m - m_l - 1)`` slot lengths (less ``2 tolerance_s``) since
   ``a_l``; the same slot (its second round) must state the same start; an earlier slot is
   refused.

A request that fails raises :class:`ClockRefusedError` (a :class:`ReportRefusedError`): nothing
is spent or sent, and the SDK loop counts it (:class:`~app.client.fleet.Answer`).

>>> clock = DeviceClock(slot_s=60.0, tolerance_s=2.0)
>>> clock.check(7, When(600.0, 660.0, now=601.0)); clock.record(7, When(600.0, 660.0, 601.0))
>>> clock.check(10, When(600.0, 660.0, now=602.0))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
app.client.clock.ClockRefusedError: slot 10 is 3 slots after slot 7 but starts 0 s after it ...
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.client.errors import ReportRefusedError

DEFAULT_TOLERANCE_S = 2.0
"""How far the device's clock may disagree with the service's (seconds)."""

_REL = 1e-9  # float slack on stated times, relative to the slot length


class ClockRefusedError(ReportRefusedError):
    """The device refused a request whose wall-clock slot disagrees with its own clock.

    The request carried no wall-clock slot, is for a slot in the future or long over, or its
    slot number advanced faster than time (a compressed sequence of requests). An honest
    service with a synchronised clock never triggers this: check the service's and the
    device's clocks (NTP) and ``tolerance_s``; otherwise the aggregator is compressing time.
    """


@dataclass(frozen=True)
class When:
    """A request's wall-clock slot as the service stated it (None: not stated), and the
    device's own clock when it received it."""

    start: float | None
    end: float | None
    now: float

    @classmethod
    def on_wire(cls, value: Mapping[str, Any], now: float) -> When:
        """From a decoded ``collection-requests`` value; a missing or non-numeric time is None."""

        def number(key: str) -> float | None:
            x = value.get(key)
            return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None

        return cls(number("start"), number("end"), now)

    @classmethod
    def offline(cls, slot: int, slot_s: float = 1.0) -> When:
        """Service and device in one process on one trusted clock (tests, bench, audit): slot
        ``slot`` spans ``[slot * slot_s, (slot + 1) * slot_s)`` and is received at its start."""
        return cls(slot * slot_s, (slot + 1) * slot_s, slot * slot_s)


class DeviceClock:
    """A device's memory of the last slot it answered and when; see the module docstring."""

    def __init__(self, slot_s: float | None = None, tolerance_s: float = DEFAULT_TOLERANCE_S):
        if slot_s is not None and not slot_s > 0:
            raise ValueError(f"slot_s must be > 0, got {slot_s!r}")
        if not tolerance_s >= 0:
            raise ValueError(f"tolerance_s must be >= 0, got {tolerance_s!r}")
        self.slot_s = slot_s
        self.tolerance_s = tolerance_s
        self.last: tuple[int, float, float] | None = None  # (slot, stated start, answered at)

    def check(self, slot: int, when: When) -> None:
        """Raise :class:`ClockRefusedError` unless ``slot`` stated at ``when`` may be answered."""
        start, end, now, tol = when.start, when.end, when.now, self.tolerance_s
        if start is None or end is None or not end > start:
            raise ClockRefusedError(f"slot {slot}: the request carries no wall-clock slot")
        length = end - start
        if self.slot_s is not None and abs(length - self.slot_s) > _REL * self.slot_s:
            raise ClockRefusedError(
                f"slot {slot} lasts {length:g} s, the stream's slots last {self.slot_s:g} s"
            )
        if start - tol > now:
            raise ClockRefusedError(
                f"slot {slot} starts at {start:.3f}, in the future of the device's {now:.3f}"
            )
        if now > end + tol:
            raise ClockRefusedError(f"slot {slot} ended at {end:.3f}, the device is at {now:.3f}")
        if self.last is None:
            return
        last, last_start, answered_at = self.last
        if slot < last:
            raise ClockRefusedError(f"slot {slot} is before slot {last}, answered already")
        if slot == last:
            if abs(start - last_start) > _REL * length:
                raise ClockRefusedError(f"slot {slot} stated another start than before")
            return
        k = slot - last
        if start - last_start < k * length - _REL * length:
            raise ClockRefusedError(
                f"slot {slot} is {k} slots after slot {last} but starts "
                f"{start - last_start:g} s after it (slots of {length:g} s)"
            )
        if now - answered_at < (k - 1) * length - 2 * tol:
            raise ClockRefusedError(
                f"slot {slot} is {k} slots after slot {last}, answered "
                f"{now - answered_at:g} s ago by the device's clock (slots of {length:g} s)"
            )

    def record(self, slot: int, when: When) -> None:
        """Remember an answered slot (after :meth:`check` passed); pins the slot length."""
        assert when.start is not None and when.end is not None
        if self.slot_s is None:
            self.slot_s = when.end - when.start
        self.last = (slot, when.start, when.now)

    def state_dict(self) -> dict[str, Any]:
        """Plain values (persisted with the device's ledger)."""
        return {"slot_s": self.slot_s, "last": None if self.last is None else list(self.last)}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.slot_s = state["slot_s"]
        last = state["last"]
        self.last = None if last is None else (int(last[0]), float(last[1]), float(last[2]))
