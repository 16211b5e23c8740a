"""Checks on the score arrays every metric receives, and the two errors metrics raise."""
from __future__ import annotations

import numpy as np

from pipeline.core.errors import VpevalError


class ScoreError(VpevalError, ValueError):
    """Scores a metric cannot use: empty, non-finite, not one-dimensional."""


class UndefinedMetricError(VpevalError, ValueError):
    """The metric has no value for these (legal) scores; the message says why.

    `summary()` turns it into a None value plus an entry in its `notes`.
    """


def as_scores(values, name: str) -> np.ndarray:
    """Return `values` as a 1-D float array, refusing empty or non-finite input.

    float32 input stays float32 (the threshold-sweep EER compares scores at their own
    precision, as SpeechBrain does); anything else becomes float64.
    """
    array = np.asarray(values)
    if array.dtype != np.float32:
        try:
            array = array.astype(np.float64, copy=False)
        except (TypeError, ValueError):
            raise ScoreError(f"{name} scores are not numeric (dtype {array.dtype})") from None
    if array.ndim != 1:
        raise ScoreError(f"{name} scores must be a 1-D array, got shape {array.shape}")
    if array.size == 0:
        raise ScoreError(f"no {name} scores: both classes are needed")
    finite = np.isfinite(array)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise ScoreError(
            f"{name} scores: {int((~finite).sum())} value(s) are NaN or infinite "
            f"(first at index {bad}: {array[bad]})"
        )
    return array


def as_llrs(values, name: str) -> np.ndarray:
    """Return LLRs as a non-empty 1-D float64 array; +-inf is allowed (certainty), NaN is not."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ScoreError(f"{name} LLRs must be a non-empty 1-D array, got shape {array.shape}")
    if np.isnan(array).any():
        raise ScoreError(f"{name} LLRs contain NaN (first at index {int(np.flatnonzero(np.isnan(array))[0])})")
    return array


def first_repeat(first: np.ndarray, second: np.ndarray) -> tuple[int, int] | None:
    """Indices (earlier, later) of the first pair (first[i], second[i]) that repeats an
    earlier one, or None when all pairs are distinct."""
    pair = np.char.add(np.char.add(first.astype(str), "\t"), second.astype(str))
    order = np.argsort(pair, kind="stable")
    repeated = np.flatnonzero(pair[order][1:] == pair[order][:-1])
    if not len(repeated):
        return None
    earliest = repeated[np.argmin(order[repeated + 1])]
    return int(order[earliest]), int(order[earliest + 1])
