"""The device side of local mode: membership, perturbation, and the device's own ledger.

A device holds its registration (:class:`Enrollment`: its user index, its requirement ``(w,
eps)`` and group) and answers a :class:`~app.dp.local.wire.CollectionRequest`:

1. membership: it reports only if its bucket (``user mod buckets``) is in the request's cohort
   bitmap (or the request asks everybody);
2. clock: the request's wall-clock slot must be a slot of the enrolled grid, the one the
   device's own clock is in, and after the last slot it answered (:mod:`app.client.clock`), so
   the service cannot compress time;
3. level: a personalized request names the level it holds for the user
   (:attr:`~app.dp.local.wire.CollectionRequest.levels`); the device refuses one that is not
   its own, and every request while it sits out after a change of level
   (:meth:`Device.change_level`);
4. ledger: the budget it is asked for, in exact units of its own ``eps``, must fit every window
   of ``w`` slots on its own :class:`~app.dp.budget.SlotLedger`; otherwise it refuses
   (:class:`ReportRefusedError`) even though the service asked (spec ``seed-004`` §1.5);
5. spend, then perturb: it records the spending, then perturbs its true value with the
   request's oracle at the budget its own ledger computed from the units, and returns the
   :class:`Report`.

The device never sends its true value; the randomness comes from the generator it is given
(a CSPRNG-seeded one in production, :func:`app.dp.noise.secure_rng`).

>>> import numpy as np
>>> from app.dp.local import LPU
>>> service = LPU(d=4, eps=1.0, w=2, users=6)
>>> request = service.open_slot(np.random.default_rng(0))
>>> grid = {"slot_s": 1.0, "origin_s": 0.0}  # the grid of When.offline (one trusted clock)
>>> devices = [Device(Enrollment(user=i, w=2, eps=1.0, **grid)) for i in range(6)]
>>> [d.asked(request) for d in devices]
[True, False, True, False, True, False]
>>> when = When.offline(request.slot)  # one process, one trusted clock
>>> report = devices[0].respond(request, 3, np.random.default_rng(1), when)
>>> report.user, report.slot, report.round, report.oracle, len(report.payload)
(0, 1, 'publication', 'grr', 1)
>>> devices[0].respond(request, 3, np.random.default_rng(2), when)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
app.client.errors.ReportRefusedError: user 0 refuses slot 1 publication: its window of 2 slots ...
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np

from app.client.clock import DeviceClock, When
from app.client.errors import ReportRefusedError
from app.dp.budget import SlotLedger, within
from app.dp.errors import ParameterError
from app.dp.levels import sit_out
from app.dp.local.wire import CollectionRequest
from app.dp.oracles import ORACLES, Payload, make
from app.dp.types import Group
from app.wire import reports


@dataclass(frozen=True)
class Enrollment:
    """What a device got at registration: its user index, requirement and group, and the
    stream's slot grid: slot length ``slot_s`` and origin ``origin_s`` (the wall-clock start
    of slot 0, in seconds since the epoch; ``0.0`` for the service's streams).

    The slot grid is required, by keyword, and never learnt from a request (issue 21: a device
    that took its slot length from the first request answered 100 full-budget requests in
    3 s). The device's own clock places itself on this grid (:mod:`app.client.clock`).
    """

    user: int
    w: int
    eps: float
    group: int = 0
    _: KW_ONLY
    slot_s: float
    origin_s: float

    def __post_init__(self) -> None:
        if isinstance(self.user, bool) or not isinstance(self.user, int) or self.user < 0:
            raise ParameterError(f"user must be an integer >= 0, got {self.user!r}")
        if isinstance(self.group, bool) or not isinstance(self.group, int) or self.group < 0:
            raise ParameterError(f"group must be an integer >= 0, got {self.group!r}")
        Group(self.w, self.eps)  # validates w and eps
        DeviceClock(self.slot_s, self.origin_s)  # validates the slot grid


@dataclass(frozen=True)
class Report:
    """One perturbed report, as the device sends it (the payload is the oracle's)."""

    mechanism: str
    slot: int
    round: str
    user: int
    group: int
    oracle: str
    payload: Payload

    def record(self, stream: str) -> reports.Report:
        """The ``reports`` record of this report for ``stream`` (:func:`app.wire.reports.encode`
        gives its bytes)."""
        return reports.Report(
            stream,
            self.mechanism,
            self.slot,
            self.round,
            self.user,
            self.group,
            self.oracle,
            tuple(int(x) for x in self.payload),
        )


class Device:
    """One user's device: answers collection requests within its own ledger.

    A change of level (:meth:`change_level`) follows the gap rule of the core, the service's
    (:func:`app.dp.levels.sit_out`): the device answers nothing for ``max(w_old, w_new)`` slots
    from the change on, so no window of either level holds reports of both; then it starts a
    fresh ledger at the new level. The device keeps this rule itself, whatever the service does.
    """

    def __init__(self, enrollment: Enrollment, tolerance_s: float | None = None) -> None:
        self.enrollment = enrollment
        self.group = enrollment.group
        """The level index the device holds now (its enrollment's, until :meth:`change_level`)."""
        self.ledger = SlotLedger(Group(enrollment.w, enrollment.eps))
        self.clock = DeviceClock(enrollment.slot_s, enrollment.origin_s, tolerance_s)
        self.quiet_until = 0
        """The first slot the device answers after its last change of level."""

    @property
    def level(self) -> Group:
        """The device's requirement ``(w, eps)`` now."""
        return self.ledger.budget.group

    def change_level(self, group: int, w: int, eps: float, slot: int) -> None:
        """Move to level ``group`` = ``(w, eps)`` from ``slot`` on: answer nothing in
        ``[slot, slot + max(w_old, w))``, then spend on a fresh ledger of the new level."""
        new = Group(w, eps)
        if isinstance(group, bool) or not isinstance(group, int) or group < 0:
            raise ParameterError(f"group must be an integer >= 0, got {group!r}")
        if group == self.group and new == self.level:
            return
        self.quiet_until = max(self.quiet_until, slot + sit_out(self.level.w, w))
        self.group = group
        self.ledger = SlotLedger(new)

    def asked(self, request: CollectionRequest) -> bool:
        """Whether the request's cohort includes this device."""
        return request.asks(self.enrollment.user)

    def respond(
        self, request: CollectionRequest, value: int, rng: np.random.Generator, when: When
    ) -> Report | None:
        """The report for ``request`` received ``when`` (None if not asked); refuse beyond the
        device's window or off its clock."""
        eps = self.admit(request, value, when)
        if eps is None:
            return None
        return self._report(request, value, rng, eps)

    def _report(
        self, request: CollectionRequest, value: int, rng: np.random.Generator, eps: float
    ) -> Report:
        """Step 4: ``value`` perturbed at ``eps`` by the request's oracle for this group."""
        oracle = make(request.oracle[self.group], request.d, eps)
        payload = oracle.payloads(oracle.perturb(np.array([int(value)]), rng))[0]
        return Report(
            request.mechanism,
            request.slot,
            request.round,
            self.enrollment.user,
            self.group,
            oracle.name,
            payload,
        )

    def admit(self, request: CollectionRequest, value: int, when: When) -> float | None:
        """Steps 1-3 and the spending of step 4: the budget to perturb with, or None if not asked.

        After it returns a budget the spending is recorded, so the caller must perturb and send
        (:meth:`respond` does; :class:`~app.client.fleet.Fleet` perturbs many devices at once).
        Raises :class:`ReportRefusedError` when the request does not fit the device's ledger,
        and :class:`~app.client.clock.ClockRefusedError` when it does not fit its clock.
        """
        if not self.asked(request):
            return None
        me = self.enrollment
        if not 0 <= int(value) < request.d:
            raise ParameterError(f"value must lie in [0, d={request.d}), got {value!r}")
        self.clock.check(request.slot, when)
        group, held = self.group, request.level_of(me.user)
        if held is not None and held != group:
            raise ReportRefusedError(
                f"user {me.user} refuses slot {request.slot} {request.round}: the request holds "
                f"it at level {held}, its own level is {group}"
            )
        if request.slot < self.quiet_until:
            raise ReportRefusedError(
                f"user {me.user} refuses slot {request.slot} {request.round}: it changed level "
                f"and sits out until slot {self.quiet_until}"
            )
        if group >= len(request.units):
            raise ReportRefusedError(f"user {me.user}: request has no entry for group {group}")
        units, oracle_name = request.units[group], request.oracle[group]
        budget = self.ledger.budget
        eps = budget.to_eps(units) if units > 0 else 0.0
        asked_eps = request.eps[group]
        if (
            units <= 0
            or oracle_name not in ORACLES
            or not (within(eps, asked_eps) and within(asked_eps, eps))
        ):
            raise ReportRefusedError(
                f"user {me.user} refuses slot {request.slot} {request.round}: request budget "
                f"{asked_eps!r} with {oracle_name!r} does not match its own {units} units"
            )
        if not self.ledger.fits(request.slot, units):
            raise ReportRefusedError(
                f"user {me.user} refuses slot {request.slot} {request.round}: its window of "
                f"{self.level.w} slots already spent "
                f"{budget.to_eps(self.ledger.window(request.slot)):.6g}, asked {eps:.6g}, limit "
                f"{self.level.eps:.6g}"
            )
        self.ledger.record(request.slot, units)  # spend before drawing
        self.clock.record(request.slot, when)
        return eps

    def state_dict(self) -> dict[str, Any]:
        """The device's ledger as plain values (to persist across restarts)."""
        return {
            "user": self.enrollment.user,
            "level": [self.group, self.level.w, self.level.eps, self.quiet_until],
            "ledger": self.ledger.state_dict(),
            "clock": self.clock.state_dict(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; refuses another user's ledger."""
        if state.get("user") != self.enrollment.user:
            raise ParameterError(f"state belongs to user {state.get('user')!r}")
        if "level" in state:
            group, w, eps, quiet = state["level"]
            self.group, self.quiet_until = int(group), int(quiet)
            self.ledger = SlotLedger(Group(int(w), float(eps)))
        self.ledger.load_state(state["ledger"])
        self.clock.load_state(state["clock"])
