"""Property-based tests (hypothesis) over random score sets, ties included."""
from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.metrics import (
    cllr,
    eer,
    eer_threshold_sweep,
    linkability,
    min_cllr,
    min_dcf,
    summary,
    zebra,
    zebra_tag,
)
from pipeline.metrics.zebra import TAG_RANGES
from tests.unit.metrics.test_metrics_reference import (
    reference_d_ece,
    reference_eer_threshold,
    reference_l_w,
    reference_min_cllr,
    reference_rocch_eer,
)

PROFILE = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# few distinct levels make ties between and within classes common
tied = st.lists(st.integers(-4, 4).map(float), min_size=1, max_size=25)
spread = st.lists(st.floats(-50, 50, allow_nan=False, width=32), min_size=1, max_size=25)
scores = st.one_of(tied, spread)


@PROFILE
@given(scores, scores)
def test_eer_lies_in_zero_half_and_matches_bosaris(tar, non):
    value = eer(tar, non)
    assert 0.0 <= value <= 0.5
    assert math.isclose(value, reference_rocch_eer(tar, non), abs_tol=1e-12)


@PROFILE
@given(scores, scores)
def test_eer_is_symmetric_under_label_swap_and_negation(tar, non):
    assert eer(tar, non) == eer([-x for x in non], [-x for x in tar])


@PROFILE
@given(scores, scores, st.randoms(use_true_random=False))
def test_metrics_ignore_trial_order(tar, non, random):
    shuffled_tar, shuffled_non = random.sample(tar, len(tar)), random.sample(non, len(non))
    before, after = summary(tar, non), summary(shuffled_tar, shuffled_non)
    # Cllr sums in input order (last-bit differences); everything else is order-free
    assert math.isclose(before.pop("cllr"), after.pop("cllr"), rel_tol=1e-12, abs_tol=1e-15)
    assert before == after


@PROFILE
@given(scores, scores)
def test_min_cllr_is_a_lower_bound_in_zero_one(tar, non):
    value = min_cllr(tar, non)
    assert -1e-12 <= value <= 1 + 1e-12
    assert value <= cllr(tar, non) + 1e-12
    assert math.isclose(value, reference_min_cllr(tar, non), abs_tol=1e-12)


@PROFILE
@given(scores, scores)
def test_zebra_bounds_and_reference(tar, non):
    disclosure = zebra(tar, non)
    assert -1e-12 <= disclosure.d_ece <= 1 / (2 * math.log(2)) + 1e-12
    assert math.isclose(disclosure.d_ece, reference_d_ece(tar, non), abs_tol=1e-6)
    assert math.isclose(disclosure.l_w, reference_l_w(tar, non), rel_tol=1e-12, abs_tol=1e-15)
    assert disclosure.tag == zebra_tag(disclosure.l_w)


@PROFILE
@given(st.floats(0, 20, allow_nan=False))
def test_zebra_tag_follows_its_ranges(l_w):
    tag = zebra_tag(l_w)
    lower, upper = next((low, high) for name, low, high in TAG_RANGES if name == tag)
    assert (lower < l_w <= upper) or (tag == "0" and l_w == 0)


@PROFILE
@given(scores, scores)
def test_threshold_sweep_matches_the_quadratic_reference(tar, non):
    for dtype in (np.float32, np.float64):
        t, n = np.asarray(tar, dtype), np.asarray(non, dtype)
        sweep = eer_threshold_sweep(t, n)
        assert (sweep.eer, sweep.threshold) == reference_eer_threshold(t, n)
        # the sweep point never beats the convex hull on its worse error
        assert eer(t, n) <= max(sweep.far, sweep.frr) + 1e-7


@PROFILE
@given(scores, scores, st.floats(0.001, 0.999), st.floats(0.1, 10), st.floats(0.1, 10))
def test_min_dcf_never_exceeds_the_trivial_decisions(tar, non, p_target, c_miss, c_fa):
    value = min_dcf(tar, non, p_target, c_miss, c_fa)
    assert 0 <= value <= min(c_miss * p_target, c_fa * (1 - p_target)) * (1 + 1e-12)


@PROFILE
@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=20, max_size=60), scores)
def test_linkability_lies_in_zero_one(tar, non):
    assert 0.0 <= linkability(tar, non) <= 1.0 + 1e-12


@PROFILE
@given(scores, scores)
def test_summary_is_json_clean(tar, non):
    result = summary(tar, non)
    json.dumps(result, allow_nan=False)
    assert (result["linkability"] is None) == ("linkability" in result["notes"])
