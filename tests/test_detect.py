"""Overestimation detection: the matched line, its prediction bound, verdicts, the reference file."""
import numpy as np
import pytest

from pipeline.errors import VpevalError
from pipeline.stages.detect import (
    OVERESTIMATED,
    TRUSTWORTHY,
    UNDETERMINED,
    assess,
    fit_line,
    pairs,
    read_reference,
    run,
)


def pair(evaluated: str, attacker: str, eer_test: float, eer_val: float, attack: str = "AA") -> dict:
    return {"attack": attack, "anonymizer": evaluated, "attacker_anonymizer": attacker, "eer_test": eer_test,
            "eer_val": eer_val, "relative_gap": None}


def line_sweep(noise: float = 0.005, seed: int = 0) -> list[dict]:
    """Five matched systems on EER_val = 0.02 + 0.3·EER_test, and one mismatched pair far below."""
    rng = np.random.default_rng(seed)
    rows = [pair(f"s{i}", f"s{i}", x, 0.02 + 0.3 * x + rng.normal(0, noise))
            for i, x in enumerate([0.1, 0.2, 0.27, 0.3, 0.4])]
    return rows + [pair("s2", "s4", 0.44, 0.10)]  # (B4, B3)-like: high EER_test, low EER_val


def test_line_recovers_slope_and_intercept():
    line = fit_line([(x, 0.02 + 0.3 * x) for x in (0.1, 0.2, 0.3, 0.4)])
    assert line.slope == pytest.approx(0.3) and line.intercept == pytest.approx(0.02)
    assert line.residual_std == pytest.approx(0, abs=1e-12)


def test_outlier_is_flagged_and_matched_points_are_not():
    judged, fit = assess(line_sweep())
    assert fit["source"] == "matched pairs" and fit["n_points"] == 5
    verdicts = [r["verdict"] for r in judged]
    assert verdicts[:5] == [TRUSTWORTHY] * 5
    outlier = judged[5]
    assert outlier["verdict"] == OVERESTIMATED and outlier["flag"]
    assert outlier["residual"] < -outlier["margin"] < 0


def test_point_above_the_line_is_trustworthy():
    judged, _ = assess(line_sweep()[:5] + [pair("s1", "s3", 0.3, 0.3)])
    assert judged[-1]["verdict"] == TRUSTWORTHY and judged[-1]["residual"] > 0


def test_margin_grows_away_from_the_centre():
    line = fit_line([(x, 0.02 + 0.3 * x + e) for x, e in zip((0.1, 0.2, 0.3, 0.4), (0.01, -0.01, -0.01, 0.01))])
    assert line.margin(0.6, 0.05) > line.margin(0.25, 0.05) > 0
    assert line.margin(0.25, 0.01) > line.margin(0.25, 0.05)


def test_fewer_than_three_matched_pairs_is_undetermined():
    rows = [pair("a", "a", 0.3, 0.1), pair("a", "b", 0.45, 0.1)]
    judged, fit = assess(rows)
    assert all(r["verdict"] == UNDETERMINED for r in judged)
    assert "at least 3" in fit["reason"] and "detect.reference" in judged[1]["reason"]


def test_matched_pair_left_out_needs_three_others():
    rows = [pair(s, s, x, 0.02 + 0.3 * x) for s, x in (("a", 0.1), ("b", 0.2), ("c", 0.3))]
    rows.append(pair("a", "b", 0.45, 0.05))
    judged, fit = assess(rows)
    assert fit["n_points"] == 3 and judged[3]["verdict"] == OVERESTIMATED
    assert [r["verdict"] for r in judged[:3]] == [UNDETERMINED] * 3
    assert "only 2 remain" in judged[0]["reason"]


def test_original_pairs_are_not_judged():
    judged, _ = assess([pair("original", "original", 0.02, 0.01, attack="OO"), *line_sweep()])
    assert judged[0]["verdict"] == UNDETERMINED and "no anonymisation" in judged[0]["reason"]


def test_false_alarm_rate_matches_the_stated_rate_by_simulation():
    """Under the linear-Gaussian model, a new matched pair is flagged with probability alpha."""
    rng = np.random.default_rng(2025)
    alpha, trials, flagged = 0.05, 4000, 0
    xs = np.array([0.1, 0.18, 0.25, 0.33, 0.4, 0.45])
    for _ in range(trials):
        ys = 0.02 + 0.3 * xs + rng.normal(0, 0.02, xs.size)
        line = fit_line(list(zip(xs, ys)))
        x_new = rng.uniform(0.05, 0.5)
        y_new = 0.02 + 0.3 * x_new + rng.normal(0, 0.02)
        flagged += (y_new - line.predict(x_new)) < -line.margin(x_new, alpha)
    rate = flagged / trials
    assert abs(rate - alpha) < 3 * np.sqrt(alpha * (1 - alpha) / trials), rate


def test_reference_file_is_used_for_the_fit(tmp_path):
    reference = tmp_path / "matched.csv"
    reference.write_text("label,eer_test,eer_val\nB3,0.27,0.11\nB4,0.30,0.12\nB5,0.38,0.14\nB2,0.20,0.08\n")
    judged, fit = assess([pair("x", "x", 0.3, 0.12), pair("x", "y", 0.44, 0.05)],
                         reference=read_reference(reference))
    assert fit["source"] == "reference" and fit["n_points"] == 4
    assert judged[0]["verdict"] == TRUSTWORTHY and judged[1]["verdict"] == OVERESTIMATED


@pytest.mark.parametrize("text,problem", [
    ("eer_test,eer_val\n0.2,0.1\n0.3,0.12\n", r"matched\.csv: 2 matched pair\(s\); a reference line needs at least 3"),
    ("eer_test,val\n0.2,0.1\n", r"matched\.csv:1: missing column\(s\) eer_val"),
    ("eer_test,eer_val\n0.2,0.1\n27,11\n0.3,0.1\n", r"matched\.csv:3: EERs are fractions"),
    ("eer_test,eer_val\n0.2,x\n", r"matched\.csv:2: eer_test and eer_val must be numbers"),
])
def test_bad_reference_file_is_one_clear_error(tmp_path, text, problem):
    reference = tmp_path / "matched.csv"
    reference.write_text(text)
    with pytest.raises(VpevalError, match=problem):
        read_reference(reference)


def test_missing_reference_file_names_the_key(tmp_path):
    with pytest.raises(VpevalError, match=r"not found \(detect.reference\)"):
        read_reference(tmp_path / "none.csv")


def records(attack: str, evaluated: str, attacker: str, val: float, f: float, m: float) -> list[dict]:
    base = {"attack": attack, "anonymizer": evaluated, "attacker_anonymizer": attacker}
    return [{**base, "set": "test_f", "eer": f, "eer_ci_low": f - 0.02, "eer_ci_high": f + 0.04},
            {**base, "set": "test_m", "eer": m, "eer_ci_low": m - 0.02, "eer_ci_high": m + 0.04},
            {**base, "anonymizer": attacker, "set": "val", "eer": val, "eer_ci_low": val - 0.01, "eer_ci_high": val + 0.01}]


def test_pairs_of_an_experiment_average_female_and_male_with_an_interval():
    rows = pairs(records("AA", "mcadams", "mcadams", 0.1, 0.3, 0.2))
    (row,) = rows
    assert row["eer_test"] == pytest.approx(0.25) and row["eer_val"] == 0.1
    low, high = row["eer_test_ci"]
    assert low == pytest.approx(0.25 - np.sqrt(2 * 0.02 ** 2) / 2)
    assert high == pytest.approx(0.25 + np.sqrt(2 * 0.04 ** 2) / 2)
    assert row["eer_val_ci"] == [pytest.approx(0.09), pytest.approx(0.11)]


def test_single_experiment_says_a_reference_or_sweep_is_needed():
    rows, fit = run(records("OO", "original", "original", 0.01, 0.02, 0.03)
                    + records("AA", "mcadams", "mcadams", 0.1, 0.3, 0.2))
    assert [r["verdict"] for r in rows] == [UNDETERMINED, UNDETERMINED]
    assert "1 matched pair(s)" in rows[1]["reason"] and "detect.reference" in rows[1]["reason"]
    assert "slope" not in fit


def test_same_name_with_another_config_is_not_a_matched_pair():
    from pipeline.config import compose
    from pipeline.experiment import system_labels

    assert system_labels(compose([])) == ("mcadams", "mcadams")
    assert system_labels(compose(["anonymizer@attacker_anonymizer=mcadams"])) == ("mcadams", "mcadams")
    evaluated, attacker = system_labels(compose(["anonymizer@attacker_anonymizer=mcadams",
                                                 "attacker_anonymizer.alpha=[0.7,0.9]"]))
    assert evaluated == "mcadams" and attacker.startswith("mcadams#") and len(attacker) == len("mcadams#") + 6
    assert system_labels(compose(["anonymizer@attacker_anonymizer=mcadams_speaker"])) == ("mcadams", "mcadams_speaker")
