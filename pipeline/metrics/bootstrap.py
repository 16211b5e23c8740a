"""Bootstrap confidence intervals for the ROCCH-EER and min Cllr.

Scores are grouped once; a resample only changes how many trials each score group holds,
so every replicate costs O(n) (no re-sorting) and is exact: resampled trials keep their
scores, so they land in the same groups.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from pipeline.metrics.cllr import cllr_of_bins
from pipeline.metrics.eer import rocch_eer
from pipeline.metrics.inputs import ScoreError
from pipeline.metrics.roc import group_scores, pav, pav_bins, trial_groups

UNITS = ("speakers", "trials")


@dataclass(frozen=True)
class Interval:
    """Point estimate on all trials and the percentile interval of the resamples."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class BootstrapResult:
    """Percentile-bootstrap intervals; `n_discarded` resamples lacked one class;
    `eer_replicates` the EER of every kept resample (for intervals of derived quantities,
    e.g. detection's relative drop; left out of `as_dict`)."""

    unit: str
    n_resamples: int
    confidence: float
    seed: int
    n_discarded: int
    eer: Interval
    min_cllr: Interval
    eer_replicates: tuple[float, ...] = field(default=(), repr=False, compare=False)

    def as_dict(self) -> dict:
        found = asdict(self)
        del found["eer_replicates"]
        return found


def bootstrap_ci(tar, non, n_resamples: int = 1000, unit: str = "speakers",
                 tar_speakers=None, non_speakers=None, confidence: float = 0.95,
                 seed: int = 0) -> BootstrapResult:
    """Percentile intervals for EER and min Cllr.

    unit="speakers" (default) resamples speakers with replacement and keeps all trials of
    each drawn speaker (a trial belongs to its enrolment speaker, `tar_speakers[i]` /
    `non_speakers[j]`), so trials of one speaker stay together; unit="trials" resamples
    target and non-target trials independently, keeping both counts. The stream is
    numpy's `default_rng(seed)`: the same seed gives the same intervals.
    """
    if unit not in UNITS:
        raise ScoreError(f"unknown bootstrap unit {unit!r}; choose from {', '.join(UNITS)}")
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ScoreError(f"n_resamples must be a positive integer, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ScoreError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    groups = group_scores(tar, non)
    tar_group, non_group = trial_groups(groups, tar, non)
    n_groups = len(groups.scores)
    rng = np.random.default_rng(seed)
    if unit == "speakers":
        tar_code, non_code, n_speakers = _speaker_codes(tar_speakers, non_speakers, len(tar_group), len(non_group))

        def resample():
            copies = np.bincount(rng.integers(0, n_speakers, n_speakers), minlength=n_speakers)
            return (np.bincount(tar_group, weights=copies[tar_code], minlength=n_groups),
                    np.bincount(non_group, weights=copies[non_code], minlength=n_groups))
    else:
        def resample():
            return (np.bincount(tar_group[rng.integers(0, len(tar_group), len(tar_group))], minlength=n_groups),
                    np.bincount(non_group[rng.integers(0, len(non_group), len(non_group))], minlength=n_groups))

    eers, cllrs = [], []
    for _ in range(int(n_resamples)):
        targets, nontargets = (counts.astype(np.int64) for counts in resample())
        n_tar, n_non = int(targets.sum()), int(nontargets.sum())
        if n_tar == 0 or n_non == 0:
            continue
        used = (targets + nontargets) > 0
        bins = pav(targets[used], nontargets[used])
        eers.append(rocch_eer(bins, n_tar, n_non))
        cllrs.append(cllr_of_bins(bins, n_tar, n_non))
    if not eers:
        raise ScoreError("every bootstrap resample lacked target or non-target trials")
    full_bins = pav_bins(groups)
    alpha = (1 - confidence) / 2
    return BootstrapResult(
        unit=unit,
        n_resamples=int(n_resamples),
        confidence=confidence,
        seed=seed,
        n_discarded=int(n_resamples) - len(eers),
        eer=_interval(rocch_eer(full_bins, groups.n_target, groups.n_nontarget), eers, alpha),
        min_cllr=_interval(cllr_of_bins(full_bins, groups.n_target, groups.n_nontarget), cllrs, alpha),
        eer_replicates=tuple(float(e) for e in eers),
    )


def _interval(estimate: float, values: list[float], alpha: float) -> Interval:
    low, high = np.quantile(np.asarray(values), [alpha, 1 - alpha])
    return Interval(estimate=estimate, low=float(low), high=float(high))


def _speaker_codes(tar_speakers, non_speakers, n_tar: int, n_non: int):
    if tar_speakers is None or non_speakers is None:
        raise ScoreError(
            "bootstrap over speakers needs the speaker of every trial; "
            "these scores carry none (resample trials instead)"
        )
    labels = [str(s) for s in tar_speakers] + [str(s) for s in non_speakers]
    if len(labels) != n_tar + n_non:
        raise ScoreError(
            f"speaker labels: {len(labels)} given for {n_tar} target + {n_non} non-target scores"
        )
    speakers, code = np.unique(np.asarray(labels, dtype=str), return_inverse=True)
    return code[:n_tar], code[n_tar:], len(speakers)
