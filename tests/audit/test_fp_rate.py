"""The auditor's own false-positive rate on a correct, tight Laplace mechanism.

Each audit certifies a pre-registered event with two one-sided 97.5% Clopper-Pearson bounds, so
a correct mechanism is flagged with probability at most ``alpha = 0.05``. Over ``SEEDS``
independent audits the number of false alarms is then stochastically below Binomial(SEEDS,
0.05); the test allows three standard deviations above that mean.
"""

from __future__ import annotations

import math

import pytest

from app.audit.reference import false_positive_rate, geometric_case
from app.audit.tight import TIGHT_TRIALS

SEEDS = 100
TRIALS = 1000
ALPHA = 0.05


def test_false_positive_rate_is_at_most_the_confidence_level():
    rate, bounds = false_positive_rate(SEEDS, TRIALS, eps=1.0, alpha=ALPHA)
    allowed = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / SEEDS)
    assert rate <= allowed, (rate, sorted(bounds)[-5:])
    # and the auditor is not vacuous on this tight mechanism: most bounds are well above 0
    assert sorted(bounds)[SEEDS // 2] > 0.5


@pytest.mark.parametrize("eps", [1.0, 2.0])  # the worst-case claims lie in [1, 2]
def test_worst_case_rule_false_positive_rate_on_exact_discrete_noise(eps):
    # the rule of the worst-case cases (claim = the true loss, event on the likelihood-ratio
    # statistic alone, TIGHT_TRIALS runs per input) on a correct, tight discrete mechanism
    rate, bounds = false_positive_rate(
        SEEDS, TIGHT_TRIALS, eps=eps, alpha=ALPHA, case=geometric_case(eps)
    )
    allowed = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / SEEDS)
    assert rate <= allowed, (rate, sorted(bounds)[-5:])
    assert sorted(bounds)[SEEDS // 2] > 0.6 * eps  # close to tight, so a doubled loss crosses
