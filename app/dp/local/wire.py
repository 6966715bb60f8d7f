"""The wire types of the local slot protocol: what a service sends devices, and what it sums.

A :class:`CollectionRequest` says who reports in one round (a cohort bitmap over buckets, see
:mod:`app.dp.local.population`), with which oracle and budget, and, for a personalized
mechanism, every user's requirement level (:attr:`CollectionRequest.levels`); a :class:`Tally`
is the service's sum of the answers. Both are stream-independent plain values; the protocol
that produces and consumes them is :mod:`app.dp.local.base`.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from app.dp.errors import ParameterError
from app.dp.local.population import MAX_BUCKETS, bucket_of, from_bitmap, in_bitmap
from app.dp.types import IntArray

Round = Literal["dissimilarity", "publication"]
ROUNDS: tuple[Round, ...] = ("dissimilarity", "publication")
SITS_OUT = 255
"""The level byte of a user who is not asked this slot (it changed level: spec I6 gap)."""
MAX_LEVEL_BYTES = 1 << 24
"""The most users a request's level vector may cover (a bound on decompression)."""


@dataclass(frozen=True)
class CollectionRequest:
    """Who reports in one round, with which oracle and budget (stream-independent fields).

    ``cohort`` is a bitmap over ``buckets`` (see :mod:`app.dp.local.population`), or None for
    every registered user. ``oracle``, ``eps`` and ``units`` have one entry per requirement
    group (one, except for PLBU); ``units`` is ``eps`` in the group's exact ledger units
    (``eps_g`` is ``2 w_g 2**40`` units). The request is small: the bitmap is
    ``ceil(buckets / 8)`` bytes whatever the number of users.

    ``levels`` (personalized mechanisms only, else None) gives every registered user's level
    index, one byte per user (:data:`SITS_OUT`: not asked, whatever its bucket): the level the
    service holds for the user this slot, whose ``oracle``/``eps``/``units`` entry it must use.
    A device whose own level differs refuses. Levels are public in the paper's model (spec
    seed-002 §1: "public to the server"); on the wire the vector is zlib-compressed, so a
    population mostly at one level costs a few bytes per thousand users.
    """

    mechanism: str
    slot: int
    round: Round
    d: int
    buckets: int
    cohort: bytes | None
    oracle: tuple[str, ...]
    eps: tuple[float, ...]
    units: tuple[int, ...]
    levels: bytes | None = None

    def asks(self, user: int) -> bool:
        """Whether the user registered with index ``user`` is in the cohort (not sitting out)."""
        if self.levels is not None and self.level_of(user) == SITS_OUT:
            return False
        return self.cohort is None or in_bitmap(self.cohort, bucket_of(user, self.buckets))

    def level_of(self, user: int) -> int | None:
        """The level the request assigns ``user`` (None: not personalized; :data:`SITS_OUT`
        for a user beyond the vector)."""
        if self.levels is None:
            return None
        return self.levels[user] if 0 <= user < len(self.levels) else SITS_OUT

    def cohort_buckets(self) -> IntArray | None:
        """The cohort's bucket indices, or None for everybody."""
        return None if self.cohort is None else from_bitmap(self.cohort, self.buckets)

    def to_dict(self) -> dict[str, Any]:
        """Plain values for msgpack (bytes stay bytes)."""
        return {
            "mechanism": self.mechanism,
            "slot": self.slot,
            "round": self.round,
            "d": self.d,
            "buckets": self.buckets,
            "cohort": self.cohort,
            "oracle": list(self.oracle),
            "eps": list(self.eps),
            "units": list(self.units),
            "levels": None if self.levels is None else zlib.compress(self.levels),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CollectionRequest:
        """Inverse of :meth:`to_dict`; validates the fields a device relies on."""
        rnd = data["round"]
        if rnd not in ROUNDS:
            raise ParameterError(f"round must be one of {ROUNDS}, got {rnd!r}")
        buckets = int(data["buckets"])
        cohort = data["cohort"]
        if not 1 <= buckets <= MAX_BUCKETS:
            raise ParameterError(f"buckets must be in [1, {MAX_BUCKETS}], got {buckets}")
        if cohort is not None and len(cohort) != (buckets + 7) // 8:
            raise ParameterError(f"cohort must be {(buckets + 7) // 8} bytes, got {len(cohort)}")
        oracle = tuple(str(o) for o in data["oracle"])
        eps = tuple(float(e) for e in data["eps"])
        units = tuple(int(u) for u in data["units"])
        if not len(oracle) == len(eps) == len(units) >= 1:
            raise ParameterError("oracle, eps and units must have one entry per group")
        packed = data.get("levels")
        levels = None if packed is None else _inflate(bytes(packed))
        lv = np.frombuffer(levels or b"", dtype=np.uint8)
        if ((lv != SITS_OUT) & (lv >= len(units))).any():
            raise ParameterError(f"levels must name one of the {len(units)} groups or sit out")
        return cls(
            str(data["mechanism"]),
            int(data["slot"]),
            rnd,
            int(data["d"]),
            buckets,
            None if cohort is None else bytes(cohort),
            oracle,
            eps,
            units,
            levels,
        )


def _inflate(packed: bytes) -> bytes:
    """The level vector of a request, refusing one that inflates beyond :data:`MAX_LEVEL_BYTES`."""
    try:
        inflater = zlib.decompressobj()
        out = inflater.decompress(packed, MAX_LEVEL_BYTES)
    except zlib.error as exc:
        raise ParameterError(f"levels are not a zlib stream: {exc}") from None
    if inflater.unconsumed_tail or not inflater.eof:
        raise ParameterError(f"levels must inflate to at most {MAX_LEVEL_BYTES} bytes, whole")
    return out


@dataclass(frozen=True)
class Tally:
    """The aggregated answers to one request: support counts ``(m, d)``, reports ``(m,)``."""

    slot: int
    round: Round
    support: IntArray
    reports: IntArray

    def __post_init__(self) -> None:
        s = np.array(self.support, dtype=np.int64)
        n = np.array(self.reports, dtype=np.int64).reshape(-1)
        s = s.reshape(n.shape[0], -1)
        if (s < 0).any() or (n < 0).any():
            raise ParameterError("tally support and reports must be non-negative")
        s.flags.writeable = False
        n.flags.writeable = False
        object.__setattr__(self, "support", s)
        object.__setattr__(self, "reports", n)


def mask_users(request: CollectionRequest, users: int) -> npt.NDArray[np.bool_]:
    """Which of the users ``0 .. users-1`` a request asks (vectorized :meth:`asks`)."""
    cohort = request.cohort_buckets()
    if cohort is None:
        asked = np.ones(users, dtype=bool)
    else:
        member = np.zeros(request.buckets, dtype=bool)
        member[cohort] = True
        reps = -(-users // request.buckets)  # users i, i + B, ... share bucket i: tile, no modulo
        asked = np.tile(member, reps)[:users]
    if request.levels is not None:
        lv = np.full(users, SITS_OUT, dtype=np.uint8)
        known = np.frombuffer(request.levels, dtype=np.uint8)[:users]
        lv[: known.shape[0]] = known
        asked &= lv != SITS_OUT
    return asked
