"""The device side of local mode: membership, perturbation, and the device's own ledger.

A device holds its registration (:class:`Enrollment`: its user index, its requirement ``(w,
eps)`` and group) and answers a :class:`~app.dp.local.base.CollectionRequest`:

1. membership: it reports only if its bucket (``user mod buckets``) is in the request's cohort
   bitmap (or the request asks everybody);
2. ledger: the budget it is asked for, in exact units of its own ``eps``, must fit every window
   of ``w`` slots on its own :class:`~app.dp.budget.SlotLedger`; otherwise it refuses
   (:class:`ReportRefusedError`) even though the service asked (spec ``seed-004`` §1.5);
3. spend, then perturb: it records the spending, then perturbs its true value with the
   request's oracle at the budget its own ledger computed from the units, and returns the
   :class:`Report`.

The device never sends its true value; the randomness comes from the generator it is given
(a CSPRNG-seeded one in production, :func:`app.dp.noise.secure_rng`).

>>> import numpy as np
>>> from app.dp.local import LPU
>>> service = LPU(d=4, eps=1.0, w=2, users=6)
>>> request = service.open_slot(np.random.default_rng(0))
>>> devices = [Device(Enrollment(user=i, w=2, eps=1.0)) for i in range(6)]
>>> [d.asked(request) for d in devices]
[True, False, True, False, True, False]
>>> report = devices[0].respond(request, 3, np.random.default_rng(1))
>>> report.user, report.slot, report.round, report.oracle, len(report.payload)
(0, 1, 'publication', 'grr', 1)
>>> devices[0].respond(request, 3, np.random.default_rng(2))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
app.client.device.ReportRefusedError: user 0 refuses slot 1 publication: its window of 2 slots ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from app.dp.budget import SlotLedger, within
from app.dp.errors import DPError, ParameterError
from app.dp.local.base import CollectionRequest
from app.dp.oracles import ORACLES, Payload, make
from app.dp.types import Group


class ReportRefusedError(DPError):
    """The device refused a collection request that would exceed its own privacy budget.

    An honest service never triggers this: it means the service asked the user again within
    its window, asked more budget than its window has left, or describes another requirement
    than the device's. Nothing was sent. The service's population ledger or configuration is
    wrong; report the numbers in the message.
    """


@dataclass(frozen=True)
class Enrollment:
    """What a device got at registration: its user index, requirement and group."""

    user: int
    w: int
    eps: float
    group: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.user, bool) or not isinstance(self.user, int) or self.user < 0:
            raise ParameterError(f"user must be an integer >= 0, got {self.user!r}")
        if isinstance(self.group, bool) or not isinstance(self.group, int) or self.group < 0:
            raise ParameterError(f"group must be an integer >= 0, got {self.group!r}")
        Group(self.w, self.eps)  # validates w and eps


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

    def to_dict(self) -> dict[str, Any]:
        """Plain values for msgpack."""
        return {
            "mechanism": self.mechanism, "slot": self.slot, "round": self.round,
            "user": self.user, "group": self.group, "oracle": self.oracle,
            "payload": list(self.payload),
        }  # fmt: skip


class Device:
    """One user's device: answers collection requests within its own ledger."""

    def __init__(self, enrollment: Enrollment) -> None:
        self.enrollment = enrollment
        self.ledger = SlotLedger(Group(enrollment.w, enrollment.eps))

    def asked(self, request: CollectionRequest) -> bool:
        """Whether the request's cohort includes this device."""
        return request.asks(self.enrollment.user)

    def respond(
        self, request: CollectionRequest, value: int, rng: np.random.Generator
    ) -> Report | None:
        """The report for ``request`` (None if not asked); refuse beyond the device's window."""
        eps = self.admit(request, value)
        if eps is None:
            return None
        me = self.enrollment
        oracle = make(request.oracle[me.group], request.d, eps)
        payload = oracle.payloads(oracle.perturb(np.array([int(value)]), rng))[0]
        return Report(
            request.mechanism, request.slot, request.round, me.user, me.group, oracle.name,
            payload,
        )  # fmt: skip

    def admit(self, request: CollectionRequest, value: int) -> float | None:
        """Steps 1-2 and the spending of step 3: the budget to perturb with, or None if not asked.

        After it returns a budget the spending is recorded, so the caller must perturb and send
        (:meth:`respond` does; :class:`~app.client.fleet.Fleet` perturbs many devices at once).
        Raises :class:`ReportRefusedError` when the request does not fit the device's ledger.
        """
        if not self.asked(request):
            return None
        me = self.enrollment
        if not 0 <= int(value) < request.d:
            raise ParameterError(f"value must lie in [0, d={request.d}), got {value!r}")
        if me.group >= len(request.units):
            raise ReportRefusedError(f"user {me.user}: request has no entry for group {me.group}")
        units, oracle_name = request.units[me.group], request.oracle[me.group]
        budget = self.ledger.budget
        eps = budget.to_eps(units) if units > 0 else 0.0
        asked_eps = request.eps[me.group]
        if units <= 0 or oracle_name not in ORACLES or not (
            within(eps, asked_eps) and within(asked_eps, eps)
        ):
            raise ReportRefusedError(
                f"user {me.user} refuses slot {request.slot} {request.round}: request budget "
                f"{asked_eps!r} with {oracle_name!r} does not match its own {units} units"
            )
        if not self.ledger.fits(request.slot, units):
            raise ReportRefusedError(
                f"user {me.user} refuses slot {request.slot} {request.round}: its window of "
                f"{me.w} slots already spent {budget.to_eps(self.ledger.window(request.slot)):.6g}"
                f", asked {eps:.6g}, limit {me.eps:.6g}"
            )
        self.ledger.record(request.slot, units)  # spend before drawing
        return eps

    def state_dict(self) -> dict[str, Any]:
        """The device's ledger as plain values (to persist across restarts)."""
        return {"user": self.enrollment.user, "ledger": self.ledger.state_dict()}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; refuses another user's ledger."""
        if state.get("user") != self.enrollment.user:
            raise ParameterError(f"state belongs to user {state.get('user')!r}")
        self.ledger.load_state(state["ledger"])
