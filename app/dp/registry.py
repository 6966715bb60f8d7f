"""The one list of mechanisms: registry name -> class.

>>> names()[:6]
['uniform', 'sample', 'bd', 'ba', 'pbd', 'pba']
>>> from app.dp.types import Group
>>> create("pba", d=100, groups=[Group(120, 0.6), Group(40, 1.0)], noise="laplace")
PBA(d=100, groups=[[120, 0.6], [40, 1.0]], noise='laplace', sensitivity=1)

:func:`create` is typed per kind: a literal name of a central or graph mechanism gives a
:class:`~app.dp.interfaces.SlotStepped`, of a period one a
:class:`~app.dp.interfaces.PeriodStepped`, of a local one a
:class:`~app.dp.interfaces.RoundDriven` (so ``create("pba", ...).step(...)`` type-checks); a name
known only at run time (a streams file) gives a :class:`~app.dp.mechanism.Mechanism`, to narrow
with :mod:`app.dp.interfaces`. The literal names per kind (:data:`SlotName`,
:data:`PeriodName`, :data:`RoundName`) are the registry's, which ``tests/dp/test_interfaces.py``
holds equal.
"""

from __future__ import annotations

from typing import Any, Literal, overload

from app.dp.central import BA, BD, PBA, PBD, Sample, Uniform
from app.dp.errors import ParameterError
from app.dp.interfaces import PeriodStepped, RoundDriven, SlotStepped
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


SlotName = Literal[
    "uniform", "sample", "bd", "ba", "pbd", "pba",  # central
    "stbd", "str", "rescuedp", "rescuedp_g", "wn_uniform",  # graph
]  # fmt: skip
"""The names of the slot-stepped mechanisms (central and graph)."""
PeriodName = Literal["optstream", "optstream_h", "optstream_hr", "dft", "pegasus"]
"""The names of the period mechanisms."""
RoundName = Literal[
    "lbu", "lsp", "lpu", "lbd", "lba", "lpd", "lpa", "plbu",
    "plpd", "plpa", "plpd+", "plpa+", "plbd-rp", "plba-rp", "plbd-ops", "plba-ops",
]  # fmt: skip
"""The names of the local (round-driven) mechanisms."""


@overload
def create(name: SlotName, **params: Any) -> SlotStepped: ...
@overload
def create(name: PeriodName, **params: Any) -> PeriodStepped: ...
@overload
def create(name: RoundName, **params: Any) -> RoundDriven: ...
@overload
def create(name: str, **params: Any) -> Mechanism: ...
def create(name: str, **params: Any) -> Mechanism:
    """Build the mechanism ``name`` from its parameters (see each class for them), typed by
    its kind for a literal name (see the module docstring); a name read at run time gives a
    :class:`Mechanism`, to narrow with :mod:`app.dp.interfaces` (``as_slotted``,
    ``as_period``, ``as_round``)."""
    return get(name)(**params)
