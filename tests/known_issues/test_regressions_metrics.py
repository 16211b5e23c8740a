"""Regressions of the metrics: each test names the bug it pins."""
import math

import numpy as np
import pytest

from pipeline.metrics import linkability, zebra


def test_linkability_of_a_subnormal_score_range_is_finite():
    """Regression: bin widths of ~1e-309 made the densities overflow and returned NaN."""
    tar = [0.0] * 19 + [1.1125369292536007e-308]
    assert linkability(tar, [0.0]) == linkability([0.0] * 19 + [1.0], [0.0])


def test_worst_case_on_ties_equals_the_zebra_reference():
    """Regression: tied scores were pooled before l_w; the ZEBRA reference code orders tied
    non-targets before targets (a stable sort of [non, tar]) and does not pool them."""
    from tests.unit.metrics.test_metrics_reference import reference_l_w

    assert zebra([1.0, 2.0], [1.0, 2.0]).l_w == pytest.approx(reference_l_w([1.0, 2.0], [1.0, 2.0]), rel=1e-12)
    assert zebra([1.0, 2.0], [1.0, 2.0]).l_w == pytest.approx(math.log(2) / math.log(10), abs=1e-6)  # was 0
    rng = np.random.default_rng(7)
    for _ in range(20):
        tar = np.round(rng.normal(1, 1, rng.integers(1, 60)), 1)  # one decimal: many ties
        non = np.round(rng.normal(0, 1, rng.integers(1, 200)), 1)
        assert zebra(tar, non).l_w == pytest.approx(reference_l_w(tar, non), rel=1e-12)
