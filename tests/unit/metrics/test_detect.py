"""Overestimation detection: the val-test models (gap, gap_re, line), verdicts and their
reasons, the trusted systems or CSV, imported attackers, groups and seeds, the column test,
relative drop and bootstrap intervals. The false-alarm and power simulations are in
test_detect_simulation.py."""
import logging
import re

import numpy as np
import pytest

from pipeline.core.errors import VpevalError
from pipeline.core.schemas import Detect, check_of
from pipeline.metrics.detection import (
    NOT_FLAGGED,
    OVERESTIMATED,
    TRUSTWORTHY,
    UNDETERMINED,
    Settings,
    Trusted,
    assess,
    pairs,
    read_reference,
    read_trusted,
    seed_summary,
)
from pipeline.metrics.detectors import MODELS, GapModel, Line, Point, RandomGapModel, fit_model, from_fit
from pipeline.metrics.results import ConditionResult
from pipeline.stages.detect import run
from tests.helpers import condition, split_of

MATCHED = Trusted(systems=("s0", "s1", "s2", "s3", "s4"))
PROTOCOL = "holdout=unseen"


def pair(evaluated: str, attacker: str, eer_test: float, eer_val: float, attack: str = "AA", **extra) -> dict:
    """A detection row; its gap's bootstrap variance is (0.5 points)² unless given."""
    return {"attack": attack, "anonymizer": evaluated, "attacker_anonymizer": attacker, "eer_test": eer_test,
            "eer_val": eer_val, "gap": eer_test - eer_val, "relative_drop": None, "gap_var": 0.005 ** 2, **extra}


def gap_sweep(spread: float = 0.01, seed: int = 0) -> list[dict]:
    """Five matched systems whose EER_val is their EER_test less 0.01 give or take `spread`,
    and one mismatched pair with EER_val 0.30 below its EER_test."""
    rng = np.random.default_rng(seed)
    rows = [pair(f"s{i}", f"s{i}", x, x - 0.01 + rng.normal(0, spread)) for i, x in enumerate([0.1, 0.2, 0.27, 0.3, 0.4])]
    return rows + [pair("s2", "s4", 0.44, 0.14)]


def test_gap_model_is_the_mean_and_spread_of_the_trusted_gaps_beside_their_sampling_variance():
    model = GapModel.fit([Point(0.3, 0.28, 1e-4), Point(0.2, 0.2, 1e-4), Point(0.4, 0.36, 1e-4)])
    assert model.mean_gap == pytest.approx(0.02) and model.gap_std == pytest.approx(0.02)
    assert model.mean_var == pytest.approx(1e-4) and model.predict(0.5) == pytest.approx(0.48)
    # one-sided t(0.95; 2) = 2.920 times sqrt(v + (s² - v̄) + s²/3): s * sqrt(1 + 1/3) when v = v̄
    assert model.margin(0.5, 0.05) == pytest.approx(2.919986 * 0.02 * np.sqrt(4 / 3), rel=1e-5)
    # a judged pair's own, larger variance (a higher EER) widens its margin
    assert model.margin(0.5, 0.05, gap_var=4e-4) == pytest.approx(2.919986 * np.sqrt(4e-4 + 3e-4 + 4e-4 / 3), rel=1e-5)


def test_gap_model_spread_is_floored_at_the_sampling_variance():
    """Trusted gaps that agree better than their sampling noise allows cannot narrow the margin
    below the sampling variance: v + v̄/n."""
    model = GapModel.fit([Point(0.3, 0.29, 9e-4), Point(0.2, 0.1899, 9e-4), Point(0.4, 0.3901, 9e-4)])
    assert model.margin(0.3, 0.05) == pytest.approx(2.919986 * 0.03 * np.sqrt(4 / 3), rel=1e-5)


@pytest.mark.parametrize("points,problem", [
    ([Point(0.3, 0.29, 1e-4), Point(0.2, 0.19, 1e-4), Point(0.4, 0.39, 1e-4)], "same gap"),
    ([Point(0.3, 0.28, 1e-4), Point(0.2, 0.2), Point(0.4, 0.36, 1e-4)], "bootstrap variance"),
    ([Point(0.3, 0.28, 1e-4, 4), Point(0.2, 0.2, 1e-4, 20), Point(0.4, 0.36, 1e-4, 20)], "4 speaker(s)"),
])
def test_gap_model_without_a_sampling_variance_or_spread_is_a_reason(points, problem):
    assert problem in fit_model("gap", points)


def test_random_gap_model_has_no_between_spread_when_gaps_agree_within_their_variance():
    tight = RandomGapModel.fit([Point(0.3, 0.29, 1e-3), Point(0.2, 0.19, 1e-3), Point(0.4, 0.39, 1e-3)])
    assert tight.tau2 == 0 and tight.mean_gap == pytest.approx(0.01)
    spread = RandomGapModel.fit([Point(0.3, 0.1, 1e-4), Point(0.2, 0.19, 1e-4), Point(0.4, 0.39, 1e-4)])
    assert spread.tau2 > 0.005
    assert spread.margin(0.3, 0.05, gap_var=1e-4) > tight.margin(0.3, 0.05, gap_var=1e-4)
    assert "bootstrap variance" in RandomGapModel.fit([Point(0.3, 0.2), Point(0.2, 0.1)])


def test_random_gap_margin_is_the_t_bound_scaled_by_the_hartung_knapp_factor():
    """Gaps 1, 2 and 6 points with variances 1e-4, 1e-4, 4e-4: DerSimonian-Laird's Q = 5 about
    the pooled 2 points (Σw = 22500, Σw² = 2.0625e8) gives τ² = 3 / (22500 - 2.0625e8 / 22500)
    = 2.25e-4; the gaps spread about δ by 1.36 times their predicted variance (h), so the margin
    is t(0.95; 2)·sqrt(h·(v + τ² + Var δ))."""
    model = RandomGapModel.fit([Point(0.3, 0.29, 1e-4), Point(0.3, 0.28, 1e-4), Point(0.3, 0.24, 4e-4)])
    assert model.tau2 == pytest.approx(3 / (22500 - 2.0625e8 / 22500))
    gaps, weights = np.array([0.01, 0.02, 0.06]), 1 / (np.array([1e-4, 1e-4, 4e-4]) + 2.25e-4)
    assert model.mean_gap == pytest.approx((weights * gaps).sum() / weights.sum())
    h = (weights * (gaps - model.mean_gap) ** 2).sum() / 2
    assert model.hartung_knapp == pytest.approx(h) and h == pytest.approx(1.3626, abs=1e-4)
    variance = h * (2e-4 + 2.25e-4 + 1 / weights.sum())
    assert model.margin(0.3, 0.05, 2e-4) == pytest.approx(2.919986 * np.sqrt(variance))
    agreeing = RandomGapModel.fit([Point(0.3, 0.29, 1e-3), Point(0.2, 0.19, 1e-3), Point(0.4, 0.39, 1e-3)])
    assert agreeing.hartung_knapp == 1.0  # never below 1: trusted gaps that agree cannot narrow the bound


def test_line_recovers_slope_and_intercept_and_its_margin_grows_away_from_the_centre():
    line = fit_model("line", [Point(x, 0.02 + 0.3 * x + e) for x, e in zip((0.1, 0.2, 0.3, 0.4), (0.01, -0.01, -0.01, 0.01))])
    assert line.slope == pytest.approx(0.3) and line.intercept == pytest.approx(0.02)
    assert line.margin(0.6, 0.05) > line.margin(0.25, 0.05) > 0
    assert line.margin(0.25, 0.01) > line.margin(0.25, 0.05)
    assert isinstance(fit_model("line", [Point(0.2, 0.1)] * 3), str)  # one EER_test: no line


@pytest.mark.parametrize("model", [GapModel(4, 0.02, 0.01, 1e-4), RandomGapModel(4, 0.02, 1e-4, 1e-5, 2e-4, 1.3),
                                   Line(0.01, 0.9, 4, 0.02, 0.2, 0.05)])
def test_a_fit_record_rebuilds_its_model(model):
    from pipeline.metrics.detectors import as_fit

    assert from_fit({**as_fit(model), "group": "g", "source": "trusted pairs"}) == model


def test_mismatch_is_flagged_and_matched_pairs_are_not():
    judged, (fit,) = assess(gap_sweep(), trusted=MATCHED)
    assert fit["method"] == "gap" and fit["n_points"] == 5 and fit["mean_gap"] == pytest.approx(0.01, abs=0.01)
    assert all(r["verdict"] != OVERESTIMATED for r in judged[:5])
    mismatch = judged[5]
    assert mismatch["verdict"] == OVERESTIMATED and mismatch["flag"]
    assert mismatch["residual"] < -mismatch["margin"] < 0
    assert mismatch["flag_below"] == pytest.approx(mismatch["predicted_eer_val"] - mismatch["margin"])


def test_not_flagged_says_what_a_flag_needs():
    judged, _ = assess(gap_sweep(spread=0.03)[:5] + [pair("s1", "s3", 0.3, 0.27)], trusted=MATCHED)
    row = judged[-1]
    assert row["verdict"] == NOT_FLAGGED and 0 < row["flag_below"] < row["eer_val"]
    assert f"a flag needs EER_val below {100 * row['flag_below']:.2f} %" in row["reason"]


def test_trustworthy_only_when_the_excess_gap_is_surely_small():
    tight = gap_sweep(spread=0.002)[:5]
    judged, _ = assess(tight + [pair("s1", "s3", 0.3, 0.29)], trusted=MATCHED)
    assert judged[-1]["verdict"] == TRUSTWORTHY and "detect.tolerance=5" in judged[-1]["reason"]
    judged, _ = assess(tight + [pair("s1", "s3", 0.3, 0.29)], trusted=MATCHED, settings=Settings(tolerance=0.001))
    assert judged[-1]["verdict"] == NOT_FLAGGED  # the bound no longer lies within the tolerance


def test_no_power_is_undetermined_not_trustworthy():
    """Regression (issue 25): with 4 trusted pairs the built-in sweep's bound was so wide that
    no EER_val could be flagged, and every pair was reported `trustworthy`."""
    wide = [pair(f"s{i}", f"s{i}", x, y) for i, (x, y) in enumerate([(0.1, 0.1), (0.2, 0.0), (0.3, 0.3), (0.15, 0.0)])]
    judged, _ = assess(wide + [pair("s1", "s3", 0.12, 0.05)], trusted=Trusted(systems=("s0", "s1", "s2", "s3")))
    row = judged[-1]
    assert row["verdict"] == UNDETERMINED and row["reason"].startswith("insufficient power")
    assert row["flag_below"] < 0 and not any(r["verdict"] == TRUSTWORTHY for r in judged)


def test_too_few_trusted_pairs_is_undetermined_and_a_trusted_pair_is_judged_leaving_itself_out():
    rows = [pair("a", "a", 0.3, 0.29), pair("a", "b", 0.45, 0.1)]
    judged, (fit,) = assess(rows, trusted=Trusted(systems=("a",)))
    assert all(r["verdict"] == UNDETERMINED for r in judged)
    assert "needs at least 2" in fit["reason"] and "detect.trusted" in judged[1]["reason"]
    rows = [pair(s, s, x, x - g) for s, x, g in (("a", 0.1, 0.01), ("b", 0.2, 0.015))] + [pair("a", "b", 0.45, 0.05)]
    judged, (fit,) = assess(rows, trusted=Trusted(systems=("a", "b")))
    assert fit["n_points"] == 2 and judged[2]["verdict"] != UNDETERMINED
    assert "only 1 remain" in judged[0]["reason"]


def test_original_pairs_are_not_judged():
    judged, _ = assess([pair("original", "original", 0.02, 0.01, attack="OO"), *gap_sweep()], trusted=MATCHED)
    assert judged[0]["verdict"] == UNDETERMINED and "no anonymisation" in judged[0]["reason"]


def test_imported_attacker_is_undetermined_and_cannot_be_trusted(caplog):
    reason = "imported attacker (attacker.pretrained), its training data unknown"
    imported = pair("s1", "s3", 0.44, 0.05, imported=reason)
    judged, _ = assess(gap_sweep()[:5] + [imported], trusted=MATCHED)
    assert judged[-1]["verdict"] == UNDETERMINED and judged[-1]["reason"] == reason
    rows = gap_sweep()[:4] + [pair("s4", "s4", 0.4, 0.39, imported=reason)]
    judged, _ = assess(rows, trusted=MATCHED)
    assert all("detect.trusted names s4, whose attacker is imported" in r["reason"] for r in judged[:4])
    assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 1


def test_trusted_csv_calibrates_only_pairs_of_its_protocol(tmp_path, caplog):
    reference = tmp_path / "matched.csv"
    reference.write_text("label,eer_test,eer_val,protocol,gap_var\n" + "".join(
        f"B{i},{x},{x - 0.01 + e},{PROTOCOL},0.0001\n" for i, (x, e) in enumerate([(0.27, 0.01), (0.3, -0.01), (0.38, 0.0)])))
    rows = [pair("x", "x", 0.3, 0.29, validation_protocol=PROTOCOL), pair("x", "y", 0.44, 0.05, validation_protocol=PROTOCOL)]
    judged, (fit,) = assess(rows, trusted=read_trusted(str(reference)))
    assert fit["source"] == str(reference) and fit["n_points"] == 3
    assert judged[0]["verdict"] != OVERESTIMATED and judged[1]["verdict"] == OVERESTIMATED
    other = [{**r, "validation_protocol": "holdout=speaker"} for r in rows]
    judged, (fit,) = assess(other, trusted=read_trusted(str(reference)))
    assert all(r["verdict"] == UNDETERMINED for r in judged)
    assert "measured with validation protocol 'holdout=unseen', these pairs with 'holdout=speaker'" in fit["reason"]


@pytest.mark.parametrize("text,problem", [
    ("eer_test,eer_val\n0.2,0.1\n", r"matched\.csv:1: missing column\(s\) protocol"),
    ("eer_test,eer_val,protocol\n", r"matched\.csv: no matched pair"),
    ("eer_test,eer_val,protocol\n0.2,0.1,a\n27,11,a\n", r"matched\.csv:3: EERs are fractions"),
    ("eer_test,eer_val,protocol\n0.2,x,a\n", r"matched\.csv:2: eer_test, eer_val and gap_var must be numbers"),
    ("eer_test,eer_val,protocol\n0.2,0.1,a\n0.3,0.2,b\n", r"matched\.csv: rows measured with 2 validation protocols"),
])
def test_bad_reference_file_is_one_clear_error(tmp_path, text, problem):
    reference = tmp_path / "matched.csv"
    reference.write_text(text)
    with pytest.raises(VpevalError, match=problem):
        read_reference(reference)


def test_reference_file_with_a_byte_order_mark_reads_its_first_column(tmp_path):
    reference = tmp_path / "matched.csv"
    reference.write_text("\ufeffeer_test,eer_val,protocol\n0.2,0.19,a\n0.3,0.28,a\n")
    points, protocol = read_reference(reference)
    assert points[0].eer_test == 0.2 and protocol == "a"


@pytest.mark.parametrize("trusted, problem", [
    (["s0", "s1", "s2", "s9"], r"detect.trusted names s9: no matched pair of it here"),
    ("columns.csv", r"columns\.csv:1: missing column\(s\) eer_val"),
    (None, r"detect.trusted is not set"),
])
def test_bad_trusted_input_leaves_verdicts_undetermined_with_one_line(tmp_path, monkeypatch, caplog, trusted, problem):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "columns.csv").write_text("eer_test,val,protocol\n0.2,0.1,a\n")
    caplog.set_level(logging.INFO)
    judged, (fit,) = assess(gap_sweep(), trusted=read_trusted(trusted))
    assert all(r["verdict"] == UNDETERMINED for r in judged)
    assert all(re.search(problem, r["reason"]) for r in judged) and re.search(problem, fit["reason"])
    if trusted is not None:
        assert len([r for r in caplog.records if r.getMessage().startswith("detection:")]) == 1


def test_a_sweep_point_without_a_trusted_system_is_logged_once_at_info(caplog):
    """Regression (issue 38): a 25-job sweep logged 49 `[ERROR] detection: detect.trusted names ...:
    no matched pair of it here` lines, one per point and per aggregate report; an expected condition."""
    caplog.set_level(logging.INFO)
    for system in ("s0", "s1", "s3"):  # one point per system, then the aggregate of each point
        assess([pair(system, system, 0.3, 0.29)], trusted=read_trusted(["s9"]))
        assess(gap_sweep()[:4], trusted=read_trusted(["s9"]))
    lines = [r for r in caplog.records if "no matched pair" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelname == "INFO"


def test_each_group_and_seed_is_calibrated_on_its_own():
    """A line per seed: a single-seed row is judged against the trusted pairs of its seed."""
    rows = []
    for seed, shift in ((1, 0.0), (2, 0.12)):  # seed 2's matched gaps are 12 points wider
        rows += [{**r, "seed": seed, "eer_val": r["eer_val"] - shift} for r in gap_sweep()[:5]]
    suspect = pair("s1", "s3", 0.3, 0.17)  # 13 points below EER_test
    judged, fits = assess(rows + [{**suspect, "seed": 1}, {**suspect, "seed": 2}], trusted=MATCHED)
    assert [f["seed"] for f in fits] == [1, 2] and all(f["n_points"] == 5 for f in fits)
    by_seed = {r["seed"]: r for r in judged if r["attacker_anonymizer"] == "s3"}
    assert by_seed[1]["verdict"] == OVERESTIMATED and by_seed[2]["verdict"] != OVERESTIMATED
    summary = seed_summary(judged)
    assert len(summary) == 6 and summary[-1]["flagged"] == 1
    groups = [{**r, "group": "small"} for r in gap_sweep()[:1]] + [{**r, "group": "big"} for r in gap_sweep()]
    _, fits = assess(groups, trusted=MATCHED)
    assert {f["group"]: f.get("n_points") for f in fits} == {"small": 1, "big": 5}


def replicated(row: dict, mean: float, spread: float, seed: int) -> dict:
    """`row` with EER_test replicates around `mean` from speaker draws shared by every
    attacker of the evaluation set (`seed`), plus the attacker's own noise."""
    shared = np.random.default_rng(seed).normal(0, spread, 400)
    own = np.random.default_rng(hash(row["attacker_anonymizer"]) % 2 ** 32).normal(0, spread / 4, 400)
    val = np.random.default_rng(7).normal(row["eer_val"], spread, 400)
    return {**row, "enroll": "anonymized", "trials": "anonymized", "eer_test": mean,
            "eer_test_replicates": list(mean + shared + own),
            "eer_val_replicates": list(val), "ci_level": 0.95}


def test_column_test_flags_an_attacker_beaten_on_the_same_trials_and_splits_alpha():
    matched = replicated(pair("s1", "s1", 0.20, 0.19), 0.20, 0.03, seed=1)
    beaten = replicated(pair("s1", "s2", 0.26, 0.25), 0.26, 0.03, seed=1)  # shared draws: paired
    other_data = replicated(pair("s2", "s2", 0.40, 0.39), 0.40, 0.03, seed=2)
    judged, (fit,) = assess([matched, beaten, other_data], trusted=Trusted(systems=("s1",)))
    rows = {(r["anonymizer"], r["attacker_anonymizer"]): r for r in judged}
    assert rows[("s1", "s2")]["column"]["flag"] and rows[("s1", "s2")]["verdict"] == OVERESTIMATED
    assert "s1 (AA) reaches an EER_test 6.00 points lower" in rows[("s1", "s2")]["reason"]
    assert not rows[("s1", "s1")]["column"]["flag"] and rows[("s2", "s2")]["column"] is None
    assert fit["band_false_alarm"] == 0.025
    judged, _ = assess([matched, beaten], trusted=Trusted(systems=("s1",)), settings=Settings(column=False))
    assert all(r["column"] is None for r in judged)


def test_rows_that_do_not_say_their_data_are_compared_with_none():
    """Regression: rows of results written before they carried `enroll` and `trials` (an old
    sweep aggregated again) were taken as scored on anonymised enrolment and trials, so OA
    was compared with AA on other trials."""
    oa = {k: v for k, v in replicated(pair("s1", "original", 0.30, 0.29, attack="OA"), 0.30, 0.03, 1).items()
          if k not in ("enroll", "trials")}
    aa = replicated(pair("s1", "s1", 0.20, 0.19), 0.20, 0.03, seed=1)
    judged, _ = assess([oa, aa], trusted=Trusted(systems=("s1",)))
    assert [r["column"] for r in judged] == [None, None]


def test_settings_are_checked_with_the_schemas_rule():
    """Settings built through the API are checked by the `detect` schema's own checks (one home
    per rule), and the schema allows exactly the val-test models there are."""
    with pytest.raises(VpevalError, match=r"^detect.method=ratio: must be gap, gap_re or line$"):
        Settings(method="ratio")
    with pytest.raises(VpevalError, match=r"^detect.tolerance=0: must be a number in \(0, 0.5\)"):
        Settings(tolerance=0)
    assert all(check_of(Detect, "method").test(method) for method in MODELS)
    assert check_of(Detect, "method").allowed == "gap, gap_re or line" and len(MODELS) == 3


def records(attack: str, evaluated: str, attacker: str, val: float, f: float, m: float) -> list[ConditionResult]:
    base = {"attack": attack, "anonymizer": evaluated, "attacker_anonymizer": attacker}
    rows = [{**base, "set": "test_f", "eer": f, "eer_ci_low": f - 0.02, "eer_ci_high": f + 0.04},
            {**base, "set": "test_m", "eer": m, "eer_ci_low": m - 0.02, "eer_ci_high": m + 0.04},
            *({**base, "anonymizer": attacker, "set": f"val_{g}", "eer": val, "eer_ci_low": val - 0.01,
               "eer_ci_high": val + 0.01, "n_target": 45, "n_nontarget": 180, "eer_speakers": 5} for g in "fm")]
    return [condition(row) for row in rows]


def test_pairs_of_an_experiment_average_female_and_male_with_an_interval():
    (row,) = pairs(records("AA", "mcadams", "mcadams", 0.1, 0.3, 0.2))
    assert row.eer_test == pytest.approx(0.25) and row.eer_val == 0.1 and row.gap == pytest.approx(0.15)
    low, high = row.eer_test_ci
    assert low == pytest.approx(0.25 - np.sqrt(2 * 0.02 ** 2) / 2)
    assert high == pytest.approx(0.25 + np.sqrt(2 * 0.04 ** 2) / 2)
    assert row.eer_val_ci == [pytest.approx(0.1 - np.sqrt(2) * 0.01 / 2), pytest.approx(0.1 + np.sqrt(2) * 0.01 / 2)]
    assert row.val_trials == [90, 360] and row.val_speakers == 5 and row.attacker_origin == "trained"


def test_single_experiment_says_a_sweep_or_csv_is_needed():
    rows, (fit,) = run(records("OO", "original", "original", 0.01, 0.02, 0.03)
                       + records("AA", "mcadams", "mcadams", 0.1, 0.3, 0.2), trusted=["mcadams"],
                       protocol=PROTOCOL, seeds=(1, 1))
    assert [r.verdict for r in rows] == [UNDETERMINED, UNDETERMINED]
    assert "1 trusted pair(s)" in rows[1].reason and "detect.trusted" in rows[1].reason
    assert "reason" in fit and rows[1].validation_protocol == PROTOCOL and rows[1].seed == 1


def test_same_name_with_another_config_is_not_a_matched_pair():
    from pipeline.app.experiment import system_labels
    from pipeline.core.config import compose

    assert system_labels(compose([])) == ("mcadams", "mcadams")
    assert system_labels(compose(["anonymizer@attacker_anonymizer=mcadams"])) == ("mcadams", "mcadams")
    evaluated, attacker = system_labels(compose(["anonymizer@attacker_anonymizer=mcadams",
                                                 "attacker_anonymizer.alpha=[0.7,0.9]"]))
    assert evaluated == "mcadams" and attacker.startswith("mcadams#") and len(attacker) == len("mcadams#") + 6
    assert system_labels(compose(["anonymizer@attacker_anonymizer=mcadams_speaker"])) == ("mcadams", "mcadams_speaker")


def test_suspects_are_judged_never_fitted():
    """Regression: the line was fitted on every matched pair, including nominally matched
    hidden mismatches (speaker-level systems, OHNN), the cases furthest from the others."""
    suspect = pair("ohnn", "ohnn", 0.45, 0.04)
    judged, (fit,) = assess(gap_sweep()[:5] + [suspect], trusted=MATCHED)
    assert fit["n_points"] == 5 and fit["mean_gap"] == pytest.approx(0.01, abs=0.01)
    assert judged[-1]["role"] == "judged" and judged[-1]["verdict"] == OVERESTIMATED
    assert [r["role"] for r in judged[:5]] == ["trusted"] * 5
    _, (with_suspect,) = assess(gap_sweep()[:5] + [suspect], trusted=Trusted(systems=(*MATCHED.systems, "ohnn")))
    assert with_suspect["n_points"] == 6 and with_suspect["gap_std"] > 3 * fit["gap_std"]  # it would widen the margin


def test_relative_drop_is_the_papers_with_a_bootstrap_interval():
    """panariello2025 §4: (B3,B3) EER_test 27 % falls to EER_val 11 %, a relative drop of 60 %."""
    rng = np.random.default_rng(0)
    replicates = {"AA/val_f": list(0.11 + rng.normal(0, 0.01 * np.sqrt(2), 500)),
                  "AA/val_m": list(0.11 + rng.normal(0, 0.01 * np.sqrt(2), 500)),
                  "AA/test_f": list(0.27 + rng.normal(0, 0.02, 500)),
                  "AA/test_m": list(0.27 + rng.normal(0, 0.02, 500))}
    (row,) = pairs(records("AA", "b3", "b3", 0.11, 0.27, 0.27), replicates=replicates)
    assert row.relative_drop == pytest.approx((0.27 - 0.11) / 0.27)
    low, high = row.relative_drop_ci
    assert low < row.relative_drop < high and 0.03 < high - low < 0.2
    assert row.gap_var == pytest.approx(0.01 ** 2 + 0.02 ** 2 / 2, rel=0.2)
    judged, _ = assess([*gap_sweep()[:5], row.row()], trusted=MATCHED)
    residual_low, residual_high = judged[-1]["residual_ci"]
    assert residual_low < judged[-1]["residual"] < residual_high


def test_imported_attackers_are_judged_only_on_speakers_named_unseen():
    """Item 6 of issue 25: an imported or fine-tuned attacker's EER_val is on vpeval's split of
    data it may have been trained on; an attacker imported from anonymised speech is validated
    on anonymised speech."""
    from pipeline.app.experiment import attacker_origin, trained_on as trained_on_settings
    from pipeline.asv.train import attacker_settings
    from pipeline.core.config import compose

    def origin_of(cfg, kind):
        return attacker_origin(attacker_settings(cfg.attacker), split_of(cfg), kind)

    def trained_on(cfg, kind):
        return trained_on_settings(attacker_settings(cfg.attacker), kind)

    assert origin_of(compose([]), "anonymized") == ("trained", None)
    origin, reason = origin_of(compose(["attacker.pretrained=/vpc/exp/asv_orig"]), "original")
    assert origin == "imported" and "attacker.pretrained" in reason and "split.unseen_speakers" in reason
    assert origin_of(compose(["attacker.pretrained=/vpc/exp/asv_orig"]), "anonymized") == ("trained", None)
    origin, reason = origin_of(compose(["attacker.init=/vpc/exp/asv_orig"]), "anonymized")
    assert origin == "fine-tuned" and "attacker.init" in reason
    vouched = compose(["attacker.init=/vpc/exp/asv_orig", "split.unseen_speakers=[19,26]"])
    assert origin_of(vouched, "anonymized") == ("fine-tuned", None)
    assert trained_on(compose(["attacker.pretrained=/vpc/exp/asv_anon_b2"]), "original") == "original"
    anon = compose(["attacker.pretrained=/vpc/exp/asv_anon_b2", "attacker.pretrained_on=anonymized"])
    assert trained_on(anon, "original") == "anonymized" and trained_on(anon, "anonymized") == "anonymized"


def test_detection_group_covers_the_validation_protocol():
    """Regression (issue 25): jobs differing in split settings or detect.test_split shared
    one detection group, so one model calibrated pairs measured with different protocols."""
    from pipeline.app.experiment import detection_group, validation_protocol
    from pipeline.core.config import compose

    base = compose([])
    for override in ("split.val_fraction=0.2", "split.holdout=speaker", "detect.test_split=dev",
                     "split.enroll_utterances=3"):
        other = compose([override])
        assert detection_group(other) != detection_group(base), override
        assert validation_protocol(other, split_of(other)) != validation_protocol(base, split_of(base)), override
    assert detection_group(compose(["seed=7"])) == detection_group(base)  # seeds are repeats of one group
    assert validation_protocol(base, split_of(base)).startswith("holdout=unseen val_fraction=0.1 enroll_utterances=5")
