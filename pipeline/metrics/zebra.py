"""ZEBRA (Nautsch et al. 2020; noe2022 §5): expected and worst-case privacy disclosure,
categorical tags, and empirical cross-entropy (ECE) profiles."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.special import expit

from pipeline.metrics.inputs import as_llrs
from pipeline.metrics.roc import PavBins, ScoreGroups, bin_llrs, group_scores, pav, pav_bins

LN2 = np.log(2.0)
LN10 = np.log(10.0)
EPS = float(np.finfo(float).eps)
MONOTONICITY_EPSILON = 1e-6  # the ZEBRA reference code's `monotonicity_epsilon`
DEFAULT_PRIOR_LOG_ODDS = np.linspace(-10, 10, 201)

# (tag, lower, upper): lower < l_w <= upper, l_w in log10 units, the ZEBRA reference code's
# convention (its tag is the range whose lower bound alone is below l_w); noe2022 Table 1
# writes lower <= l_w < upper, which differs only for l_w exactly on a bound. The reference
# code puts the bound between "0" and "A" at machine epsilon.
TAG_RANGES = (
    ("0", 0.0, EPS),
    ("A", EPS, 1.0),
    ("B", 1.0, 2.0),
    ("C", 2.0, 4.0),
    ("D", 4.0, 5.0),
    ("E", 5.0, 6.0),
    ("F", 6.0, np.inf),
)


class Zebra(NamedTuple):
    """ZEBRA metrics: D_ECE in bits, l_w = max |LLR| in log10 units, and its tag."""

    d_ece: float
    l_w: float
    tag: str


def zebra(tar, non) -> Zebra:
    """Expected (D_ECE) and worst-case (l_w, tag) privacy disclosure.

    D_ECE integrates the gap between the prior and the PAV-calibrated posterior ECE over
    all priors (noe2022 eq. 13); l_w is the worst case as the ZEBRA reference code computes
    it (`worst_case_disclosure`).

    >>> round(zebra([1.0, 2.0], [1.0, 2.0]).l_w, 4)  # ties: the reference orders non-targets first
    0.301
    """
    groups = group_scores(tar, non)
    return zebra_from_groups(groups, pav_bins(groups))


def zebra_from_groups(groups: ScoreGroups, bins: PavBins) -> Zebra:
    """ZEBRA from precomputed score groups and their PAV bins."""
    n_tar, n_non = groups.n_target, groups.n_nontarget
    d_ece = weighted_d_ece(bin_llrs(bins, n_tar, n_non), bins.targets, bins.nontargets, n_tar, n_non)
    l_w = worst_case_disclosure(groups)
    return Zebra(d_ece=d_ece, l_w=l_w, tag=zebra_tag(l_w))


def worst_case_disclosure(groups: ScoreGroups) -> float:
    """l_w (log10) exactly as the ZEBRA reference code (Nautsch et al.; `optimal_llr` with
    `laplace=True`, then max |LLR| / ln 10) computes it, ties included.

    The reference sorts the trials by score with a stable sort of [non-targets, targets],
    so tied non-targets come before tied targets and ties are *not* pooled; runs PAV over
    that sequence with a pseudo target and non-target at each end (Laplace); takes the LLR
    logit(posterior) - log(Nt / Nn) of every real trial; adds `i · 1e-6 / N` at sorted
    position i (its monotonicity term); l_w is the largest |LLR| / ln 10. Pooling ties (as
    D_ECE, EER and Cllr do) would give less extreme LLRs: equal score sets have l_w = 0
    pooled, 0.301 in the reference.
    """
    return float(reference_llrs(groups).max() / LN10)


def reference_llrs(groups: ScoreGroups) -> np.ndarray:
    """|LLR| (natural log) of every trial as the ZEBRA reference code computes it for l_w,
    in its sorted order: position i holds non-target `i - (targets before it)` or target
    `i - (non-targets before it)` of the ascending classes, non-targets first within a tie
    (see `worst_case_disclosure`). Within a run of one class the LLR is constant plus the
    increasing monotonicity term, so its largest |LLR| is at one end of the run."""
    tar, non = groups.tar_sorted, groups.non_sorted
    n_tar, n_non = len(tar), len(non)
    total = n_tar + n_non
    is_target = np.zeros(total, dtype=bool)  # sorted order, non-targets before tied targets
    is_target[np.searchsorted(non, tar, side="right") + np.arange(n_tar)] = True
    run_start = np.flatnonzero(np.concatenate(([True], is_target[1:] != is_target[:-1])))
    run_size = np.diff(np.append(run_start, total))
    run_tar = np.where(is_target[run_start], run_size, 0)
    one = np.ones(1, dtype=np.int64)
    bins = pav(np.concatenate((one, run_tar, one)), np.concatenate((one, run_size - run_tar, one)))
    runs_per_bin = np.diff(np.append(bins.group_start, len(run_start) + 2))
    run_llr = np.repeat(bin_llrs(bins, n_tar, n_non), runs_per_bin)[1:-1]  # pseudo groups dropped
    step = MONOTONICITY_EPSILON / total
    return np.abs(np.repeat(run_llr, run_size) + np.arange(total) * step)


def zebra_tag(l_w: float) -> str:
    """Categorical tag of a worst-case disclosure l_w (log10): 0, A, ..., F."""
    for tag, lower, upper in TAG_RANGES:
        if lower < l_w <= upper:
            return tag
    return "0"


def zebra_z(llr) -> np.ndarray:
    """Z(l) = 1/2 + (l - (e^l - 1)) / (e^l - 1)^2 of noe2022 eq. 13, accurate everywhere.

    Near 0 a Taylor series replaces the cancelling closed form (Z(0) = 0); Z(+inf) = 1/2,
    Z(-inf) = -inf.
    """
    llr = np.asarray(llr, dtype=np.float64)
    out = np.empty_like(llr)
    small = np.abs(llr) < 1e-2
    huge = llr > 700
    rest = ~small & ~huge
    x = llr[small]
    out[small] = x * (1 / 3 + x * (-1 / 12 + x * (1 / 180 + x * (1 / 720 + x * (-1 / 5040 - x / 30240)))))
    out[huge] = 0.5
    lr_minus_one = np.expm1(llr[rest])
    out[rest] = 0.5 + (llr[rest] - lr_minus_one) / lr_minus_one**2
    return out


def d_ece(tar_llr, non_llr) -> float:
    """D_ECE (bits) of given natural-log LLRs, eq. 13 of noe2022, without calibrating them.

    On PAV-calibrated LLRs this is the expected privacy disclosure; on LLRs calibrated on
    another run it is the calibration extension C_ECE (negative: worse than no evidence).
    """
    tar = as_llrs(tar_llr, "target")
    non = as_llrs(non_llr, "non-target")
    return weighted_d_ece(
        np.concatenate((tar, non)),
        np.concatenate((np.ones(len(tar)), np.zeros(len(non)))),
        np.concatenate((np.zeros(len(tar)), np.ones(len(non)))),
        len(tar),
        len(non),
    )


def weighted_d_ece(llrs, tar_counts, non_counts, n_target: int, n_nontarget: int) -> float:
    """D_ECE of LLR values carrying `tar_counts` targets and `non_counts` non-targets each."""
    tar_counts = np.asarray(tar_counts, dtype=np.float64)
    non_counts = np.asarray(non_counts, dtype=np.float64)
    llrs = np.asarray(llrs, dtype=np.float64)
    has_tar, has_non = tar_counts > 0, non_counts > 0
    tar_term = np.sum(tar_counts[has_tar] * zebra_z(llrs[has_tar])) / n_target
    non_term = np.sum(non_counts[has_non] * zebra_z(-llrs[has_non])) / n_nontarget
    return float((tar_term + non_term) / (2 * LN2))


@dataclass(frozen=True)
class EceProfile:
    """ECE (bits) against prior log-odds: no evidence, PAV-calibrated, and the raw scores."""

    prior_log_odds: np.ndarray
    reference: np.ndarray
    calibrated: np.ndarray
    actual: np.ndarray | None


def ece_profile(tar, non, prior_log_odds=DEFAULT_PRIOR_LOG_ODDS, actual: bool = True) -> EceProfile:
    """ZEBRA's ECE profiles (noe2022 eqs. 11-12, Fig. 7).

    `reference` is the prior entropy (perfect privacy), `calibrated` the ECE of the
    PAV-calibrated LLRs (its area below `reference` is D_ECE), `actual` the ECE of the
    scores taken as LLRs (computed only with `actual`; O(n x priors)).
    """
    plo = np.asarray(prior_log_odds, dtype=np.float64)
    groups = group_scores(tar, non)
    bins = pav_bins(groups)
    llrs = bin_llrs(bins, groups.n_target, groups.n_nontarget)
    calibrated = weighted_ece(llrs, bins.targets, llrs, bins.nontargets, plo)
    raw = None
    if actual:
        raw = weighted_ece(groups.scores, groups.targets, groups.scores, groups.nontargets, plo)
    return EceProfile(plo, ece(np.zeros(1), np.zeros(1), plo), calibrated, raw)


def ece(tar_llr, non_llr, prior_log_odds) -> np.ndarray:
    """ECE in bits at each prior log-odds: pi <-log2 sigma(a + logit pi)>_tar
    + (1 - pi) <-log2 sigma(-b - logit pi)>_non (noe2022 eq. 11)."""
    tar = as_llrs(tar_llr, "target")
    non = as_llrs(non_llr, "non-target")
    return weighted_ece(tar, np.ones(len(tar)), non, np.ones(len(non)), prior_log_odds)


def weighted_ece(tar_llrs, tar_counts, non_llrs, non_counts, prior_log_odds) -> np.ndarray:
    """ECE of LLR values with per-value counts (zero counts ignored)."""
    tar_counts = np.asarray(tar_counts, dtype=np.float64)
    non_counts = np.asarray(non_counts, dtype=np.float64)
    tar_keep, non_keep = tar_counts > 0, non_counts > 0
    tar_llrs, tar_counts = np.asarray(tar_llrs)[tar_keep], tar_counts[tar_keep]
    non_llrs, non_counts = np.asarray(non_llrs)[non_keep], non_counts[non_keep]
    profile = []
    for plo in np.atleast_1d(np.asarray(prior_log_odds, dtype=np.float64)):
        p_tar = expit(plo)
        tar_cost = np.sum(tar_counts * np.logaddexp(0.0, -(tar_llrs + plo))) / tar_counts.sum()
        non_cost = np.sum(non_counts * np.logaddexp(0.0, non_llrs + plo)) / non_counts.sum()
        profile.append((p_tar * tar_cost + (1 - p_tar) * non_cost) / LN2)
    return np.array(profile)
