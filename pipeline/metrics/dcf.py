"""Detection cost (minDCF) and DET curves."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.metrics.inputs import ScoreError
from pipeline.metrics.roc import PavBins, group_scores, pav_bins, rocch


def min_dcf(tar, non, p_target: float = 0.01, c_miss: float = 1.0, c_fa: float = 1.0,
            normalize: bool = False) -> float:
    """Minimum over thresholds of c_miss p_target Pmiss + c_fa (1 - p_target) Pfa.

    Defaults are SpeechBrain's `minDCF` (p_target 0.01, unit costs, not normalised);
    `normalize` divides by min(c_miss p_target, c_fa (1 - p_target)) as NIST and BOSARIS
    do. The minimum runs over every threshold, accept-all and reject-all included (it is
    reached at a vertex of the ROC convex hull, which is where it is evaluated).
    """
    groups = group_scores(tar, non)
    return dcf_from_bins(pav_bins(groups), groups.n_target, groups.n_nontarget,
                         p_target, c_miss, c_fa, normalize)


def dcf_from_bins(bins: PavBins, n_target: int, n_nontarget: int, p_target: float,
                  c_miss: float, c_fa: float, normalize: bool = False) -> float:
    """`min_dcf` from PAV bins."""
    if not 0 < p_target < 1:
        raise ScoreError(f"min_dcf: p_target must lie strictly between 0 and 1, got {p_target}")
    if not (c_miss > 0 and c_fa > 0):
        raise ScoreError(f"min_dcf: costs must be positive, got c_miss={c_miss}, c_fa={c_fa}")
    misses, false_alarms = rocch(bins, n_target, n_nontarget)
    cost = c_miss * p_target * (misses / n_target) + c_fa * (1 - p_target) * (false_alarms / n_nontarget)
    best = float(cost.min())
    if normalize:
        best /= min(c_miss * p_target, c_fa * (1 - p_target))
    return best


@dataclass(frozen=True)
class DetCurve:
    """ROC operating points (decide "target" when score > threshold) and the ROC convex hull.

    `pfa[i]`, `pmiss[i]` are the error rates at `thresholds[i]`; the first threshold is
    -inf (accept all). `hull_pfa`, `hull_pmiss` are the ROCCH vertices (BOSARIS `rocch`).
    Plot on probit axes (`scipy.stats.norm.ppf`) for a DET curve.
    """

    thresholds: np.ndarray
    pfa: np.ndarray
    pmiss: np.ndarray
    hull_pfa: np.ndarray
    hull_pmiss: np.ndarray


def det_curve(tar, non) -> DetCurve:
    """Every operating point of the scores, plus the convex hull."""
    groups = group_scores(tar, non)
    n_tar, n_non = groups.n_target, groups.n_nontarget
    misses, false_alarms = rocch(pav_bins(groups), n_tar, n_non)
    return DetCurve(
        thresholds=np.concatenate(([-np.inf], groups.scores)),
        pfa=np.concatenate(([n_non], n_non - np.cumsum(groups.nontargets))) / n_non,
        pmiss=np.concatenate(([0], np.cumsum(groups.targets))) / n_tar,
        hull_pfa=false_alarms / n_non,
        hull_pmiss=misses / n_tar,
    )
