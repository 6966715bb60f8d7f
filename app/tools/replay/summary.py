"""The utility of a replay against the exact histograms it was computed from.

Per released slot, the absolute error of each cell; over the run, the mean (MAE), the largest
error, how many releases were fresh, and for streams of more than ``k`` labels the top-``k``
recall (the share of the exact top-``k`` labels among the released top-``k``; a label stream
releases every label, so its precision is the same figure). Per level, the largest window spend
seen against the level's ``eps``.

An open-domain stream (:class:`OpenUtility`) releases a key -> count map: per slot, the MAE over
the union of the true and the released keys (a key not released counts 0, a released key nobody
sent has true count 0), the top-``k`` recall for ``k`` in :data:`OPEN_KS` and ``--top`` (the
share of the true top-``k`` keys among the released top-``k``), the top-``k`` precision (the
share of the released top-``k`` among the true top-``k``) and the precision of every released
key (the share someone sent in the slot), each averaged over the slots where it is defined; the
measures are the ``bench open-domain`` ones (:mod:`app.bench.open_domain.measures`). Per level,
the largest window spend of eps and of delta.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from app.bench.open_domain.measures import mae, precision, recall, top
from app.stream.config import StreamConfig
from app.tools.replay.run import OpenReleased, Released, Tally

OPEN_KS = (10, 100)
"""The top-k of an open stream's summary (``--top`` adds one)."""


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

    def add(self, r: Released | OpenReleased) -> None:
        assert isinstance(r, Released)
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
        out += _rows_lines(tally)
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


def precision_at(true: Mapping[str, int], released: Mapping[str, float], k: int) -> float:
    """Share of the released top-``k`` (keys released above 0) among the true top-``k`` (NaN
    if no key was released above 0).

    >>> precision_at({"a": 9, "b": 5, "c": 1}, {"a": 8.0, "z": 6.0, "c": -1.0}, 2)
    0.5
    """
    ranked = {key: c for key, c in released.items() if c > 0}
    if not ranked:
        return math.nan
    return len(top(true, k) & top(ranked, k)) / min(k, len(ranked))


@dataclass
class _Mean:
    """A mean over the slots where a measure is defined (NaN skipped)."""

    total: float = 0.0
    n: int = 0

    def add(self, x: float) -> None:
        if not math.isnan(x):
            self.total += x
            self.n += 1

    def text(self) -> str:
        return f"{self.total / self.n:.3f}" if self.n else "-"


@dataclass
class OpenUtility:
    """Running utility figures of an open-domain stream's replay (see the module docstring)."""

    stream: StreamConfig
    k: int = 10
    slots: int = 0
    fresh: int = 0
    released_keys: int = 0
    new_keys: int = 0
    true_keys: int = 0
    mae: _Mean = field(default_factory=_Mean)
    largest: float = 0.0
    precision: _Mean = field(default_factory=_Mean)
    recall: dict[int, _Mean] = field(default_factory=dict)
    precision_k: dict[int, _Mean] = field(default_factory=dict)
    peak: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def ks(self) -> tuple[int, ...]:
        return tuple(sorted({*OPEN_KS, self.k}))

    def add(self, r: Released | OpenReleased) -> None:
        assert isinstance(r, OpenReleased)
        true, released = r.exact, r.release.histogram()
        self.slots += 1
        self.fresh += bool(r.release.fresh)
        self.released_keys += len(released)
        self.new_keys += int(r.release.new.sum())
        self.true_keys += len(true)
        self.mae.add(mae(true, released))
        errors = [abs(released.get(key, 0) - true.get(key, 0)) for key in {*true, *released}]
        self.largest = max(self.largest, *errors, 0)
        self.precision.add(precision(true, released))
        for k in self.ks:
            self.recall.setdefault(k, _Mean()).add(recall(true, released, k))
            self.precision_k.setdefault(k, _Mean()).add(precision_at(true, released, k))
        for lv, w in zip(self.stream.levels, r.window, strict=True):
            was = self.peak.get(lv.name, (0.0, 0.0))
            self.peak[lv.name] = (max(was[0], float(w.spent)), max(was[1], float(w.delta_spent)))

    def lines(self, tally: Tally) -> list[str]:
        """The summary printed at the end of an open stream's replay."""
        s = self.stream
        out = [
            f"replay stream={s.id} mechanism={s.mechanism} (domain: open, max_keys={s.max_keys})"
            f" slots={self.slots} rows={tally.rows} fresh={self.fresh}/{self.slots}"
        ]
        out += _rows_lines(tally)
        if self.slots:
            out.append(
                f"  keys per slot: {self.true_keys / self.slots:.1f} true (after max_keys), "
                f"{self.released_keys / self.slots:.1f} released ({self.new_keys} newly "
                "selected in all)"
            )
            out.append(
                f"  MAE over true and released keys: {self.mae.text()}   largest error: "
                f"{self.largest:.4g}"
            )
            out.append(
                "  "
                + "   ".join(
                    f"top-{k} recall {self.recall[k].text()} precision {self.precision_k[k].text()}"
                    for k in self.ks
                )
            )
            out.append(f"  released keys someone sent (precision): {self.precision.text()}")
        for lv in s.levels:
            eps, delta = self.peak.get(lv.name, (0.0, 0.0))
            out.append(
                f"  level {lv.name}: w={lv.w} eps={lv.eps:g} delta={lv.delta:g}, largest window "
                f"spend eps {eps:.4g} delta {delta:.3g}"
            )
        return out


def _rows_lines(tally: Tally) -> list[str]:
    """What became of the file's rows: the events' outcomes and the malformed rows."""
    counted = ", ".join(f"{k}={v}" for k, v in sorted(tally.outcomes.items())) or "none"
    bad = ", ".join(f"{k}={v}" for k, v in sorted(tally.bad.items())) or "none"
    return [
        f"  events: {counted}; before the first slot: {tally.before_first}",
        f"  malformed rows (skipped): {sum(tally.bad.values())} ({bad})",
    ]
