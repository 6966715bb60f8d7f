"""What every dataset loader shares: the :class:`Dataset` value, slot filling, durations, paths.

A loader turns raw records into a ``(T, N)`` integer array: ``values[t, i]`` is the cell (value
index in ``0..d-1``) user ``i`` holds at slot ``t`` (0-based), or :data:`NO_RECORD` when the user
has nothing there. How slots without a record of their own are filled is the *missing policy*
(:data:`MISSING_POLICIES`):

``"carry"``
    The user keeps the value of their latest record up to the end of the slot; before their
    first record they hold the value of that first record. Every kept user is present in every
    slot. This is the PWSM authors' Taxi preprocessing (spec seed-000 A26) and the proposal of
    the LDP-IDS and PLDP-IDS specs (seed-004 §7.2, seed-002 A28).
``"forward"``
    As ``"carry"``, but slots before the user's first record hold :data:`NO_RECORD`.
``"absent"``
    A slot holds the user's last record *inside* that slot, else :data:`NO_RECORD`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from app.bench.engine.replay import group_counts

NO_RECORD = -1
"""The value of a user who holds nothing at a slot (never counted)."""

MISSING_POLICIES = ("carry", "forward", "absent")
"""The accepted ``missing`` options; see the module docstring."""

DATA_ENV = "DPSTREAM_DATA"
"""Environment variable naming the raw-data root; default ``<repository>/../shared/data/raw``."""

_CHUNK_CELLS = 1 << 23  # about 8M array cells per vectorized block: bounds temporary memory

_UNITS = {"": 1, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Dataset:
    """Per-slot true values of every user of one stream, with where they came from.

    Attributes
    ----------
    name
        Loader name (``"tdrive"``, ``"checkins"``, ``"msnbc"``, ``"synthetic"``).
    values
        ``(T, N)`` read-only signed integers: the value index of user ``i`` at slot ``t``, or
        :data:`NO_RECORD`.
    d
        Number of histogram cells; every recorded value is in ``0..d-1``.
    labels
        ``d`` cell names (grid cell, region, category or value).
    slot_s
        Slot length in seconds (``0`` when the stream has no clock, as msnbc).
    start
        Start of slot 0 (timezone-aware), or ``None`` without a clock.
    users
        ``N`` user identifiers, in column order.
    missing
        The missing policy that filled the slots (:data:`MISSING_POLICIES`).
    source
        The raw file or folder read, or ``""`` for generated data.
    options
        Every option that shaped the values (for report rows), as plain values.

    Examples
    --------
    >>> ds = Dataset("toy", np.array([[0, 1], [1, -1]]), 2, ("a", "b"), 60, None, ("u", "v"),
    ...              "absent", "", {})
    >>> ds.T, ds.N, ds.histograms().tolist()
    (2, 2, [[1, 1], [0, 1]])
    """

    name: str
    values: npt.NDArray[np.signedinteger[Any]]
    d: int
    labels: tuple[str, ...]
    slot_s: int
    start: datetime | None
    users: tuple[str, ...]
    missing: str
    source: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        v = np.asarray(self.values)
        if v.ndim != 2 or not np.issubdtype(v.dtype, np.signedinteger):
            raise ValueError(f"values must be a 2-D signed integer array, got {v.dtype} {v.shape}")
        if len(self.labels) != self.d:
            raise ValueError(f"labels must have d={self.d} names, got {len(self.labels)}")
        if len(self.users) != v.shape[1]:
            raise ValueError(f"users must have N={v.shape[1]} ids, got {len(self.users)}")
        if v.size and (v.max() >= self.d or v.min() < NO_RECORD):
            raise ValueError(f"values must lie in [{NO_RECORD}, {self.d - 1}]")
        if v.flags.writeable:
            v = v.view()
            v.flags.writeable = False
        object.__setattr__(self, "values", v)
        object.__setattr__(self, "options", dict(self.options))

    @property
    def T(self) -> int:
        """Number of slots."""
        return int(self.values.shape[0])

    @property
    def N(self) -> int:
        """Number of users."""
        return int(self.values.shape[1])

    def histograms(self) -> npt.NDArray[np.int64]:
        """True per-slot counts ``(T, d)`` over all users (records only)."""
        return group_counts(self.values, np.zeros(self.N, dtype=np.int64), 1, self.d)[:, 0, :]

    def provenance(self) -> dict[str, Any]:
        """Plain-valued description for report rows: name, sizes, clock, policy, source, options."""
        return {
            "dataset": self.name,
            "T": self.T,
            "N": self.N,
            "d": self.d,
            "slot_s": self.slot_s,
            "start": None if self.start is None else self.start.isoformat(),
            "missing": self.missing,
            "source": self.source,
            **{f"opt_{k}": v for k, v in sorted(self.options.items())},
        }


def check_missing(missing: str) -> str:
    """Validate a missing policy name.

    >>> check_missing("nope")
    Traceback (most recent call last):
    ...
    ValueError: missing must be one of ('carry', 'forward', 'absent'), got 'nope'
    """
    if missing not in MISSING_POLICIES:
        raise ValueError(f"missing must be one of {MISSING_POLICIES}, got {missing!r}")
    return missing


def value_dtype(d: int) -> type[np.signedinteger[Any]]:
    """The smallest signed integer type holding ``-1..d-1``."""
    for dt in (np.int8, np.int16, np.int32):
        if d - 1 <= np.iinfo(dt).max:
            return dt
    return np.int64


def parse_duration(slot: str | int | float) -> int:
    """Seconds in a slot length such as ``60``, ``"60s"``, ``"1min"``, ``"100min"`` or ``"1h"``.

    >>> parse_duration("100min"), parse_duration("10m"), parse_duration(60), parse_duration("2h")
    (6000, 600, 60, 7200)
    """
    if isinstance(slot, int | float) and not isinstance(slot, bool):
        seconds = slot
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", str(slot).lower())
        if not match or match.group(2) not in _UNITS:
            raise ValueError(f"slot must look like 60, '60s', '10min', '1h', got {slot!r}")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds < 1 or seconds != int(seconds):
        raise ValueError(f"slot must be a whole number of seconds >= 1, got {slot!r}")
    return int(seconds)


def data_root() -> Path:
    """The raw-data root: ``$DPSTREAM_DATA`` or ``<repository>/../shared/data/raw``."""
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[4].parent / "shared" / "data" / "raw"


PUBLIC_DATA = {
    "tdrive": "tdrive_sample600/taxi_log_2008_by_id",
    "msnbc": "msnbc/msnbc990928.zip",
    "rte2013": "rte_regional_2013/2013-01.json.gz",
    "diginetica": "diginetica_sample/sample_train-item-views.csv",
    "checkins": "foursquare/checkins.tsv",
}
"""The public data sets the benchmarks read, by name, and where each lies under
:func:`data_root` (docs/datasets.md: source, licence, layout, checksum). Every other dataset
name is generated."""


class DatasetMissing(FileNotFoundError):
    """A public data set is not under :func:`data_root`; the message is one line to print."""


def missing(name: str) -> bool:
    """Whether ``name`` is a public data set that is not under :func:`data_root` (an empty
    folder counts as missing); generated data sets are never missing.

    >>> missing("sin")
    False
    """
    if name not in PUBLIC_DATA:
        return False
    path = data_root() / PUBLIC_DATA[name]
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


def missing_line(names: list[str]) -> str:
    """One line saying which public data sets are missing and how to get them.

    >>> import os; os.environ["DPSTREAM_DATA"] = "/data"
    >>> print(missing_line(["tdrive"]))
    tdrive not found: expected /data/tdrive_sample600/taxi_log_2008_by_id; set DPSTREAM_DATA \
to the folder holding it (docs/datasets.md: where the public data comes from)
    >>> del os.environ["DPSTREAM_DATA"]
    """
    where = ", ".join(str(data_root() / PUBLIC_DATA[n]) for n in names)
    return (
        f"{', '.join(names)} not found: expected {where}; set {DATA_ENV} to the folder holding "
        f"{'them' if len(names) > 1 else 'it'} (docs/datasets.md: where the public data comes "
        "from)"
    )


def fallback_note(verb: str, skipped: list[str], instead: str) -> str:
    """The one line a verb prints when it runs without the public data sets ``skipped``."""
    return f"dpstream {verb}: {missing_line(skipped)}; running {instead} instead"


def require(name: str) -> None:
    """Raise :class:`DatasetMissing` (one line) if ``name`` is a missing public data set."""
    if missing(name):
        raise DatasetMissing(missing_line([name]))


def fill_slots(
    user: npt.NDArray[np.integer[Any]],
    slot: npt.NDArray[np.integer[Any]],
    value: npt.NDArray[np.integer[Any]],
    T: int,
    N: int,
    missing: str,
    dtype: type[np.signedinteger[Any]] = np.int16,
) -> npt.NDArray[np.signedinteger[Any]]:
    """Per-slot values ``(T, N)`` from time-ordered records, under a missing policy.

    Parameters
    ----------
    user, slot, value
        One entry per record, sorted by ``user`` and, within a user, by time; ``slot`` may fall
        before 0 or past ``T - 1``. A slot with several records takes the last one.
    T, N
        Output shape.
    missing
        One of :data:`MISSING_POLICIES`. Records before slot 0 count as "latest up to the end
        of slot 0" under ``carry`` and ``forward`` and are dropped under ``absent``; records past
        the last slot are always dropped.
    dtype
        Output integer type.

    Examples
    --------
    >>> u, s, v = np.array([0, 0, 1]), np.array([1, 3, 2]), np.array([5, 6, 7])
    >>> fill_slots(u, s, v, 5, 2, "carry").T.tolist()
    [[5, 5, 5, 6, 6], [7, 7, 7, 7, 7]]
    >>> fill_slots(u, s, v, 5, 2, "forward").T.tolist()
    [[-1, 5, 5, 6, 6], [-1, -1, 7, 7, 7]]
    >>> fill_slots(u, s, v, 5, 2, "absent").T.tolist()
    [[-1, 5, -1, 6, -1], [-1, -1, 7, -1, -1]]
    """
    check_missing(missing)
    user, slot, value = np.asarray(user), np.asarray(slot), np.asarray(value)
    keep = slot < T
    if missing == "absent":
        keep &= slot >= 0
    user, value = user[keep].astype(np.int64), value[keep]
    slot = np.maximum(slot[keep], 0).astype(np.int64)
    out = np.full((T, N), NO_RECORD, dtype=dtype)
    if user.size:
        key = user * T + slot
        last = np.ones(key.size, dtype=bool)
        last[:-1] = key[1:] != key[:-1]  # the last record of each (user, slot) run
        out[slot[last], user[last]] = value[last]
    if missing == "absent" or T == 0:
        return out
    step = max(1, _CHUNK_CELLS // T)
    rows = np.arange(T, dtype=np.int32)[:, None]
    for lo in range(0, N, step):  # column blocks bound the (T, block) index temporary
        block = out[:, lo : lo + step]
        idx = np.where(block >= 0, rows, 0)
        np.maximum.accumulate(idx, axis=0, out=idx)  # slot of the latest record so far
        out[:, lo : lo + step] = np.take_along_axis(block, idx, axis=0)
    if missing == "carry" and user.size:
        first = np.full(N, NO_RECORD, dtype=np.int64)
        starts = np.ones(user.size, dtype=bool)
        starts[1:] = user[1:] != user[:-1]
        first[user[starts]] = value[starts]
        lead = out < 0
        out[lead] = np.broadcast_to(first.astype(dtype), out.shape)[lead]
    return out
