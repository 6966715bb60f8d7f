"""The device-side SDK of local mode: answer collection requests within the device's budget.

A device receives :class:`~app.dp.local.wire.CollectionRequest` s, decides whether its bucket
is in the cohort, checks its own w-event ledger, perturbs its true value with the requested
frequency oracle, and returns a :class:`~app.client.device.Report`. It is independent of Kafka:
the producer that sends reports comes with the service wiring.
"""

from __future__ import annotations

from app.client.clock import ClockRefusedError, When
from app.client.device import Device, Enrollment, Report
from app.client.errors import ReportRefusedError

__all__ = ["ClockRefusedError", "Device", "Enrollment", "Report", "ReportRefusedError", "When"]
