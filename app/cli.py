"""The ``dpstream`` command line: one verb per job, each defined next to the code it drives.

Each module in :data:`VERB_MODULES` exposes ``register(subparsers)``, which adds its verbs and
sets ``func`` on their parsers; heavy imports (Faust, Kafka clients, numpy) happen inside the
verb, so ``dpstream --help`` stays fast. A verb whose options belong to a heavy module sets
``takes_rest``: the arguments the parser does not know are handed to it as ``args.rest``, for
the module's own parser. A verb returns its exit code.
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
    "app.tools.capacity.cli",
    "app.audit.cli",
    "app.verify.cli",
)
"""The modules that add verbs (in the order ``dpstream --help`` lists them)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpstream",
        description="Differentially private histograms of event streams under w-event privacy.",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for module in VERB_MODULES:
        importlib.import_module(module).register(sub)
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The verb and its options; ``args.rest``: the arguments a ``takes_rest`` verb hands to
    its module's own parser (any other verb refuses them, as ``parse_args`` would)."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and not getattr(args, "takes_rest", False):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
