"""The utility metrics under the metric contract: every metric a module of pipeline.metrics
defines is in the one list, the utility results hold the listed columns only, and the report's
utility tables print the list's headers."""
import importlib
import pkgutil

import pytest
from omegaconf import OmegaConf

import pipeline.metrics
from pipeline.app import utility
from pipeline.core.schemas import Utility
from pipeline.metrics.contract import UTILITY_NEEDS, Column, Metric, UtilityMetric
from pipeline.metrics.registry import METRICS, UTILITY_METRICS, set_metrics, unlisted_utility_keys
from pipeline.report.document import render_markdown
from pipeline.report.utility import emotion_rows, utility_rows, utility_section


def defined_metrics(kind) -> list:
    """Every module-level `kind` of the modules of pipeline.metrics."""
    found = []
    for module in pkgutil.iter_modules(pipeline.metrics.__path__):
        values = vars(importlib.import_module(f"pipeline.metrics.{module.name}")).values()
        found += [value for value in values if isinstance(value, kind) and value not in found]
    return found


def test_every_metric_a_module_defines_is_in_the_one_list():
    utilities = defined_metrics(UtilityMetric)
    assert {m.name for m in utilities} == {"pitch_correlation", "wer", "emotion"}
    assert all(m in UTILITY_METRICS for m in utilities)
    assert all(m in METRICS for m in defined_metrics(Metric))


def test_utility_names_are_unique_each_needs_a_known_input_and_is_computed_in_the_metrics():
    names = [m.name for m in UTILITY_METRICS]
    assert len(set(names)) == len(names)
    for metric in UTILITY_METRICS:
        assert metric.needs in UTILITY_NEEDS and metric.section == "Utility metrics"
        assert metric.compute.__module__.startswith("pipeline.metrics."), metric.name
        assert len(set(metric.keys)) == len(metric.keys) and metric.description and metric.reference
    with pytest.raises(ValueError, match="needs must be one of"):
        UtilityMetric("x", "scores", (Column("x"),), len, True, "x", "x")
    assert [m.name for m in set_metrics()] == ["pitch_correlation", "wer"]
    assert [m.higher_is_better for m in UTILITY_METRICS] == [True, False, True]


def result():
    """A utility result as `utility.measure` writes it: sets, pooled splits, emotion."""
    found = {"pitch_correlation": 0.7, "pitch_correlation_std": 0.1, "utterances": 4, "wer_original": 0.1,
             "wer_anonymized": 0.3, "words": 35}
    pooled = {"pitch_correlation": 0.7, "pitch_correlation_std": 0.1, "pitch_correlation_ci": [0.6, 0.8],
              "wer_original": 0.1, "wer_original_ci": [0.05, 0.15], "wer_anonymized": 0.3,
              "wer_anonymized_ci": [0.25, 0.35]}
    emotion = {"uar_original": 0.5, "uar_anonymized": 0.25, "class_recall_original": {"ang": 0.5},
               "class_recall_anonymized": {"ang": 0.25}, "data": "emo", "utterances": 8, "classes": ["ang", "sad"],
               "uar_rule": "vpc", "models": "5 folds (spk2fold)"}
    return {"sets": {"test_f": found}, "splits": {"test": pooled}, "emotion": emotion, "skipped": {}}


def test_a_utility_result_holds_listed_columns_only():
    assert unlisted_utility_keys(result()) == []
    wrong = result()
    wrong["sets"]["test_f"]["rho"] = 1.0
    wrong["emotion"]["words"] = 3  # a column, but of a metric measured per set
    assert unlisted_utility_keys(wrong) == ["rho", "words"]


class Measured:
    """An experiment whose evaluated system anonymises the trials (for `utility.measure`)."""

    cfg = OmegaConf.create({"eval_splits": ["test"], "asr": {"name": "x"}})
    utility = Utility(pitch_correlation=True, pitch_tracker="yin", pitch_rule="voiced", wer=False, wer_text="vpc",
                      uar_rule="pooled")
    cache = evaluated = None

    def evaluates_anonymized(self):
        return True

    def data(self, kind, trials, evaluated):
        return f"{kind}/{trials}"


@pytest.mark.parametrize("key, unlisted", [("pitch_correlation", []), ("rho", ["rho"])])
def test_measure_runs_each_metrics_stage_and_a_key_no_column_names_is_found(monkeypatch, key, unlisted):
    """What the end-to-end tests assert of real runs: a value no listed column names is found."""
    def pitch_correlations(experiment, lists, sets, found):
        assert lists["test_f"] == {"original": "original/test_trials_f", "anonymized": "anonymized/test_trials_f"}
        found["sets"]["test_f"][key] = 0.5

    monkeypatch.setattr(utility, "pitch_correlations", pitch_correlations)
    found = utility.measure(Measured())
    assert found["sets"]["test_f"] == {key: 0.5} and set(found["skipped"]) == {"wer", "emotion"}
    assert unlisted_utility_keys(found) == unlisted


def test_the_report_prints_the_headers_of_the_list(tmp_path):
    section = utility_section(utility_rows(result(), "mcadams"), {}, emotion_rows(result(), "mcadams"), [], tmp_path)
    (sets, set_rows), (emotion, emotion_row) = section.tables
    assert sets == ["system", "set", *(c.header for m in set_metrics() for c in m.columns if c.header)]
    assert sets[2:5] == ["ρF0", "ρF0 std", "ρF0 CI"] and "WER original %" in sets
    assert emotion == ["system", "UAR original %", "UAR anonymised %", "# utterances", "# left out", "classes",
                       "UAR over", "classifiers", "emotion data"]
    assert emotion_row == [["mcadams", "50.00", "25.00", "8", "–", "ang, sad", "vpc", "5 folds (spk2fold)", "emo"]]
    pooled = dict(zip(sets, set_rows[1]))
    assert (pooled["ρF0"], pooled["ρF0 CI"], pooled["WER anonymised CI %"], pooled["# words"]) == \
        ("0.700", "[0.600, 0.800]", "[25.00, 35.00]", "–")
    assert "| mcadams | test_f | 0.700 | 0.100 | – | 4 | 10.00 | 30.00 | – | 35 |" in render_markdown("r", [section])
