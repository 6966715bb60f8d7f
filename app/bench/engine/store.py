"""The run store: every run behind RESULTS.md, its rows and its record, under one root.

The root (``docs/results`` for RESULTS.md) holds a folder per run with its rows as CSV, kept
gzipped (``results.csv.gz``, ``optstream.csv.gz``, ...: the form the repository keeps, so that
``dpstream bench results --reuse`` rebuilds the report from a clone), and one ``runs.json``:
per run, the command that made it, the commit it ran at, the machine, its wall time, the
1-minute load after it and the facts of its data the report quotes (:func:`record`).

>>> sorted(machine())
['cpus', 'numpy', 'platform', 'python']
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

__all__ = [
    "RUNS_FILE",
    "commit",
    "find",
    "gzip_file",
    "machine",
    "read_rows",
    "record",
    "records",
    "write_records",
]

RUNS_FILE = "runs.json"


def machine() -> dict[str, str]:
    """Facts of this machine, measured now: platform, CPU count, Python and numpy versions."""
    import numpy

    return {
        "platform": platform.platform(),
        "cpus": str(os.cpu_count() or 0),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
    }


def commit() -> str | None:
    """The commit of the checkout this code runs from (``-dirty`` with uncommitted changes),
    or None outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(  # noqa: S603 - fixed argv, no shell
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],  # noqa: S607
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() or None


def records(root: str | Path) -> dict[str, dict[str, Any]]:
    """``run key -> record`` of the runs stored under ``root`` (empty if none)."""
    path = Path(root) / RUNS_FILE
    return dict(json.loads(path.read_text())) if path.exists() else {}


def record(root: str | Path, key: str, **fields: Any) -> dict[str, Any]:
    """Record a run that just ran under ``root``: ``fields`` (its command, wall time, ...) with
    the commit, the machine and the 1-minute load now; fields of an earlier record of the same
    run that ``fields`` does not set (its data facts) are kept."""
    base = Path(root)
    log = records(base)
    entry = {
        **log.get(key, {}),
        **fields,
        "commit": commit(),
        "machine": machine(),
        "load": round(os.getloadavg()[0], 2),
    }
    log[key] = entry
    write_records(base, log)
    return entry


def write_records(root: str | Path, log: dict[str, dict[str, Any]]) -> None:
    """Write ``log`` as the records of ``root``."""
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    (base / RUNS_FILE).write_text(json.dumps(log, indent=1, ensure_ascii=False))


def find(path: Path) -> Path | None:
    """``path`` or its gzipped copy ``path.gz``, whichever is newer; None if neither exists."""
    found = [p for p in (path, path.with_name(path.name + ".gz")) if p.exists()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def read_rows(path: Path) -> list[dict[str, str]]:
    """A CSV (or gzipped CSV) as rows of strings."""
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def gzip_file(path: Path) -> Path:
    """Replace ``path`` by ``path.gz`` (no timestamp inside: the same rows give the same
    bytes) and return the new path."""
    out = path.with_name(path.name + ".gz")
    with path.open("rb") as src, out.open("wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    path.unlink()
    return out
