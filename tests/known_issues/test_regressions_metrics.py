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


def test_scores_near_the_largest_float_give_finite_exact_metrics():
    """Regression (issue 27): scores of +-1e308 gave Cllr inf (a sum of costs overflowed) and
    linkability NaN (the score range overflowed), though the docs promise finite Cllr for
    any finite score."""
    import warnings

    from pipeline.metrics import cllr, summary

    rng = np.random.default_rng(0)
    tar, non = rng.normal(2, 1, 40), rng.normal(0, 1, 80)
    extreme_tar, extreme_non = np.r_[tar, 1e308, -1e308], np.r_[non, 1e308, -1e308]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow anywhere
        found = summary(extreme_tar, extreme_non)
    assert math.isfinite(found["cllr"]) and found["cllr"] > 1e306
    assert cllr([-1e308, -1e308], [0.0]) == pytest.approx((1e308 / math.log(2) + 1 / 2 * math.log2(2) * 2) / 2)
    # D_sys is invariant under scaling by a power of two (exact in floating point): same bins, same value
    assert found["linkability"] == linkability(extreme_tar / 2 ** 1000, extreme_non / 2 ** 1000)
    assert linkability(tar * 2.0 ** 1020, non * 2.0 ** 1020) == linkability(tar, non)


def test_eer_val_is_not_pooled_over_genders_while_eer_test_averages_them():
    """Regression (issue 37, a): EER_val pooled the female and male validation trials into one
    EER while EER_test was the mean of the per-gender EERs; on a corpus of real voices OO EER_val
    was 17.5 % pooled, 25.19 % female and 5.93 % male. The split now writes val_trials_f and
    val_trials_m and EER_val is their mean."""
    from pipeline.metrics.detection import pairs
    from tests.helpers import condition

    def rec(set_name, value):
        return condition({"attack": "OO", "anonymizer": "original", "attacker_anonymizer": "original",
                          "set": set_name, "eer": value, "eer_ci_low": value, "eer_ci_high": value})

    (row,) = pairs([rec("test_f", 0.05), rec("test_m", 0.08), rec("val_f", 0.2519), rec("val_m", 0.0593)])
    assert row.eer_val == pytest.approx((0.2519 + 0.0593) / 2)
    assert pairs([rec("test_f", 0.05), rec("test_m", 0.08), rec("val", 0.175)]) == []  # a pooled record is no EER_val
