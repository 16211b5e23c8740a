"""Unweighted average recall (UAR) of emotion labels, the utility metric of VPC 2024's emotion
recognition: the mean over the true classes of each one's recall, so a rare emotion counts as
much as a frequent one (`pipeline.recognition.emotion` gives the labels).
"""
from __future__ import annotations

import numpy as np


def unweighted_average_recall(truth: list[str], predicted: list[str]) -> float:
    """Mean over the true classes of the share of their utterances labelled right.

    >>> unweighted_average_recall(["a", "a", "a", "b"], ["a", "a", "b", "a"])
    0.3333333333333333
    """
    return float(np.mean(list(class_recalls(truth, predicted).values())))


def class_recalls(truth: list[str], predicted: list[str]) -> dict[str, float]:
    """Share of each true class's utterances labelled right (VPC 2026's `ACC_<label>`).

    >>> class_recalls(["a", "a", "b"], ["a", "b", "b"])
    {'a': 0.5, 'b': 1.0}
    """
    truth, predicted = np.asarray(truth), np.asarray(predicted)
    return {str(c): float(np.mean(predicted[truth == c] == c)) for c in sorted(set(truth.tolist()))}
