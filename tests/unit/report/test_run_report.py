"""The run report's rendering (`pipeline.report.run_report`): intervals that carry no
information are printed as "–" with the reason, never as figures."""
from pipeline.metrics.bootstrap import COVERED_SPEAKERS, MIN_SPEAKERS, TRIALS_NOTE
from pipeline.metrics.results import JudgedPair
from pipeline.report.run_report import detection_table, interval

ROW = {"attack": "AA", "anonymizer": "mcadams", "attacker_anonymizer": "mcadams", "eer_val": 0.18, "eer_test": 0.2,
       "eer_val_ci": [0.1, 0.26], "eer_test_ci": [0.12, 0.28], "relative_drop": 0.1, "relative_drop_ci": [-0.3, 0.45],
       "val_speakers": max(COVERED_SPEAKERS.values()), "test_speakers": max(COVERED_SPEAKERS.values()),
       "verdict": "not flagged", "reason": "r"}


def test_an_interval_from_too_few_speakers_is_marked():
    """Regression (issue 27): a "95 % CI" of zero width from one speaker was printed with no note."""
    assert interval([0.2, 0.2], 1) == "– (1 speaker(s): too few for a speaker interval)"
    assert interval([0.1, 0.3], MIN_SPEAKERS) == (f"[10.00, 30.00] ({MIN_SPEAKERS} speakers: a 95 % interval was "
                                                  f"measured to cover less than 90 % below {COVERED_SPEAKERS['eer']})")
    assert interval([0.1, 0.3], COVERED_SPEAKERS["eer"]) == "[10.00, 30.00]"


def test_each_interval_of_a_pair_is_marked_by_its_own_measured_coverage():
    """The relative drop's and the residual's intervals carry the note of their own
    measurement (docs/metrics.md: near nominal from 20 speakers per list), not the EER's."""
    assert interval([-0.3, 0.45], 19, kind="relative_drop").startswith("[-30.00, 45.00] (19 speakers: ")
    assert interval([-0.3, 0.45], 20, kind="relative_drop") == "[-30.00, 45.00]"
    assert interval([-0.1, 0.1], 20, kind="gap") == "[-10.00, 10.00]"
    assert interval([-0.1, 0.1], 20).endswith("below 81)")  # the EER's own


def test_an_interval_from_resampled_trials_says_so():
    """Regression: a bootstrap of trials (detect.bootstrap.unit=trials, speakers held fixed)
    was printed as a bare 95 % interval; it covers 0.4-0.7 (docs/metrics.md)."""
    assert interval([0.1, 0.3], 0) == f"[10.00, 30.00] ({TRIALS_NOTE})"
    headers, rows = detection_table([JudgedPair(**{**ROW, "val_speakers": 0, "test_speakers": 0})])
    for column in ("EER_val CI %", "EER_test CI %", "drop CI %"):
        assert rows[0][headers.index(column)].endswith(f"({TRIALS_NOTE})")


def test_the_report_prints_a_dash_and_the_reason_instead_of_the_figures():
    headers, rows = detection_table([JudgedPair(**ROW), JudgedPair(**{**ROW, "relative_drop_ci": [-70.58, 0.47]}),
                                     JudgedPair(**{**ROW, "test_speakers": 3, "residual_ci": [-0.1, 0.1]})])
    drop, residual, test = (headers.index(h) for h in ("drop CI %", "residual CI", "EER_test CI %"))
    assert rows[0][drop] == "[-30.00, 45.00]"
    assert rows[1][drop] == "– (uninformative: 7105 points wide)"
    assert rows[2][drop] == "– (too few speakers (3))"
    assert rows[2][residual] == rows[2][test] == "– (3 speaker(s): too few for a speaker interval)"
