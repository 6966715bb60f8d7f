"""Local w-event mechanisms (LDP-IDS, Ren et al. SIGMOD 2022; PLBU from the PWSM paper).

The service is an untrusted aggregator: devices perturb their own values with a frequency oracle
(:mod:`app.dp.oracles`) and the service only sums support counts. Budget division (LBU, PLBU,
LBD, LBA) asks everybody at every slot with a share of ``eps``; population division (LSP, LPU,
LPD, LPA) asks a cohort of users, each with the whole ``eps``, and never the same user twice in
``w`` slots (:mod:`app.dp.local.population`). The per-slot two-round protocol is documented in
:mod:`app.dp.local.base`. Build them through :func:`app.dp.registry.create`.

Personalized population division (PLDP-IDS, Du et al.): PLPD, PLPA, PLPD+, PLPA+ and the
ablations PLBD-RP, PLBA-RP, PLBD-OPS, PLBA-OPS (:mod:`app.dp.local.pldp`), built on the
personalized frequency oracle (:mod:`app.dp.local.pfo`), OPS (:mod:`app.dp.local.ops`), PUE
(:mod:`app.dp.local.pue`) and a population ledger of every user's own window
(:mod:`app.dp.local.personal_population`).
"""

from __future__ import annotations

from app.dp.local.base import LocalMechanism
from app.dp.local.lba import LBA
from app.dp.local.lbd import LBD
from app.dp.local.lbu import LBU
from app.dp.local.lpa import LPA
from app.dp.local.lpd import LPD
from app.dp.local.lpu import LPU
from app.dp.local.lsp import LSP
from app.dp.local.plbu import PLBU
from app.dp.local.pldp_ablations import PLBAOPS, PLBARP, PLBDOPS, PLBDRP
from app.dp.local.plpa import PLPA
from app.dp.local.plpa_plus import PLPAPlus
from app.dp.local.plpd import PLPD
from app.dp.local.plpd_plus import PLPDPlus
from app.dp.local.wire import CollectionRequest, Tally

__all__ = [
    "LBA",
    "LBD",
    "LBU",
    "LPA",
    "LPD",
    "LPU",
    "LSP",
    "PLBAOPS",
    "PLBARP",
    "PLBDOPS",
    "PLBDRP",
    "PLBU",
    "PLPA",
    "PLPD",
    "PLPAPlus",
    "PLPDPlus",
    "CollectionRequest",
    "LocalMechanism",
    "Tally",
]
