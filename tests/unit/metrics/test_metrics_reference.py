"""Straightforward reference implementations of the metrics, written from the definitions
(docs/metrics.md "Conventions, and where they come from", BOSARIS, SpeechBrain, the Inria and ZEBRA toolkits) with
plain loops and no shared code with `pipeline.metrics`; the other metric tests compare
the fast implementations against them. The tests here pin the references themselves to
hand-computed values.
"""
from __future__ import annotations

import math

import numpy as np
import pytest


def sorted_labels(tar, non) -> tuple[np.ndarray, np.ndarray]:
    """Scores ascending with their labels, targets before tied non-targets (BOSARIS)."""
    scores = np.concatenate((np.asarray(tar, float), np.asarray(non, float)))
    labels = np.concatenate((np.ones(len(tar)), np.zeros(len(non))))
    order = np.argsort(scores, kind="mergesort")
    return scores[order], labels[order]


def naive_pav(values) -> tuple[list[float], list[int]]:
    """Pool-adjacent-violators on a sequence: fitted value of every element and block widths."""
    blocks: list[list[float]] = []  # [sum, width]
    for value in values:
        blocks.append([float(value), 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            total, width = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += width
    fitted = [total / width for total, width in blocks for _ in range(width)]
    return fitted, [width for _, width in blocks]


def reference_pav_llrs(tar, non, laplace: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per-trial PAV LLRs (ties pooled) in the input order, as BOSARIS / ZEBRA compute them."""
    n_tar, n_non = len(tar), len(non)
    scores = np.concatenate((np.asarray(tar, float), np.asarray(non, float)))
    labels = np.concatenate((np.ones(n_tar), np.zeros(n_non)))
    order = np.argsort(scores, kind="mergesort")
    ideal = list(labels[order])
    if laplace:
        ideal = [1.0, 0.0] + ideal + [1.0, 0.0]
    fitted, _ = naive_pav(ideal)
    if laplace:
        fitted = fitted[2:-2]
    with np.errstate(divide="ignore"):
        llr_sorted = np.log(np.array(fitted)) - np.log1p(-np.array(fitted)) - math.log(n_tar / n_non)
    llrs = np.empty(n_tar + n_non)
    llrs[order] = llr_sorted
    return llrs[:n_tar], llrs[n_tar:]


def reference_cllr(tar_llr, non_llr) -> float:
    """Cllr in bits, term by term."""
    tar_cost = sum(math.log2(1 + math.exp(-x)) if x != math.inf else 0.0 for x in tar_llr) / len(tar_llr)
    non_cost = sum(math.log2(1 + math.exp(x)) if x != -math.inf else 0.0 for x in non_llr) / len(non_llr)
    return (tar_cost + non_cost) / 2


def reference_min_cllr(tar, non) -> float:
    return reference_cllr(*reference_pav_llrs(tar, non))


def reference_rocch_eer(tar, non) -> float:
    """BOSARIS rocch + rocch2eer: ROCCH vertices from PAV blocks, max over hull segments."""
    n_tar, n_non = len(tar), len(non)
    _, labels = sorted_labels(tar, non)
    _, widths = naive_pav(labels)
    pmiss, pfa = [0.0], [1.0]
    left = 0
    for width in widths:
        left += width
        miss = labels[:left].sum()
        pmiss.append(miss / n_tar)
        pfa.append((n_non - (left - miss)) / n_non)
    eer = 0.0
    for i in range(len(pfa) - 1):
        xy = np.array([[pfa[i], pmiss[i]], [pfa[i + 1], pmiss[i + 1]]])
        if min(abs(xy[0, 0] - xy[1, 0]), abs(xy[0, 1] - xy[1, 1])) == 0:
            candidate = 0.0
        else:
            line = np.linalg.solve(xy, np.ones(2))
            candidate = 1 / line.sum()
        eer = max(eer, candidate)
    return eer


def reference_eer_threshold(tar, non) -> tuple[float, float]:
    """SpeechBrain 1.1.2 `EER`, transcribed with numpy: float32 rates, its comparison."""
    tar, non = np.asarray(tar), np.asarray(non)
    dtype = np.float32 if tar.dtype == non.dtype == np.float32 else np.float64
    tar, non = tar.astype(dtype), non.astype(dtype)
    unique = np.unique(np.concatenate((tar, non)))
    thresholds = np.sort(np.concatenate((unique, (unique[:-1] + unique[1:]) / dtype(2))))
    best, final_frr, final_far = 0, 0.0, 0.0
    for i, threshold in enumerate(thresholds):
        frr = np.float32((tar <= threshold).sum()) / np.float32(len(tar))
        far = np.float32((non > threshold).sum()) / np.float32(len(non))
        if float(abs(far - frr)) < abs(final_far - final_frr) or i == 0:
            best, final_frr, final_far = i, float(frr), float(far)
    return (final_far + final_frr) / 2, float(thresholds[best])


def reference_linkability(mated, nonmated, omega=1.0, n_bins=None) -> float:
    """The Inria anonymization-metrics `linkability`, as docs/metrics.md states it."""
    if n_bins is None:
        n_bins = min(len(mated) // 10, 100)
    edges = np.linspace(min(min(mated), min(nonmated)), max(max(mated), max(nonmated)), n_bins + 1)
    centres = (edges[1:] + edges[:-1]) / 2
    p_m = np.histogram(mated, bins=edges, density=True)[0]
    p_nm = np.histogram(nonmated, bins=edges, density=True)[0]
    lr = np.divide(p_m, p_nm, out=np.ones_like(p_m), where=p_nm != 0)
    local = 2 * (omega * lr / (1 + omega * lr)) - 1
    local[omega * lr <= 1] = 0
    local[(p_nm == 0) & (p_m != 0)] = 1
    return float(np.trapezoid(y=local * p_m, x=centres))


def reference_d_ece(tar, non) -> float:
    """ZEBRA `get_delta_ECE` on PAV LLRs (Z set to 0 within 1e-6 of LLR 0, as ZEBRA does)."""

    def integral(llrs):
        contributions = []
        for x in llrs:
            if math.isinf(x):
                contributions.append(0.0)
            elif abs(x) <= 1e-6:
                contributions.append(-0.5)
            else:
                b = math.expm1(x)
                contributions.append((x - b) / b**2)
        return 0.25 + sum(contributions) / len(contributions) / 2

    tar_llr, non_llr = reference_pav_llrs(tar, non)
    return (integral(tar_llr) + integral(-non_llr)) / math.log(2)


def reference_l_w(tar, non, monotonicity_epsilon: float = 1e-6) -> float:
    """ZEBRA's max |LLR| / ln 10, step by step as its `optimal_llr(laplace=True)` goes: a
    stable sort of [non-targets, targets] (tied non-targets first, so ties are not pooled),
    PAV with a pseudo target and non-target at both ends, the LLR of every real trial plus
    `i * epsilon / N` at sorted position i."""
    n_tar, n_non = len(tar), len(non)
    scores = np.concatenate((np.asarray(non, float), np.asarray(tar, float)))
    labels = np.concatenate((np.zeros(n_non), np.ones(n_tar)))
    ideal = [1.0, 0.0] + list(labels[np.argsort(scores, kind="mergesort")]) + [1.0, 0.0]
    fitted = np.array(naive_pav(ideal)[0][2:-2])
    with np.errstate(divide="ignore"):
        llrs = np.log(fitted) - np.log1p(-fitted) - math.log(n_tar / n_non)
    llrs = llrs + np.arange(n_tar + n_non) * monotonicity_epsilon / (n_tar + n_non)
    return float(np.abs(llrs).max() / math.log(10))


def reference_min_dcf(tar, non, p_target=0.01, c_miss=1.0, c_fa=1.0) -> float:
    """Minimum cost over every threshold (accept all, then each distinct score)."""
    tar, non = np.asarray(tar, float), np.asarray(non, float)
    costs = []
    for threshold in np.concatenate(([-np.inf], np.unique(np.concatenate((tar, non))))):
        pmiss = (tar <= threshold).mean()
        pfa = (non > threshold).mean()
        costs.append(c_miss * p_target * pmiss + c_fa * (1 - p_target) * pfa)
    return min(costs)


TABLE1 = {1: "NNHNHNHH", 2: "NNHNHHNH", 3: "NNHNHHHN"}


def table1_case(case: int) -> tuple[np.ndarray, np.ndarray]:
    """maouche2020 Table 1: scores 1..8 with the labels of one case."""
    scores = np.arange(1, 9, dtype=float)
    mated = np.array([c == "H" for c in TABLE1[case]])
    return scores[mated], scores[~mated]


def test_naive_pav_pools_violators():
    fitted, widths = naive_pav([0, 0, 1, 0, 1, 0, 1, 1])
    assert fitted == [0, 0, 0.5, 0.5, 0.5, 0.5, 1, 1]
    assert widths == [2, 4, 2]


def test_reference_min_cllr_matches_table1_by_hand():
    # case 2 by hand: PAV bins {N,N}, {H,N}, {H,H,N}, {H}; LLRs -inf, 0, ln 2, +inf
    by_hand = ((1 + 2 * math.log2(1.5)) / 4 + (1 + math.log2(3)) / 4) / 2
    assert reference_min_cllr(*table1_case(2)) == pytest.approx(by_hand, rel=1e-12)


def test_reference_rocch_eer_on_table1():
    for case in TABLE1:
        assert reference_rocch_eer(*table1_case(case)) == pytest.approx(0.25)


def test_reference_eer_threshold_on_separated_scores():
    assert reference_eer_threshold([0.6, 0.7, 0.8, 0.5], [0.4, 0.3, 0.2, 0.1])[0] == 0.0


def test_reference_linkability_of_identical_sets_is_zero():
    scores = np.arange(40.0)
    assert reference_linkability(scores, scores) == 0.0


def test_reference_min_dcf_of_separated_scores_is_zero():
    assert reference_min_dcf([2.0, 3.0], [0.0, 1.0]) == 0.0
