"""RescueDP (Wang et al., TDSC 2018) at place level: the (w,1) baseline of Liu et al. 2021."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.dp.graph import Graph
from app.dp.types import Group
from app.dp.wn.str_ import STR


class RescueDP(STR):
    """RescueDP: adaptive sampling, budget allocation and Kalman filtering per page, w-event
    privacy for every page on its own (place level, ``(w, 1)``).

    Paper
    -----
    Q. Wang, Y. Zhang, X. Lu, Z. Wang, Z. Qin, K. Ren. *Real-time and spatio-temporal crowd-
    sourced social network data publishing with differential privacy*, IEEE TDSC 15(4), 2018
    (RescueDP), as the baseline of Liu et al. 2021 (§5.2) with its Table 2 parameters; spec
    ``docs/specs/seed-003-trajectory.md`` §A7. The schedule is STR's (Alg. 3-4) with
    single-page windows: ``psi^m = eps - sum_{w-1} eps_t^m`` and ``eta^m = psi^m``.

    =====================  =====================================
    paper                  here
    =====================  =====================================
    per-region budget      ``ledger`` over the edgeless graph, ``n = 1``
    K_p, K_i, K_d, pi      ``kp``, ``ki``, ``kd``, ``pid_window``
    other symbols          as in :class:`~app.dp.wn.str_.STR`
    =====================  =====================================

    Parameters
    ----------
    d, groups, noise, sensitivity
        Domain size, requirement groups (run at ``(max w, min eps)``), noise kind, ``l``.
    kp, ki, kd, pid_window, theta, s, p_max, eps_max, process_var, interval_norm
        As in STR (Table 2 defaults).

    State
    -----
    t, last_release, ledger, next_sample, interval, samples, last_sample_t, last_out
        As in STR.
    errors, x_hat, p_var
        As in STR.

    Privacy
    -------
    Neighbours: :data:`~app.dp.wn.base.WN_RELATION` at ``n = 1``: the spatial window is one
    page, so the guarantee covers one user's values on one page (whether they land there), in
    ``w`` consecutive slots, added or removed at ``sensitivity=l`` (the service passes ``2 l``
    for ``neighbours: replace``). A value moved from one page to another changes two windows;
    a user's values on ``k`` pages cost up to ``k eps``.
    w-event ``eps``-DP for every page separately, with ``eps = min eps_g``, ``w = max w_g``: a
    sampled page spends at most ``p_max`` times what its own window has left, so every page's
    window stays strictly below ``eps`` (the ledger checks it before any draw). This is the
    weakest unit of the four mechanisms of Liu et al.: a user whose ``l`` values span several
    pages is protected per page, not jointly (``(w, 1)``-DP).

    Deviations
    ----------
    * No dynamic grouping (spec A7's default: "STR differs from RescueDP only in budget
      allocation"); the grouping variant is
      :class:`~app.dp.wn.rescuedp_grouping.RescueDPGrouped` (``rescuedp_g``).
    * As STR otherwise (spec A5, A9.3-A9.6, A9.17).

    Examples
    --------
    >>> import numpy as np
    >>> from app.dp.types import Group
    >>> m = RescueDP(d=3, groups=[Group(10, 1.0)])
    >>> rel = m.step([[5, 0, 7]], np.random.default_rng(0))
    >>> rel.fresh_cells.tolist(), round(float(rel.spent_pub[0]), 4)
    ([True, True, True], 0.1386)

    References
    ----------
    Wang et al., IEEE TDSC 2018; Liu et al., Secur. Commun. Netw. 2021.
    """

    name = "rescuedp"
    version = 1

    def __init__(
        self,
        d: int,
        groups: Sequence[Group],
        kp: float = 0.9,
        ki: float = 0.1,
        kd: float = 0.0,
        pid_window: int = 3,
        theta: float = 10.0,
        s: float = 0.2,
        p_max: float = 0.6,
        eps_max: float = 0.2,
        process_var: float = 1000.0,
        interval_norm: str = "paper",
        noise: str = "laplace",
        sensitivity: int = 1,
    ) -> None:
        self._setup(
            d,
            groups,
            Graph(d),
            1,
            kp,
            ki,
            kd,
            pid_window,
            theta,
            s,
            p_max,
            eps_max,
            process_var,
            interval_norm,
            noise,
            sensitivity,
        )

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {"d": 6, "groups": [Group(5, 1.0), Group(3, 0.5)], "process_var": 100.0}

    def describe(self) -> str:
        return (
            "RescueDP place level (w,1): adaptive sampling (PID); a sampled page spends "
            f"min(min(s ln(I+1), p_max) x its own window's budget left, {self.eps_max:g} eps); "
            "Kalman-filtered outputs"
        )


__all__ = ["RescueDP"]
