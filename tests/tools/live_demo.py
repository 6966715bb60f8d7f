"""``dpstream demo`` as a newcomer runs it, for the tests that run the docs' commands against it.

:func:`running_demo` starts the demo (its own embedded broker, worker and producers) in a
subprocess, waits for its first release line, and yields the environment its ``export`` line
gives, as a newcomer would paste it into another shell. At the end it stops the demo with
SIGTERM (as ``timeout`` would) and waits for its clean-up.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
START_S = 120.0
"""Time for the broker, the topics, the worker and a first release on a loaded machine."""
STOP_S = 60.0
"""The demo's own clean-up bound (threads, the worker's SIGTERM, the broker) and a margin."""


def exported(line: str) -> dict[str, str]:
    """The variables of the demo's ``export A=1 B='x y'`` line.

    >>> exported("  export DPSTREAM_BROKER=127.0.0.1:9 DPSTREAM_CONFIG='/a b.yaml'")
    {'DPSTREAM_BROKER': '127.0.0.1:9', 'DPSTREAM_CONFIG': '/a b.yaml'}
    """
    words = shlex.split(line)
    assert words[0] == "export", line
    return dict(word.split("=", 1) for word in words[1:])


@contextmanager
def running_demo(*args: str) -> Iterator[dict[str, str]]:
    """``dpstream demo ARGS`` until its first release; yields ``os.environ`` plus its export
    line (the demo's ``DPSTREAM_NOISE_KEY`` is its own: the verbs need none)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSTREAM_")}
    proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "app.stream", "demo", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + START_S
        while not any(ln.startswith("clicks ") for ln in lines):
            assert proc.poll() is None, f"the demo exited with {proc.returncode}: {lines}"
            assert time.monotonic() < deadline, f"no release within {START_S} s: {lines}"
            time.sleep(0.5)
        export = next(ln for ln in lines if ln.lstrip().startswith("export "))
        yield {**env, **exported(export)}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        reader.join(10)
