"""The one list of mechanisms: registry name -> class.

>>> names()[:6]
['uniform', 'sample', 'bd', 'ba', 'pbd', 'pba']
>>> from app.dp.types import Group
>>> create("pba", d=100, groups=[Group(120, 0.6), Group(40, 1.0)], noise="laplace")
PBA(d=100, groups=[[120, 0.6], [40, 1.0]], noise='laplace', sensitivity=1)
"""

from __future__ import annotations

from typing import Any

from app.dp.central import BA, BD, PBA, PBD, Sample, Uniform
from app.dp.errors import ParameterError
from app.dp.local import (
    LBA,
    LBD,
    LBU,
    LPA,
    LPD,
    LPU,
    LSP,
    PLBAOPS,
    PLBARP,
    PLBDOPS,
    PLBDRP,
    PLBU,
    PLPA,
    PLPD,
    PLPAPlus,
    PLPDPlus,
)
from app.dp.mechanism import Mechanism
from app.dp.period import DFT, HierOptStream, OptStream, PeGaSus, RegionalHierOptStream
from app.dp.wn import STBD, STR, RescueDP, RescueDPGrouped, WNUniform

_REGISTRY: dict[str, type[Mechanism]] = {
    cls.name: cls
    for cls in (Uniform, Sample, BD, BA, PBD, PBA, LBU, LSP, LPU, LBD, LBA, LPD, LPA, PLBU)
    + (STBD, STR, RescueDP, RescueDPGrouped, WNUniform)  # (w,n) mechanisms over a graph (app.dp.wn)
    # period mechanisms (app.dp.period)
    + (OptStream, HierOptStream, RegionalHierOptStream, DFT, PeGaSus)
    + (PLPD, PLPA, PLPDPlus, PLPAPlus, PLBDRP, PLBARP, PLBDOPS, PLBAOPS)  # PLDP-IDS
}


def names(kind: str | None = None) -> list[str]:
    """Registered mechanism names, optionally only ``"central"`` or ``"local"`` ones."""
    return [n for n, cls in _REGISTRY.items() if kind is None or cls.kind == kind]


def get(name: str) -> type[Mechanism]:
    """The class registered under ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ParameterError(f"mechanism must be one of {names()}, got {name!r}") from None


def create(name: str, **params: Any) -> Mechanism:
    """Build the mechanism ``name`` from its parameters (see each class for them); narrow it
    to the interface a caller drives with :mod:`app.dp.interfaces` (``as_slotted``,
    ``as_period``, ``as_round``)."""
    return get(name)(**params)
