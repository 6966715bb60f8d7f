"""OptStream: sample, perturb, reconstruct and post-process one period at a time (Alg. 2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app.dp import validate
from app.dp.errors import ParameterError
from app.dp.noise import SAFE_NOISE
from app.dp.period.base import PeriodMechanism
from app.dp.period.perturb import perturb
from app.dp.period.postprocess import (
    Feature,
    check_features,
    default_features,
    feature_answers,
    postprocess,
)
from app.dp.period.reconstruct import reconstruct
from app.dp.period.sampling import equally_spaced, l1_sample
from app.dp.types import FloatArray, Group

SAMPLINGS = ("ls", "es", "none")


class OptStream(PeriodMechanism):
    """OptStream: the whole period released at its end, from a few perturbed samples.

    Paper
    -----
    F. Fioretto and P. Van Hentenryck, "OptStream: Releasing Time Series Privately", JAIR
    (arXiv:1808.01949v2): Alg. 2 (driver, l.1-10), Alg. 3 (L1 sampler), §3.2 (PERTURB), §3.3
    (RECONSTRUCT), Alg. 4 (POSTPROCESS), §5.1 ((w, alpha) model). Spec ``seed-001-optstream.md``.

    ========================  ===========================================================
    paper                     here
    ========================  ===========================================================
    w                         ``period`` = ``max_g w_g``
    eps                       ``period_eps`` (``min_g eps_g``, halved in strict mode)
    eps_s, eps_p, eps_o       equal shares of ``period_eps`` over the active components
    k, theta                  ``k``, ``theta``
    F = {F1, ..., Fp}         F1 (singletons) + ``features`` (cut points)
    Delta_Q, Delta_A          ``delta`` = ``sensitivity`` (counts) or ``alpha * sensitivity``
    Delta_L                   ``2 delta (w - k)``
    Q_F sensitivity           ``w delta`` (``feature_sensitivity="rigorous"``) or ``delta``
    ========================  ===========================================================

    Parameters
    ----------
    d, groups, noise, sensitivity, alpha, strict
        As in :class:`~app.dp.period.base.PeriodMechanism`: domain size, requirement groups
        (the period and budget are ``(max w, min eps)``), the noise (``"geometric"``, DP as
        implemented; ``"laplace"`` for the papers, see :mod:`app.dp.period.base`), the neighbouring
        relation's multiplier, the sum-stream bound (None for counts), strict sliding windows
        (``strict=False`` is the paper's setting and **not w-event private**; see
        :mod:`app.dp.period.base`).
    k
        Samples per period (``min(k, w)`` are taken; ``k >= w`` measures every slot).
    theta
        SVT threshold of the L1 sampler, in the data's units (the paper: 1000 MW).
    sampling
        ``"ls"`` (L1 sampler, SVT), ``"es"`` (equally spaced) or ``"none"`` (every slot).
    postprocess
        Run POSTPROCESS (the ``O`` of the ablations ``<P,S,O>``).
    features
        Cut points of the features F2..Fp; None: the paper's F2, F3 scaled to the period.
    feature_sensitivity
        ``"rigorous"`` (``w delta``, default) or ``"paper"`` (``delta``, spec §2.8; **not
        w-event private**: a w-neighbour moves a partition sum by up to ``w delta``; kept to
        reproduce the paper, refused by the service unless a stream accepts it).
    es_split
        ES budget: ``"halves"`` (``eps_p = eps_o``, default) or ``"thirds"`` (``eps_s`` wasted).

    State
    -----
    t, buffer, ledger
        Slot counter, the current period's true histograms, the window ledger. Nothing else
        crosses periods (spec §3 item 6).

    Privacy
    -------
    Neighbours: the user's contribution to each slot changes by at most ``delta`` in L1 (add-
    remove of one count, or of one clipped amount ``alpha``); the service doubles it for
    ``neighbours: replace``.
    One period's release is ``eps_P``-DP against any change inside the period: SAMPLE (SVT,
    Thm 7), PERTURB (Thm 8) and the feature queries (Thm 9) spend ``eps_s + eps_p + eps_o =
    eps_P`` (Lemma 1); RECONSTRUCT and the NNLS are post-processing. In strict mode (default)
    ``eps_P = eps / 2`` and the ledger proves every sliding window of ``w`` slots spends at
    most ``eps`` (see :mod:`app.dp.period.base`); with ``strict=False`` only aligned periods do
    (the paper's setting; a straddling window loses up to ``2 eps``, spec §1.6).

    Deviations
    ----------
    * Strict mode is the default (spec §1.6, §2.13 item 5).
    * Feature queries default to the rigorous sensitivity ``w delta`` (spec §2.8, item 4).
    * ES splits its budget in halves (spec §2.3, item 6); positions per spec §2.4 (item 7).
    * The L1 sampler reserves the last slot (spec §2.5, item 2); line 9's typo fixed (item 1).
    * Histograms: the ``d`` categories share one sample set, chosen on the L1 scores summed
      over categories (same ``Delta_L``, see :func:`~app.dp.period.sampling.l1_sample`); the
      perturbation and features cover all categories with the same scales (one slot moves by
      ``delta`` in L1), and the program separates per category.
    * ``geometric`` noise by default (discrete Laplace on the integers for the samples and
      features of counts, on a grid otherwise; :mod:`app.dp.period.base`); the paper's
      Laplace with ``noise="laplace"``.

    Examples
    --------
    Nothing is released inside a period; the period's ``w`` releases come at its end:

    >>> from app.dp.types import Group
    >>> m = OptStream(d=1, groups=[Group(4, 1.0)], k=2)
    >>> rng = np.random.default_rng(1)
    >>> [len(m.step([[c]], rng)) for c in (10, 20, 30, 40)]
    [0, 0, 0, 4]
    >>> m.period_eps, OptStream(d=1, groups=[Group(4, 1.0)], strict=False).period_eps
    (0.5, 1.0)

    References
    ----------
    Kellaris et al., PVLDB 7(12), 2014 (w-event privacy). Lyu, Su and Li, PVLDB 10(6), 2017
    (SVT). Fioretto, Lee and Van Hentenryck, AAMAS 2018 (Thm 12).
    """

    name = "optstream"
    version = 1

    def __init__(
        self,
        d: int,
        groups: Sequence[Group],
        noise: str = SAFE_NOISE,
        sensitivity: int = 1,
        alpha: float | None = None,
        strict: bool = True,
        k: int = 10,
        theta: float = 1000.0,
        sampling: str = "ls",
        postprocess: bool = True,
        features: Sequence[Sequence[int]] | None = None,
        feature_sensitivity: str = "rigorous",
        es_split: str = "halves",
    ) -> None:
        self.k = validate.integer("k", k, 2)
        self.theta = validate.number("theta", theta)
        self.sampling = validate.choice("sampling", sampling, SAMPLINGS)
        self.postprocess = validate.flag("postprocess", postprocess)
        self.feature_sensitivity = validate.choice(
            "feature_sensitivity", feature_sensitivity, ("rigorous", "paper")
        )
        self.es_split = validate.choice("es_split", es_split, ("halves", "thirds"))
        super().__init__(d, groups, noise, sensitivity, alpha, strict)
        w = self.period
        self.features: tuple[Feature, ...] | None = (
            None if features is None else check_features(features, w)
        )
        if self.postprocess and not self.active_features:
            raise ParameterError(f"features must hold at least one feature, got {features!r}")

    @property
    def active_features(self) -> tuple[Feature, ...]:
        """The features F2..Fp in use."""
        return default_features(self.period) if self.features is None else self.features

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {**super().test_params(), "k": 3, "theta": 50.0}

    def describe(self) -> str:
        s, p, o = self.split(1.0)
        return (
            f"OptStream-{self.sampling.upper()} over periods of w={self.period} released at "
            f"their end, eps_P={self.period_eps:g} per period"
            f"{' (strict: every sliding window <= eps)' if self.strict else ' (aligned only)'}"
            f"; shares sample/perturb/features {s:g}/{p:g}/{o:g}"
        )

    def weaker_guarantee(self) -> str | None:
        reasons = [super().weaker_guarantee()]
        if self.postprocess and self.feature_sensitivity == "paper" and self.period > 1:
            reasons.append("feature_sensitivity=paper: features calibrated to Delta, not w Delta")
        return "; ".join(r for r in reasons if r) or None

    def effective_sampling(self) -> str:
        """The sampler actually run: ``"none"`` when ``k`` covers the period."""
        return "none" if self.k >= self.period else self.sampling

    def split(self, eps: float) -> tuple[float, float, float]:
        """``(eps_s, eps_p, eps_o)``: equal shares over the active components (spec §2.3, B4)."""
        sampling = self.effective_sampling()
        uses_s = sampling == "ls" or (sampling == "es" and self.es_split == "thirds")
        parts = 1 + int(uses_s) + int(self.postprocess)
        share = eps / parts
        eps_s = share if sampling == "ls" else 0.0  # an ES "thirds" share is left unspent
        return eps_s, share, share if self.postprocess else 0.0

    def noisy_inputs(
        self, x: FloatArray, eps: float, rng: np.random.Generator
    ) -> tuple[FloatArray, list[FloatArray]]:
        """Alg. 2 l.5-8 and Alg. 4 l.2: the reconstruction and the noisy feature answers, the
        only things derived from ``x`` (``(w, d)``)."""
        w = x.shape[0]
        eps_s, eps_p, eps_o = self.split(eps)  # l.5
        sampling = self.effective_sampling()
        if sampling == "ls":  # l.6
            samples = l1_sample(x, self.k, eps_s, self.theta, self.delta, rng, noise=self.noise)
        elif sampling == "es":
            samples = equally_spaced(w, self.k)
        else:
            samples = np.arange(w, dtype=np.int64)
        # l.7
        noisy = perturb(x, samples, eps_p, self.delta, rng, noise=self.noise, exact=self.exact)
        rec = reconstruct(noisy, samples, w)  # l.8
        answers: list[FloatArray] = []
        if self.postprocess:  # Alg. 4 l.2
            sens = self.delta * (w if self.feature_sensitivity == "rigorous" else 1)
            answers = feature_answers(
                x, self.active_features, eps_o, sens, rng, noise=self.noise, exact=self.exact
            )
        return rec, answers

    def _release(self, x: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        rec, answers = self.noisy_inputs(x, eps, rng)
        if not self.postprocess:
            return np.maximum(rec, 0.0)  # §6: negative values truncated to 0
        return postprocess(rec, answers, self.active_features)  # l.9, Alg. 4 l.3-4
