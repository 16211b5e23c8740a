"""Bootstrap confidence intervals for the ROCCH-EER and min Cllr.

Scores are grouped once; a resample only changes how many trials each score group holds,
so every replicate costs O(n) (no re-sorting) and is exact: resampled trials keep their
scores, so they land in the same groups.

The default unit is the speaker, on both sides of a trial (a two-way bootstrap): a
non-target score depends on the enrolment speaker *and* the test speaker, so resampling
only one side treats the other as fixed and gives intervals that are too narrow. One draw
of the speakers (enrolment and test speakers are one population) is a bootstrap world in
which every copy of a speaker keeps its target trials and every pair of copies of two
different speakers keeps their non-target trials: a target trial of speaker s counts c_s
times, a non-target trial of (e, t) c_e·c_t times, c the copies drawn.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from pipeline.metrics.cllr import cllr_of_bins
from pipeline.metrics.eer import rocch_eer
from pipeline.metrics.inputs import ScoreError
from pipeline.metrics.roc import group_scores, pav, pav_bins, trial_groups

UNITS = ("speakers", "trials")
MAX_REDRAWS = 10  # resamples lacking a class, per resample asked, before giving up
MIN_SPEAKERS = 5  # a speaker bootstrap over fewer has few distinct resamples (1 speaker: one, of zero width)
# Speakers below which a 95 % interval was measured to cover its true value less than 90 % of the time, per
# interval (recipes/detection_power/coverage.py; docs/metrics.md "Coverage"): of one trial list for the EER and
# min Cllr, of each list of a detection pair for its relative drop and gap (the residual's interval is the gap's,
# shifted, under the gap models; under `line` measured at slopes 0.5 and 1.5, reaching 0.90 from 12 and 20
# speakers, so it wears the gap's marker): the smallest count measured from which every model reached 0.90, or
# one past the largest measured (80; LibriSpeech test-clean has 20 per gender) where none did; coverage from more
# speakers than measured is not known to be nominal.
COVERED_SPEAKERS = {"eer": 81, "min_cllr": 81, "relative_drop": 20, "gap": 20}


def few_speakers_note(n_speakers: int | None) -> str:
    """'' for an interval from enough speakers, else the note it must carry.

    >>> few_speakers_note(1)
    '1 speaker(s): too few for a speaker interval'
    """
    if n_speakers is None or n_speakers == 0 or n_speakers >= MIN_SPEAKERS:
        return ""
    return f"{n_speakers} speaker(s): too few for a speaker interval"


TRIALS_NOTE = ("trials resampled, speakers held fixed: a 95 % interval was measured to cover less than 90 % at "
               "every size")  # docs/metrics.md: 0.4-0.7 from 5 to 40 speakers


def coverage_note(n_speakers: int | None, interval: str = "eer") -> str:
    """'' for an `interval` (a `COVERED_SPEAKERS` key) from enough speakers that its coverage
    was not measured below 90 % (or too few for any interval: `few_speakers_note` says so),
    else the note that it covers less than nominal; `TRIALS_NOTE` for one whose bootstrap
    resampled trials (`n_speakers` 0).

    >>> coverage_note(8, "min_cllr")
    '8 speakers: a 95 % interval was measured to cover less than 90 % below 81'
    """
    if n_speakers == 0:
        return TRIALS_NOTE
    covered = COVERED_SPEAKERS[interval]
    if n_speakers is None or n_speakers < MIN_SPEAKERS or n_speakers >= covered:
        return ""
    return f"{n_speakers} speakers: a 95 % interval was measured to cover less than 90 % below {covered}"


@dataclass(frozen=True)
class Interval:
    """Point estimate on all trials and the percentile interval of the resamples."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class BootstrapResult:
    """Percentile-bootstrap intervals; `n_redrawn` resamples lacked one class and were
    drawn again (so every result has `n_resamples` replicates);
    `n_speakers` the speakers resampled (0 when trials were);
    `eer_replicates` the EER of every kept resample (for intervals of derived quantities,
    e.g. detection's relative drop; left out of `as_dict`)."""

    unit: str
    n_resamples: int
    confidence: float
    seed: int
    n_redrawn: int
    eer: Interval
    min_cllr: Interval
    n_speakers: int = 0
    eer_replicates: tuple[float, ...] = field(default=(), repr=False, compare=False)

    def as_dict(self) -> dict:
        found = asdict(self)
        del found["eer_replicates"]
        return found


def bootstrap_ci(tar, non, n_resamples: int = 1000, unit: str = "speakers",
                 tar_speakers=None, non_speakers=None, confidence: float = 0.95,
                 seed: int = 0, tar_test_speakers=None, non_test_speakers=None) -> BootstrapResult:
    """Percentile intervals for EER and min Cllr.

    unit="speakers" (default) is the two-way speaker bootstrap of the module docstring:
    `tar_speakers[i]` / `non_speakers[j]` are the enrolment speakers of the trials,
    `tar_test_speakers[i]` / `non_test_speakers[j]` their test speakers; unit="trials"
    resamples target and non-target trials independently, keeping both counts. The stream
    is numpy's `default_rng(seed)`: the same seed and the same speakers give the same
    resamples, so conditions scored on one trial list (several attackers, one evaluation
    set) get paired replicates.

    >>> r = bootstrap_ci([2.0, 3.0, 2.5], [0.0, 1.0, 2.2], 200, tar_speakers=["a", "b", "c"],
    ...                  non_speakers=["a", "b", "c"], tar_test_speakers=["a", "b", "c"],
    ...                  non_test_speakers=["b", "c", "a"])
    >>> r.eer.estimate, r.unit
    (0.16666666666666666, 'speakers')
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
    n_speakers = 0
    if unit == "speakers":
        (tar_enrol, tar_test, non_enrol, non_test), n_speakers = speaker_codes(
            (tar_speakers, tar_test_speakers, non_speakers, non_test_speakers), len(tar_group), len(non_group))
        if np.any(tar_enrol != tar_test):  # one speaker under two names would be resampled as two
            k = int(np.flatnonzero(tar_enrol != tar_test)[0])
            raise ScoreError(f"a target trial's enrolment speaker {str(tar_speakers[k])!r} and test speaker "
                             f"{str(tar_test_speakers[k])!r} differ: the speaker bootstrap needs one name per speaker "
                             "(map test utterances to the enrolment ids, e.g. --utt2spk, or resample trials)")

        def resample():
            copies = np.bincount(rng.integers(0, n_speakers, n_speakers), minlength=n_speakers)
            return (np.bincount(tar_group, weights=copies[tar_enrol], minlength=n_groups),
                    np.bincount(non_group, weights=copies[non_enrol] * copies[non_test], minlength=n_groups))
    else:
        def resample():
            return (np.bincount(tar_group[rng.integers(0, len(tar_group), len(tar_group))], minlength=n_groups),
                    np.bincount(non_group[rng.integers(0, len(non_group), len(non_group))], minlength=n_groups))

    eers, cllrs, redrawn = [], [], 0
    while len(eers) < int(n_resamples):
        targets, nontargets = (counts.astype(np.int64) for counts in resample())
        n_tar, n_non = int(targets.sum()), int(nontargets.sum())
        if n_tar == 0 or n_non == 0:  # drawn again: replicate k of every condition on one trial list stays paired
            redrawn += 1
            if redrawn > MAX_REDRAWS * int(n_resamples):
                raise ScoreError("nearly every bootstrap resample lacked target or non-target trials: too few "
                                 "speakers own the trials of one class (resample trials instead)")
            continue
        used = (targets + nontargets) > 0
        bins = pav(targets[used], nontargets[used])
        eers.append(rocch_eer(bins, n_tar, n_non))
        cllrs.append(cllr_of_bins(bins, n_tar, n_non))
    full_bins = pav_bins(groups)
    alpha = (1 - confidence) / 2
    return BootstrapResult(
        unit=unit,
        n_resamples=int(n_resamples),
        confidence=confidence,
        seed=seed,
        n_redrawn=redrawn,
        eer=_interval(rocch_eer(full_bins, groups.n_target, groups.n_nontarget), eers, alpha),
        min_cllr=_interval(cllr_of_bins(full_bins, groups.n_target, groups.n_nontarget), cllrs, alpha),
        n_speakers=n_speakers,
        eer_replicates=tuple(float(e) for e in eers),
    )


def _interval(estimate: float, values: list[float], alpha: float) -> Interval:
    low, high = np.quantile(np.asarray(values), [alpha, 1 - alpha])
    return Interval(estimate=estimate, low=float(low), high=float(high))


def speaker_codes(sides, n_tar: int, n_non: int) -> tuple[list[np.ndarray], int]:
    """Integer codes of the (target enrolment, target test, non-target enrolment, non-target
    test) speakers in one numbering of every speaker named, and the number of speakers."""
    names = ("enrolment", "test", "enrolment", "test")
    for side, name in zip(sides, names):
        if side is None:
            raise ScoreError(f"the two-way speaker bootstrap needs the {name} speaker of every trial; these scores "
                             "carry none (give the test speakers, or resample trials instead)")
    for side, name, count, kind in zip(sides, names, (n_tar, n_tar, n_non, n_non), ("target",) * 2 + ("non-target",) * 2):
        if len(side) != count:
            raise ScoreError(f"speaker labels: {len(side)} {name} speakers given for {count} {kind} scores")
    labels = np.asarray([str(s) for side in sides for s in side], dtype=str)
    speakers, code = np.unique(labels, return_inverse=True)
    bounds = np.cumsum([0, n_tar, n_tar, n_non, n_non])
    return [code[a:b] for a, b in zip(bounds[:-1], bounds[1:])], len(speakers)
