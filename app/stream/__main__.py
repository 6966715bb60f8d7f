"""``python -m app.stream VERB``: the ``dpstream`` command line without the console script.

The worker's subprocesses (demo, tests, benchmarks) start ``sys.executable -m app.stream
worker``, which needs no installed entry point.
"""

from __future__ import annotations

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main())
