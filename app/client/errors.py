"""The device SDK's refusals (one root: :class:`~app.dp.errors.DPError`)."""

from __future__ import annotations

from app.dp.errors import DPError


class ReportRefusedError(DPError):
    """The device refused a collection request that would exceed its own privacy budget.

    An honest service never triggers this: it means the service asked the user again within
    its window, asked more budget than its window has left, or describes another requirement
    than the device's. Nothing was sent. The service's population ledger or configuration is
    wrong; report the numbers in the message.
    """
