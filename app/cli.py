"""The ``dpstream`` command line: one verb per job, each defined next to the code it drives.

Each module in :data:`VERB_MODULES` exposes ``register(subparsers)``, which adds its verbs and
sets ``func`` on their parsers; heavy imports (Faust, Kafka clients) happen inside the verb, so
``dpstream --help`` stays fast. A verb returns its exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

VERB_MODULES = (
    "app.bench.cli",
    "app.stream.cli",
    "app.conformance",
    "app.tools.cli",
    "app.audit.cli",
    "app.verify.cli",
)
"""Registration order matters: :mod:`app.tools.cli` adds ``bench throughput`` to ``bench``."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpstream",
        description="Differentially private histograms of event streams under w-event privacy.",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for module in VERB_MODULES:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
