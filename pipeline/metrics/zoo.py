"""Per-speaker (zoo) breakdown: where each speaker sits in the mean target / mean
non-target score plane (Dunstone & Yager; noe2022 §4.3), and its own EER."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from pipeline.metrics.eer import eer
from pipeline.metrics.inputs import ScoreError, as_scores


@dataclass(frozen=True)
class SpeakerStats:
    """One speaker's trials: counts, mean scores and ROCCH-EER (None where undefined:
    no target or no non-target trial)."""

    speaker: str
    n_target: int
    n_nontarget: int
    mean_target: float | None
    mean_nontarget: float | None
    eer: float | None

    def as_dict(self) -> dict:
        return asdict(self)


def speaker_breakdown(tar, non, tar_speakers, non_speakers) -> list[SpeakerStats]:
    """Statistics per speaker, sorted by speaker id.

    `tar_speakers[i]` is the speaker a target trial belongs to (the enrolment speaker, or
    speaker a of a trial table), likewise `non_speakers`.
    """
    tar = as_scores(tar, "target").astype(np.float64)
    non = as_scores(non, "non-target").astype(np.float64)
    labels = _speaker_labels(tar_speakers, len(tar), "target") + _speaker_labels(
        non_speakers, len(non), "non-target"
    )
    speakers, code = np.unique(np.asarray(labels, dtype=str), return_inverse=True)
    is_target = np.arange(len(labels)) < len(tar)
    scores = np.concatenate((tar, non))
    n_tar = np.bincount(code[is_target], minlength=len(speakers))
    n_non = np.bincount(code[~is_target], minlength=len(speakers))
    sum_tar = np.bincount(code[is_target], weights=tar, minlength=len(speakers))
    sum_non = np.bincount(code[~is_target], weights=non, minlength=len(speakers))
    order = np.argsort(code, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(n_tar + n_non)))
    stats = []
    for index, speaker in enumerate(speakers.tolist()):
        trials = order[bounds[index] : bounds[index + 1]]
        mine_tar, mine_non = scores[trials[is_target[trials]]], scores[trials[~is_target[trials]]]
        defined = len(mine_tar) > 0 and len(mine_non) > 0
        stats.append(
            SpeakerStats(
                speaker=speaker,
                n_target=int(n_tar[index]),
                n_nontarget=int(n_non[index]),
                mean_target=float(sum_tar[index] / n_tar[index]) if n_tar[index] else None,
                mean_nontarget=float(sum_non[index] / n_non[index]) if n_non[index] else None,
                eer=eer(mine_tar, mine_non) if defined else None,
            )
        )
    return stats


def _speaker_labels(speakers, expected: int, name: str) -> list[str]:
    labels = [str(speaker) for speaker in speakers]
    if len(labels) != expected:
        raise ScoreError(f"{len(labels)} speaker labels for {expected} {name} scores")
    return labels
