"""Dataset loaders for ``dpstream bench``: per-slot true values of every user.

Every loader returns a frozen :class:`Dataset` whose ``values`` is a ``(T, N)`` integer array
(user ``i``'s cell at slot ``t``, or :data:`NO_RECORD`), with the cell labels, the clock, the
missing policy (:data:`MISSING_POLICIES`) and its provenance. :func:`load` is the one name ->
loader registry:

``tdrive``
    T-Drive taxi files, ``g x g`` grid (PWSM: 10 x 10, 1-minute slots) or ``regions`` (LDP-IDS /
    PLDP-IDS: 5) (:mod:`~app.bench.engine.datasets.tdrive`).
``checkins``
    Generic check-in and POI TSVs, ``regions`` spatial partitions, ``slot`` length (Foursquare
    runs: ``"100min"``) (:mod:`~app.bench.engine.datasets.checkins`).
``msnbc``
    msnbc.com click sessions, slot ``k`` = ``k``-th click (:mod:`~app.bench.engine.datasets.msnbc`).
``synthetic``, ``tlns``, ``lns``, ``sin``, ``log``
    The papers' binary streams with ``paper=`` sizes (:mod:`~app.bench.engine.datasets.synthetic`);
    the stream names select ``stream`` directly.

Raw data is read from ``$DPSTREAM_DATA`` or ``<repository>/../shared/data/raw``
(:func:`data_root`); nothing is cached. A public data set that is not there
(:data:`PUBLIC_DATA`, :func:`missing`) is :class:`DatasetMissing`, one line naming
``DPSTREAM_DATA`` and docs/datasets.md; the bench verbs run their generated data sets instead.

>>> ds = load("sin", paper="pwsm", N=50, T=4, seed=1)
>>> ds.name, ds.values.shape, ds.d, ds.options["stream"]
('synthetic', (4, 50), 2, 'sin')
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from app.bench.engine.datasets.base import (
    MISSING_POLICIES,
    NO_RECORD,
    PUBLIC_DATA,
    Dataset,
    DatasetMissing,
    data_root,
    fallback_note,
    missing,
    missing_line,
    parse_duration,
    require,
)
from app.bench.engine.datasets.checkins import load_checkins
from app.bench.engine.datasets.msnbc import load_msnbc
from app.bench.engine.datasets.synthetic import STREAMS, load_synthetic
from app.bench.engine.datasets.tdrive import load_tdrive

__all__ = [
    "MISSING_POLICIES",
    "NO_RECORD",
    "PUBLIC_DATA",
    "Dataset",
    "DatasetMissing",
    "LOADERS",
    "data_root",
    "fallback_note",
    "load",
    "load_checkins",
    "load_msnbc",
    "load_synthetic",
    "load_tdrive",
    "missing",
    "missing_line",
    "names",
    "parse_duration",
    "require",
]

LOADERS: dict[str, Callable[..., Dataset]] = {
    "tdrive": load_tdrive,
    "checkins": load_checkins,
    "msnbc": load_msnbc,
    "synthetic": load_synthetic,
    **{stream: partial(load_synthetic, stream) for stream in STREAMS},
}
"""Dataset name -> loader (keyword options as in each loader)."""


def names() -> list[str]:
    """Registered dataset names.

    >>> names()
    ['checkins', 'lns', 'log', 'msnbc', 'sin', 'synthetic', 'tdrive', 'tlns']
    """
    return sorted(LOADERS)


def load(name: str, **options: Any) -> Dataset:
    """Load dataset ``name`` with the loader's keyword ``options``.

    >>> load("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: dataset must be one of ['checkins', ..., 'tlns'], got 'nope'
    """
    try:
        loader = LOADERS[name]
    except KeyError:
        raise ValueError(f"dataset must be one of {names()}, got {name!r}") from None
    return loader(**options)
