"""Unweighted average recall (UAR) of emotion labels, the utility metric of VPC 2024's emotion
recognition: the mean over the true classes of each one's recall, so a rare emotion counts as
much as a frequent one (`pipeline.recognition.emotion` gives the labels).

Three rules (`utility.uar_rule`): `pooled` (the default) takes every utterance of the set at
once; `vpc` is what VPC 2024 and VPC 2026 Track 1 compute (`evaluate_ser` with SpeechBrain
fold models): a UAR per speaker, then their mean (and, as VPC 2026's `ACC_<label>`, each class's
recall per speaker, then its mean over the speakers who have that class); `vpc_track2` is VPC
2026 Track 2's (`evaluate_ser` with emotion2vec+): every utterance labelled ang, hap, neu or
sad at once (the others left out), scikit-learn's macro recall, so a class predicted but never
true counts as a recall of 0.
"""
from __future__ import annotations

import numpy as np

from pipeline.core.errors import VpevalError

UAR_RULES = ("pooled", "vpc", "vpc_track2")  # utility.uar_rule
TRACK2_CLASSES = ("ang", "hap", "neu", "sad")  # the labels VPC 2026 Track 2 scores (its IEMOCAP_LABELS)


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


def speaker_recalls(truth: list[str], predicted: list[str], speakers: list[str]) -> list[tuple[dict[str, float], int]]:
    """Per speaker (in order of first appearance): the recalls of its true classes, and how many
    classes are predicted for it but never true (each a recall of 0 in sklearn's macro recall)."""
    truth, predicted, speakers = np.asarray(truth), np.asarray(predicted), np.asarray(speakers)
    found = []
    for speaker in dict.fromkeys(speakers.tolist()):
        t, p = truth[speakers == speaker], predicted[speakers == speaker]
        recalls = class_recalls(t, p)
        found.append((recalls, len(set(p.tolist()) - set(recalls))))
    return found


def speaker_mean_uar(truth: list[str], predicted: list[str], speakers: list[str]) -> float:
    """VPC's UAR: per speaker, sklearn's macro recall, i.e. the mean recall over every class in
    the speaker's truth *or predictions* (a class predicted for a speaker who never has it counts
    0), then the mean over speakers.

    >>> speaker_mean_uar(["a", "a", "b", "b"], ["a", "b", "b", "b"], ["s", "s", "t", "t"])  # s: (0.5 + 0) / 2
    0.625
    """
    return _mean_uar(speaker_recalls(truth, predicted, speakers))


def speaker_mean_class_recalls(truth: list[str], predicted: list[str], speakers: list[str]) -> dict[str, float]:
    """VPC's `ACC_<label>`: each true class's recall per speaker, averaged over the speakers who
    have the class.

    >>> speaker_mean_class_recalls(["a", "a", "a", "b"], ["a", "b", "a", "b"], ["s", "s", "t", "t"])
    {'a': 0.75, 'b': 1.0}
    """
    return _class_means(speaker_recalls(truth, predicted, speakers))


def _mean_uar(per_speaker: list[tuple[dict[str, float], int]]) -> float:
    return float(np.mean([sum(recalls.values()) / (len(recalls) + extra) for recalls, extra in per_speaker]))


def _class_means(per_speaker: list[tuple[dict[str, float], int]]) -> dict[str, float]:
    classes = sorted({c for recalls, _ in per_speaker for c in recalls})
    return {c: float(np.mean([recalls[c] for recalls, _ in per_speaker if c in recalls])) for c in classes}


def scored(truth: list[str], rule: str) -> list[bool]:
    """Which utterances `rule` scores: under `vpc_track2` those labelled one of TRACK2_CLASSES
    (VPC skips the others), under the other rules all."""
    return [rule != "vpc_track2" or label in TRACK2_CLASSES for label in truth]


def emotion_recall(truth: list[str], predicted: list[str], speakers: list[str], rule: str) -> tuple[float, dict]:
    """(UAR, class recalls) by `rule` (one of UAR_RULES).

    >>> emotion_recall(["ang", "ang", "fru"], ["ang", "sad", "ang"], ["s", "t", "s"], "vpc_track2")  # fru left out; sad: 0
    (0.25, {'ang': 0.5})
    """
    if rule in ("vpc", "vpc_track2"):  # one pass over the speakers (vpc_track2: all as one) for both
        keep = scored(truth, rule)
        truth, predicted = [t for t, k in zip(truth, keep) if k], [p for p, k in zip(predicted, keep) if k]
        if not truth:  # vpc_track2 only: the data has utterances
            raise VpevalError(f"utility.uar_rule={rule}: no utterance is labelled {', '.join(TRACK2_CLASSES)}, the "
                              "classes it scores")
        per_speaker = speaker_recalls(truth, predicted, speakers if rule == "vpc" else ["all"] * len(truth))
        return _mean_uar(per_speaker), _class_means(per_speaker)
    if rule == "pooled":
        return unweighted_average_recall(truth, predicted), class_recalls(truth, predicted)
    raise VpevalError(f"utility.uar_rule={rule!r}: not a UAR rule (one of {', '.join(UAR_RULES)})")
