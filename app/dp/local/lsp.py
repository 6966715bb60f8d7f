"""LSP: LDP Sampling (LDP-IDS §5.2.2, reclassified as population division in §6.1)."""

from __future__ import annotations

import numpy as np

from app.dp import validate
from app.dp.local.base import Ask, LocalMechanism
from app.dp.types import Status


class LSP(LocalMechanism):
    """LDP Sampling: everybody reports with ``eps`` once every ``w`` slots; the rest repeat.

    Paper
    -----
    X. Ren et al., SIGMOD 2022, §5.2.2 (spec ``docs/specs/seed-004-ldp-ids.md`` §3.2).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    sampling slots      ``(t - 1 - offset) mod w == 0``
    s                   ``offset``
    r_t = r_{t-1}       status ``"skip"`` between sampling slots
    ==================  ==================================================

    Protocol: at a sampling slot, one publication round, cohort everybody, budget ``eps``;
    otherwise no round at all (``open_slot`` returns None) and the last release is repeated.

    Parameters
    ----------
    d, eps, w, users, buckets, oracle
        As in :class:`~app.dp.local.lbu.LBU`.
    offset
        Slots before the first sample (``0 <= offset < w``; default 0: sample at ``t = 1``).

    State
    -----
    t, last_release, ledger, population, open
        As in :class:`~app.dp.local.lbu.LBU`.

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    w-event ``eps``-LDP (Thm 5.1): sampling slots are exactly ``w`` apart, so each window holds
    at most one ``eps``-LDP report per user; the population ledger refuses anything else.

    Deviations
    ----------
    * The sampling interval is ``w`` with a configurable offset (spec A15); LSP is grouped with
      population division, as the paper's experiments do (spec A16).

    Examples
    --------
    >>> import numpy as np
    >>> m = LSP(d=2, eps=1.0, w=3, users=10)
    >>> rng = np.random.default_rng(0)
    >>> from app.dp.local.wire import Tally
    >>> statuses = []
    >>> for _ in range(4):
    ...     req = m.open_slot(rng)
    ...     if req is not None:
    ...         _ = m.on_tally(Tally(req.slot, req.round, [[7, 3]], [10]), rng)
    ...     statuses.append(m.close_slot().status)
    >>> statuses
    ['publish', 'skip', 'skip', 'publish']

    References
    ----------
    X. Ren et al., SIGMOD 2022, §5.2.2, §6.1.
    """

    name = "lsp"
    version = 1

    def __init__(
        self,
        d: int,
        eps: float,
        w: int,
        users: int,
        buckets: int | None = None,
        oracle: str = "grr",
        offset: int = 0,
    ) -> None:
        self.offset = validate.integer("offset", offset, 0, high=validate.integer("w", w))
        super().__init__(d, eps, w, users, buckets, oracle)

    def describe(self) -> str:
        return "LSP: every user reports with the full eps at one slot in w; the others repeat"

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        if (t - 1 - self.offset) % self.w != 0:  # §5.2.2: approximate between samples
            return "skip"
        return Ask("publication", None, [self.full])  # everybody, full eps
