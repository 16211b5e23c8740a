"""The re-identification metrics through the metric contract: columns from the config's grid,
values equal to the metric functions on the same arrays, candidates cut to the speakers the
trial list tries, a grid the condition cannot serve noted, the grid in the evaluate key."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pipeline.core.cache import Cache
from pipeline.core.schemas import Reidentification
from pipeline.metrics.contract import Condition, Embeddings, run_metrics
from pipeline.metrics.legal import Grid, legal_metrics
from pipeline.metrics.registry import METRICS, metric_list
from pipeline.metrics.reidentification import RANK_DISCLOSURE, reidentification_metrics
from pipeline.metrics.results import ConditionResult
from pipeline.report.reidentification import reidentification_sections
from pipeline.stages import evaluate

SETTINGS = Reidentification(enabled=True, populations=[2, 3], candidates=[2, 3], lengths=[1, 2],
                            calibration_conversations=2, runs=2, confidence=0.9, short_speakers="calibrate")


def condition(spread: float) -> tuple[Condition, tuple]:
    """4 test speakers with 6 utterances, 3 of them enrolled with 2; one more enrolled speaker
    (another gender's) the trial list never tries."""
    rng = np.random.default_rng(0)
    means = rng.normal(size=(5, 8))
    trial_speakers = np.repeat([f"f{s}" for s in range(4)], 6)
    enroll_speakers = np.repeat(["f0", "f1", "f2", "m9"], 2)
    trial = np.repeat(means[:4], 6, axis=0) + spread * rng.normal(size=(24, 8))
    enroll = np.repeat(means[[0, 1, 2, 4]], 2, axis=0) + spread * rng.normal(size=(8, 8))
    found = Condition(np.array([1.0, 2.0]), np.array([0.0, 0.5]),
                      embeddings=Embeddings(enroll, enroll_speakers, trial, trial_speakers))
    return found, (trial, trial_speakers, enroll[:6], enroll_speakers[:6])


def test_columns_follow_the_grid_and_values_equal_the_functions():
    metrics = reidentification_metrics(SETTINGS, seed=7)
    assert [m.name for m in metrics] == ["singling_out_rate", "identification_rate"]
    assert metrics[0].keys[:3] == ("singling_out_rate_N2_L1", "singling_out_rate_N2_L1_low",
                                   "singling_out_rate_N2_L1_high")
    assert len(metrics[1].keys) == 2 * 2 * 3 + 1
    cond, arrays = condition(0.3)
    found = run_metrics(cond, (*metrics, RANK_DISCLOSURE))
    expected = legal_metrics(*arrays, Grid((2, 3), (2, 3), (1, 2), 2, 2, 0.9, seed=7))
    assert found["identification_rate_N3_L2"] == expected["identification_rate"]["N'=3,L=2"]["value"]
    assert found["singling_out_rate_N3_L1_low"] == expected["singling_out_rate"]["N=3,L=1"]["low"]
    detail = found["identification_rate_detail"]
    assert detail["enrolled_not_tried"] == 1 and detail["identification_rate_N2_L1"]["left_out"] == {"test": 1}
    assert found["rank_disclosure_detail"]["candidates"] == 3  # m9 is no candidate
    assert found["notes"] == {}


def test_off_or_absent_section_adds_nothing_and_rank_disclosure_is_always_listed():
    assert reidentification_metrics(None, 0) == () and reidentification_metrics(replace(SETTINGS, enabled=False), 0) == ()
    assert RANK_DISCLOSURE in METRICS and metric_list(None) == METRICS
    assert metric_list(SETTINGS, 1)[-2].name == "singling_out_rate"


def test_signal_separates_clear_from_noisy_voices():
    """Well-separated speakers are identified and ranked first; noisy ones far less."""
    metrics = (*reidentification_metrics(SETTINGS, 1), RANK_DISCLOSURE)
    clear, noisy = (run_metrics(condition(spread)[0], metrics) for spread in (0.2, 5.0))
    assert clear["identification_rate_N3_L1"] == pytest.approx(1.0) and noisy["identification_rate_N3_L1"] < 0.8
    assert clear["rank_disclosure_bits"] == pytest.approx(np.log2(3))
    assert noisy["rank_disclosure_bits"] < 0.5 * np.log2(3)


def test_a_grid_the_condition_cannot_serve_is_none_with_the_reason():
    found = run_metrics(condition(0.3)[0], reidentification_metrics(replace(SETTINGS, populations=[5]), 0))
    assert found["singling_out_rate_N5_L1"] is None
    assert "singling_out_rate at N=5, L=1" in found["notes"]["singling_out_rate_N5_L1"]
    assert found["identification_rate_N2_L1"] is not None


def test_the_grid_is_in_the_evaluate_key():
    base = evaluate.params(metric_list(SETTINGS, 1))
    assert base != evaluate.params(metric_list(replace(SETTINGS, runs=3), 1))
    assert base != evaluate.params(metric_list(replace(SETTINGS, short_speakers="drop"), 1))
    assert base != evaluate.params(metric_list(SETTINGS, 2))
    assert "settings" not in evaluate.params(METRICS)  # runs without the section keep their key
    assert Cache.key("evaluate", base, {}, code="pipeline.stages.evaluate") != Cache.key(
        "evaluate", evaluate.params(METRICS), {}, code="pipeline.stages.evaluate")


def test_report_section_tabulates_and_draws_from_the_records(tmp_path):
    metrics = (*reidentification_metrics(SETTINGS, 1), RANK_DISCLOSURE)
    labels = {"attack": "OO", "anonymizer": "original", "attacker_anonymizer": "original", "enroll": "original",
              "trials": "original"}
    records = [ConditionResult.measured(run_metrics(condition(0.3)[0], metrics), metrics, **labels, set="test_f"),
               ConditionResult(**labels, set="val_f", metrics={"eer": 0.1})]
    assert [(c.metric, c.n, c.length) for c in records[0].rates][:2] == [("singling_out_rate", 2, 1),
                                                                          ("singling_out_rate", 3, 1)]
    [section] = reidentification_sections(records, tmp_path)
    rates, disclosure = section.tables
    assert len(rates[1]) == 2 * 2 + 2 * 2 and rates[1][0][:3] == ["OO/test_f", "singling out", "N=2, L=1"]
    assert disclosure[1][0][:3] == ["OO/test_f", 3, 24 - 6]
    assert section.figures[0].is_file()
