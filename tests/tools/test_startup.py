"""Issue 15: building the ``dpstream`` parser imports no heavy library, so ``--help`` is fast.

Registering a verb must not import what only running it needs (SciPy for ``audit``, numpy for
``capacity throughput``, Faust and the Kafka clients for the service verbs).
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


def test_a_refused_connection_fails_at_once_not_after_the_timeout() -> None:
    """Issue 23 item 12: nothing listens on port 1, so the probe need not wait its 5 s."""
    import time

    import pytest

    from app.stream.config import load_settings
    from app.stream.errors import BrokerUnreachable
    from app.stream.kafka import probe

    settings = load_settings({"DPSTREAM_BROKER": "127.0.0.1:1"})
    start = time.monotonic()
    with pytest.raises(BrokerUnreachable, match="Connection refused"):
        probe(settings, 5.0)
    assert time.monotonic() - start < 2.0


def test_worker_says_an_environment_error_before_importing_faust() -> None:
    """Issue 23 item 12: configuration, noise key and broker are checked before Faust loads."""
    import os

    code = (
        "import sys\n"
        "from app.cli import main\n"
        "code = main(['worker'])\n"
        "print(code, ','.join(m for m in ('faust', 'aiokafka', 'rocksdict') if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSTREAM_")}
    env["DPSTREAM_BROKER"] = "127.0.0.1:1"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
    )
    assert out.stdout.split() == ["2"], out.stdout + out.stderr
    assert "noise key" in out.stderr.lower() and out.stderr.count("\n") == 1
