"""Generic check-ins (Foursquare-like): one stream per user, the region of their check-ins per slot.

Input, both tab-separated, one record per line; blank lines, lines starting with ``#`` and a
first line whose numeric fields do not parse (a header) are skipped:

* check-ins: ``user_id  poi_id  unix_time`` (seconds, UTC; ids are arbitrary strings);
* POIs: ``poi_id  latitude  longitude`` with an optional fourth column, a region label (e.g. a
  country code).

Preprocessing:

1. check-ins at unknown POIs are dropped; with ``user_fraction < 1`` each user is kept
   independently with that probability (``numpy`` generator seeded by ``seed``), as the PWSM
   code samples 5% of the Foursquare users (spec seed-000 A25);
2. regions (``d``): the papers map venues to countries (PWSM: ``d = 77``; the PLDP-IDS code maps
   countries at random to 5 indices, spec seed-002 A28). Countries need a gazetteer, so the
   generic loader offers, by ``partition``:

   * ``"lon"`` (default) / ``"lat"``: ``regions`` strips of (as near as ties allow) equal POI
     counts along longitude / latitude, cut at the POI quantiles ``k / regions``;
   * ``"grid"``: a ``g x g`` equal-width grid over the POIs' bounding box, ``regions = g * g``
     (must be a perfect square), index ``ix * g + iy``;
   * ``"label"``: the POI file's fourth column, one region per distinct label (sorted);
     ``regions`` is ignored. This is the papers' venue -> country map when labels are countries;

3. slots of ``slot`` seconds (the PWSM and PLDP-IDS Foursquare runs use 100 minutes) from
   ``start`` (default: the first kept check-in); ``T`` defaults to the slots up to the last
   kept check-in (the A25 way of counting: 7,650 for Foursquare);
4. missing policy ``"carry"`` by default (the LDP-IDS / PLDP-IDS specs' proposal); users with no
   check-in up to the last slot are dropped. Users are sorted by id.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.bench.engine.datasets.base import (
    Dataset,
    check_missing,
    fill_slots,
    parse_duration,
    value_dtype,
)

PARTITIONS = ("lon", "lat", "grid", "label")


def _rows(path: Path, width: int, numeric: tuple[int, ...]) -> list[list[str]]:
    """Tab-separated rows with at least ``width`` fields; a header is detected and skipped."""
    rows: list[list[str]] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            text = line.rstrip("\r\n")
            if not text.strip() or text.startswith("#"):
                continue
            fields = text.split("\t")
            if len(fields) < width:
                raise ValueError(f"{path}:{lineno}: expected {width} tab-separated fields")
            if not rows:
                try:
                    for i in numeric:
                        float(fields[i])
                except ValueError:
                    continue  # a header line
            rows.append(fields)
    return rows


def _strips(coord: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.int64]:
    """Strip index of each POI: cut at the ``j / k`` quantiles of the POI coordinates."""
    cuts = np.quantile(coord, np.arange(1, k) / k)
    return np.searchsorted(cuts, coord, side="right").astype(np.int64)


def _regions(
    lat: npt.NDArray[np.float64],
    lon: npt.NDArray[np.float64],
    label: list[str] | None,
    partition: str,
    regions: int,
) -> tuple[npt.NDArray[np.int64], tuple[str, ...]]:
    """Region index of each POI and the region labels."""
    if partition == "label":
        if label is None:
            raise ValueError("partition='label' needs a fourth POI column (a region label)")
        names, index = np.unique(np.array(label), return_inverse=True)
        return index.astype(np.int64), tuple(str(n) for n in names)
    if partition in ("lon", "lat"):
        return _strips(lon if partition == "lon" else lat, regions), tuple(
            f"{partition}{k}" for k in range(regions)
        )
    g = math.isqrt(regions)
    if g * g != regions:
        raise ValueError(f"partition='grid' needs regions to be a perfect square, got {regions}")

    def bins(x: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        lo, hi = float(x.min()), float(x.max())
        if hi == lo:
            return np.zeros(x.size, dtype=np.int64)
        return np.minimum(np.floor((x - lo) / ((hi - lo) / g)).astype(np.int64), g - 1)

    labels = tuple(f"x{ix}y{iy}" for ix in range(g) for iy in range(g))
    return bins(lon) * g + bins(lat), labels


def load_checkins(
    checkins: str | Path,
    pois: str | Path,
    *,
    regions: int = 5,
    partition: str = "lon",
    slot: str | int = "100min",
    start: str | int | datetime | None = None,
    T: int | None = None,
    missing: str = "carry",
    user_fraction: float = 1.0,
    seed: int = 0,
) -> Dataset:
    """Load check-ins as per-slot regions per user; see the module docstring.

    Parameters
    ----------
    checkins, pois
        The two TSV files.
    regions
        Number of regions ``d`` (ignored by ``partition="label"``).
    partition
        ``"lon"``, ``"lat"``, ``"grid"`` or ``"label"``.
    slot
        Slot length (``"100min"``, ``3600``...).
    start
        Start of slot 0: unix seconds, ISO string (UTC if naive) or datetime; default the first
        kept check-in.
    T
        Number of slots; default up to the last kept check-in.
    missing
        ``"carry"`` (default), ``"forward"`` or ``"absent"``.
    user_fraction, seed
        Keep each user with probability ``user_fraction`` (Foursquare: 0.05, A25).

    Examples
    --------
    >>> from pathlib import Path
    >>> fx = Path(__file__).resolve().parents[4] / "tests" / "bench" / "fixtures"
    >>> ds = load_checkins(fx / "checkins.tsv", fx / "pois.tsv", regions=2, slot="1h")
    >>> ds.T, ds.N, ds.labels
    (4, 3, ('lon0', 'lon1'))
    """
    check_missing(missing)
    if partition not in PARTITIONS:
        raise ValueError(f"partition must be one of {PARTITIONS}, got {partition!r}")
    if isinstance(regions, bool) or not isinstance(regions, int) or regions < 1:
        raise ValueError(f"regions must be an integer >= 1, got {regions!r}")
    if not 0 < user_fraction <= 1:
        raise ValueError(f"user_fraction must be in (0, 1], got {user_fraction!r}")
    slot_s = parse_duration(slot)

    poi_rows = _rows(Path(pois), 3, (1, 2))
    if not poi_rows:
        raise ValueError(f"no POIs in {pois}")
    poi_ids = [r[0] for r in poi_rows]
    lat = np.array([float(r[1]) for r in poi_rows])
    lon = np.array([float(r[2]) for r in poi_rows])
    label = [r[3] for r in poi_rows] if all(len(r) > 3 for r in poi_rows) else None
    poi_region, labels = _regions(lat, lon, label, partition, regions)
    region_of = dict(zip(poi_ids, poi_region.tolist(), strict=True))

    rows = _rows(Path(checkins), 3, (2,))
    rows = [r for r in rows if r[1] in region_of]  # step 1
    user_ids = np.array([r[0] for r in rows], dtype=str)
    value = np.array([region_of[r[1]] for r in rows], dtype=np.int64)
    secs = np.array([int(float(r[2])) for r in rows], dtype=np.int64)
    names, user = np.unique(user_ids, return_inverse=True)
    if user_fraction < 1:
        chosen = np.random.default_rng(seed).random(names.size) < user_fraction
        keep = chosen[user]
        names, user = np.unique(user_ids[keep], return_inverse=True)
        value, secs = value[keep], secs[keep]
    if not secs.size:
        raise ValueError(f"no check-ins at known POIs in {checkins}")

    if start is None:
        start_s = int(secs.min())
    elif isinstance(start, int):
        start_s = start
    else:
        dt = datetime.fromisoformat(start) if isinstance(start, str) else start
        start_s = int((dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp())
    if T is None:
        T = int((secs.max() - start_s) // slot_s) + 1
    order = np.lexsort((value, secs, user))  # by user, time (then region: deterministic ties)
    d = len(labels)
    values = fill_slots(
        user[order],
        (secs[order] - start_s) // slot_s,
        value[order],
        max(T, 0),
        names.size,
        missing,
        value_dtype(d),
    )
    present = (values >= 0).any(axis=0)
    return Dataset(
        name="checkins",
        values=np.ascontiguousarray(values[:, present]),
        d=d,
        labels=labels,
        slot_s=slot_s,
        start=datetime.fromtimestamp(start_s, tz=UTC),
        users=tuple(str(u) for u in names[present]),
        missing=missing,
        source=f"{checkins};{pois}",
        options={
            "regions": d,
            "partition": partition,
            "user_fraction": user_fraction,
            "seed": seed if user_fraction < 1 else None,
            "checkins_kept": int(secs.size),
        },
    )
