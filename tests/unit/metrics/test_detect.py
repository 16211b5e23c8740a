"""Overestimation detection: the trusted line, its prediction bound, verdicts, the trusted
systems or CSV, groups, seeds, relative drop and bootstrap intervals."""
import re

import numpy as np
import pytest

from pipeline.errors import VpevalError
from pipeline.metrics.detection import (
    OVERESTIMATED,
    TRUSTWORTHY,
    UNDETERMINED,
    Trusted,
    assess,
    fit_line,
    pairs,
    read_reference,
    read_trusted,
    seed_summary,
)
from pipeline.stages.detect import run

MATCHED = Trusted(systems=("s0", "s1", "s2", "s3", "s4"))


def pair(evaluated: str, attacker: str, eer_test: float, eer_val: float, attack: str = "AA") -> dict:
    return {"attack": attack, "anonymizer": evaluated, "attacker_anonymizer": attacker, "eer_test": eer_test,
            "eer_val": eer_val, "relative_drop": None}


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
    judged, (fit,) = assess(line_sweep(), trusted=MATCHED)
    assert fit["source"] == "trusted pairs" and fit["n_points"] == 5
    verdicts = [r["verdict"] for r in judged]
    assert verdicts[:5] == [TRUSTWORTHY] * 5
    outlier = judged[5]
    assert outlier["verdict"] == OVERESTIMATED and outlier["flag"]
    assert outlier["residual"] < -outlier["margin"] < 0


def test_point_above_the_line_is_trustworthy():
    judged, _ = assess(line_sweep()[:5] + [pair("s1", "s3", 0.3, 0.3)], trusted=MATCHED)
    assert judged[-1]["verdict"] == TRUSTWORTHY and judged[-1]["residual"] > 0


def test_margin_grows_away_from_the_centre():
    line = fit_line([(x, 0.02 + 0.3 * x + e) for x, e in zip((0.1, 0.2, 0.3, 0.4), (0.01, -0.01, -0.01, 0.01))])
    assert line.margin(0.6, 0.05) > line.margin(0.25, 0.05) > 0
    assert line.margin(0.25, 0.01) > line.margin(0.25, 0.05)


def test_fewer_than_three_trusted_pairs_is_undetermined():
    rows = [pair("a", "a", 0.3, 0.1), pair("a", "b", 0.45, 0.1)]
    judged, (fit,) = assess(rows, trusted=Trusted(systems=("a",)))
    assert all(r["verdict"] == UNDETERMINED for r in judged)
    assert "at least 3" in fit["reason"] and "detect.trusted" in judged[1]["reason"]


def test_trusted_pair_left_out_needs_three_others():
    rows = [pair(s, s, x, 0.02 + 0.3 * x) for s, x in (("a", 0.1), ("b", 0.2), ("c", 0.3))]
    rows.append(pair("a", "b", 0.45, 0.05))
    judged, (fit,) = assess(rows, trusted=Trusted(systems=("a", "b", "c")))
    assert fit["n_points"] == 3 and judged[3]["verdict"] == OVERESTIMATED
    assert [r["verdict"] for r in judged[:3]] == [UNDETERMINED] * 3
    assert "only 2 remain" in judged[0]["reason"]


def test_original_pairs_are_not_judged():
    judged, _ = assess([pair("original", "original", 0.02, 0.01, attack="OO"), *line_sweep()], trusted=MATCHED)
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


def test_trusted_csv_is_used_for_the_fit(tmp_path):
    reference = tmp_path / "matched.csv"
    reference.write_text("label,eer_test,eer_val\nB3,0.27,0.11\nB4,0.30,0.12\nB5,0.38,0.14\nB2,0.20,0.08\n")
    judged, (fit,) = assess([pair("x", "x", 0.3, 0.12), pair("x", "y", 0.44, 0.05)],
                            trusted=read_trusted(str(reference)))
    assert fit["source"] == str(reference) and fit["n_points"] == 4
    assert judged[0]["verdict"] == TRUSTWORTHY and judged[1]["verdict"] == OVERESTIMATED


@pytest.mark.parametrize("text,problem", [
    ("eer_test,eer_val\n0.2,0.1\n0.3,0.12\n", r"matched\.csv: 2 matched pair\(s\); a trusted line needs at least 3"),
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
    with pytest.raises(VpevalError, match=r"not found \(detect.trusted\)"):
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


def test_single_experiment_says_a_sweep_or_csv_is_needed():
    rows, (fit,) = run(records("OO", "original", "original", 0.01, 0.02, 0.03)
                       + records("AA", "mcadams", "mcadams", 0.1, 0.3, 0.2), trusted=["mcadams"])
    assert [r["verdict"] for r in rows] == [UNDETERMINED, UNDETERMINED]
    assert "1 trusted pair(s)" in rows[1]["reason"] and "detect.trusted" in rows[1]["reason"]
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


def test_suspects_are_judged_never_fitted():
    """Regression: the line was fitted on every matched pair, including nominally matched
    hidden mismatches (speaker-level systems, OHNN), the cases furthest below the line."""
    suspect = pair("ohnn", "ohnn", 0.45, 0.04)
    judged, (fit,) = assess(line_sweep()[:5] + [suspect], trusted=MATCHED)
    assert fit["n_points"] == 5 and fit["slope"] == pytest.approx(0.3, abs=0.05)
    assert judged[-1]["role"] == "judged" and judged[-1]["verdict"] == OVERESTIMATED
    assert [r["role"] for r in judged[:5]] == ["trusted"] * 5
    _, (with_suspect,) = assess(line_sweep()[:5] + [suspect], trusted=Trusted(systems=(*MATCHED.systems, "ohnn")))
    assert with_suspect["n_points"] == 6 and with_suspect["slope"] < fit["slope"] - 0.1  # it would tilt the line


@pytest.mark.parametrize("trusted, problem", [
    (["s0", "s1", "s2", "s9"], r"detect.trusted names s9: no matched pair of it here"),
    ("few.csv", r"few\.csv: 2 matched pair\(s\); a trusted line needs at least 3"),
    ("columns.csv", r"columns\.csv:1: missing column\(s\) eer_val"),
    (None, r"detect.trusted is not set"),
])
def test_bad_trusted_input_leaves_verdicts_undetermined_with_one_line(tmp_path, monkeypatch, caplog, trusted, problem):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "few.csv").write_text("eer_test,eer_val\n0.2,0.1\n0.3,0.12\n")
    (tmp_path / "columns.csv").write_text("eer_test,val\n0.2,0.1\n0.3,0.1\n0.4,0.1\n")
    judged, (fit,) = assess(line_sweep(), trusted=read_trusted(trusted))
    assert all(r["verdict"] == UNDETERMINED for r in judged)
    assert all(re.search(problem, r["reason"]) for r in judged) and re.search(problem, fit["reason"])
    if trusted is not None:
        assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 1


def test_each_group_has_its_own_line_and_too_few_trusted_pairs_is_undetermined():
    big = [{**r, "group": "big"} for r in line_sweep()]
    shifted = [{**pair(f"s{i}", f"s{i}", x, 0.10 + 0.3 * x), "group": "shifted"} for i, x in enumerate([0.1, 0.2, 0.3])]
    small = [{**pair("s0", "s0", 0.2, 0.1), "group": "small"}, {**pair("s0", "s1", 0.4, 0.02), "group": "small"}]
    judged, fits = assess(big + shifted + [{**pair("s1", "s3", 0.3, 0.13), "group": "shifted"}] + small,
                          trusted=MATCHED)
    by_group = {f["group"]: f for f in fits}
    assert by_group["big"]["intercept"] == pytest.approx(0.02, abs=0.02)
    assert by_group["shifted"]["intercept"] == pytest.approx(0.10) and by_group["shifted"]["n_points"] == 3
    # 0.13 at EER_test 0.3 is far below the shifted line (0.19), above the big one's (0.11)
    assert judged[9]["residual"] == pytest.approx(0.13 - 0.19)
    assert "at least 3" in by_group["small"]["reason"]
    assert [r["verdict"] for r in judged if r["group"] == "small"] == [UNDETERMINED] * 2


def test_seeds_of_a_point_fit_the_line_once_and_are_summarised():
    rows = []
    for seed, noise in ((1, -0.004), (2, 0.004)):
        rows += [{**r, "seed": seed, "eer_val": r["eer_val"] + noise} for r in line_sweep()]
    judged, (fit,) = assess(rows, trusted=MATCHED)
    assert fit["n_points"] == 5  # one point per trusted pair, its two seeds averaged
    summary = seed_summary(judged)
    assert len(summary) == 6 and all(s["seeds"] == [1, 2] for s in summary)
    outlier = summary[-1]
    assert outlier["eer_val_mean"] == pytest.approx(0.10) and outlier["eer_val_std"] == pytest.approx(0.008 / 2 ** 0.5)
    assert outlier["flagged"] == 2


def test_relative_drop_is_the_papers_with_a_bootstrap_interval():
    """panariello2025 §4: (B3,B3) EER_test 27 % falls to EER_val 11 %, a relative drop of 60 %."""
    rng = np.random.default_rng(0)
    replicates = {"AA/val": list(0.11 + rng.normal(0, 0.01, 500)),
                  "AA/test_f": list(0.27 + rng.normal(0, 0.02, 500)),
                  "AA/test_m": list(0.27 + rng.normal(0, 0.02, 500))}
    (row,) = pairs(records("AA", "b3", "b3", 0.11, 0.27, 0.27), replicates=replicates)
    assert row["relative_drop"] == pytest.approx((0.27 - 0.11) / 0.27)
    low, high = row["relative_drop_ci"]
    assert low < row["relative_drop"] < high and 0.03 < high - low < 0.2
    judged, _ = assess([*line_sweep()[:5], row], trusted=MATCHED)
    residual_low, residual_high = judged[-1]["residual_ci"]
    assert residual_low < judged[-1]["residual"] < residual_high and judged[-1]["below_line"] is False
