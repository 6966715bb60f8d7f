"""Central w-event mechanisms: the trusted service sees raw counts per requirement group.

Uniform and Sample (Kellaris et al. 2014) spend a fixed schedule; BD and BA (Kellaris et al.
2014) adapt it to the data with a dissimilarity test; PBD and PBA (Du et al. 2025) do the same
per requirement group with the Sampling Mechanism and OBS. Build them through
:func:`app.dp.registry.create`.
"""

from __future__ import annotations

from app.dp.central.ba import BA
from app.dp.central.base import CentralMechanism
from app.dp.central.bd import BD
from app.dp.central.pba import PBA
from app.dp.central.pbd import PBD
from app.dp.central.sample import Sample
from app.dp.central.uniform import Uniform

__all__ = ["BA", "BD", "PBA", "PBD", "CentralMechanism", "Sample", "Uniform"]
