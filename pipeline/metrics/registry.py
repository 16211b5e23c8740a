"""The one list of metrics (`pipeline.metrics.contract`): a new metric is its module and one line here.

The summary, the report, `vpeval metrics`, results.csv and the evaluate stage's cache key
iterate `METRICS`, in this order (the order of the columns). `UTILITY_METRICS` lists the
utility metrics: the utility results hold their columns only, and the report's utility
tables print them in this order.
"""
from __future__ import annotations

from pipeline.core.schemas import Reidentification
from pipeline.metrics.contract import EMBEDDINGS, EMOTION_DATA
from pipeline.metrics.reidentification import RANK_DISCLOSURE, reidentification_metrics
from pipeline.metrics.speaker_risk import SPEAKER_RISK
from pipeline.metrics.speaker_zebra import SPEAKER_ZEBRA
from pipeline.metrics.utility import EMOTION_RECALL, PITCH_CORRELATION, WORD_ERROR_RATE
from pipeline.metrics.verification import CLLR, LINKABILITY, MIN_DCF, ROCCH_EER, THRESHOLD_EER, TRIAL_COUNTS, ZEBRA

METRICS = (
    TRIAL_COUNTS,
    ROCCH_EER,
    THRESHOLD_EER,
    CLLR,
    LINKABILITY,
    ZEBRA,
    MIN_DCF,
    SPEAKER_RISK,
    SPEAKER_ZEBRA,
    RANK_DISCLOSURE,
)
UTILITY_METRICS = (
    PITCH_CORRELATION,
    WORD_ERROR_RATE,
    EMOTION_RECALL,
)


def metric_list(reidentification: Reidentification | None = None, seed: int = 0) -> tuple:
    """METRICS and the metrics a config section builds: the singling out and identification
    rates over the grid of the typed `reidentification` section when it is enabled."""
    return (*METRICS, *reidentification_metrics(reidentification, seed))


def metric_versions(metrics=METRICS) -> dict[str, int]:
    """{name: version} of the metrics (part of the evaluate stage's cache key)."""
    return {metric.name: metric.version for metric in metrics}


def metric_settings(metrics=METRICS) -> dict[str, dict]:
    """{name: built_with} of the metrics built from the config (part of the evaluate stage's key)."""
    return {metric.name: metric.built_with for metric in metrics if metric.built_with}


def score_metrics(metrics=METRICS) -> tuple:
    """The metrics a score file can give (no embeddings needed): those of `vpeval metrics`."""
    return tuple(metric for metric in metrics if metric.needs != EMBEDDINGS)


def table_columns(metrics=METRICS) -> list:
    """The columns printed in tables (those with a header), in list order."""
    return [column for metric in metrics for column in metric.columns if column.header]


def sections(metrics=METRICS) -> dict[str, list]:
    """{report section: its printed columns}, sections and columns in list order."""
    found: dict[str, list] = {}
    for metric in metrics:
        found.setdefault(metric.section, []).extend(column for column in metric.columns if column.header)
    return {name: columns for name, columns in found.items() if columns}


def set_metrics(metrics=UTILITY_METRICS) -> tuple:
    """The utility metrics measured per evaluation set (and pooled per split): the utility table's."""
    return tuple(metric for metric in metrics if metric.needs != EMOTION_DATA)


def unlisted_utility_keys(utility: dict, metrics=UTILITY_METRICS) -> list[str]:
    """The keys of a utility result that no listed column names: those of its `sets` and `splits`
    against the columns of `set_metrics`, those of its `emotion` against the other metrics'."""
    per_set = {key for metric in set_metrics(metrics) for key in metric.keys}
    emotion = {key for metric in metrics if metric.needs == EMOTION_DATA for key in metric.keys}
    sets = [*utility.get("sets", {}).values(), *utility.get("splits", {}).values()]
    return sorted(({key for values in sets for key in values} - per_set) | (set(utility.get("emotion", {})) - emotion))
