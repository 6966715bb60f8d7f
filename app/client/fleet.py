"""Many devices answering one request together: the SDK's logic per device, numpy for the rest.

:class:`Fleet` holds one :class:`~app.client.device.Device` per enrolled user. For a collection
request, every device decides membership and checks and spends its own ledger through
:meth:`Device.admit` (so a refusal is exactly the SDK's refusal); the devices admitted with the
same oracle and budget are then perturbed in one vectorized draw, which has the same law as
perturbing each one alone. Used by the device simulator (:mod:`app.tools.simulator`).

>>> import numpy as np
>>> from app.dp.local import LPU
>>> service = LPU(d=3, eps=1.0, w=2, users=8)
>>> request = service.open_slot(np.random.default_rng(0))
>>> grid = {"slot_s": 1.0, "origin_s": 0.0}  # the grid of When.offline
>>> fleet = Fleet([Enrollment(user=i, w=2, eps=1.0, **grid) for i in range(8)])
>>> values, when = np.zeros(8, dtype=np.int64), When.offline(request.slot)
>>> answer = fleet.respond(request, values, np.random.default_rng(1), when)
>>> [r.user for r in answer.reports], answer.refused
([0, 2, 4, 6], [])
>>> again = fleet.respond(request, values, np.random.default_rng(2), when)
>>> again.reports, again.refused
([], [0, 2, 4, 6])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from app.client.clock import ClockRefusedError, When
from app.client.device import Device, Enrollment, Report
from app.client.errors import ReportRefusedError
from app.dp.local.wire import CollectionRequest
from app.dp.oracles import make


@dataclass
class Answer:
    """What a fleet sent for one request, and who refused (user indices): over budget
    (``refused``) or off the device's clock (``clock_refused``)."""

    reports: list[Report] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    clock_refused: list[int] = field(default_factory=list)
    no_value: int = 0


class Fleet:
    """Devices of one stream, indexed by their position; see the module docstring."""

    def __init__(self, enrollments: Sequence[Enrollment], tolerance_s: float | None = None) -> None:
        self.devices = [Device(e, tolerance_s) for e in enrollments]

    def respond(
        self,
        request: CollectionRequest,
        values: npt.ArrayLike,
        rng: np.random.Generator,
        when: When,
    ) -> Answer:
        """Every asked device's report; ``values[i]`` is device ``i``'s true value (< 0: none).

        ``when`` is the request's wall-clock slot and the devices' clock on receipt. A device
        without a value this slot does not answer (and spends nothing); a refusal is counted
        in the :class:`Answer`, never raised.
        """
        v = np.asarray(values, dtype=np.int64)
        out = Answer()
        admitted: dict[tuple[int, float], list[int]] = {}
        for i, device in enumerate(self.devices):
            if not device.asked(request):
                continue
            if v[i] < 0:
                out.no_value += 1
                continue
            try:
                eps = device.admit(request, int(v[i]), when)
            except ClockRefusedError:
                out.clock_refused.append(device.enrollment.user)
                continue
            except ReportRefusedError:
                out.refused.append(device.enrollment.user)
                continue
            if eps is not None:
                admitted.setdefault((device.group, eps), []).append(i)
        for (group, eps), idx in admitted.items():
            oracle = make(request.oracle[group], request.d, eps)
            payloads = oracle.payloads(oracle.perturb(v[idx], rng))
            for i, payload in zip(idx, payloads, strict=True):
                out.reports.append(
                    Report(
                        request.mechanism,
                        request.slot,
                        request.round,
                        self.devices[i].enrollment.user,
                        group,
                        oracle.name,
                        payload,
                    )
                )
        return out
