"""Stage 7 — detect: is a privacy estimate overestimated? EER_val against EER_test.

One row per attack of an experiment that has both a validation and a test EER, judged by
the detection statistics of `pipeline.metrics.detection` (the val-test model calibrated on
the trusted matched pairs, and the column test where several attackers were scored on the
same evaluation data; panariello2025 §3.4).
"""
from __future__ import annotations

from pipeline.metrics.detection import Settings, assess, pairs, read_trusted
from pipeline.metrics.results import ConditionResult, JudgedPair


def run(records: list[ConditionResult], test_split: str = "test", trusted=None, settings: Settings = Settings(),
        replicates: dict[str, list[float]] | None = None, protocol: str | None = None,
        seeds: tuple = (None, None)) -> tuple[list[JudgedPair], list[dict]]:
    """Detection pairs of one experiment (one per attack with validation and test records),
    judged, and the fits they were judged against; `trusted` is `detect.trusted`, `protocol`
    the experiment's validation protocol, `seeds` its (training, anonymisation) seeds."""
    rows = [{**pair.row(), "validation_protocol": protocol, "seed": seeds[0], "anonymization_seed": seeds[1]}
            for pair in pairs(records, test_split, replicates)]
    judged, fits = assess(rows, trusted=read_trusted(trusted), settings=settings)
    return [JudgedPair(**row) for row in judged], fits
