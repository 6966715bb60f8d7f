"""``dpstream audit``: the empirical privacy audit of the registered mechanisms.

``dpstream audit`` audits every registered mechanism and runs the power controls;
``dpstream audit uniform ba`` only those two (plus the controls unless ``--no-controls``).
``--quick`` is the CI profile: one add/remove and one replace case per group, the service's
default noise only, 200 runs per input unless ``--trials`` says otherwise (about a minute).
Every profile adds the worst-case cases (a pair realizing the mechanism's loss, claimed at that
computed loss, at their own runs per input) and runs the power controls at theirs; with the
controls come the open-domain key-selection cases (app.audit.selection) and their control.
A line per mechanism goes to stderr as its audit ends. Exit code 1 when a lower bound
exceeds a claimed ``eps``, a power control is not caught, or an audit fails to run; 2 for
a usage error (an unknown mechanism or control, a bad option). A correct mechanism gets a
violation verdict with probability at most ``--alpha`` (0.05) per verdict (docs/audit.md).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    audit = sub.add_parser(
        "audit",
        help="empirical privacy audit: lower bounds on the privacy loss vs the claimed eps",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    audit.add_argument("mechanisms", nargs="*", help="registered names (default: all)")
    audit.add_argument(
        "--trials",
        type=_trials,
        default=None,
        help="runs per input of each neighbouring pair (default 2000; 200 with --quick)",
    )
    audit.add_argument(
        "--alpha",
        type=_alpha,
        default=0.05,
        help="1 - confidence of each lower bound (default 0.05)",
    )
    audit.add_argument("--seed", type=int, default=20261123, help="seed of the audit's generator")
    audit.add_argument(
        "--quick",
        action="store_true",
        help="CI profile: one add/remove and one replace case per group, "
        "the service's noise only, 200 runs per input",
    )
    audit.add_argument("--no-controls", action="store_true", help="skip the power controls")
    audit.add_argument(
        "--controls", nargs="*", metavar="NAME", help="run only these power controls"
    )
    audit.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    audit.set_defaults(func=_audit)


def _audit(args: argparse.Namespace) -> int:
    from app.audit.controls import CONTROLS
    from app.audit.report import exit_code, summary, table, to_json
    from app.audit.run import run_audit
    from app.audit.runners import QUICK, Settings
    from app.audit.selection import CONTROLS as SELECTION_CONTROLS
    from app.dp.registry import names

    unknown = [n for n in args.mechanisms if n not in names()]
    known = {k.name for k in CONTROLS} | {k.name for k in SELECTION_CONTROLS}
    unknown += [f"control {c}" for c in args.controls or [] if c not in known]
    if unknown:
        print(
            f"dpstream audit: unknown {', '.join(map(repr, unknown))}; registered: "
            f"{', '.join(names())}; controls: {', '.join(sorted(known))}",
            file=sys.stderr,
        )
        return 2
    controls: list[str] | None = [] if args.no_controls else args.controls
    settings = QUICK if args.quick else Settings()
    verdicts = run_audit(
        args.mechanisms or names(),
        settings,
        args.trials or settings.trials,
        args.alpha,
        args.seed,
        controls,
        progress=False,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    if args.json:
        print(to_json(verdicts))
    else:
        print(table(verdicts))
        print(summary(verdicts))
    return exit_code(verdicts)


def _trials(text: str) -> int:
    value = int(text)
    if value < 4:
        raise argparse.ArgumentTypeError(f"must be an integer >= 4, got {value}")
    return value


def _alpha(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1), got {value}")
    return value
