"""Issue 37: intervals that carry no information are not printed as figures. A relative drop
(EER_test - EER_val) / EER_test from a tiny set spans e.g. [-7058, 47] %; the report shows "–"
and the reason, results.json keeps the numbers (`drop_interval_problem`)."""
from pipeline.metrics.bootstrap import MIN_SPEAKERS
from pipeline.metrics.detection import DROP_MAX_WIDTH, drop_interval_problem

ROW = {"attack": "AA", "anonymizer": "mcadams", "attacker_anonymizer": "mcadams", "eer_val": 0.18, "eer_test": 0.2,
       "eer_val_ci": [0.1, 0.26], "eer_test_ci": [0.12, 0.28], "relative_drop": 0.1, "relative_drop_ci": [-0.3, 0.45],
       "val_speakers": 40, "test_speakers": 40, "verdict": "not flagged", "reason": "r"}


def test_an_informative_drop_interval_has_no_problem():
    assert drop_interval_problem(ROW) is None
    assert drop_interval_problem({**ROW, "relative_drop_ci": None}) is None


def test_too_few_speakers_an_eer_test_reaching_0_or_a_wide_interval_tell_nothing():
    assert drop_interval_problem({**ROW, "test_speakers": MIN_SPEAKERS - 1}) == f"too few speakers ({MIN_SPEAKERS - 1})"
    assert drop_interval_problem({**ROW, "eer_test_ci": [0.0, 0.2]}) == "uninformative: the EER_test interval reaches 0"
    # the replicates decide when the row has them (the mean of two genders' intervals rarely reaches 0)
    reaching = {**ROW, "eer_test_replicates": [0.0] * 30 + [0.1] * 970, "ci_level": 0.95}
    assert drop_interval_problem(reaching) == "uninformative: the EER_test interval reaches 0"
    assert drop_interval_problem({**reaching, "eer_test_replicates": [0.0] * 20 + [0.1] * 980}) is None
    wide = {**ROW, "relative_drop_ci": [-70.58, 0.47]}  # issue 37's -167 [-7058, 47]
    assert drop_interval_problem(wide) == "uninformative: 7105 points wide"
    assert drop_interval_problem({**ROW, "relative_drop_ci": [-0.5, -0.5 + DROP_MAX_WIDTH]}) is None

