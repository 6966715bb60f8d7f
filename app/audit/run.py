"""One audit run: build every case (registered mechanisms and power controls), sample, judge.

:func:`run_audit` is what ``dpstream audit`` and the tests call. Cases are built first (the
boundary search runs then), so the progress bar knows the total number of trials; a mechanism
whose kind has no adapter gets a "no adapter" verdict, and a mechanism whose audit raises gets
an ``ERROR`` verdict with the message, never a crash of the whole run. ``log`` gets one line
per mechanism (and per control) as soon as its audit ends: its cases, its largest lower bound
against the claim, and the seconds it took, so a long run is never silent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from app.audit.controls import CONTROLS
from app.audit.runners import Case, Settings
from app.audit.selection import selection_verdicts
from app.audit.verdict import Progress, Verdict, audit_case, cases_for


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
    log: Callable[[str], None] | None = None,
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
        jobs.extend(_Job(case, max(trials, case.min_trials), False) for case in cases)
    for control in CONTROLS:
        if controls is None or control.name in controls:
            jobs.append(_Job(control.build(), max(trials, control.trials), True, control.bug))
    total = sum(2 * j.trials for j in jobs if isinstance(j, _Job))
    owners = [_owner(j) for j in jobs]
    units = list(dict.fromkeys(owners))
    started, done = time.monotonic(), 0
    if log is not None:
        count = sum(isinstance(j, _Job) for j in jobs)
        log(f"audit: {len(units)} mechanisms and controls, {count} cases, {total} runs")
    with tqdm(
        total=total, unit="run", disable=None if progress is None else not progress, desc="audit"
    ) as bar:
        for i, job in enumerate(jobs):
            if log is not None and (i == 0 or owners[i - 1] != owners[i]):
                started = time.monotonic()
            if isinstance(job, Verdict):
                verdicts.append(job)
            else:
                verdicts.append(_audit_job(job, alpha, rng, bar.update))
            if log is not None and (i + 1 == len(jobs) or owners[i + 1] != owners[i]):
                done += 1
                mine = [v for v, o in zip(verdicts, owners[: i + 1], strict=True) if o == owners[i]]
                log(progress_line(done, len(units), mine, time.monotonic() - started))
    verdicts += selection_verdicts(trials, alpha, rng, controls)  # open domains (issue 36)
    return verdicts


def _owner(job: _Job | Verdict) -> str:
    if isinstance(job, Verdict):
        return job.mechanism
    return job.case.mechanism


def progress_line(done: int, total: int, verdicts: Sequence[Verdict], seconds: float) -> str:
    """One line on a finished mechanism or control.

    >>> v = Verdict("pba", "central", lower_bound=0.31, eps=1.0, trials=50)
    >>> progress_line(3, 29, [v, v], 4.04)
    'audit [3/29] pba (central): 2 cases, largest lower bound 0.310 (claim 1.00), ok, 4.0 s'
    """
    first = verdicts[0]
    statuses = sorted({v.status for v in verdicts})
    scored = [v for v in verdicts if v.lower_bound is not None and v.eps]
    best = max(scored, key=lambda v: (v.lower_bound or 0.0) / float(v.eps or 1.0), default=None)
    worst = (
        ""
        if best is None
        else (f", largest lower bound {best.lower_bound:.3f} (claim {best.eps:.2f})")
    )
    return (
        f"audit [{done}/{total}] {first.mechanism} ({first.kind}): {len(verdicts)} cases"
        f"{worst}, {'/'.join(statuses)}, {seconds:.1f} s"
    )


def _audit_job(job: _Job, alpha: float, rng: np.random.Generator, update: Progress) -> Verdict:
    try:
        return audit_case(job.case, job.trials, alpha, rng, update, job.control, job.note)
    except Exception as exc:  # noqa: BLE001 - reported as a verdict, never a crash
        case = job.case
        return Verdict(
            case.mechanism,
            case.kind,
            case.relation,
            case.scenario,
            case.group,
            status="ERROR",
            control=job.control,
            note=f"{exc!r}",
        )
