"""The capacity benchmarks of the service (``dpstream capacity``, :mod:`.cli`): they start a
broker and ``dpstream worker`` processes and measure CPU per event, memory, recovery, readiness
under overload and counting under group churn. Modules are imported on demand."""

from __future__ import annotations

__all__ = ["bare", "churn", "cli", "fleet", "memory", "overload", "recovery", "throughput"]
