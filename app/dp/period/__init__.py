"""Period mechanisms: the release of slot ``t`` becomes known only at a later slot.

OptStream (Fioretto and Van Hentenryck) releases a whole period of ``w`` slots at its end,
from a few sampled and perturbed slots, a linear reconstruction and a least-squares
post-processing over public features; its hierarchical variant adds the total of the ``d``
categories as a root, exactly consistent with them (one sample set shared by the
categories, or one per category as the paper). DFT (Rastogi and Nath, per period) and
PeGaSus adapted to w-event privacy are the paper's baselines. Every one has ``kind =
"period"``: ``step`` returns the list of releases that became known at the slot. Build them
through :func:`app.dp.registry.create`.
"""

from __future__ import annotations

from app.dp.period.base import PeriodMechanism
from app.dp.period.dft import DFT
from app.dp.period.hierarchical import HierOptStream
from app.dp.period.hierarchical_regions import RegionalHierOptStream
from app.dp.period.optstream import OptStream
from app.dp.period.pegasus import PeGaSus

__all__ = [
    "DFT",
    "HierOptStream",
    "OptStream",
    "PeGaSus",
    "PeriodMechanism",
    "RegionalHierOptStream",
]
