"""T-Drive taxi trajectories: one stream per taxi, its grid cell or region per slot.

Input: a folder of ``<id>.txt`` files, one GPS fix per line, ``id,YYYY-MM-DD HH:MM:SS,lon,lat``
(Microsoft Research T-Drive sample; times as recorded, Beijing local time, UTC+8). Default
folder: ``<data root>/tdrive_sample600/taxi_log_2008_by_id``.

Preprocessing (PWSM spec seed-000 §6.1 and A26, unless an option says otherwise):

1. drop exact duplicate lines (same taxi, time and position);
2. keep fixes with lon in [116, 116.8] and lat in [39.5, 40.3] (bounds inclusive, ``bbox``);
3. cell: ``ix = floor((lon - 116) / (0.8 / g))``, ``iy = floor((lat - 39.5) / (0.8 / g))``,
   clipped to ``g - 1`` on the upper edge; cell index ``ix * g + iy`` (longitude-major), label
   ``"x{ix}y{iy}"``. ``g = 10`` gives the PWSM paper's ``d = 100``;
4. optional ``regions = D`` (LDP-IDS / PLDP-IDS: ``d = 5``): the papers only say "5 areas";
   the PLDP-IDS code maps each of the 10 x 10 cells uniformly at random to one of ``D``
   indices (spec seed-002 A28). ``region_map="random"`` (default) does the same with
   ``numpy.random.default_rng(region_seed)`` (not Java's ``Random(0)`` sequence, so the map
   differs from the authors'); ``region_map="strips"`` cuts the box into ``D`` equal-width
   longitude strips instead. A region may end up with no cell under ``"random"``;
5. slots of ``slot`` seconds from ``start`` (default 2008-02-02 13:30:44 Beijing =
   05:30:44 UTC, 60 s, spec A26); slot ``k`` covers ``[start + k slot, start + (k+1) slot)``.
   ``T`` defaults to the slots up to the last deduplicated fix (8,889 one-minute slots on the
   sample, as in the papers);
6. missing policy ``"carry"`` by default (A26: latest fix up to the end of the slot, the first
   fix before it); see :mod:`app.bench.engine.datasets.base`. Taxis with no kept fix up to the last
   slot are dropped. Users are taxis in increasing id order.

Simultaneous fixes of one taxi with different positions are ordered by position, so the result
never depends on file order.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from app.bench.engine.datasets.base import (
    Dataset,
    check_missing,
    data_root,
    fill_slots,
    parse_duration,
    require,
)

BEIJING = timezone(timedelta(hours=8))
"""The clock of the T-Drive timestamps."""

DEFAULT_START = "2008-02-02 13:30:44"
"""Beijing time of slot 0 in the PWSM authors' code (05:30:44 UTC; spec seed-000 A26)."""

BBOX = (116.0, 116.8, 39.5, 40.3)
"""``(lon_min, lon_max, lat_min, lat_max)`` of the papers' box filter."""

REGION_MAPS = ("random", "strips")


def default_dir() -> Path:
    """``<data root>/tdrive_sample600/taxi_log_2008_by_id``."""
    return data_root() / "tdrive_sample600" / "taxi_log_2008_by_id"


def _parse(raw: bytes) -> tuple[npt.NDArray[Any], ...]:
    """Columns ``(id, seconds since 1970 on the file's clock, lon, lat)`` of one file."""
    tok = np.array(raw.replace(b",", b" ").split()).reshape(-1, 5)  # id, date, time, lon, lat
    days = tok[:, 1].astype("datetime64[D]").astype(np.int64)
    hms = np.frombuffer(tok[:, 2].astype("S8").tobytes(), dtype=np.uint8).reshape(-1, 8)
    digit = hms.astype(np.int64) - ord("0")
    secs = (
        (digit[:, 0] * 10 + digit[:, 1]) * 3600
        + (digit[:, 3] * 10 + digit[:, 4]) * 60
        + digit[:, 6] * 10
        + digit[:, 7]
    )
    lon, lat = tok[:, 3].astype(np.float64), tok[:, 4].astype(np.float64)
    return tok[:, 0].astype(np.int64), days * 86400 + secs, lon, lat


def read_fixes(folder: Path, max_taxis: int | None = None) -> tuple[npt.NDArray[Any], ...]:
    """All fixes of a T-Drive folder: taxi id, local-clock epoch seconds, longitude, latitude.

    ``max_taxis`` keeps the files of the smallest ids only. Empty files are skipped.
    """
    files = sorted(folder.glob("*.txt"), key=lambda p: (len(p.stem), p.stem))
    if not files:
        raise FileNotFoundError(f"no T-Drive <id>.txt files in {folder}")
    if max_taxis is not None:
        files = files[:max_taxis]
    parts = [_parse(raw) for raw in (p.read_bytes() for p in files) if raw.strip()]
    if not parts:
        raise ValueError(f"every T-Drive file in {folder} is empty")
    ids, secs, lon, lat = (np.concatenate(col) for col in zip(*parts, strict=True))
    return ids, secs, lon, lat


def _bins(x: npt.NDArray[np.float64], lo: float, hi: float, k: int) -> npt.NDArray[np.int64]:
    """``floor((x - lo) / ((hi - lo) / k))``, the upper edge ``hi`` folded into bin ``k - 1``."""
    return np.minimum(np.floor((x - lo) / ((hi - lo) / k)).astype(np.int64), k - 1)


def _cells(
    lon: npt.NDArray[np.float64], lat: npt.NDArray[np.float64], grid: int, bbox: tuple[float, ...]
) -> npt.NDArray[np.int64]:
    x0, x1, y0, y1 = bbox
    return _bins(lon, x0, x1, grid) * grid + _bins(lat, y0, y1, grid)


def load_tdrive(
    path: str | Path | None = None,
    *,
    grid: int = 10,
    regions: int | None = None,
    region_map: str = "random",
    region_seed: int = 0,
    slot: str | int = "1min",
    start: str | datetime = DEFAULT_START,
    T: int | None = None,
    missing: str = "carry",
    bbox: tuple[float, float, float, float] = BBOX,
    max_taxis: int | None = None,
) -> Dataset:
    """Load T-Drive taxi files as per-slot grid cells or regions; see the module docstring.

    Parameters
    ----------
    path
        Folder of ``<id>.txt`` files; default :func:`default_dir`.
    grid
        ``g`` of the ``g x g`` grid over ``bbox`` (``d = g * g`` without ``regions``).
    regions
        If given, merge the grid cells into this many regions (``d = regions``).
    region_map, region_seed
        ``"random"`` (seeded uniform cell -> region map, PLDP-IDS code) or ``"strips"``
        (equal-width longitude strips; ignores ``grid``).
    slot
        Slot length (``60``, ``"1min"``, ``"10min"``...).
    start
        Start of slot 0 on the files' clock (Beijing time), ISO string or naive datetime.
    T
        Number of slots; default up to the last fix.
    missing
        ``"carry"`` (default, A26), ``"forward"`` or ``"absent"``.
    bbox
        ``(lon_min, lon_max, lat_min, lat_max)`` box filter and grid extent.
    max_taxis
        Read only the files of the ``max_taxis`` smallest taxi ids (quick runs).
    """
    check_missing(missing)
    if isinstance(grid, bool) or not isinstance(grid, int) or grid < 1:
        raise ValueError(f"grid must be an integer >= 1, got {grid!r}")
    bad_regions = isinstance(regions, bool) or not isinstance(regions, int) or regions < 1
    if regions is not None and bad_regions:
        raise ValueError(f"regions must be an integer >= 1, got {regions!r}")
    if region_map not in REGION_MAPS:
        raise ValueError(f"region_map must be one of {REGION_MAPS}, got {region_map!r}")
    if path is None:
        require("tdrive")
    folder = Path(path) if path is not None else default_dir()
    slot_s = parse_duration(slot)
    start_dt = datetime.fromisoformat(start) if isinstance(start, str) else start
    if start_dt.tzinfo is None:
        start_dt = start_dt.replace(tzinfo=BEIJING)
    local = start_dt.astimezone(BEIJING).replace(tzinfo=None)
    start_s = int((local - datetime(1970, 1, 1)).total_seconds())  # seconds on the files' clock

    ids, secs, lon, lat = read_fixes(folder, max_taxis)
    order = np.lexsort((lat, lon, secs, ids))  # by taxi, time, then position
    ids, secs, lon, lat = ids[order], secs[order], lon[order], lat[order]
    dup = np.zeros(ids.size, dtype=bool)  # step 1: exact duplicates are adjacent now
    dup[1:] = (ids[1:] == ids[:-1]) & (secs[1:] == secs[:-1])
    dup[1:] &= (lon[1:] == lon[:-1]) & (lat[1:] == lat[:-1])
    n_dedup = int(ids.size - dup.sum())
    if T is None:
        T = int((secs[~dup].max() - start_s) // slot_s) + 1
    if T < 0:
        raise ValueError(f"T must be >= 0, got {T}")
    x0, x1, y0, y1 = bbox
    keep = ~dup & (lon >= x0) & (lon <= x1) & (lat >= y0) & (lat <= y1)  # step 2
    ids, secs, lon, lat = ids[keep], secs[keep], lon[keep], lat[keep]

    if regions is None:  # steps 3-4
        d = grid * grid
        value = _cells(lon, lat, grid, bbox)
        labels = tuple(f"x{ix}y{iy}" for ix in range(grid) for iy in range(grid))
    elif region_map == "strips":
        d = regions
        value = _bins(lon, x0, x1, regions)
        labels = tuple(f"strip{k}" for k in range(regions))
    else:
        d = regions
        cell_region = np.random.default_rng(region_seed).integers(0, regions, grid * grid)
        value = cell_region[_cells(lon, lat, grid, bbox)]
        labels = tuple(f"region{k}" for k in range(regions))

    taxis, user = np.unique(ids, return_inverse=True)
    slot_idx = (secs - start_s) // slot_s  # step 5
    values = fill_slots(user, slot_idx, value, T, taxis.size, missing, np.int16)  # step 6
    present = (values >= 0).any(axis=0)
    options: dict[str, Any] = {
        "grid": grid,
        "regions": regions,
        "region_map": region_map if regions is not None else None,
        "region_seed": region_seed if regions is not None and region_map == "random" else None,
        "bbox": list(bbox),
        "max_taxis": max_taxis,
        "fixes_read": int(keep.size),
        "fixes_distinct": n_dedup,
        "fixes_in_box": int(keep.sum()),
    }
    return Dataset(
        name="tdrive",
        values=np.ascontiguousarray(values[:, present]),
        d=d,
        labels=labels,
        slot_s=slot_s,
        start=start_dt,
        users=tuple(str(t) for t in taxis[present]),
        missing=missing,
        source=str(folder),
        options=options,
    )
