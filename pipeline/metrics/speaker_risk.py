"""Per-speaker risk: each enrolment speaker's EER and linkability, and the speakers least protected.

A speaker's trials are those scored against its enrolment model (its target and
non-target trials). Its EER is the threshold-sweep EER of the VPC toolkits on those trials
(`eer_threshold`), which exceeds 50 % when the speaker's targets score below its
non-targets; averages clip it at 50 % first (a speaker cannot be "more than unprotected"),
as the 2026 per-speaker evaluations do; the unclipped mean is given beside it. VPC 2026's
configs carry `compute_per_speaker_eer`, which no code of its toolkit reads (checked at
commit e6810a4): there is no reference to match.

Its linkability is the speaker's share of the condition's D_sys: the condition's local
linkability D(s) (Inria grid, `pipeline.metrics.linkability`) integrated over the speaker's
own mated-score density on the same grid. The attacker has one evidence function for all
speakers, and the mated-count-weighted mean of the speakers' values is the condition's
D_sys exactly; it is defined whenever D_sys is (a speaker's own histogram, with Inria's
n_bins = n_mated // 10, would need 20 target trials per speaker).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from pipeline.metrics.contract import SPEAKERS, Column, Condition, Metric, Undefined
from pipeline.metrics.eer import eer, eer_threshold
from pipeline.metrics.inputs import UndefinedMetricError
from pipeline.metrics.linkability import density, linkability_from_sorted, linkability_grid

CLIP = 0.5
SECTION = "Per-speaker risk"
WORST = 3  # speakers listed in the report; every speaker is in `speaker_eers`


@dataclass(frozen=True)
class SpeakerRisk:
    """One enrolment speaker: trial counts, EER (threshold sweep), clipped EER, ROCCH-EER, linkability."""

    speaker: str
    n_target: int
    n_nontarget: int
    eer: float
    eer_clipped: float
    eer_rocch: float
    linkability: float | None

    def as_dict(self) -> dict:
        return asdict(self)


def speaker_risk(tar, non, tar_speakers, non_speakers, omega: float = 1.0) -> tuple[list[SpeakerRisk], list[str]]:
    """(risk of every speaker with target and non-target trials, sorted by speaker id; the
    speakers left out for lacking one class). Linkability is None when the condition's
    D_sys is undefined."""
    tar, non = np.asarray(tar, dtype=np.float64), np.asarray(non, dtype=np.float64)
    tar_speakers, non_speakers = np.asarray(tar_speakers, dtype=str), np.asarray(non_speakers, dtype=str)
    if len(tar_speakers) != len(tar) or len(non_speakers) != len(non):
        raise ValueError(f"{len(tar_speakers)} / {len(non_speakers)} speaker labels for {len(tar)} / {len(non)} scores")
    share = _linkability_share(np.sort(tar), np.sort(non), omega)
    risks, left_out = [], []
    for speaker in np.unique(np.concatenate((tar_speakers, non_speakers))).tolist():
        mine_tar, mine_non = tar[tar_speakers == speaker], non[non_speakers == speaker]
        if not len(mine_tar) or not len(mine_non):
            left_out.append(speaker)
            continue
        sweep = eer_threshold(mine_tar, mine_non)
        risks.append(SpeakerRisk(speaker, len(mine_tar), len(mine_non), sweep, min(sweep, CLIP),
                                 eer(mine_tar, mine_non), None if share is None else share(np.sort(mine_tar))))
    return risks, left_out


def _linkability_share(mated: np.ndarray, nonmated: np.ndarray, omega: float):
    """The map from a speaker's ascending mated scores to its share of the condition's
    D_sys; None when D_sys is undefined."""
    try:
        linkability_from_sorted(mated, nonmated, omega)
    except UndefinedMetricError:
        return None
    grid = linkability_grid(mated, nonmated, omega, min(len(mated) // 10, 100))
    if grid is None:  # every score equal: D = 0 everywhere
        return lambda mine: 0.0
    return lambda mine: float(np.trapezoid(grid.local * density(mine, grid), x=grid.centres))


def least_protected(risks: list[SpeakerRisk], count: int = WORST) -> list[SpeakerRisk]:
    """The `count` speakers with the lowest clipped EER (ties: higher linkability, then id)."""
    return sorted(risks, key=lambda r: (r.eer_clipped, -(r.linkability or 0.0), r.speaker))[:count]


def _compute(condition: Condition) -> dict:
    risks, left_out = speaker_risk(condition.target, condition.nontarget, condition.target_speakers,
                                   condition.nontarget_speakers, condition.settings["omega"])
    if not risks:
        reason = Undefined("no speaker has both target and non-target trials")
        return {"speakers": 0, "speakers_left_out": len(left_out), "eer_speaker_mean": reason,
                "eer_speaker_clipped_mean": reason, "linkability_speaker_max": reason,
                "least_protected_speakers": reason, "speaker_eers": []}
    links = [r.linkability for r in risks if r.linkability is not None]
    return {
        "speakers": len(risks),
        "speakers_left_out": len(left_out),
        "eer_speaker_mean": float(np.mean([r.eer for r in risks])),
        "eer_speaker_clipped_mean": float(np.mean([r.eer_clipped for r in risks])),
        "linkability_speaker_max": max(links) if links else Undefined("the condition's linkability is undefined"),
        "least_protected_speakers": [f"{r.speaker} ({100 * r.eer_clipped:.1f})" for r in least_protected(risks)],
        "speaker_eers": [r.as_dict() for r in risks],
    }


SPEAKER_RISK = Metric("speaker_risk", SPEAKERS, (
    Column("speakers", "speakers", "#spk"),
    Column("speakers_left_out"),
    Column("eer_speaker_mean", "speaker EER mean %", "spkEER%", scale=100, digits=2),
    Column("eer_speaker_clipped_mean", "speaker EER mean, clipped at 50 % %", "spkEERclip%", scale=100, digits=2),
    Column("linkability_speaker_max", "max speaker D_sys", "maxSpkDsys", digits=3),
    Column("least_protected_speakers", "least protected speakers (clipped EER %)", "worst speakers"),
    Column("speaker_eers"),
), _compute, section=SECTION)
