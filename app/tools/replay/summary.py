"""The utility of a replay against the exact histograms it was computed from.

Per released slot, the absolute error of each cell; over the run, the mean (MAE), the largest
error, how many releases were fresh, and for streams of more than ``k`` labels the top-``k``
recall (the share of the exact top-``k`` labels among the released top-``k``; a label stream
releases every label, so its precision is the same figure). Per level, the largest window spend
seen against the level's ``eps``. An open-domain stream adds recall and precision of the keys
it releases (not here yet: see the package).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.stream.config import StreamConfig
from app.tools.replay.run import Released, Tally


@dataclass
class Utility:
    """Running utility figures of one replay."""

    stream: StreamConfig
    k: int = 10
    slots: int = 0
    fresh: int = 0
    abs_sum: float = 0.0
    cells: int = 0
    max_abs: float = 0.0
    topk_hits: int = 0
    peak: dict[str, float] = field(default_factory=dict)

    def add(self, r: Released) -> None:
        released = np.asarray(r.release.histogram, dtype=np.float64)
        exact = np.asarray(r.exact, dtype=np.float64)
        err = np.abs(released - exact)
        self.slots += 1
        self.fresh += bool(r.release.fresh)
        self.abs_sum += float(err.sum())
        self.cells += err.size
        self.max_abs = max(self.max_abs, float(err.max(initial=0.0)))
        if self.stream.d > self.k:
            top_true = set(np.argsort(-exact, kind="stable")[: self.k].tolist())
            top_rel = set(np.argsort(-released, kind="stable")[: self.k].tolist())
            self.topk_hits += len(top_true & top_rel)
        for lv, w in zip(self.stream.levels, r.window, strict=True):
            self.peak[lv.name] = max(self.peak.get(lv.name, 0.0), float(w.spent))

    def lines(self, tally: Tally) -> list[str]:
        """The summary printed at the end of a replay."""
        s = self.stream
        out = [
            f"replay stream={s.id} mechanism={s.mechanism} slots={self.slots} "
            f"rows={tally.rows} fresh={self.fresh}/{self.slots}"
        ]
        counted = ", ".join(f"{k}={v}" for k, v in sorted(tally.outcomes.items())) or "none"
        out.append(f"  events: {counted}; before the first slot: {tally.before_first}")
        bad = ", ".join(f"{k}={v}" for k, v in sorted(tally.bad.items())) or "none"
        out.append(f"  malformed rows (skipped): {sum(tally.bad.values())} ({bad})")
        if self.slots:
            mae = self.abs_sum / self.cells if self.cells else 0.0
            out.append(f"  MAE per cell: {mae:.4g}   largest error: {self.max_abs:.4g}")
            if s.d > self.k:
                recall = self.topk_hits / (self.k * self.slots)
                out.append(
                    f"  top-{self.k} recall (= precision, all labels released): {recall:.3f}"
                )
        for lv in s.levels:
            spent = self.peak.get(lv.name, 0.0)
            out.append(
                f"  level {lv.name}: w={lv.w} eps={lv.eps:g}, largest window spend {spent:.4g}"
            )
        return out
