"""STR: Spatial-Temporal RescueDP (Liu et al. 2021, Alg. 4 and the reconstructed Alg. 3)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from app.dp import validate
from app.dp.budget import exact
from app.dp.errors import ParameterError
from app.dp.graph import Graph
from app.dp.types import FloatArray, Group, IntArray
from app.dp.wn.base import BoolArray, Edges, GraphMechanism, Spending

INTERVAL_NORMS = ("paper", "rescuedp")


class STR(GraphMechanism):
    """Spatial-Temporal RescueDP: adaptive sampling and Kalman filtering on the (w,n) ledger.

    Paper
    -----
    X. Liu, Y. Guo, X. Tan, Y. Chen. *Differentially private web browsing trajectories over
    infinite streams* (Security and Communication Networks, 2021), Algorithm 4 (budget
    allocation), Eq. 16-18, Table 2; Algorithm 3 is missing from the paper and follows its
    reconstruction in ``docs/specs/seed-003-trajectory.md`` §A5 (lines 1-11 there).

    ======================  ======================================================
    paper                   here
    ======================  ======================================================
    (w, eps), n, l          ``requirement``, ``n``, ``sensitivity``
    K_p, K_g, K_d, pi       ``kp``, ``ki``, ``kd``, ``pid_window``
    theta, s, p_max         ``theta``, ``s``, ``p_max``
    eps_max = 0.2 eps       ``eps_max`` (a share of eps)
    psi^win, eta^m          ``ledger.remaining()``, ``ledger.eta()``
    I^m, next sample        ``interval``, ``next_sample``
    Kalman x^, P, Q, R      ``x_hat``, ``p_var``, ``process_var``, noise variance
    ======================  ======================================================

    Parameters
    ----------
    d, groups, n, edges, grid, neighbours, noise, sensitivity
        As in :class:`~app.dp.wn.stbd.STBD`.
    kp, ki, kd, pid_window
        PID gains and the integral's window ``pi`` (Eq. 16; Table 2: 0.9, 0.1, 0, 3).
    theta, s, p_max, eps_max
        Interval step (Eq. 17), the share slope and cap (Alg. 4 l.7), the cap of one
        publication as a share of ``eps`` (Table 2: 10, 0.2, 0.6, 0.2).
    process_var
        Kalman process variance ``Q`` (a hyperparameter; calibrate it on public data, never on
        the released series, spec A5).
    interval_norm
        ``"paper"``: Eq. 17's ``(delta eta)**2``; ``"rescuedp"``: ``(delta eta / l)**2``.

    State
    -----
    t, last_release, ledger
        As in STBD (the ledger holds ``BallMax`` of the budgets of the last ``w - 1`` slots).
    next_sample, interval, samples, last_sample_t, last_out, errors
        Per page: next sampling slot, ``I^m``, number of samples, slot and output of the last
        sample, and the last ``pi`` PID errors ``E``.
    x_hat, p_var
        Per page Kalman posterior mean and variance.

    Privacy
    -------
    Neighbours: :data:`~app.dp.wn.base.WN_RELATION`, at ``n`` = the ``n`` parameter: one user's
    up to ``l`` values per slot, in ``w`` consecutive slots, changed only on pages within
    ``n - 1`` hops of one centre page, added or removed at ``sensitivity=l`` (the service passes
    ``2 l`` for ``neighbours: replace``: the values changed, old and new pages in that window).
    A user whose pages in ``w`` slots fit in no single such window is protected per window:
    ``k`` windows cost up to ``k eps``.
    (w,n)-DP with ``eps = min eps_g`` over ``w = max w_g`` (Theorem 7). Only the perturbation
    reads data: a sampled page spends ``min(p eta^m, eps_max)`` with ``p <= p_max < 1``, where
    ``eta^m`` is the least remaining budget ``eps - sum phi`` over the windows containing ``m``;
    every window therefore stays strictly below ``eps``; the ledger checks Theorem 5 exactly
    before any draw. Scheduling, PID and Kalman filter only use released values.

    Deviations
    ----------
    * Alg. 3 is reconstructed (spec A5, A9.1): budget, perturb, filter, then PID and interval.
    * Eq. 16's integral uses the last ``min(pi, n-1)`` errors and divides by their count
      (spec A9.3); Eq. 17 uses ``eta`` of Alg. 4 at the sample (spec A9.4), and the interval
      that scheduled the sample in Alg. 4 l.7 (A9.5); the next sample is ``t + floor(I)``.
    * Kalman: random walk, ``R`` = the variance of the noise drawn, first sample ``x = z``,
      ``P = R`` (spec A5). Every page samples at slot 1 with ``I = 1`` (A9.6).
    * ``eps_max`` is a share of ``eps`` (A9.17). A page whose share rounds to 0 units waits
      one slot. No dynamic grouping (the seed: STR differs from RescueDP only in budgets).

    Examples
    --------
    The first publication gets ``min(0.2 ln 2, 0.6) eps = 0.1386 eps`` (spec §3.4):

    >>> import numpy as np
    >>> from app.dp.types import Group
    >>> m = STR(d=4, groups=[Group(10, 1.0)], n=2, grid=[2, 2])
    >>> round(float(m.step([[5, 0, 7, 1]], np.random.default_rng(0)).spent_pub[0]), 4)
    0.1386

    References
    ----------
    Liu et al., Secur. Commun. Netw. 2021; Q. Wang et al., RescueDP, IEEE TDSC 2018.
    """

    name = "str"
    version = 1

    def __init__(
        self,
        d: int,
        groups: Sequence[Group],
        n: int = 2,
        edges: Edges | None = None,
        grid: Sequence[int] | None = None,
        neighbours: int = 4,
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
        graph = self._take_graph(d, n, edges, grid, neighbours)
        self._setup(
            d,
            groups,
            graph,
            n,
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

    def _setup(
        self,
        d: int,
        groups: Sequence[Group],
        graph: Graph,
        n: int,
        kp: float,
        ki: float,
        kd: float,
        pid_window: int,
        theta: float,
        s: float,
        p_max: float,
        eps_max: float,
        process_var: float,
        interval_norm: str,
        noise: str,
        sensitivity: int,
    ) -> None:
        self.kp = validate.number("kp", kp, 0)
        self.ki = validate.number("ki", ki, 0)
        self.kd = validate.number("kd", kd, 0)
        self.pid_window = validate.integer("pid_window", pid_window)
        self.theta = validate.number("theta", theta, 0)
        self.s = validate.positive("s", s)
        self.p_max = validate.number("p_max", p_max, 0, strict=True, high=1.0)
        if self.p_max >= 1.0:
            raise ParameterError(f"p_max must be < 1 (Theorem 7), got {p_max!r}")
        self.eps_max = validate.number("eps_max", eps_max, 0, strict=True, high=1.0)
        self.process_var = validate.number("process_var", process_var, 0)
        self.interval_norm = validate.choice("interval_norm", interval_norm, INTERVAL_NORMS)
        super().__init__(d, groups, graph, n, noise, sensitivity)

    def _reset(self) -> None:
        super()._reset()
        d = self.d
        self.eps_max_units = int(self.ledger.total * Fraction(exact(self.eps_max)))
        self.next_sample: IntArray = np.ones(d, dtype=np.int64)
        self.interval = np.ones(d)
        self.samples: IntArray = np.zeros(d, dtype=np.int64)
        self.last_sample_t: IntArray = np.zeros(d, dtype=np.int64)
        self.last_out = np.zeros(d)
        self.errors = np.zeros((d, self.pid_window))
        self.x_hat = np.zeros(d)
        self.p_var = np.zeros(d)

    publication_share = Fraction(1)

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {
            "d": 6,
            "groups": [Group(5, 1.0), Group(3, 0.5)],
            "n": 2,
            "edges": [[0, 1], [1, 2], [2, 3], [3, 4], [1, 5]],
            "process_var": 100.0,
        }

    def describe(self) -> str:
        return (
            f"{type(self).__name__} (w,n)-DP, n={self.n}: adaptive sampling (PID); a sampled "
            f"page spends min(min(s ln(I+1), p_max) x least budget left in its windows, "
            f"{self.eps_max:g} eps); Kalman-filtered outputs"
        )

    def _slot(self, t: int, r: IntArray, rng: np.random.Generator) -> Spending:
        eta = self.ledger.eta()  # Alg. 4 l.1-6 (all pages), units
        due = self.next_sample <= t  # Alg. 3 l.2
        share = np.minimum(self.s * np.log(self.interval + 1.0), self.p_max)  # Alg. 4 l.7
        units = np.minimum(np.floor(share * eta.astype(np.float64)), self.eps_max_units)
        units = np.where(due, np.minimum(units.astype(np.int64), eta), 0)  # Alg. 4 l.8
        sampled = due & (units > 0)
        units, z, noise_var = self._perturb(r, sampled, units, rng)  # Alg. 3 l.5 (Eq. 18)
        # Alg. 3 l.6, l.9: Kalman predict for every page, correct the sampled ones
        x_hat, p_var = self.x_hat.copy(), self.p_var + self.process_var
        first = self.samples[sampled] == 0
        prior_x, prior_p = x_hat[sampled], p_var[sampled]
        gain = prior_p / (prior_p + noise_var)
        x_hat[sampled] = np.where(first, z, prior_x + gain * (z - prior_x))
        p_var[sampled] = np.where(first, noise_var, (1.0 - gain) * prior_p)
        # Alg. 3 l.7 (Eq. 16-17): PID on published values, then the next interval
        out = x_hat[sampled]
        idx = np.flatnonzero(sampled)
        err = np.abs(out - self.last_out[idx])
        errors = self.errors.copy()
        errors[idx] = np.concatenate([errors[idx, 1:], err[:, None]], axis=1)
        have = np.minimum(self.samples[idx], self.pid_window)  # errors so far (after this one)
        integral = errors[idx].sum(axis=1) / np.maximum(have, 1)
        gap = np.maximum(t - self.last_sample_t[idx], 1)
        delta = self.kp * err + self.ki * integral + self.kd * err / gap
        ratio = delta * self.eps_of(eta[idx])
        if self.interval_norm == "rescuedp":
            ratio = ratio / self.sensitivity
        interval = self.interval.copy()
        pid = ~first  # the PID needs two samples
        interval[idx[pid]] = np.maximum(
            1.0, interval[idx[pid]] + self.theta * (1 - ratio[pid] ** 2)
        )
        errors[idx[first]] = 0.0
        # commit the per-page state (ledger recording follows in step)
        self.x_hat, self.p_var, self.errors, self.interval = x_hat, p_var, errors, interval
        self.next_sample = np.where(due & ~sampled, t + 1, self.next_sample)
        self.next_sample[idx] = t + np.floor(interval[idx]).astype(np.int64)  # Alg. 3 l.8
        self.last_out[idx] = out
        self.last_sample_t[idx] = t
        self.samples[idx] += 1
        return Spending(x_hat.copy(), sampled, np.zeros(self.d, dtype=np.int64), units)

    def _perturb(
        self, r: IntArray, sampled: BoolArray, units: IntArray, rng: np.random.Generator
    ) -> tuple[IntArray, FloatArray, FloatArray]:
        """Alg. 3 l.5: ensure ``units`` on the ledger (Theorem 5), then noise every sampled
        page at its own budget. Returns the units spent per page, the noisy values and their
        noise variances (of the sampled pages, in page order)."""
        self.ledger.ensure(np.zeros(self.d, dtype=np.int64), units)  # Theorem 5 before draws
        eps = self.calibrated(units[sampled])
        return units, r[sampled] + self.draw(rng, eps), self.noise_variance(eps)

    def _extra_state(self) -> dict[str, Any]:
        return {
            "next_sample": [int(x) for x in self.next_sample],
            "interval": [float(x) for x in self.interval],
            "samples": [int(x) for x in self.samples],
            "last_sample_t": [int(x) for x in self.last_sample_t],
            "last_out": [float(x) for x in self.last_out],
            "errors": [[float(x) for x in row] for row in self.errors],
            "x_hat": [float(x) for x in self.x_hat],
            "p_var": [float(x) for x in self.p_var],
        }

    def _extra_load(self, state: dict[str, Any]) -> None:
        ints = ("next_sample", "samples", "last_sample_t")
        for key in (*ints, "interval", "last_out", "x_hat", "p_var"):
            a = np.array(state[key], dtype=np.int64 if key in ints else np.float64)
            if a.shape != (self.d,):
                raise ParameterError(f"state {key!r} has shape {a.shape}, expected ({self.d},)")
            setattr(self, key, a)
        self.errors = np.array(state["errors"], dtype=np.float64).reshape(self.d, self.pid_window)


__all__ = ["STR"]
