"""T-Drive taxi counts per region, half-hourly: the OptStream bench's count dataset.

The issue asks for the OptStream presets on "T-Drive regional counts" besides the load series.
Read in place with :func:`app.bench.engine.datasets.tdrive.load_tdrive` (the T-Drive sample of 598
taxis, 2-8 February 2008, Beijing time), with these choices:

* regions: the cells of a ``grid x grid`` grid over the papers' Beijing box (lon [116, 116.8] x
  lat [39.5, 40.3]); ``grid = 3`` gives 9 regions, the centre one holding the city (most fixes),
  the eight around it the suburbs. Each region is its own ``d = 1`` series, as the paper treats
  its regions;
* slots: half-hours from 2008-02-03 00:00 Beijing time, so that ``w = 48`` is one calendar day
  as in the load series; five whole days (3-7 February, 240 slots, five periods). The sample
  starts on 2 February at 13:31 and ends on 8 February at 17:39, so these are all its whole
  days. They include the eve of the Chinese New Year (6 February 2008) and its first day;
* value: the number of taxis that reported a fix from the region during the slot, each taxi
  counted once per slot at its last fix of the slot (missing policy ``"absent"``: a taxi that
  did not report is not counted). One taxi changes one count of a slot by at most one, so
  these are counts and ``Delta = 1`` (the bench's ``alpha = None``) is their sensitivity.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.bench.engine.datasets.tdrive import load_tdrive

START = "2008-02-03 00:00:00"
"""First half-hour slot: midnight Beijing time, the first whole day of the sample."""

DAYS = 5
"""Whole days of the sample from :data:`START` (3-7 February 2008)."""


def tdrive_regions(
    grid: int = 3, days: int = DAYS, path: Path | None = None
) -> tuple[list[str], np.ndarray]:
    """``(region labels, (days * 48, grid * grid) counts)``: taxis reporting per region and
    half-hour from the taxi files in ``path`` (default: the sample); see the module docstring."""
    ds = load_tdrive(path, grid=grid, slot="30min", start=START, T=days * 48, missing="absent")
    return list(ds.labels), ds.histograms().astype(np.float64)
