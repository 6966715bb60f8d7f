"""Issue 15: building the ``dpstream`` parser imports no heavy library, so ``--help`` is fast.

Registering a verb must not import what only running it needs (SciPy for ``audit``, numpy for
``bench throughput``, Faust and the Kafka clients for the service verbs).
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("scipy", "numpy", "faust", "confluent_kafka", "matplotlib")


def test_building_the_parser_imports_no_heavy_library() -> None:
    code = (
        "import sys\n"
        "from app.cli import build_parser\n"
        "build_parser()\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""
