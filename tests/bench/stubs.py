"""Stand-ins for finished benchmark runs, so that report tests run no benchmark."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any


def write_cost_slopes(folder: Path, **host: Any) -> Path:
    """Write a finished cost run's ``cost_slopes.csv`` into ``folder``: BD's slope 0.5 (0.6 at
    the top of the range, the claim holding) on each axis d, m and N, with the columns ``host``
    (the run's seed, load and machine facts) on every row; the folder."""
    with (folder / "cost_slopes.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, ["mechanism", "axis", "slope", "slope_top", "holds", *host])
        w.writeheader()
        for axis in ("d", "m", "N"):
            w.writerow(
                {
                    "mechanism": "bd",
                    "axis": axis,
                    "slope": 0.5,
                    "slope_top": 0.6,
                    "holds": True,
                    **host,
                }
            )
    return folder
