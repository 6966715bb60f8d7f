"""Local w-event mechanisms (LDP-IDS, Ren et al. SIGMOD 2022; PLBU from the PWSM paper).

The service is an untrusted aggregator: devices perturb their own values with a frequency oracle
(:mod:`app.dp.oracles`) and the service only sums support counts. Budget division (LBU, PLBU,
LBD, LBA) asks everybody at every slot with a share of ``eps``; population division (LSP, LPU,
LPD, LPA) asks a cohort of users, each with the whole ``eps``, and never the same user twice in
``w`` slots (:mod:`app.dp.local.population`). The per-slot two-round protocol is documented in
:mod:`app.dp.local.base`. Build them through :func:`app.dp.registry.create`.
"""

from __future__ import annotations

from app.dp.local.base import CollectionRequest, LocalMechanism, Tally
from app.dp.local.lba import LBA
from app.dp.local.lbd import LBD
from app.dp.local.lbu import LBU
from app.dp.local.lpa import LPA
from app.dp.local.lpd import LPD
from app.dp.local.lpu import LPU
from app.dp.local.lsp import LSP
from app.dp.local.plbu import PLBU

__all__ = [
    "LBA",
    "LBD",
    "LBU",
    "LPA",
    "LPD",
    "LPU",
    "LSP",
    "PLBU",
    "CollectionRequest",
    "LocalMechanism",
    "Tally",
]
