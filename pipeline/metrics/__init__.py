"""Privacy metrics on target / non-target scores, exact to the VoicePrivacy reference toolkits.

Every metric follows `contract.Metric` and is listed once, in `registry.METRICS`; the utility
metrics (ρF0, WER, emotion UAR) follow `contract.UtilityMetric`, listed in `registry.UTILITY_METRICS`.

Plain functions on 1-D arrays of target and non-target scores (natural-log LLRs where an
LLR is meant); rates are fractions, Cllr-type values bits. See README.md, "Privacy metrics".
"""
from pipeline.metrics.bootstrap import BootstrapResult, Interval, bootstrap_ci
from pipeline.metrics.calibration import (
    CalibrationExtension,
    c_ece,
    calibration_extension,
    train_isotonic_calibration,
    train_linear_calibration,
)
from pipeline.metrics.cllr import cllr, min_cllr, pav_llrs
from pipeline.metrics.contract import Column, Condition, Embeddings, Metric, Undefined
from pipeline.metrics.dcf import DetCurve, det_curve, min_dcf
from pipeline.metrics.eer import SweepEER, eer, eer_threshold, eer_threshold_sweep
from pipeline.metrics.inputs import ScoreError, UndefinedMetricError
from pipeline.metrics.linkability import linkability
from pipeline.metrics.registry import METRICS
from pipeline.metrics.scorefiles import ScoreFile, read_scores
from pipeline.metrics.similarity import SimilarityResult, TrialTable, similarity_metrics
from pipeline.metrics.speaker_risk import SpeakerRisk, speaker_risk
from pipeline.metrics.speaker_zebra import SpeakerDisclosure, speaker_disclosure
from pipeline.metrics.summary import SUMMARY_KEYS, summary
from pipeline.metrics.zebra import (
    EceProfile,
    Zebra,
    d_ece,
    ece,
    ece_profile,
    zebra,
    zebra_tag,
)
from pipeline.metrics.zoo import SpeakerStats, speaker_breakdown

__all__ = [
    "BootstrapResult", "CalibrationExtension", "Column", "Condition", "DetCurve", "EceProfile", "Embeddings",
    "Interval", "METRICS", "Metric", "SUMMARY_KEYS", "ScoreError", "ScoreFile", "SimilarityResult",
    "SpeakerDisclosure", "SpeakerRisk", "SpeakerStats", "SweepEER", "TrialTable", "Undefined",
    "UndefinedMetricError", "Zebra", "bootstrap_ci", "c_ece", "calibration_extension", "cllr", "d_ece",
    "det_curve", "ece", "ece_profile", "eer", "eer_threshold", "eer_threshold_sweep", "linkability", "min_cllr",
    "min_dcf", "pav_llrs", "read_scores", "similarity_metrics", "speaker_breakdown", "speaker_disclosure",
    "speaker_risk", "summary", "train_isotonic_calibration", "train_linear_calibration", "zebra", "zebra_tag",
]
