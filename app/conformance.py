"""``dpstream check``: run the conformance suite on the installed mechanisms.

The same checks as ``tests/dp/test_conformance.py`` (:mod:`app.dp.checks`), without pytest, so an
operator can verify the mechanisms of a deployed image before pointing it at real data.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def register(sub: Any) -> None:
    check = sub.add_parser(
        "check",
        help="run the conformance checks on every registered mechanism (or the named ones)",
    )
    check.add_argument("mechanisms", nargs="*", help="mechanism names (default: all)")
    check.add_argument("--seed", type=int, default=20261122, help="seed of the checks' generator")
    check.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    import numpy as np

    from app.dp.checks import factory_for
    from app.dp.checks.suite import yield_checks
    from app.dp.registry import get, names

    unknown = [n for n in args.mechanisms if n not in names()]
    if unknown:
        print(
            f"dpstream check: unknown mechanism(s) {', '.join(map(repr, unknown))}; "
            f"registered: {', '.join(names())}",
            file=sys.stderr,
        )
        return 2
    failures = 0
    for name in args.mechanisms or names():
        cls = get(name)
        for check in yield_checks(cls.kind):
            label = f"{name}:{check.__name__.removeprefix('check_')}"
            started = time.perf_counter()
            try:
                check(factory_for(cls), np.random.default_rng(args.seed))
            except AssertionError as exc:
                failures += 1
                print(f"FAIL {label}: {exc}")
            else:
                print(f"ok   {label} ({time.perf_counter() - started:.2f} s)")
    print(f"{failures} failure(s)")
    return 1 if failures else 0
