"""Cllr (Brümmer & du Preez 2006) and min Cllr (Cllr after PAV calibration), in bits."""
from __future__ import annotations

import numpy as np

from pipeline.metrics.inputs import as_scores
from pipeline.metrics.roc import PavBins, bin_llrs, group_scores, pav_bins, trial_groups

LN2 = np.log(2.0)


def cllr(tar, non) -> float:
    """Cllr of scores read as natural-log LLRs, in bits.

    Cllr = (mean log2(1 + e^-s) over targets + mean log2(1 + e^s) over non-targets) / 2.
    Computed with logaddexp and means of scaled costs, so it stays finite for any finite
    score, up to +-1.8e308 (the BOSARIS-derived Python ports return inf once a posterior
    underflows to 0).

    >>> round(cllr([0.0], [0.0]), 12)
    1.0
    """
    tar = as_scores(tar, "target").astype(np.float64, copy=False)
    non = as_scores(non, "non-target").astype(np.float64, copy=False)
    return float(_mean(np.logaddexp(0.0, -tar)) / (2 * LN2) + _mean(np.logaddexp(0.0, non)) / (2 * LN2))


def _mean(costs: np.ndarray) -> float:
    """Mean of non-negative costs without overflow (a sum of costs near 1e308 would)."""
    largest = float(costs.max())
    return largest * float(np.mean(costs / largest)) if largest > 0 else 0.0


def min_cllr(tar, non) -> float:
    """Cllr of the PAV-calibrated LLRs llr = logit(p_pav) - log(Nt/Nn), in bits.

    Tied target / non-target scores are pooled. 1 means no information, 0 perfect
    separation. Invariant under any strictly increasing transform of the scores.

    >>> min_cllr([3, 5, 7, 8], [1, 2, 4, 6])
    0.5
    """
    groups = group_scores(tar, non)
    return cllr_of_bins(pav_bins(groups), groups.n_target, groups.n_nontarget)


def cllr_of_bins(bins: PavBins, n_target: int, n_nontarget: int) -> float:
    """min Cllr from PAV bins, each bin's costs in closed form.

    A bin with t targets and n non-targets has LLR log(t Nn / (n Nt)), so a target in it
    costs log(1 + n Nt / (t Nn)) and a non-target log(1 + t Nn / (n Nt)) nats.
    """
    tar = bins.targets.astype(np.float64)
    non = bins.nontargets.astype(np.float64)
    mixed = (tar > 0) & (non > 0)
    tar, non = tar[mixed], non[mixed]
    target_cost = np.sum(tar * np.log1p((non * n_target) / (tar * n_nontarget))) / n_target
    nontarget_cost = np.sum(non * np.log1p((tar * n_nontarget) / (non * n_target))) / n_nontarget
    return float((target_cost + nontarget_cost) / (2 * LN2))


def pav_llrs(tar, non, laplace: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per-trial PAV-calibrated LLRs (natural log), in the input order.

    With `laplace`, the PAV includes one pseudo target and one pseudo non-target at each
    end (ZEBRA, noe2022 footnote 6), so every LLR is finite; the prior removed is still
    the real Nt / Nn.
    """
    groups = group_scores(tar, non)
    bins = pav_bins(groups, laplace=laplace)
    llrs = bin_llrs(bins, groups.n_target, groups.n_nontarget)
    offset = 1 if laplace else 0  # with Laplace, group 0 is the low pseudo group
    bin_of_group = np.repeat(
        np.arange(len(llrs)), np.diff(np.append(bins.group_start, len(groups.scores) + 2 * offset))
    )[offset : offset + len(groups.scores)]
    tar_group, non_group = trial_groups(groups, tar, non)
    return llrs[bin_of_group[tar_group]], llrs[bin_of_group[non_group]]
