"""One audit run: build every case (registered mechanisms and power controls), sample, judge.

:func:`run_audit` is what ``dpstream audit`` and the tests call. Cases are built first (the
boundary search runs then), so the progress bar knows the total number of trials; a mechanism
whose kind has no adapter gets a "no adapter" verdict, and a mechanism whose audit raises gets
an ``ERROR`` verdict with the message, never a crash of the whole run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from app.audit.controls import CONTROLS
from app.audit.runners import Case, Settings
from app.audit.verdict import Verdict, audit_case, cases_for


@dataclass
class _Job:
    case: Case
    trials: int
    control: bool
    note: str = ""


def run_audit(
    names: Sequence[str],
    settings: Settings,
    trials: int,
    alpha: float = 0.05,
    seed: int = 20261123,
    controls: Sequence[str] | None = None,
    progress: bool | None = None,
) -> list[Verdict]:
    """Audit the registered mechanisms ``names`` and the power controls ``controls``.

    ``trials`` runs per input of each pair (half to search the event, half to certify it);
    a control runs with ``max(trials, its own trial count)``. ``controls=None`` runs all of
    them. ``progress=None`` shows a bar only on a terminal.
    """
    from app.dp.registry import get

    rng = np.random.default_rng(seed)
    verdicts: list[Verdict] = []
    jobs: list[_Job | Verdict] = []
    for name in names:
        cls = get(name)
        try:
            cases, missing = cases_for(name, cls, settings, rng)
        except Exception as exc:  # noqa: BLE001 - reported as a verdict, never a crash
            jobs.append(Verdict(name, str(cls.kind), status="ERROR", note=f"{exc!r}"))
            continue
        if missing is not None:
            jobs.append(missing)
        jobs.extend(_Job(case, trials, False) for case in cases)
    for control in CONTROLS:
        if controls is None or control.name in controls:
            jobs.append(_Job(control.build(), max(trials, control.trials), True, control.bug))
    total = sum(2 * j.trials for j in jobs if isinstance(j, _Job))
    with tqdm(total=total, unit="run", disable=None if progress is None else not progress,
              desc="audit") as bar:  # fmt: skip
        for job in jobs:
            if isinstance(job, Verdict):
                verdicts.append(job)
                continue
            try:
                verdicts.append(audit_case(job.case, job.trials, alpha, rng, bar.update,
                                           job.control, job.note))  # fmt: skip
            except Exception as exc:  # noqa: BLE001
                verdicts.append(Verdict(job.case.mechanism, job.case.kind, job.case.relation,
                                        job.case.scenario, job.case.group, status="ERROR",
                                        control=job.control, note=f"{exc!r}"))  # fmt: skip
    return verdicts
