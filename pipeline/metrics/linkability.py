"""Linkability D<->sys (Gomez-Barrero et al. 2017), as the Inria anonymization metrics
used by VPC 2020-2024 compute it (maouche2020 §3.3)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from pipeline.metrics.inputs import ScoreError, UndefinedMetricError
from pipeline.metrics.roc import group_scores


def linkability(tar, non, omega: float = 1.0, n_bins: int | None = None) -> float:
    """Global linkability D_sys of mated (target) against non-mated scores, in [0, 1].

    Inria defaults: n_bins = min(n_mated // 10, 100); edges linspace(min, max of all
    scores, n_bins + 1); per-class density histograms; LR = p_m / p_nm (1 where p_nm = 0);
    D = 2 omega LR / (1 + omega LR) - 1 where omega LR > 1, else 0, and D = 1 where
    p_nm = 0 < p_m; D_sys = trapezoid integral of D p_m over the bin centres.

    Raises `UndefinedMetricError` with fewer than 2 bins (fewer than 20 mated scores with
    the default): no bins at all below 10, and with one bin the trapezoid over a single
    centre is 0 whatever the scores. When every score is equal the two distributions
    coincide and D_sys = 0.
    """
    groups = group_scores(tar, non)
    return linkability_from_sorted(groups.tar_sorted, groups.non_sorted, omega, n_bins)


def linkability_from_sorted(mated, nonmated, omega: float = 1.0, n_bins: int | None = None) -> float:
    """`linkability` on ascending float64 arrays (histograms by binary search)."""
    if not (np.isfinite(omega) and omega > 0):
        raise ScoreError(f"linkability: omega must be a positive number, got {omega}")
    n_mated = len(mated)
    if n_bins is None:
        n_bins = min(n_mated // 10, 100)
        if n_bins == 0:
            raise UndefinedMetricError(
                f"linkability needs at least 10 mated (target) scores, got {n_mated} "
                "(Inria default n_bins = min(n_mated // 10, 100) gives no bin)"
            )
    if int(n_bins) != n_bins or n_bins < 1:
        raise ScoreError(f"linkability: n_bins must be a positive integer, got {n_bins}")
    if n_bins < 2:
        raise UndefinedMetricError(
            f"linkability with 1 histogram bin is 0 by construction (trapezoid over a single bin "
            f"centre); the default needs at least 20 mated scores, got {n_mated}"
        )
    grid = linkability_grid(mated, nonmated, omega, n_bins)
    if grid is None:
        return 0.0
    return float(np.trapezoid(grid.local * grid.p_mated, x=grid.centres))


@dataclass(frozen=True)
class LinkabilityGrid:
    """The histogram grid of D_sys: bin centres, local linkability D(s) per bin, the mated
    density, and `rescale`, the map from scores to the grid's axis (the identity unless the
    scores' range over- or underflows)."""

    edges: np.ndarray
    centres: np.ndarray
    local: np.ndarray
    p_mated: np.ndarray
    rescale: Callable[[np.ndarray], np.ndarray]


def linkability_grid(mated, nonmated, omega: float, n_bins: int) -> LinkabilityGrid | None:
    """The grid of `linkability_from_sorted` (ascending inputs, n_bins >= 2 checked); None
    when every score is equal (D_sys = 0)."""
    low, high = min(mated[0], nonmated[0]), max(mated[-1], nonmated[-1])
    if low == high:
        return None
    steps = []
    if high / 4 - low / 4 > 1e307:  # high - low would overflow: divide by 4, exact (a power of two)
        mated, nonmated, low, high = mated / 4, nonmated / 4, low / 4, high / 4
        steps.append(lambda x: x / 4)
    if (high - low) / n_bins < 1e-290:  # densities would overflow: rescale (D_sys is scale invariant)
        mated, nonmated = (mated - low) / (high - low), (nonmated - low) / (high - low)
        steps.append(lambda x, low=low, high=high: (x - low) / (high - low))
        low, high = 0.0, 1.0
    edges = np.linspace(low, high, int(n_bins) + 1)
    centres = (edges[1:] + edges[:-1]) / 2
    p_mated = _density(mated, edges)
    p_nonmated = _density(nonmated, edges)
    lr = np.divide(p_mated, p_nonmated, out=np.ones_like(p_mated), where=p_nonmated != 0)
    local = 2 * (omega * lr / (1 + omega * lr)) - 1
    local[omega * lr <= 1] = 0
    local[(p_nonmated == 0) & (p_mated != 0)] = 1

    def rescale(x: np.ndarray) -> np.ndarray:
        for step in steps:
            x = step(x)
        return x

    return LinkabilityGrid(edges, centres, local, p_mated, rescale)


def density(sorted_scores: np.ndarray, grid: LinkabilityGrid) -> np.ndarray:
    """The density of ascending scores on a linkability grid."""
    return _density(grid.rescale(sorted_scores), grid.edges)


def _density(sorted_scores: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """`np.histogram(scores, edges, density=True)[0]` on sorted scores, in O(bins log n)."""
    below = np.concatenate(
        (np.searchsorted(sorted_scores, edges[:-1], "left"), np.searchsorted(sorted_scores, edges[-1:], "right"))
    )
    counts = np.diff(below)
    return counts / np.diff(edges) / counts.sum()
