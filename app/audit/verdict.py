"""Verdicts: run one audit case, search an event on half the runs, certify it on the other.

For a case (:class:`app.audit.runners.Case`) the auditor draws ``trials`` runs on each input of
the neighbouring pair, splits each side in two halves, searches the best distinguishing event on
the first halves (:func:`app.audit.events.search`) and counts it on the second
(:func:`app.audit.events.evaluate`). The lower bound holds with confidence ``1 - alpha``; a
registered mechanism *violates* its claim when the bound exceeds the claimed ``eps``; a power
control is *caught* when it does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from app.audit.events import evaluate, search
from app.audit.runners import ADAPTERS, Case, Settings

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
        mechanism=case.mechanism, kind=case.kind, relation=case.relation,
        scenario=case.scenario, group=case.group, w=case.claim.w, eps=case.claim.eps,
        sensitivity=case.sensitivity, lower_bound=max(bound, 0.0) if math.isfinite(bound) else 0.0,
        event=event.describe(label), counts=[result.k_a, result.n_a, result.k_b, result.n_b],
        trials=trials, confidence=1.0 - alpha, control=control, status=status, note=note,
    )  # fmt: skip


def cases_for(
    name: str, cls: Any, settings: Settings, rng: np.random.Generator
) -> tuple[list[Case], Verdict | None]:
    """The audit cases of a registered mechanism, or a "no adapter" verdict for its kind."""
    adapter = ADAPTERS.get(cls.kind)
    if adapter is None:
        return [], Verdict(
            name, str(cls.kind), status="no adapter",
            note=f"no adapter for kind {cls.kind!r}: add one to app.audit.runners.ADAPTERS",
        )  # fmt: skip
    return adapter.cases(name, cls, settings, rng), None
