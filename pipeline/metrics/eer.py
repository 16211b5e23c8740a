"""Equal error rates: the ROCCH-EER (BOSARIS) and the threshold-sweep EER (VPC 2024).

Both are fractions in [0, 1] (multiply by 100 for the percentages VPC tables print).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.metrics.roc import PavBins, ScoreGroups, group_scores, pav_bins, rocch


def eer(tar, non) -> float:
    """ROCCH-EER: where the ROC convex hull meets Pmiss = Pfa (BOSARIS `rocch2eer`).

    Tied target / non-target scores are pooled. Invariant under any strictly increasing
    transform of the scores.

    >>> eer([3, 5, 7, 8], [1, 2, 4, 6])
    0.25
    """
    groups = group_scores(tar, non)
    return rocch_eer(pav_bins(groups), groups.n_target, groups.n_nontarget)


def rocch_eer(bins: PavBins, n_target: int, n_nontarget: int) -> float:
    """ROCCH-EER from PAV bins, exact: one rounding of a ratio of integers."""
    misses, false_alarms = rocch(bins, n_target, n_nontarget)
    # side of the diagonal, in integers: Pfa - Pmiss has the sign of fa * Nt - miss * Nn
    side = false_alarms * n_target - misses * n_nontarget
    last_above = int(np.flatnonzero(side > 0)[-1])
    fa1, m1 = int(false_alarms[last_above]), int(misses[last_above])
    fa2, m2 = int(false_alarms[last_above + 1]), int(misses[last_above + 1])
    if fa2 * n_target == m2 * n_nontarget:
        return m2 / n_target
    # intersection of the hull segment (fa1/Nn, m1/Nt)-(fa2/Nn, m2/Nt) with Pmiss = Pfa
    return (fa2 * m1 - fa1 * m2) / ((fa2 - fa1) * n_target - (m2 - m1) * n_nontarget)


@dataclass(frozen=True)
class SweepEER:
    """Operating point chosen by the threshold sweep (SpeechBrain `EER`)."""

    eer: float
    threshold: float
    far: float
    frr: float


def eer_threshold(tar, non) -> float:
    """Threshold-sweep EER of the VPC 2024 toolkit (SpeechBrain 1.1.2 `EER`), in O(n log n).

    Thresholds are the distinct scores and the midpoints between them; FRR counts targets
    <= threshold, FAR non-targets > threshold, both as float32 rates as SpeechBrain computes
    them; the first threshold minimising |FAR - FRR| under SpeechBrain's own comparison
    wins; EER = (FAR + FRR) / 2. The value is bit-identical to
    `speechbrain.utils.metric_stats.EER(torch.tensor(tar), torch.tensor(non))[0]` for
    tensors of the same dtype. The VPC 2024 toolkit builds float32 tensors from its scores:
    pass float32 arrays to reproduce its numbers exactly.

    >>> eer_threshold([3, 5, 7, 8], [1, 2, 4, 6])
    0.25
    """
    return eer_threshold_sweep(tar, non).eer


def eer_threshold_sweep(tar, non) -> SweepEER:
    """`eer_threshold` with the chosen threshold and its FAR and FRR."""
    return sweep_from_groups(group_scores(tar, non))


def sweep_from_groups(groups: ScoreGroups) -> SweepEER:
    """The threshold sweep on grouped scores (see `eer_threshold`)."""
    n_tar, n_non = groups.n_target, groups.n_nontarget
    frr = np.cumsum(groups.targets).astype(np.float32) / np.float32(n_tar)
    far = (n_non - np.cumsum(groups.nontargets)).astype(np.float32) / np.float32(n_non)
    best = _speechbrain_choice(far, frr)
    return SweepEER(
        eer=(float(far[best]) + float(frr[best])) / 2,
        threshold=_reported_threshold(groups, far, frr, best),
        far=float(far[best]),
        frr=float(frr[best]),
    )


def _speechbrain_choice(far: np.ndarray, frr: np.ndarray) -> int:
    """Index SpeechBrain's loop ends on, without the loop over every threshold.

    SpeechBrain keeps threshold i when `float32 |FAR_i - FRR_i| < |FAR_best - FRR_best|`,
    the right side computed in float64 from the float32 rates (or i == 0). Thresholds at
    midpoints repeat the rates of the score below them and never change the chosen rates.
    Let gap = the exact |FAR - FRR| and gap32 its float32 rounding. Since the kept value is
    always the gap of an earlier threshold, any i with gap32 < min(gap before i) is surely
    kept; after the last such i (L), the kept gap stays below gap[L] + one float32 ulp, so
    only thresholds with gap32 within 2^-20 of gap[L] can still be kept: a handful of
    near-ties, replayed exactly.
    """
    gap = np.abs(far.astype(np.float64) - frr.astype(np.float64))
    gap32 = np.abs(far - frr).astype(np.float64)
    earlier_min = np.concatenate(([np.inf], np.minimum.accumulate(gap)[:-1]))
    surely_kept = np.flatnonzero(gap32 < earlier_min)
    best = int(surely_kept[-1]) if len(surely_kept) else 0
    bound = gap[best] * (1 + 2.0**-20)
    for index in np.flatnonzero(gap32[best + 1:] < bound) + best + 1:
        if gap32[index] < gap[best]:
            best = int(index)
    return best


def _reported_threshold(groups: ScoreGroups, far, frr, best: int) -> float:
    """The threshold value SpeechBrain returns for the chosen rates.

    Its midpoint threshold (in the scores' precision) repeats the rates of the score below
    it and replaces that score when float32 |FAR - FRR| is below the exact gap.
    """
    score = groups.scores[best]
    if best + 1 == len(groups.scores):
        return float(score)
    low, high = groups.scores[best : best + 2].astype(groups.precision)
    midpoint = (low + high) / groups.precision.type(2)
    gap = abs(float(far[best]) - float(frr[best]))
    if float(abs(far[best] - frr[best])) < gap and midpoint < high:
        return float(midpoint)
    return float(score)
