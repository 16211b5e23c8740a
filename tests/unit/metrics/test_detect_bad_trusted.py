"""Bad `detect.trusted` pairs: identical gaps, or EERs from fewer speakers than the speaker
bootstrap needs, leave every verdict `undetermined` with the reason, never a flag from a
zero-width interval."""
import pytest

from pipeline.metrics.bootstrap import MIN_SPEAKERS
from pipeline.metrics.detection import OVERESTIMATED, UNDETERMINED, Settings, Trusted, assess

TRUSTED = Trusted(systems=("s0", "s1", "s2", "s3"))


def row(evaluated: str, attacker: str, eer_test: float, eer_val: float, speakers: int = 20, gap_var=1e-4) -> dict:
    return {"attack": "AA", "anonymizer": evaluated, "attacker_anonymizer": attacker, "eer_test": eer_test,
            "eer_val": eer_val, "gap": eer_test - eer_val, "gap_var": gap_var, "relative_drop": None,
            "val_speakers": 20, "test_speakers": speakers}


def sweep(gaps, speakers: int = 20) -> list[dict]:
    """Four trusted matched pairs with these gaps, a new matched pair 1.5 points below, a
    mismatched pair 30 points below."""
    rows = [row(f"s{i}", f"s{i}", x, round(x - g, 6), speakers) for i, (x, g) in enumerate(zip((0.1, 0.2, 0.3, 0.4), gaps))]
    return rows + [row("new", "new", 0.25, 0.235), row("new", "other", 0.45, 0.15)]


@pytest.mark.parametrize("method,reason", [("gap", "same gap"), ("line", "on one line")])
def test_identical_trusted_gaps_are_undetermined_never_flagged(method, reason):
    judged, (fit,) = assess(sweep([0.01] * 4), trusted=TRUSTED, settings=Settings(method=method, column=False))
    assert all(r["verdict"] == UNDETERMINED and reason in r["reason"] for r in judged)
    assert reason in fit["reason"]


def test_trusted_pairs_from_too_few_test_speakers_are_undetermined():
    judged, (fit,) = assess(sweep([0.01, 0.0, 0.02, 0.015], speakers=MIN_SPEAKERS - 1), trusted=TRUSTED,
                            settings=Settings(column=False))
    assert all(r["verdict"] == UNDETERMINED for r in judged)
    assert f"{MIN_SPEAKERS - 1} speaker(s)" in fit["reason"] and "bootstrap" in judged[-1]["reason"]


def test_enough_speakers_and_spread_judge_and_flag_the_mismatch():
    judged, _ = assess(sweep([0.01, 0.0, 0.02, 0.015]), trusted=TRUSTED, settings=Settings(column=False))
    verdicts = {(r["anonymizer"], r["attacker_anonymizer"]): r["verdict"] for r in judged}
    assert verdicts[("new", "other")] == OVERESTIMATED and verdicts[("new", "new")] != OVERESTIMATED


def test_a_judged_pair_from_too_few_speakers_is_undetermined():
    rows = sweep([0.01, 0.0, 0.02, 0.015])
    rows[-1]["test_speakers"] = 2
    judged, _ = assess(rows, trusted=TRUSTED, settings=Settings(column=False))
    assert judged[-1]["verdict"] == UNDETERMINED and "2 speaker(s)" in judged[-1]["reason"]
