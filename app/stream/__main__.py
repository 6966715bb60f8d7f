"""``python -m app.stream VERB``: the service verbs alone (same handlers as ``dpstream``)."""

from __future__ import annotations

import argparse
import sys

from app.stream.cli import register


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m app.stream")
    register(parser.add_subparsers(dest="verb", metavar="VERB", required=True))
    args = parser.parse_args()
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
