"""Verdicts: run one audit case, search an event on half the runs, certify it on the other.

For a case (:class:`app.audit.runners.Case`) the auditor draws ``trials`` runs on each input of
the neighbouring pair, splits each side in two halves, searches the best distinguishing event on
the first halves (:func:`app.audit.events.search`) and counts it on the second
(:func:`app.audit.events.evaluate`). The lower bound holds with confidence ``1 - alpha``; a
registered mechanism *violates* its claim when the bound exceeds the claimed ``eps``; a power
control is *caught* when it does.

Besides the fixed features of :mod:`app.audit.features`, every audit gets one *fitted* feature,
``fitted_projection``: the runs' outputs (every released cell, and the target's reports in local
mode) projected on ``(mean_A - mean_B) / variance`` per coordinate, both estimated on the search
half only. This is the linear discriminant of independent coordinates (for a period mechanism,
whose noise a whole period shares, it weighs the slots the user did not change too). It is fixed
before the holdout half is looked at, so its events are certified like any other.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from app.audit.events import evaluate, search
from app.audit.features import Runs
from app.audit.runners import ADAPTERS, Case, Settings
from app.audit.tight import tight_cases

Progress = Callable[[int], None]


@dataclass
class Verdict:
    """The outcome of one audit, as the table and ``--json`` show it."""

    mechanism: str
    kind: str
    relation: str = ""
    scenario: str = ""
    group: int | None = None
    w: int | None = None
    eps: float | None = None
    sensitivity: int | None = None
    lower_bound: float | None = None
    event: str = ""
    counts: list[int] = field(default_factory=list)
    trials: int = 0
    confidence: float = 0.95
    noise: str = ""
    control: bool = False
    status: str = "ok"
    note: str = ""

    @property
    def failed(self) -> bool:
        """Whether this verdict makes the audit fail (a violation or a missed control)."""
        return self.status in ("VIOLATION", "MISSED", "ERROR")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["lower_bound"] is not None and not math.isfinite(out["lower_bound"]):
            out["lower_bound"] = None
        return out


def audit_case(
    case: Case,
    trials: int,
    alpha: float,
    rng: np.random.Generator,
    progress: Progress,
    control: bool = False,
    note: str = "",
) -> Verdict:
    """Run ``trials`` per side, search on one half, certify on the other."""
    runs_a = case.run("A", trials, rng, progress)
    runs_b = case.run("B", trials, rng, progress)
    names_a, xa, pa = case.features(runs_a)
    names_b, xb, pb = case.features(runs_b)
    if names_a != names_b:  # a feature seen on one side only (e.g. a report never made)
        common = [n for n in names_a if n in names_b]
        xa = xa[:, [names_a.index(n) for n in common]]
        xb = xb[:, [names_b.index(n) for n in common]]
        names_a = common
    h = trials // 2
    if case.statistic is None:
        fa, fb = fitted_projection(_outputs(runs_a), _outputs(runs_b), h)
        names_a = [*names_a, "fitted_projection"]
        xa, xb = np.column_stack([xa, fa]), np.column_stack([xb, fb])
    else:  # the likelihood-ratio statistic alone: thresholds on it are the best events
        j = names_a.index(case.statistic)
        names_a, xa, xb = [case.statistic], xa[:, [j]], xb[:, [j]]
        pa, pb = np.zeros_like(pa), np.zeros_like(pb)
    event = search(names_a, xa[:h], xb[:h], pa[:h], pb[:h], alpha)
    result = evaluate(event, names_a, xa[h:], xb[h:], pa[h:], pb[h:], alpha)
    bound = result.lower_bound
    exceeds = math.isfinite(bound) and bound > case.claim.eps
    if control:
        status = "caught" if exceeds else "MISSED"
    else:
        status = "VIOLATION" if exceeds else "ok"
    label = case.label(int(event.threshold)) if event.feature == "pattern" else None
    return Verdict(
        mechanism=case.mechanism,
        kind=case.kind,
        relation=case.relation,
        scenario=case.scenario,
        group=case.group,
        w=case.claim.w,
        eps=case.claim.eps,
        sensitivity=case.sensitivity,
        lower_bound=max(bound, 0.0) if math.isfinite(bound) else 0.0,
        event=event.describe(label),
        counts=[result.k_a, result.n_a, result.k_b, result.n_b],
        trials=trials,
        confidence=1.0 - alpha,
        noise=case.noise,
        control=control,
        status=status,
        note=note,
    )


def _outputs(runs: Runs) -> np.ndarray:
    """Everything an observer sees in each run as one row: released cells, target's reports."""
    parts = [np.nan_to_num(runs.hist.reshape(runs.hist.shape[0], -1))]
    if runs.reports is not None:
        parts.append(runs.reports.reshape(runs.reports.shape[0], -1))
    return np.column_stack(parts)


def fitted_projection(a: np.ndarray, b: np.ndarray, h: int) -> tuple[np.ndarray, np.ndarray]:
    """``a @ u`` and ``b @ u`` with ``u = (mean_A - mean_B) / pooled variance`` estimated on the
    first ``h`` rows of each side only (the search half); coordinates that never vary get 0.

    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal([1.0, 0.0], 1.0, (400, 2)); b = rng.normal([0.0, 0.0], 1.0, (400, 2))
    >>> pa, pb = fitted_projection(a, b, 200)
    >>> bool(pa[200:].mean() - pb[200:].mean() > 0.5)  # the shift survives on the holdout
    True
    """
    diff = a[:h].mean(axis=0) - b[:h].mean(axis=0)
    var = (a[:h].var(axis=0) + b[:h].var(axis=0)) / 2.0
    weights = np.where(var > 1e-12, diff / np.where(var > 1e-12, var, 1.0), 0.0)
    return a @ weights, b @ weights


def cases_for(
    name: str, cls: Any, settings: Settings, rng: np.random.Generator
) -> tuple[list[Case], Verdict | None]:
    """The audit cases of a registered mechanism, or a "no adapter" verdict for its kind."""
    adapter = ADAPTERS.get(cls.kind)
    if adapter is None:
        return [], Verdict(
            name,
            str(cls.kind),
            status="no adapter",
            note=f"no adapter for kind {cls.kind!r}: add one to app.audit.runners.ADAPTERS",
        )
    worst = tight_cases(name, cls) if settings.worst_case else []
    return [*adapter.cases(name, cls, settings, rng), *worst], None
