"""Coverage of the EER's two-way speaker-bootstrap interval on small test sets, by simulation.

Each replication draws one gender's trial list with vpeval's protocol layout (`--speakers`
speakers of `--utterances` utterances, round(0.75 × speakers) of them enrolled with 5
utterances, every enrolled speaker tried against every other utterance of the gender) and
scores from a generative model with speaker effects, then computes the 95 % interval with
`pipeline.metrics.bootstrap_ci` (1000 resamples, as `confidence.bootstrap` defaults). A
target score of speaker s is μ + a_s + e; a non-target score of enrolment speaker i and test
speaker j is b_i + c_j + d_ij + e (d symmetric: a pair of speakers that sound alike), e the
utterance noise (sd 1). The true EER is the ROCCH-EER of the model's infinite population
(every speaker effect drawn anew per trial), from one draw of `--truth` scores per class.
Coverage is the share of intervals that contain it, with its Wilson 95 % interval.

Models (`MODELS`): `normal` (Gaussian speaker effects) at a true EER near 20 % and near 5 %
(the OO conditions, whose intervals start at 0); `t3` (the speaker effects Student t with 3
degrees of freedom, scaled to the same variance: a few speakers far off, misspecified for
any method that assumes Gaussian speakers); `goats` (one speaker in eight has target scores
lowered by 3: a bimodal population).

    python recipes/detection_power/coverage.py [--replications 150] [--speakers 2 3 ... 40]

Prints a markdown table, one row per speaker count, one column per model (coverage, its
Wilson interval, and how many intervals lay wholly below the true EER), and the count
`pipeline.metrics.bootstrap.COVERED_SPEAKERS` follows from: the smallest measured count
from which (at it and every larger count measured) every model's coverage is at least `RULE`.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from pipeline.metrics.bootstrap import bootstrap_ci
from pipeline.metrics.detection import wilson_interval
from pipeline.metrics.eer import rocch_eer
from pipeline.metrics.roc import group_scores, pav_bins
from pipeline.report.tables import markdown_table

ENROLL_FRACTION, ENROLL_UTTERANCES = 0.75, 5  # conf/data/*.yaml protocol
SD = {"a": 0.5, "b": 0.3, "c": 0.3, "d": 0.4}  # speaker-effect standard deviations; utterance noise sd 1
RULE = 0.90  # a count is enough when every model's coverage of the 95 % interval is at least this, at it and above


def effects(rng, kind: str, size) -> np.ndarray:
    """Unit-variance speaker effects: Gaussian, or Student t (3 df) scaled to variance 1."""
    if kind == "t3":
        return rng.standard_t(3, size) / np.sqrt(3.0)
    return rng.normal(size=size)


MODELS = {  # name: (effect distribution, target mean μ, share of goats)
    "normal, EER ≈ 20 %": ("normal", 1.9, 0.0),
    "normal, EER ≈ 5 %": ("normal", 3.7, 0.0),
    "t3, EER ≈ 20 %": ("t3", 1.9, 0.0),
    "goats, EER ≈ 20 %": ("normal", 2.3, 0.125),
}
GOAT_SHIFT = 3.0


def trial_list(rng, model: str, speakers: int, utterances: int) -> dict:
    """Scores and speaker sides of one gender's trial list drawn from `model`."""
    kind, mu, goats = MODELS[model]
    a, b, c = (SD[k] * effects(rng, kind, speakers) for k in "abc")
    a = a - GOAT_SHIFT * (rng.random(speakers) < goats)
    upper = np.triu(SD["d"] * effects(rng, kind, (speakers, speakers)), 1)
    d = upper + upper.T
    enrolled = np.sort(rng.choice(speakers, int(round(ENROLL_FRACTION * speakers)), replace=False))
    trial_utts = np.concatenate([np.full(utterances - ENROLL_UTTERANCES * (s in enrolled), s) for s in range(speakers)])
    enrol = np.repeat(enrolled, len(trial_utts))
    test = np.tile(trial_utts, len(enrolled))
    target = enrol == test
    noise = rng.normal(size=len(enrol))
    scores = np.where(target, mu + a[enrol], b[enrol] + c[test] + d[enrol, test]) + noise
    return {"tar": scores[target], "non": scores[~target], "tar_speakers": enrol[target],
            "tar_test_speakers": test[target], "non_speakers": enrol[~target], "non_test_speakers": test[~target]}


def true_eer(model: str, draws: int, seed: int = 12345) -> float:
    """ROCCH-EER of the model's population: every trial's speaker effects drawn anew."""
    rng = np.random.default_rng(seed)
    kind, mu, goats = MODELS[model]
    tar = mu + SD["a"] * effects(rng, kind, draws) - GOAT_SHIFT * (rng.random(draws) < goats) + rng.normal(size=draws)
    non = sum(SD[k] * effects(rng, kind, draws) for k in "bcd") + rng.normal(size=draws)
    groups = group_scores(tar, non)
    return float(rocch_eer(pav_bins(groups), groups.n_target, groups.n_nontarget))


def coverage(model: str, speakers: int, replications: int, truth: float, *, utterances: int = 16,
             n_resamples: int = 1000, seed: int = 0) -> tuple[int, int]:
    """How many of `replications` intervals contain `truth`, and how many lie wholly below it."""
    rng = np.random.default_rng([seed, speakers])
    hits = below = 0
    for _ in range(replications):
        scores = trial_list(rng, model, speakers, utterances)
        found = bootstrap_ci(scores.pop("tar"), scores.pop("non"), n_resamples, **scores)
        hits += found.eer.low <= truth <= found.eer.high
        below += found.eer.high < truth
    return hits, below


def marker(table: dict[int, dict[str, float]], rule: float = RULE) -> int | None:
    """The smallest measured count from which every model's coverage is at least `rule` (None if none).

    >>> marker({3: {"x": 0.8}, 4: {"x": 0.91}, 5: {"x": 0.89}, 6: {"x": 0.93}})
    6
    """
    found = None
    for count in sorted(table, reverse=True):
        if min(table[count].values()) < rule:
            break
        found = count
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speakers", type=int, nargs="+", default=[*range(2, 9), 10, 12, 16, 20, 24, 32, 40])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--replications", type=int, default=150)
    parser.add_argument("--utterances", type=int, default=16)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--truth", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.time()
    truths = {m: true_eer(m, args.truth) for m in args.models}
    table: dict[int, dict[str, float]] = {}
    rows = []
    for count in args.speakers:
        row = [str(count)]
        for m in args.models:
            hits, below = coverage(m, count, args.replications, truths[m], utterances=args.utterances,
                            n_resamples=args.resamples, seed=args.seed)
            low, high = wilson_interval(hits, args.replications)
            table.setdefault(count, {})[m] = hits / args.replications
            row.append(f"{hits / args.replications:.3f} [{low:.3f}, {high:.3f}] ({below} below)")
        rows.append(row)
        print(" | ".join(row), flush=True)
    headers = ["speakers per gender", *(f"{m} (true {100 * truths[m]:.2f} %)" for m in args.models)]
    print(markdown_table(headers, rows))
    print(f"smallest count from which every coverage ≥ {RULE}: {marker(table)}; "
          f"{args.replications} replications per cell, {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
