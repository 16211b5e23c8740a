"""ZEBRA at the speaker level (noe2022 §8, second proposal): each enrolment speaker's expected
and worst-case disclosure, and the speakers a system protects least.

The adversary calibrates once, on all trials of the condition (a per-speaker calibration
would fit a handful of trials, and PAV on few trials overstates the evidence). With the
condition's PAV-calibrated LLRs l(t) (those of its D_ECE) and the reference code's
per-trial LLRs of its worst case (those of its l_w), for speaker s with target trials T_s
and non-target trials N_s:

    D_ECE(s) = 1 / (2 ln 2) [ mean_{t in T_s} Z(l(t)) + mean_{t in N_s} Z(-l(t)) ]   (bits)
    l_w(s)   = max_{t in T_s u N_s} |l_w-LLR(t)| / ln 10                           (log10)

Z is noe2022 eq. 13's kernel, so D_ECE(s) is the condition's D_ECE restricted to the
speaker's trials; a negative value says the global calibration misleads on that speaker.
The largest l_w(s) is the condition's l_w. The least protected speakers are those with the
largest l_w(s), then the largest D_ECE(s).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from pipeline.metrics.cllr import pav_llrs
from pipeline.metrics.contract import SPEAKERS, Column, Condition, Metric, Undefined
from pipeline.metrics.roc import group_scores
from pipeline.metrics.speaker_risk import SECTION
from pipeline.metrics.zebra import LN10, d_ece, reference_llrs, zebra_tag

WORST = 3


@dataclass(frozen=True)
class SpeakerDisclosure:
    """One enrolment speaker's ZEBRA: D_ECE (bits), l_w (log10) and its tag."""

    speaker: str
    n_target: int
    n_nontarget: int
    d_ece: float
    l_w: float
    tag: str

    def as_dict(self) -> dict:
        return asdict(self)


def trial_worst_case(tar, non) -> tuple[np.ndarray, np.ndarray]:
    """The reference code's |LLR| / ln 10 of every target and every non-target trial, in
    the given order (its maximum is l_w)."""
    tar, non = np.asarray(tar, dtype=np.float64), np.asarray(non, dtype=np.float64)
    groups = group_scores(tar, non)
    at_position = reference_llrs(groups) / LN10
    tar_order, non_order = np.argsort(tar, kind="stable"), np.argsort(non, kind="stable")
    tar_position = np.searchsorted(groups.non_sorted, groups.tar_sorted, side="right") + np.arange(len(tar))
    non_position = np.searchsorted(groups.tar_sorted, groups.non_sorted, side="left") + np.arange(len(non))
    tar_lw, non_lw = np.empty(len(tar)), np.empty(len(non))
    tar_lw[tar_order] = at_position[tar_position]
    non_lw[non_order] = at_position[non_position]
    return tar_lw, non_lw


def speaker_disclosure(tar, non, tar_speakers, non_speakers) -> tuple[list[SpeakerDisclosure], list[str]]:
    """(disclosure of every speaker with both classes of trials, sorted by id; the speakers left out)."""
    tar_speakers, non_speakers = np.asarray(tar_speakers, dtype=str), np.asarray(non_speakers, dtype=str)
    tar_llr, non_llr = pav_llrs(tar, non)
    tar_lw, non_lw = trial_worst_case(tar, non)
    found, left_out = [], []
    for speaker in np.unique(np.concatenate((tar_speakers, non_speakers))).tolist():
        mine_tar, mine_non = tar_speakers == speaker, non_speakers == speaker
        if not mine_tar.any() or not mine_non.any():
            left_out.append(speaker)
            continue
        l_w = float(max(tar_lw[mine_tar].max(), non_lw[mine_non].max()))
        found.append(SpeakerDisclosure(speaker, int(mine_tar.sum()), int(mine_non.sum()),
                                       d_ece(tar_llr[mine_tar], non_llr[mine_non]), l_w, zebra_tag(l_w)))
    return found, left_out


def least_protected(found: list[SpeakerDisclosure], count: int = WORST) -> list[SpeakerDisclosure]:
    """The `count` speakers with the largest l_w(s), then the largest D_ECE(s)."""
    return sorted(found, key=lambda d: (-d.l_w, -d.d_ece, d.speaker))[:count]


def _compute(condition: Condition) -> dict:
    found, _ = speaker_disclosure(condition.target, condition.nontarget, condition.target_speakers,
                                  condition.nontarget_speakers)
    if not found:
        reason = Undefined("no speaker has both target and non-target trials")
        return {"d_ece_speaker_mean": reason, "d_ece_speaker_max": reason, "zebra_least_protected": reason,
                "speaker_zebra": []}
    return {
        "d_ece_speaker_mean": float(np.mean([d.d_ece for d in found])),
        "d_ece_speaker_max": max(d.d_ece for d in found),
        "zebra_least_protected": [f"{d.speaker} ({d.l_w:.2f}, {d.d_ece:.3f})" for d in least_protected(found)],
        "speaker_zebra": [d.as_dict() for d in found],
    }


SPEAKER_ZEBRA = Metric("speaker_zebra", SPEAKERS, (
    Column("d_ece_speaker_mean", "speaker D_ECE mean", "spkD_ECE", digits=3),
    Column("d_ece_speaker_max", "max speaker D_ECE", "maxSpkD_ECE", digits=3),
    Column("zebra_least_protected", "least protected speakers (l_w, D_ECE)", "ZEBRA worst speakers"),
    Column("speaker_zebra"),
), _compute, section=SECTION)
