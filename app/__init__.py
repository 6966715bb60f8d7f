"""dpstream: differentially private histograms of infinite event streams under w-event privacy."""

from __future__ import annotations

__version__ = "0.1.0"
