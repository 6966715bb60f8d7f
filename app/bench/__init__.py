"""Offline replay and benchmarks: streams, error measures, experiment grids, reports.

``app.bench`` builds mechanisms only through :mod:`app.dp.registry` and records the seed and
parameters of every run in its outputs.
"""

from __future__ import annotations

__all__: list[str] = []
