"""The shared core: scores grouped by distinct value, and the PAV fit on those groups.

Every threshold-free metric starts from the same two steps, both O(n log n) time and
O(n) memory:

1. `group_scores` sorts each class once and counts target and non-target trials at each
   distinct score. Tied target / non-target scores fall in one group, so PAV pools them
   (BOSARIS `rocch` sorts targets before tied non-targets, which has the same effect).
2. `pav` fits the isotonic (non-decreasing) target posterior over those groups: adjacent
   groups with equal target fraction are merged first, scipy's C PAV pools the rest, and a
   final pass over the (few) bins makes the pooling exact with integer arithmetic.

The ROC convex hull (ROCCH) vertices are the PAV bin boundaries.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import isotonic_regression

from pipeline.metrics.inputs import as_scores


@dataclass(frozen=True)
class ScoreGroups:
    """Target and non-target counts at each distinct score, in ascending score order."""

    scores: np.ndarray
    targets: np.ndarray
    nontargets: np.ndarray
    tar_sorted: np.ndarray
    non_sorted: np.ndarray
    precision: np.dtype

    @property
    def n_target(self) -> int:
        return len(self.tar_sorted)

    @property
    def n_nontarget(self) -> int:
        return len(self.non_sorted)


@dataclass(frozen=True)
class PavBins:
    """Bins of a PAV fit, ascending, with strictly increasing target fraction.

    `group_start[k]` is the index of the first score group of bin k.
    """

    targets: np.ndarray
    nontargets: np.ndarray
    group_start: np.ndarray


def group_scores(tar, non) -> ScoreGroups:
    """Validate both score sets and group them by distinct score value."""
    tar = as_scores(tar, "target")
    non = as_scores(non, "non-target")
    precision = np.dtype(np.float32 if tar.dtype == non.dtype == np.float32 else np.float64)
    tar_sorted = np.sort(tar).astype(np.float64, copy=False)
    non_sorted = np.sort(non).astype(np.float64, copy=False)
    merged, is_target = _merge(tar_sorted, non_sorted)

    starts = np.flatnonzero(np.concatenate(([True], merged[1:] != merged[:-1])))
    bounds = np.append(starts, len(merged))
    targets_through = np.cumsum(is_target)[bounds[1:] - 1]
    targets = np.diff(targets_through, prepend=0)
    return ScoreGroups(
        scores=merged[starts],
        targets=targets,
        nontargets=np.diff(bounds) - targets,
        tar_sorted=tar_sorted,
        non_sorted=non_sorted,
        precision=precision,
    )


def _merge(tar_sorted: np.ndarray, non_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge two sorted arrays, targets before tied non-targets; also return the target mask."""
    n_tar, n_non = len(tar_sorted), len(non_sorted)
    is_target = np.zeros(n_tar + n_non, dtype=bool)
    if n_tar <= n_non:
        positions = np.searchsorted(non_sorted, tar_sorted, side="left") + np.arange(n_tar)
        is_target[positions] = True
    else:
        positions = np.searchsorted(tar_sorted, non_sorted, side="right") + np.arange(n_non)
        is_target[:] = True
        is_target[positions] = False
    merged = np.empty(n_tar + n_non)
    merged[is_target] = tar_sorted
    merged[~is_target] = non_sorted
    return merged, is_target


def trial_groups(groups: ScoreGroups, tar, non) -> tuple[np.ndarray, np.ndarray]:
    """Score-group index of every target and non-target trial, in input order.

    Found by sorting (a binary search of 10^7 unsorted scores is cache-bound and ~20x slower).
    """
    merged, is_target = _merge(groups.tar_sorted, groups.non_sorted)
    group = np.cumsum(np.concatenate(([True], merged[1:] != merged[:-1]))) - 1
    return _unsort(tar, group[is_target]), _unsort(non, group[~is_target])


def _unsort(scores, values_in_score_order: np.ndarray) -> np.ndarray:
    out = np.empty_like(values_in_score_order)
    out[np.argsort(np.asarray(scores, dtype=np.float64))] = values_in_score_order
    return out


def pav(targets: np.ndarray, nontargets: np.ndarray) -> PavBins:
    """Isotonic regression of the target fraction over ordered groups of trials.

    `targets[i]`, `nontargets[i]` count the trials of group i (each group non-empty).
    """
    targets = np.asarray(targets, dtype=np.int64)
    nontargets = np.asarray(nontargets, dtype=np.int64)
    equal_to_next = targets[:-1] * nontargets[1:] == targets[1:] * nontargets[:-1]
    run_start = np.flatnonzero(np.concatenate(([True], ~equal_to_next)))
    run_tar = np.add.reduceat(targets, run_start)
    run_size = np.add.reduceat(targets + nontargets, run_start)
    fit = isotonic_regression(run_tar / run_size, weights=run_size.astype(np.float64))
    block_start = run_start[fit.blocks[:-1]]
    return _exact_pav(
        np.add.reduceat(targets, block_start), np.add.reduceat(nontargets, block_start), block_start
    )


def _exact_pav(targets: np.ndarray, nontargets: np.ndarray, group_start: np.ndarray) -> PavBins:
    """Pool bins until target fractions strictly increase, comparing exactly in integers."""
    out_tar: list[int] = []
    out_non: list[int] = []
    out_start: list[int] = []
    for tar, non, start in zip(targets.tolist(), nontargets.tolist(), group_start.tolist()):
        # pool while the previous fraction is >= this one: t_p / (t_p + n_p) >= t / (t + n)
        while out_tar and out_tar[-1] * non >= tar * out_non[-1]:
            tar += out_tar.pop()
            non += out_non.pop()
            start = out_start.pop()
        out_tar.append(tar)
        out_non.append(non)
        out_start.append(start)
    return PavBins(
        targets=np.array(out_tar, dtype=np.int64),
        nontargets=np.array(out_non, dtype=np.int64),
        group_start=np.array(out_start, dtype=np.int64),
    )


def pav_bins(groups: ScoreGroups, laplace: bool = False) -> PavBins:
    """PAV over score groups; with `laplace`, one pseudo target and one pseudo non-target
    are added below the lowest and above the highest score (Laplace's rule of succession,
    as in ZEBRA), and `group_start` then counts the low pseudo group as group 0."""
    if not laplace:
        return pav(groups.targets, groups.nontargets)
    one = np.ones(1, dtype=np.int64)
    return pav(
        np.concatenate((one, groups.targets, one)), np.concatenate((one, groups.nontargets, one))
    )


def bin_llrs(bins: PavBins, n_target: int, n_nontarget: int) -> np.ndarray:
    """Natural-log LLR of each bin: logit(bin posterior) - log(Nt / Nn); +-inf for pure bins.

    Computed as log((t * Nn) / (n * Nt)), so equal odds give exactly 0.
    """
    tar = bins.targets.astype(np.float64)
    non = bins.nontargets.astype(np.float64)
    with np.errstate(divide="ignore"):
        return np.log((tar * n_nontarget) / (non * n_target))


def rocch(bins: PavBins, n_target: int, n_nontarget: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer ROCCH vertices (misses, false alarms), from accept-all to reject-all."""
    misses = np.concatenate(([0], np.cumsum(bins.targets)))
    false_alarms = n_nontarget - np.concatenate(([0], np.cumsum(bins.nontargets)))
    return misses, false_alarms
