"""Stage 7 — detect: is a privacy estimate overestimated? EER_val against EER_test.

One row per attack of an experiment that has both a validation and a test EER, judged
against the line of the trusted matched pairs (panariello2025 §4, Fig. 2). The statistics
(line fit, prediction bound, relative drop, verdicts) are `pipeline.metrics.detection`'s.
"""
from __future__ import annotations

from pipeline.metrics.detection import assess, pairs, read_trusted


def run(records: list[dict], test_split: str = "test", trusted=None, false_alarm: float = 0.05,
        replicates: dict[str, list[float]] | None = None) -> tuple[list[dict], list[dict]]:
    """Detection rows of one experiment (one per attack with validation and test records)
    and the fits they were judged against; `trusted` is `detect.trusted`."""
    return assess(pairs(records, test_split, replicates), trusted=read_trusted(trusted), false_alarm=false_alarm)
