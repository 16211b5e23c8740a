"""All scalar metrics of one condition in one pass over the sorted scores."""
from __future__ import annotations

from pipeline.metrics.cllr import cllr, cllr_of_bins
from pipeline.metrics.dcf import dcf_from_bins
from pipeline.metrics.eer import rocch_eer, sweep_from_groups
from pipeline.metrics.inputs import UndefinedMetricError
from pipeline.metrics.linkability import linkability_from_sorted
from pipeline.metrics.roc import group_scores, pav_bins
from pipeline.metrics.zebra import zebra_from_groups

SUMMARY_KEYS = (
    "n_target", "n_nontarget", "eer", "eer_threshold", "eer_threshold_at", "cllr", "min_cllr",
    "linkability", "linkability_bins", "d_ece", "l_w", "zebra_tag", "min_dcf", "min_dcf_params",
    "notes",
)


def summary(tar, non, *, p_target: float = 0.01, c_miss: float = 1.0, c_fa: float = 1.0,
            omega: float = 1.0) -> dict:
    """Every scalar metric of (target, non-target) scores, JSON-serialisable.

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
    groups = group_scores(tar, non)
    n_tar, n_non = groups.n_target, groups.n_nontarget
    bins = pav_bins(groups)
    sweep = sweep_from_groups(groups)
    disclosure = zebra_from_groups(groups, bins)
    notes = {}
    n_bins = min(n_tar // 10, 100)
    try:
        link = linkability_from_sorted(groups.tar_sorted, groups.non_sorted, omega)
    except UndefinedMetricError as reason:
        link = None
        notes["linkability"] = str(reason)
    return {
        "n_target": n_tar,
        "n_nontarget": n_non,
        "eer": rocch_eer(bins, n_tar, n_non),
        "eer_threshold": sweep.eer,
        "eer_threshold_at": sweep.threshold,
        "cllr": cllr(tar, non),
        "min_cllr": cllr_of_bins(bins, n_tar, n_non),
        "linkability": link,
        "linkability_bins": n_bins,
        "d_ece": disclosure.d_ece,
        "l_w": disclosure.l_w,
        "zebra_tag": disclosure.tag,
        "min_dcf": dcf_from_bins(bins, n_tar, n_non, p_target, c_miss, c_fa),
        "min_dcf_params": {"p_target": p_target, "c_miss": c_miss, "c_fa": c_fa},
        "notes": notes,
    }
