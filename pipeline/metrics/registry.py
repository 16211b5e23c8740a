"""The one list of metrics (`pipeline.metrics.contract`): a new metric is its module and one line here.

The summary, the report, `vpeval metrics`, results.csv and the evaluate stage's cache key
iterate `METRICS`, in this order (the order of the columns).
"""
from __future__ import annotations

from pipeline.metrics.contract import EMBEDDINGS
from pipeline.metrics.reidentification import RANK_DISCLOSURE, reidentification_metrics
from pipeline.metrics.speaker_risk import SPEAKER_RISK
from pipeline.metrics.speaker_zebra import SPEAKER_ZEBRA
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


def metric_list(reidentification: dict | None = None, seed: int = 0) -> tuple:
    """METRICS and the metrics a config section builds: the singling out and identification
    rates over the grid of a plain `reidentification` section when it is enabled."""
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
