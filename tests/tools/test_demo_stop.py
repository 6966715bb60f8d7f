"""Issue 23 item 10: SIGTERM stops ``dpstream demo`` exactly as Ctrl-C does.

The demo runs as a supervisor or ``timeout`` would run it; once it prints its first release
line, it gets SIGTERM and must exit 0 within its clean-up time, leaving neither the embedded
broker, nor the worker, nor its temporary folder behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

START_S = 90.0
"""Time for the broker, the topics, the worker and a first release on a loaded machine."""
STOP_S = 45.0
"""The demo's own bound: threads 10 s, the worker's SIGTERM 30 s, the broker 5 s."""


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (Linux ``/proc/PID/task/*/children``)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                kids = {int(k) for k in (task / "children").read_text().split()}
            except OSError:
                continue
            todo += sorted(kids - found)
            found |= kids
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_sigterm_stops_broker_worker_and_removes_the_temp_folder(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSTREAM_")}
    temp = tmp_path / "tmp"
    temp.mkdir()
    env["TMPDIR"] = str(temp)
    err = (tmp_path / "stderr.txt").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "demo", "--rate", "50"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
    )
    try:
        deadline = time.monotonic() + START_S
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("clicks ") or time.monotonic() > deadline:
                break
        started = _descendants(proc.pid)
        why = (tmp_path / "stderr.txt").read_text()[-2000:]
        assert len(started) >= 2, f"broker and worker should run: {proc.poll()} {why}"
        assert [p.name for p in temp.iterdir()][0].startswith("dpstream-demo-")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(STOP_S) == 0
        rest = proc.stdout.read().splitlines()  # issue 32: one closing line, and it is last
        assert rest[-1].startswith("demo stopped after ") and "temporary folder removed" in rest[-1]
        assert sum("demo stopped" in line for line in rest) == 1
        time.sleep(0.5)
        assert [p for p in started if _alive(p)] == []
        assert list(temp.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        err.close()
