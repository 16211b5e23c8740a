"""EER, Cllr, linkability, minDCF: paper values, closed forms, references, degenerate input."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from pipeline.metrics import (
    ScoreError,
    UndefinedMetricError,
    cllr,
    det_curve,
    eer,
    eer_threshold,
    eer_threshold_sweep,
    linkability,
    min_cllr,
    min_dcf,
    pav_llrs,
    summary,
    zebra,
)
from tests.unit.metrics.test_metrics_reference import (
    TABLE1,
    reference_eer_threshold,
    reference_linkability,
    reference_min_cllr,
    reference_min_dcf,
    reference_pav_llrs,
    reference_rocch_eer,
    table1_case,
)

# ---------------------------------------------------------------- maouche2020 Table 1


@pytest.mark.parametrize(
    "case, exact, printed",
    [
        (1, 0.5, 0.50),
        (2, ((1 + 2 * math.log2(1.5)) / 4 + (1 + math.log2(3)) / 4) / 2, 0.59),
        (3, ((1 + 3 * math.log2(4 / 3)) / 4 + (1 + 2) / 4) / 2, 0.65),
    ],
)
def test_table1_min_cllr_and_eer(case, exact, printed):
    tar, non = table1_case(case)
    value = min_cllr(tar, non)
    assert value == pytest.approx(exact, rel=1e-12)
    assert math.floor(value * 100) / 100 == printed  # the paper prints two truncated decimals
    assert eer(tar, non) == 0.25
    assert eer_threshold(tar, non) == 0.25


def test_table1_eer_does_not_see_the_label_changes_but_min_cllr_does():
    values = [min_cllr(*table1_case(case)) for case in TABLE1]
    assert values[0] < values[1] < values[2]
    assert {eer(*table1_case(case)) for case in TABLE1} == {0.25}


# ---------------------------------------------------------------- closed forms


def test_perfect_separation():
    tar, non = np.linspace(100.0, 130.0, 1000), np.arange(0.0, 50.0)
    assert eer(tar, non) == 0.0
    assert eer_threshold(tar, non) == 0.0
    assert min_cllr(tar, non) == 0.0
    assert min_dcf(tar, non) == 0.0
    disclosure = zebra(tar, non)
    assert disclosure.d_ece == pytest.approx(1 / (2 * math.log(2)), rel=1e-12)  # area under H(pi)
    n_t, n_n = len(tar), len(non)
    # Laplace bins: {pseudo pair + all non-targets} and {all targets + pseudo pair}; the last
    # target also carries ZEBRA's monotonicity term (N - 1) * 1e-6 / N
    n = n_t + n_n
    expected_l_w = max(abs(math.log(1 * n_n / ((n_n + 1) * n_t))),
                       math.log((n_t + 1) * n_n / n_t) + (n - 1) * 1e-6 / n) / math.log(10)
    assert disclosure.l_w == pytest.approx(expected_l_w, rel=1e-12)
    assert linkability(tar, non) == pytest.approx(reference_linkability(tar, non), abs=1e-15)
    # D = 1 wherever mated scores fall; the trapezoid over bin centres only loses half of
    # the last bin: 1 - width * p_mated(last bin) / 2
    edges = np.linspace(0.0, 130.0, 101)
    p_last = np.histogram(tar, edges, density=True)[0][-1]
    assert linkability(tar, non) == pytest.approx(1 - 1.3 * p_last / 2, rel=1e-12)


def test_identical_score_sets():
    scores = np.repeat(np.arange(24.0), 2)
    assert eer(scores, scores) == 0.5
    assert eer_threshold(scores, scores) == 0.5
    assert min_cllr(scores, scores) == pytest.approx(1.0, abs=1e-15)
    disclosure = zebra(scores, scores)
    assert disclosure.d_ece == 0.0
    # the ZEBRA reference orders tied non-targets first and does not pool ties, so its
    # worst case is not 0 even here: l_w = log10(3) at the lowest score (PAV block 1/4)
    assert disclosure.l_w == pytest.approx(math.log10(3), abs=1e-6) and disclosure.tag == "A"
    assert linkability(scores, scores) == 0.0


def test_eer_threshold_reports_speechbrains_float32_rates():
    # 25 scores per class, each twice: FAR and FRR pass from 0.52 / 0.48 to 0.48 / 0.52,
    # and the reported EER is their mean in float32 rates, as the VPC 2024 toolkit prints it
    scores = np.repeat(np.arange(25.0), 2)
    sweep = eer_threshold_sweep(scores, scores)
    assert {sweep.far, sweep.frr} == {float(np.float32(0.48)), float(np.float32(0.52))}
    assert sweep.eer == (float(np.float32(0.48)) + float(np.float32(0.52))) / 2 != 0.5
    assert eer(scores, scores) == 0.5


def test_one_tied_pair_is_pooled():
    assert eer([1.0], [1.0]) == 0.5
    assert min_cllr([1.0], [1.0]) == pytest.approx(1.0, abs=1e-15)
    tar_llr, non_llr = pav_llrs([1.0], [1.0])
    assert tar_llr[0] == 0.0 and non_llr[0] == 0.0


def test_identical_distributions_by_sampling():
    rng = np.random.default_rng(3)
    tar, non = rng.normal(size=20000), rng.normal(size=20000)
    assert eer(tar, non) == pytest.approx(0.5, abs=0.02)
    assert min_cllr(tar, non) == pytest.approx(1.0, abs=0.01)
    assert zebra(tar, non).d_ece == pytest.approx(0.0, abs=0.01)
    assert linkability(tar, non) == pytest.approx(0.0, abs=0.1)


def _gaussian_cllr(mu: float) -> float:
    """Cllr of calibrated Gaussian LLRs: targets N(mu, 2 mu), non-targets N(-mu, 2 mu)."""
    sd = math.sqrt(2 * mu)
    target_cost = integrate.quad(lambda x: norm.pdf(x, mu, sd) * np.logaddexp(0, -x) / math.log(2), -np.inf, np.inf)[0]
    return target_cost  # the non-target term is its mirror image


@pytest.mark.parametrize("mu", [0.5, 2.0, 6.0])
def test_cllr_of_calibrated_gaussian_llrs_matches_the_analytic_value(mu):
    rng = np.random.default_rng(7)
    n = 200_000
    sd = math.sqrt(2 * mu)
    tar, non = rng.normal(mu, sd, n), rng.normal(-mu, sd, n)
    per_trial = np.concatenate((np.logaddexp(0, -tar), np.logaddexp(0, non))) / math.log(2)
    standard_error = per_trial.std() / math.sqrt(2 * n)
    assert cllr(tar, non) == pytest.approx(_gaussian_cllr(mu), abs=5 * standard_error)
    # these LLRs are calibrated: PAV can only gain its small over-fit
    assert 0 <= cllr(tar, non) - min_cllr(tar, non) < 0.01
    assert eer(tar, non) == pytest.approx(norm.cdf(-math.sqrt(mu / 2)), abs=0.005)


def test_cllr_stays_finite_for_extreme_llrs():
    assert cllr([-1000.0], [1000.0]) == pytest.approx(1000 / math.log(2), rel=1e-12)
    assert cllr([1000.0], [-1000.0]) == 0.0


# ---------------------------------------------------------------- invariance

TRANSFORMS = [lambda x: 5 * x - 3, lambda x: x**3 + 2 * x, lambda x: np.exp(x / 3), np.arctan]


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_threshold_free_metrics_are_invariant_under_increasing_transforms(transform):
    rng = np.random.default_rng(11)
    tar = rng.integers(-5, 12, 60).astype(float)  # integers: many ties across classes
    non = rng.integers(-10, 6, 90).astype(float)
    before = (eer(tar, non), min_cllr(tar, non), eer_threshold(tar, non), zebra(tar, non), min_dcf(tar, non))
    after = (eer(transform(tar), transform(non)), min_cllr(transform(tar), transform(non)),
             eer_threshold(transform(tar), transform(non)), zebra(transform(tar), transform(non)),
             min_dcf(transform(tar), transform(non)))
    assert after == before


# ---------------------------------------------------------------- against references


def _random_sets(rng, count: int, max_size: int = 12, levels: int = 6):
    for _ in range(count):
        n_tar, n_non = rng.integers(1, max_size, 2)
        yield (rng.integers(0, levels, n_tar).astype(float), rng.integers(0, levels, n_non).astype(float))


def test_rocch_eer_and_min_cllr_match_bosaris_style_references():
    rng = np.random.default_rng(5)
    for tar, non in _random_sets(rng, 300):
        assert eer(tar, non) == pytest.approx(reference_rocch_eer(tar, non), abs=1e-12)
        assert min_cllr(tar, non) == pytest.approx(reference_min_cllr(tar, non), abs=1e-12)


def test_pav_llrs_match_the_reference_with_and_without_laplace():
    rng = np.random.default_rng(6)
    for tar, non in _random_sets(rng, 200):
        for laplace in (False, True):
            fast = np.concatenate(pav_llrs(tar, non, laplace=laplace))
            slow = np.concatenate(reference_pav_llrs(tar, non, laplace=laplace))
            np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eer_threshold_matches_the_quadratic_reference_with_ties(dtype):
    rng = np.random.default_rng(8)
    for _ in range(400):
        n_tar, n_non = rng.integers(1, 15, 2)
        divisor = rng.integers(1, 4)
        tar = (rng.integers(0, 7, n_tar) / divisor).astype(dtype)
        non = (rng.integers(0, 7, n_non) / divisor).astype(dtype)
        sweep = eer_threshold_sweep(tar, non)
        assert (sweep.eer, sweep.threshold) == reference_eer_threshold(tar, non)


def test_eer_threshold_matches_the_reference_on_continuous_scores():
    rng = np.random.default_rng(9)
    for size in (50, 333, 1000):
        tar = rng.normal(1.0, 1.0, size // 3).astype(np.float32)
        non = rng.normal(0.0, 1.0, size).astype(np.float32)
        sweep = eer_threshold_sweep(tar, non)
        assert (sweep.eer, sweep.threshold) == reference_eer_threshold(tar, non)


SPEECHBRAIN_EER = """
import json, sys
import numpy as np, torch
from speechbrain.utils.metric_stats import EER
cases = json.load(sys.stdin)
print(json.dumps([EER(torch.tensor(np.array(t, dtype=d)), torch.tensor(np.array(n, dtype=d)))
                  for t, n, d in cases]))
"""


def test_eer_threshold_is_bit_identical_to_speechbrain():
    # in a subprocess: importing speechbrain registers lazy modules (k2) that break
    # hypothesis's module scan for the rest of the session
    rng = np.random.default_rng(10)
    cases = []
    for index in range(60):
        dtype = "float32" if index % 2 else "float64"
        n_tar, n_non = rng.integers(1, 40, 2)
        tar = np.round(rng.normal(1, 1, n_tar), index % 3).astype(dtype)
        non = np.round(rng.normal(0, 1, n_non), index % 3).astype(dtype)
        cases.append((tar.tolist(), non.tolist(), dtype))
    run = subprocess.run([sys.executable, "-c", SPEECHBRAIN_EER], input=json.dumps(cases),
                         capture_output=True, text=True, check=True)
    for (tar, non, dtype), expected in zip(cases, json.loads(run.stdout)):
        sweep = eer_threshold_sweep(np.array(tar, dtype=dtype), np.array(non, dtype=dtype))
        assert [sweep.eer, sweep.threshold] == expected


def test_linkability_matches_the_inria_definition():
    rng = np.random.default_rng(12)
    for n_mated in (20, 57, 300, 2500):
        tar = rng.normal(1.5, 1.0, n_mated)
        non = rng.normal(0.0, 1.2, 3 * n_mated)
        for omega in (1.0, 0.5, 3.0):
            assert linkability(tar, non, omega=omega) == reference_linkability(tar, non, omega=omega)
        assert linkability(tar, non, n_bins=7) == reference_linkability(tar, non, n_bins=7)
    tied = rng.integers(0, 5, 200).astype(float)
    assert linkability(tied[:50], tied[50:]) == reference_linkability(tied[:50], tied[50:])


def test_min_dcf_matches_the_threshold_loop():
    rng = np.random.default_rng(13)
    for tar, non in _random_sets(rng, 200, levels=8):
        for p_target, c_miss, c_fa in ((0.01, 1, 1), (0.5, 1, 1), (0.05, 10, 1), (0.9, 1, 3)):
            assert min_dcf(tar, non, p_target, c_miss, c_fa) == pytest.approx(
                reference_min_dcf(tar, non, p_target, c_miss, c_fa), abs=1e-15)


def test_min_dcf_normalised_divides_by_the_default_cost():
    tar, non = np.array([0.0, 2.0, 3.0]), np.array([1.0, -1.0])
    raw = min_dcf(tar, non, 0.1, 1, 1)
    assert min_dcf(tar, non, 0.1, 1, 1, normalize=True) == pytest.approx(raw / 0.1)


def test_det_curve_points():
    curve = det_curve([3.0, 1.0], [1.0, 0.0])
    np.testing.assert_array_equal(curve.thresholds, [-np.inf, 0.0, 1.0, 3.0])
    np.testing.assert_array_equal(curve.pfa, [1.0, 0.5, 0.0, 0.0])
    np.testing.assert_array_equal(curve.pmiss, [0.0, 0.0, 0.5, 1.0])
    np.testing.assert_array_equal(curve.hull_pfa, [1.0, 0.5, 0.0, 0.0])
    np.testing.assert_array_equal(curve.hull_pmiss, [0.0, 0.0, 0.5, 1.0])


# ---------------------------------------------------------------- degenerate and bad input


def test_one_target_against_many_non_targets():
    rng = np.random.default_rng(14)
    non = rng.normal(size=100_000)
    target = np.array([np.sort(non)[90_000]])  # above 90 % of the non-targets
    assert eer(target, non) == pytest.approx(reference_rocch_eer(target, non), abs=1e-12)
    assert eer(target, non) == pytest.approx(0.1 / 1.1, abs=1e-5)
    assert min_cllr(target, non) == pytest.approx(reference_min_cllr(target, non), abs=1e-12)
    result = summary(target, non)
    assert result["linkability"] is None
    assert "at least 10 mated" in result["notes"]["linkability"]
    assert eer(np.array([non.max() + 1]), non) == 0.0


def test_linkability_undefined_below_twenty_mated_scores():
    with pytest.raises(UndefinedMetricError, match="at least 10 mated"):
        linkability(np.arange(9.0), np.arange(30.0))
    with pytest.raises(UndefinedMetricError, match="1 histogram bin"):
        linkability(np.arange(19.0), np.arange(30.0))
    assert linkability(np.arange(20.0), np.arange(30.0)) == reference_linkability(np.arange(20.0), np.arange(30.0))


def test_linkability_of_a_single_repeated_score_is_zero():
    assert linkability(np.zeros(30), np.zeros(40)) == 0.0


@pytest.mark.parametrize(
    "tar, non, message",
    [
        ([], [1.0], "no target scores"),
        ([1.0], [], "no non-target scores"),
        ([1.0, np.nan], [0.0], "NaN or infinite"),
        ([1.0], [0.0, np.inf], "NaN or infinite"),
        ([[1.0, 2.0]], [0.0], "1-D"),
        (["a"], [0.0], "not numeric"),
    ],
)
def test_bad_arrays_are_refused(tar, non, message):
    for metric in (eer, eer_threshold, min_cllr, cllr, linkability, zebra, min_dcf, summary):
        with pytest.raises(ScoreError, match=message):
            metric(tar, non)


def test_bad_parameters_are_refused():
    with pytest.raises(ScoreError, match="p_target"):
        min_dcf([1.0], [0.0], p_target=1.0)
    with pytest.raises(ScoreError, match="omega"):
        linkability(np.arange(30.0), np.arange(30.0), omega=0)
    with pytest.raises(ScoreError, match="n_bins"):
        linkability(np.arange(30.0), np.arange(30.0), n_bins=0)
