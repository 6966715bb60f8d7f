"""DFT: the first ``k`` Fourier coefficients of each period, perturbed (Rastogi and Nath's FPA
per period, the OptStream paper's baseline; spec §2.11 B2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app.dp import validate
from app.dp.noise import NoiseKind, add_noise
from app.dp.period.base import PeriodMechanism
from app.dp.types import FloatArray, Group


def dft_scale(keep: int, d: int, w: int, delta: float, eps: float) -> float:
    """Laplace scale for the real and imaginary parts of ``keep`` retained coefficients: their
    L1 sensitivity ``sqrt(keep d w) delta`` over ``eps``.

    With ``norm="ortho"``, the full spectrum of a column has the L2 norm of the column, and
    every retained coefficient but the mean (and Nyquist) appears twice in it. A w-neighbour
    moves the ``(w, d)`` period by at most ``sqrt(w) delta`` in L2 (``delta`` in L1 per
    slot), so the retained real and imaginary parts move by at most ``sqrt(keep d w) delta``
    in L1 (Cauchy-Schwarz with weight 1 per coefficient: ``|Re| + |Im| <= sqrt(2) |F|``).

    >>> round(dft_scale(10, 1, 48, 1.0, 1.0) ** 2, 6)  # sqrt(k w) delta / eps, spec B2
    480.0
    """
    return float(np.sqrt(keep * d * w) * delta / eps)


def dft_release(
    x: FloatArray,
    k: int,
    eps: float,
    delta: float,
    rng: np.random.Generator,
    *,
    noise: NoiseKind,
) -> FloatArray:
    """Keep coefficients ``0..k-1`` of ``rfft(x, norm="ortho")`` per column, add noise to
    their real and imaginary parts (real only for the mean and Nyquist), zero the rest,
    invert, truncate at 0 (spec §2.11 B2 resolution).

    The noise has the joint L1 sensitivity of the ``2 keep d`` retained parts,
    ``sqrt(keep d w) delta`` (:func:`dft_scale`): ``Lap(b)`` per part for ``laplace``; for
    ``geometric``, the parts are real numbers, so they are floored onto a grid and get discrete
    Laplace noise in its steps (:func:`app.dp.noise.add_noise`; the grid's slack counts all
    ``2 keep d`` parts, the zeroed imaginary ones included).

    >>> x = np.array([[1.0], [2.0], [3.0], [2.0]])
    >>> dft_release(x, 3, 1e12, 1.0, np.random.default_rng(0), noise="laplace"
    ...             ).round(6).ravel().tolist()
    [1.0, 2.0, 3.0, 2.0]
    """
    w, d = x.shape
    spectrum = np.fft.rfft(x, axis=0, norm="ortho")
    keep = min(k, spectrum.shape[0])
    real_only = [0] + ([keep - 1] if w % 2 == 0 and keep == spectrum.shape[0] else [])
    if noise == "laplace":  # the papers' draws, in their order
        scale = dft_scale(keep, d, w, delta, eps)
        real = spectrum[:keep].real + rng.laplace(0.0, scale, (keep, d))
        imag = spectrum[:keep].imag + rng.laplace(0.0, scale, (keep, d))
    else:
        parts = np.stack([spectrum[:keep].real, spectrum[:keep].imag])
        sensitivity = dft_scale(keep, d, w, delta, 1.0)
        real, imag = add_noise(noise, rng, parts, eps, sensitivity)
    imag[real_only] = 0.0  # the mean and the Nyquist coefficient are real
    noisy = np.zeros_like(spectrum)
    noisy[:keep] = real + 1j * imag
    noisy.imag[real_only] = 0.0
    return np.maximum(np.fft.irfft(noisy, n=w, axis=0, norm="ortho"), 0.0)


class DFT(PeriodMechanism):
    """DFT: per period, the ``k`` lowest Fourier coefficients plus Laplace noise, inverted.

    Paper
    -----
    V. Rastogi and S. Nath, SIGMOD 2010 (Fourier Perturbation Algorithm), applied per period
    of ``w`` slots as the OptStream paper's baseline (Fioretto and Van Hentenryck, §6; spec
    ``seed-001-optstream.md`` §2.11 B2).

    ========================  ===========================================================
    paper                     here
    ========================  ===========================================================
    w, eps                    ``period``, ``period_eps`` (as in OptStream)
    k                         ``k`` (retained coefficients, the mean included)
    Delta_2 Q                 ``sqrt(w) delta``
    ========================  ===========================================================

    Parameters
    ----------
    d, groups, noise, sensitivity, alpha, strict
        As in :class:`~app.dp.period.base.PeriodMechanism`.
    k
        Retained coefficients (the paper: 10; 5 when alpha = 100).

    State
    -----
    t, buffer, ledger
        Slot counter, the current period's true histograms, the window ledger.

    Privacy
    -------
    Neighbours: the user's contribution to each slot changes by at most ``delta`` in L1 (add-
    remove of one count, or of one clipped amount ``alpha``); the service doubles it for
    ``neighbours: replace``.
    One period costs ``period_eps``: Laplace noise at the L1 sensitivity of the retained
    coefficients (:func:`dft_scale`); zeroing, inversion and truncation are post-processing.
    Like OptStream, a sliding window can touch two periods: strict mode (default) halves the
    period budget and the ledger proves every window of ``w`` slots (spec §1.6: DFT has the
    same ``2 eps`` issue).

    Deviations
    ----------
    * Orthonormal ``rfft``, the inverse with the opposite sign (spec §2.13 item 8).
    * Noise scale ``sqrt(k) sqrt(w) delta / eps`` per column, which is the *exact* L1 bound
      for the retained parts (conjugate symmetry; :func:`dft_scale`), so the spec's
      "rigorous" ``sqrt(2k)`` is not needed. With ``d`` categories, ``sqrt(k d w) delta``.

    Examples
    --------
    >>> from app.dp.types import Group
    >>> m = DFT(d=1, groups=[Group(4, 1.0)], k=2)
    >>> rng = np.random.default_rng(0)
    >>> [len(m.step([[c]], rng)) for c in (10, 20, 30, 40)]
    [0, 0, 0, 4]

    References
    ----------
    V. Rastogi and S. Nath, SIGMOD 2010.
    """

    name = "dft"
    version = 1

    def __init__(self, d: int, groups: Sequence[Group], k: int = 10, **params: Any) -> None:
        self.k = validate.integer("k", k)
        super().__init__(d, groups, **params)

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {**super().test_params(), "k": 2}

    def describe(self) -> str:
        return (
            f"DFT over periods of w={self.period} released at their end: the first {self.k} "
            f"coefficients with eps_P={self.period_eps:g} per period"
        )

    def _release(self, x: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        return dft_release(x, self.k, eps, self.delta, rng, noise=self.noise)
