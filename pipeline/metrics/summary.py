"""All metrics of one condition, from the one list (`pipeline.metrics.registry.METRICS`)."""
from __future__ import annotations

from pipeline.metrics.contract import SCORES, Condition, Embeddings, run_metrics
from pipeline.metrics.registry import METRICS
from pipeline.metrics.scorefiles import ScoreFile

SCORE_ONLY = tuple(metric for metric in METRICS if metric.needs == SCORES)
SUMMARY_KEYS = (*(key for metric in SCORE_ONLY for key in metric.keys), "notes")


def summary(tar, non, *, p_target: float = 0.01, c_miss: float = 1.0, c_fa: float = 1.0,
            omega: float = 1.0) -> dict:
    """Every scalar metric of (target, non-target) scores that needs nothing else, JSON-serialisable.

    Keys (rates are fractions, Cllr-type values bits, scores natural-log LLRs):

    - ``n_target``, ``n_nontarget`` (int): trial counts.
    - ``eer``: ROCCH-EER (BOSARIS; ties pooled) - the primary EER.
    - ``eer_threshold``: threshold-sweep EER of the VPC 2024 toolkit (SpeechBrain `EER`).
    - ``eer_threshold_at``: the score threshold that sweep chose.
    - ``cllr``: Cllr of the scores read as LLRs; ``min_cllr``: after PAV calibration.
    - ``linkability``: D<->sys (Inria defaults, `omega`), or None when undefined (fewer
      than 20 mated scores gives fewer than 2 histogram bins); ``linkability_bins``: the
      number of bins used (0 or 1 when undefined).
    - ``d_ece`` (bits), ``l_w`` (log10), ``zebra_tag`` (str): ZEBRA expected and worst-case
      disclosure and its tag.
    - ``min_dcf``: minimum detection cost (not normalised) at ``min_dcf_params``
      (p_target, c_miss, c_fa; SpeechBrain's defaults).
    - ``notes`` (dict): for each key whose value is None, the reason; empty otherwise.
    """
    settings = {"p_target": p_target, "c_miss": c_miss, "c_fa": c_fa, "omega": omega}
    return run_metrics(Condition(tar, non, settings=settings), SCORE_ONLY)


def evaluate(condition: Condition, metrics=METRICS) -> dict:
    """Every metric of `metrics` on `condition` (those it lacks the inputs for: None, with the reason in `notes`)."""
    return run_metrics(condition, metrics)


def condition_of(scores: ScoreFile, settings: dict | None = None, embeddings: Embeddings | None = None) -> Condition:
    """A score file's scores and speakers (and the condition's embeddings) as the metrics' input."""
    return Condition(scores.target_scores, scores.nontarget_scores, scores.target_speakers, scores.nontarget_speakers,
                     scores.target_test_speakers, scores.nontarget_test_speakers, embeddings, dict(settings or {}))
