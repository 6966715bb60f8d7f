"""msnbc.com click sequences (UCI, 28 Sep 1999): one stream per session, one category per click.

Input: the zip holding ``msnbc990928.seq`` (default ``<data root>/msnbc/msnbc990928.zip``;
``__MACOSX/`` entries are ignored). After a short header whose first non-comment line lists the
17 category names in code order, each line after ``% Sequences:`` is one session: space-separated
category codes ``1..17``.

The data has no timestamps (no paper of the project uses it; it stands in for click streams).
Resolution: user ``i`` is the ``i``-th session in file order and slot ``k`` is its ``k``-th click,
so ``values[k, i] = code - 1`` and ``d = 17``. A session shorter than ``T`` has no record in the
later slots; the default missing policy is ``"absent"`` (a finished session browses nothing;
``"carry"`` keeps its last category instead). ``max_users`` keeps the first sessions and
``max_slots`` caps ``T`` (default: the longest kept session). The full file holds 989,818
sessions with up to thousands of clicks, so a ``(T, N)`` array above :data:`MAX_CELLS` is
refused with a hint to set these options.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from app.bench.engine.datasets.base import (
    Dataset,
    check_missing,
    data_root,
    fill_slots,
    require,
)

MAX_CELLS = 1 << 28
"""Largest ``T * N`` the loader builds (256M one-byte cells)."""

_MARKER = "% Sequences:"


def default_path() -> Path:
    """``<data root>/msnbc/msnbc990928.zip``."""
    return data_root() / "msnbc" / "msnbc990928.zip"


def _read_text(path: Path) -> str:
    if path.suffix != ".zip":
        return path.read_text(encoding="ascii")
    with zipfile.ZipFile(path) as zf:
        names = [n for n in zf.namelist() if not n.startswith("__MACOSX/") and n.endswith(".seq")]
        if len(names) != 1:
            raise ValueError(f"{path} must hold one .seq file outside __MACOSX/, got {names}")
        return zf.read(names[0]).decode("ascii")


def load_msnbc(
    path: str | Path | None = None,
    *,
    max_users: int | None = None,
    max_slots: int | None = None,
    missing: str = "absent",
) -> Dataset:
    """Load msnbc sessions as per-click categories; see the module docstring.

    Parameters
    ----------
    path
        The ``.zip`` (or an extracted ``.seq``); default :func:`default_path`.
    max_users
        Keep the first ``max_users`` sessions.
    max_slots
        Keep at most the first ``max_slots`` clicks of each session (``T <= max_slots``).
    missing
        ``"absent"`` (default), ``"carry"`` or ``"forward"`` (the last two coincide here:
        every session starts at slot 0).
    """
    check_missing(missing)
    for name, opt in (("max_users", max_users), ("max_slots", max_slots)):
        if opt is not None and (isinstance(opt, bool) or not isinstance(opt, int) or opt < 1):
            raise ValueError(f"{name} must be an integer >= 1, got {opt!r}")
    if path is None:
        require("msnbc")
    source = Path(path) if path is not None else default_path()
    text = _read_text(source)
    head, sep, body = text.partition(_MARKER)
    if not sep:
        raise ValueError(f"{source}: no {_MARKER!r} line")
    header = [ln.strip() for ln in head.splitlines() if ln.strip() and not ln.startswith("%")]
    if not header:
        raise ValueError(f"{source}: no category line before {_MARKER!r}")
    labels = tuple(header[0].split())
    lines = [ln for ln in body.splitlines() if ln.strip()]
    if max_users is not None:
        lines = lines[:max_users]
    sessions = [ln.split()[:max_slots] for ln in lines]
    lengths = np.fromiter((len(s) for s in sessions), dtype=np.int64, count=len(sessions))
    T, N = int(lengths.max(initial=0)), len(sessions)
    if T * N > MAX_CELLS:
        raise ValueError(
            f"msnbc would need a {T} x {N} array; set max_users and/or max_slots "
            f"(T * N <= {MAX_CELLS})"
        )
    codes = np.array([c for s in sessions for c in s], dtype=np.int64)
    if codes.size and (codes.min() < 1 or codes.max() > len(labels)):
        raise ValueError(f"{source}: category codes must lie in 1..{len(labels)}")
    user = np.repeat(np.arange(N), lengths)
    click = np.arange(codes.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    values = fill_slots(user, click, codes - 1, T, N, missing, np.int8)
    return Dataset(
        name="msnbc",
        values=values,
        d=len(labels),
        labels=labels,
        slot_s=0,
        start=None,
        users=tuple(str(i) for i in range(N)),
        missing=missing,
        source=str(source),
        options={"max_users": max_users, "max_slots": max_slots},
    )
