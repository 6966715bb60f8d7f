"""The run store: every run behind RESULTS.md, its rows and its record, under one root.

The root (``docs/results`` for RESULTS.md) holds a folder per run with its rows as CSV, kept
gzipped (``results.csv.gz``, ``optstream.csv.gz``, ...: the form the repository keeps, so that
``dpstream bench results --reuse`` rebuilds the report from a clone), and one ``runs.json``:
per run, the command that made it, the commit it ran at, the machine, its wall time, the
1-minute load after it and the facts of its data the report quotes (:func:`record`). A paper
verb's run kept there is named by a :class:`Stored` spec (the report's list of them is
:data:`app.bench.report.stored.STORED`) and read back as a :class:`Produced`.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "RUNS_FILE",
    "SCALE_OPTIONS",
    "Produced",
    "Stored",
    "verb_args",
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


@dataclass(frozen=True)
class Stored:
    """One stored run: ``key``, the ``paper`` verb, its ``folder`` under the root, the file
    the run writes (``output``; a ``.gz`` copy counts too), the verb's options (``--out`` is
    added), for outputs no verb writes the name of the producer that writes them
    (:data:`app.bench.report.stored.PRODUCERS`), and the
    public data sets it reads whatever its ``--data`` (``reads``)."""

    key: str
    paper: str
    folder: str
    output: str
    args: tuple[str, ...] = ()
    producer: str | None = None
    gzip_output: bool = True
    reads: tuple[str, ...] = ()

    def public_data(self) -> list[str]:
        """The data sets asked for by name (``--data``) or read whatever the options (``reads``).

        >>> Stored("o", "optstream", "o", "x.csv", ("--data", "rte2013")).public_data()
        ['rte2013']
        """
        named = [v for k, v in zip(self.args, self.args[1:], strict=False) if k == "--data"]
        return [*named, *self.reads]

    def command(self, root: Path, quick: bool = False) -> str:
        """The command line that makes this run."""
        if self.producer:
            return f"dpstream bench results (its {self.producer} step)"
        out = root / self.folder if self.folder != "." else root
        args = verb_args(self, quick)
        return " ".join(["dpstream bench", self.paper, *args, "--out", str(out)])


@dataclass(frozen=True)
class Produced:
    """A stored run as the report reads it: the output's path (None: missing), the command
    that made it, its wall time (NaN: not recorded) and the 1-minute load after it."""

    spec: Stored
    path: Path | None
    command: str
    wall_s: float
    load: float | None


SCALE_OPTIONS = ("--trials", "--seeds", "--slots", "--real-slots")
"""Options that set a run's size: ``--quick`` drops them, so that the verb's quick profile
decides the size."""


def verb_args(spec: Stored, quick: bool) -> list[str]:
    """The verb's options for ``spec``; quick: its ``--quick`` profile instead of the sizes.

    >>> spec = Stored("f4", "optstream", "f4", "x.csv", ("--figure", "4", "--trials", "3"))
    >>> verb_args(spec, quick=True)
    ['--figure', '4', '--quick']
    """
    if not quick:
        return list(spec.args)
    out: list[str] = []
    skip = False
    for a in spec.args:
        if skip:
            skip = False
        elif a in SCALE_OPTIONS:
            skip = True
        else:
            out.append(a)
    return [*out, "--quick"]
