"""ZEBRA (D_ECE, l_w, tags, ECE profiles), the calibration extension, similarity matrices."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.core.errors import VpevalError
from pipeline.metrics import (
    ScoreError,
    TrialTable,
    UndefinedMetricError,
    c_ece,
    calibration_extension,
    cllr,
    d_ece,
    ece,
    ece_profile,
    min_cllr,
    pav_llrs,
    similarity_metrics,
    train_isotonic_calibration,
    train_linear_calibration,
    zebra,
    zebra_tag,
)
from pipeline.metrics.zebra import zebra_z

# ---------------------------------------------------------------- ZEBRA


@pytest.mark.parametrize(
    "l_w, tag",
    [(0.0, "0"), (1e-17, "0"), (1e-15, "A"), (1.0, "A"), (1.0000001, "B"), (2.0, "B"), (3.9, "C"),
     (4.0, "C"), (4.5, "D"), (5.0, "D"), (6.0, "E"), (6.0000001, "F"), (40.0, "F")],
)
def test_zebra_tags_follow_noe2022_table1(l_w, tag):
    assert zebra_tag(l_w) == tag


def test_z_function_closed_form_series_and_limits():
    x = np.array([-30.0, -3.0, -0.5, -0.02, 0.02, 0.5, 3.0, 30.0])
    closed = 0.5 + (x - np.expm1(x)) / np.expm1(x) ** 2
    np.testing.assert_allclose(zebra_z(x), closed, rtol=1e-12)
    # the series below |l| = 0.01 joins the closed form smoothly and is exact at 0
    edge = np.array([0.00999999, 0.01, -0.00999999, -0.01])
    np.testing.assert_allclose(zebra_z(edge), [x / 3 - x * x / 12 for x in edge], rtol=1e-5)
    assert zebra_z(np.array([0.0]))[0] == 0.0
    assert zebra_z(np.array([np.inf]))[0] == 0.5
    assert zebra_z(np.array([-np.inf]))[0] == -np.inf
    assert zebra_z(np.array([800.0]))[0] == 0.5


def test_d_ece_is_the_area_between_prior_and_calibrated_ece_profiles():
    rng = np.random.default_rng(1)
    tar, non = rng.normal(1.5, 1, 3000), rng.normal(0, 1, 5000)
    prior = np.linspace(0, 1, 1001)[1:-1]  # a uniform grid over the prior; the gap is 0 at both ends
    profile = ece_profile(tar, non, np.log(prior) - np.log1p(-prior), actual=False)
    gap = np.concatenate(([0.0], profile.reference - profile.calibrated, [0.0]))
    area = np.trapezoid(gap, x=np.concatenate(([0.0], prior, [1.0])))
    assert zebra(tar, non).d_ece == pytest.approx(area, abs=1e-5)
    # calibrated scores never carry less information than no scores, at any prior
    assert (profile.calibrated <= profile.reference + 1e-12).all()


def test_ece_profile_at_even_prior_is_cllr():
    rng = np.random.default_rng(2)
    tar, non = rng.normal(1, 1, 500), rng.normal(-1, 1, 700)
    profile = ece_profile(tar, non, [0.0])
    assert profile.actual[0] == pytest.approx(cllr(tar, non), rel=1e-12)
    assert profile.calibrated[0] == pytest.approx(min_cllr(tar, non), rel=1e-12)
    assert profile.reference[0] == pytest.approx(1.0, rel=1e-15)
    assert ece(tar, non, [0.0])[0] == pytest.approx(cllr(tar, non), rel=1e-12)


def test_d_ece_of_given_llrs_equals_zebra_on_pav_llrs():
    rng = np.random.default_rng(3)
    tar, non = rng.normal(2, 1, 400).round(1), rng.normal(0, 1, 900).round(1)
    assert d_ece(*pav_llrs(tar, non)) == pytest.approx(zebra(tar, non).d_ece, rel=1e-12)
    assert d_ece([-np.inf], [0.0]) == -np.inf
    with pytest.raises(ScoreError, match="NaN"):
        d_ece([np.nan], [0.0])


# ---------------------------------------------------------------- calibration extension


def _runs(seed: int, shift: float = 0.0, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    run0 = rng.normal(1.5, 1, 800), rng.normal(0, 1, 2400)
    run1 = scale * rng.normal(1.5, 1, 800) + shift, scale * rng.normal(0, 1, 2400) + shift
    return run0, run1


def test_linear_calibration_minimises_cllr():
    (tar, non), _ = _runs(4)
    calibration = train_linear_calibration(tar, non)
    best = cllr(calibration(tar), calibration(non))
    for d_scale, d_offset in ((1e-3, 0), (-1e-3, 0), (0, 1e-3), (0, -1e-3)):
        nearby = cllr((calibration.scale + d_scale) * tar + calibration.offset + d_offset,
                      (calibration.scale + d_scale) * non + calibration.offset + d_offset)
        assert nearby > best
    # for Gaussians with equal variance the optimum is the true LLR: scale 1.5, offset -1.125
    assert calibration.scale == pytest.approx(1.5, abs=0.15)
    assert calibration.offset == pytest.approx(-1.125, abs=0.15)


def test_linear_calibration_undefined_without_overlap():
    with pytest.raises(UndefinedMetricError, match="do not overlap"):
        train_linear_calibration([2.0, 3.0], [0.0, 1.0])
    result = calibration_extension([2.0, 3.0], [0.0, 1.0], [2.5], [0.5])
    assert result.c_ece_linear is None and result.cllr_linear is None
    assert "do not overlap" in result.notes["c_ece_linear"]
    assert result.c_ece_isotonic is not None


def test_isotonic_calibration_reproduces_laplace_pav_on_its_training_scores():
    rng = np.random.default_rng(5)
    tar, non = rng.integers(0, 30, 300).astype(float), rng.integers(-10, 20, 500).astype(float)
    calibration = train_isotonic_calibration(tar, non)
    expected_tar, expected_non = pav_llrs(tar, non, laplace=True)
    np.testing.assert_allclose(calibration(tar), expected_tar, rtol=1e-12)
    np.testing.assert_allclose(calibration(non), expected_non, rtol=1e-12)
    # beyond the training range: the end values; between bins: linear
    assert calibration(np.array([-1e9]))[0] == calibration(np.array([non.min()]))[0]
    assert calibration(np.array([1e9]))[0] == calibration(np.array([tar.max()]))[0]
    assert np.all(np.diff(calibration(np.linspace(-20, 40, 1000))) >= 0)


def test_c_ece_of_an_identical_second_run():
    (tar, non), _ = _runs(6)
    linear = train_linear_calibration(tar, non)
    assert c_ece(tar, non, tar, non, "linear") == pytest.approx(d_ece(linear(tar), linear(non)), rel=1e-12)
    # oracle calibration is optimal: a transferred calibration cannot disclose more
    assert c_ece(tar, non, tar, non, "isotonic") <= zebra(tar, non).d_ece
    assert c_ece(tar, non, tar, non, "linear") <= zebra(tar, non).d_ece


def test_c_ece_turns_negative_when_the_second_run_is_shifted():
    run0, run1 = _runs(7, shift=-6.0, scale=3.0)
    result = calibration_extension(*run0, *run1)
    assert result.c_ece_linear < 0 and result.c_ece_isotonic < 0
    assert result.cllr_linear > 1 and result.cllr_isotonic > 1
    assert result.d_ece_run1 > 0.1  # the run still discloses: only calibration fails
    with pytest.raises(ScoreError, match="unknown calibration"):
        c_ece(*run0, *run1, method="spline")


# ---------------------------------------------------------------- similarity matrices


def _table(rows, source="<test>"):
    return TrialTable.from_rows(rows, source=source)


def _within(segments: dict[str, list[str]], score):
    """All unordered pairs of distinct segments, scored by score(speaker_a, speaker_b)."""
    flat = [(speaker, seg) for speaker, segs in segments.items() for seg in segs]
    return [(sa, ga, sb, gb, score(sa, sb)) for i, (sa, ga) in enumerate(flat) for sb, gb in flat[i + 1:]]


def _between(segments: dict[str, list[str]], score):
    flat = [(speaker, seg) for speaker, segs in segments.items() for seg in segs]
    return [(sa, ga, sb, gb, score(sa, sb)) for sa, ga in flat for sb, gb in flat]


SEGMENTS = {"a": ["a1", "a2", "a3"], "b": ["b1", "b2"], "c": ["c1", "c2", "c3"]}


def test_matrices_on_raw_scores_by_hand():
    levels = {("a", "a"): 2.0, ("b", "b"): 1.0, ("c", "c"): 3.0}
    score = lambda x, y: levels.get((x, y), -1.0 if {x, y} != {"a", "b"} else 0.5)
    oo = _table(_within(SEGMENTS, score))
    result = similarity_metrics(oo, _table(_between(SEGMENTS, score)), oo, calibrated=False)
    sigmoid = lambda v: 1 / (1 + math.exp(-v))
    expected = np.array([[sigmoid(2), sigmoid(0.5), sigmoid(-1)],
                         [sigmoid(0.5), sigmoid(1), sigmoid(-1)],
                         [sigmoid(-1), sigmoid(-1), sigmoid(3)]])
    for variant in ("sigmoid_mean_llr", "geometric_mean"):  # constant cells: both variants agree
        for name in ("oo", "op", "pp"):
            np.testing.assert_allclose(result.matrices[variant][name], expected, rtol=1e-12)
    diag, off = np.diag(expected).mean(), expected[~np.eye(3, dtype=bool)].mean()
    assert result.d_diag["sigmoid_mean_llr"]["oo"] == pytest.approx(abs(diag - off), rel=1e-12)
    assert result.deid == {"sigmoid_mean_llr": pytest.approx(0.0, abs=1e-12), "geometric_mean": pytest.approx(0.0, abs=1e-12),
                           "mean_llr": pytest.approx(0.0, abs=1e-12)}
    assert result.g_vd["geometric_mean"] == pytest.approx(0.0, abs=1e-12)
    assert result.speakers == ["a", "b", "c"]
    # 8 segments: 28 unordered pairs within; 64 - 8 own-version pairs between
    assert result.n_trials == {"oo": 28, "op": 56, "pp": 28}
    assert result.n_excluded == {"oo": 0, "op": 8, "pp": 0}


def test_cell_means_mix_trials_and_the_two_variants_differ_as_jensen_says():
    rows = [("a", "a1", "a", "a2", 4.0), ("a", "a1", "a", "a3", 0.0), ("a", "a2", "a", "a3", -1.0),
            ("a", "a1", "b", "b1", 1.0), ("b", "b2", "a", "a2", -3.0), ("b", "b1", "b", "b2", 2.0)]
    table = _table(rows)
    result = similarity_metrics(table, table, table, calibrated=False)
    sigmoid = lambda v: 1 / (1 + math.exp(-v))
    mean_llr, geometric = result.matrices["sigmoid_mean_llr"]["oo"], result.matrices["geometric_mean"]["oo"]
    assert mean_llr[0, 0] == pytest.approx(sigmoid(1.0))
    assert geometric[0, 0] == pytest.approx((sigmoid(4) * sigmoid(0) * sigmoid(-1)) ** (1 / 3))
    # unordered OO pairs count for both cells; OP keeps the side order
    assert mean_llr[0, 1] == mean_llr[1, 0] == pytest.approx(sigmoid(-1.0))
    op_mean = result.matrices["sigmoid_mean_llr"]["op"]
    assert op_mean[0, 1] == pytest.approx(sigmoid(1.0)) and op_mean[1, 0] == pytest.approx(sigmoid(-3.0))
    assert (geometric <= mean_llr + 1e-15).all()


def test_deid_and_gvd_for_a_protecting_anonymiser():
    rng = np.random.default_rng(8)
    segments = {f"s{k}": [f"s{k}_{u}" for u in range(5)] for k in range(8)}
    oo = _table(_within(segments, lambda x, y: rng.normal(3 if x == y else -2, 1)))
    op = _table(_between(segments, lambda x, y: rng.normal(0, 1)))
    pp = _table(_within(segments, lambda x, y: rng.normal(1 if x == y else -0.5, 1)))
    result = similarity_metrics(oo, op, pp)
    for variant in ("sigmoid_mean_llr", "geometric_mean"):
        dd = result.d_diag[variant]
        assert result.deid[variant] == pytest.approx(1 - dd["op"] / dd["oo"], rel=1e-12)
        assert result.deid[variant] > 0.8
        assert result.g_vd[variant] == pytest.approx(10 * math.log10(dd["pp"] / dd["oo"]), rel=1e-12)
        assert result.g_vd[variant] < 0
    assert result.d_ece_op_oo == pytest.approx(1 - result.d_ece["op"] / result.d_ece["oo"], rel=1e-12)
    cmin = result.min_cllr
    assert result.cllr_min_op_oo == pytest.approx((cmin["op"] - cmin["oo"]) / (1 - cmin["oo"]), rel=1e-12)
    assert result.g_dece_pp_oo == pytest.approx(10 * math.log10(result.d_ece["pp"] / result.d_ece["oo"]), rel=1e-12)
    assert result.g_cllr_pp_oo == pytest.approx(10 * math.log10((1 - cmin["pp"]) / (1 - cmin["oo"])), rel=1e-12)
    assert result.d_ece["oo"] == pytest.approx(zebra(oo.score[oo.is_target()], oo.score[~oo.is_target()]).d_ece)
    assert result.as_dict()["matrices"]["geometric_mean"]["oo"][0][0] == result.matrices["geometric_mean"]["oo"][0, 0]


def test_calibrated_matrices_use_laplace_pav_per_table():
    rng = np.random.default_rng(9)
    segments = {f"s{k}": [f"s{k}_{u}" for u in range(3)] for k in range(4)}
    oo = _table(_within(segments, lambda x, y: rng.normal(2 if x == y else 0, 1)))
    result = similarity_metrics(oo, oo, oo)
    target = oo.is_target()
    llrs = np.empty(len(oo.score))
    llrs[target], llrs[~target] = pav_llrs(oo.score[target], oo.score[~target], laplace=True)
    cell = (oo.speaker_a == "s0") & (oo.speaker_b == "s0")
    assert result.matrices["sigmoid_mean_llr"]["oo"][0, 0] == pytest.approx(1 / (1 + math.exp(-llrs[cell].mean())))


def test_undefined_ratios_are_none_with_a_reason():
    rows = [("a", "a1", "a", "a2", 1.0), ("a", "a1", "b", "b1", 1.0), ("b", "b1", "b", "b2", 1.0),
            ("a", "a2", "b", "b2", 1.0)]
    flat = _table(rows)  # every score equal: no diagonal dominance, no disclosure
    result = similarity_metrics(flat, flat, flat)
    assert result.deid["geometric_mean"] is None and "D_diag(M_OO)" in result.notes["deid_geometric_mean"]
    assert result.g_vd["sigmoid_mean_llr"] is None
    assert result.d_ece_op_oo is None and result.g_dece_pp_oo is None
    assert result.cllr_min_op_oo is None and result.g_cllr_pp_oo is None


def test_empty_cells_are_reported():
    rows = [("a", "a1", "a", "a2", 2.0), ("a", "a1", "b", "b1", -1.0), ("b", "b1", "a", "a2", 0.0)]
    table = _table(rows)  # speaker b has one segment: no diagonal trial
    result = similarity_metrics(table, table, table, calibrated=False)
    assert np.isnan(result.matrices["geometric_mean"]["oo"][1, 1])
    assert "1 of 4 cells" in result.notes["matrix_oo"]
    assert result.as_dict()["matrices"]["geometric_mean"]["oo"][1][1] is None


def test_trial_table_errors():
    good = [("a", "a1", "a", "a2", 1.0), ("a", "a1", "b", "b1", 0.0)]
    with pytest.raises(VpevalError, match=r"<t>:3: trial a2 / a1 repeats the unordered pair at line 1"):
        similarity_metrics(_table(good + [("a", "a2", "a", "a1", 2.0)], "<t>"), _table(good), _table(good))
    with pytest.raises(VpevalError, match="no non-target"):
        similarity_metrics(_table(good[:1]), _table(good), _table(good))
    with pytest.raises(VpevalError, match="not finite"):
        similarity_metrics(_table([("a", "a1", "b", "b1", float("nan"))] + good), _table(good), _table(good))
