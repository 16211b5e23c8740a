"""Coverage of the EER's and min Cllr's two-way speaker-bootstrap intervals on small test sets, by simulation.

Each replication draws one gender's trial list with vpeval's protocol layout (`--speakers`
speakers of `--utterances` utterances, round(0.75 × speakers) of them enrolled with 5
utterances, every enrolled speaker tried against every other utterance of the gender) and
scores from a generative model with speaker effects, then computes the 95 % intervals with
`pipeline.metrics.bootstrap_ci` (1000 resamples, as `confidence.bootstrap` defaults). A
target score of speaker s is μ + a_s + e; a non-target score of enrolment speaker i and test
speaker j is b_i + c_j + d_ij + e (d symmetric: a pair of speakers that sound alike), e the
utterance noise (sd 1). The true EER is the ROCCH-EER of the model's infinite population
(every speaker effect drawn anew per trial), from one draw of `--truth` scores per class, and
the true min Cllr that population's. Coverage is the share of intervals that contain the
true value, with its Wilson 95 % interval.

Models (`MODELS`): `normal` (Gaussian speaker effects) at a true EER near 20 % and near 5 %
(the OO conditions, whose intervals start at 0); `t3` (the speaker effects Student t with 3
degrees of freedom, scaled to the same variance: a few speakers far off, misspecified for
any method that assumes Gaussian speakers); `goats` (one speaker in eight has target scores
lowered by 3: a bimodal population).

    python recipes/detection_power/coverage.py [--replications 150] [--speakers 2 3 ... 80] [--unit trials] [--pairs [--val-speakers N]]
    python recipes/detection_power/coverage.py --variance [--replications 200] [--speakers ...]

Prints, for the EER and then min Cllr, a markdown table, one row per speaker count, one
column per model (coverage, its Wilson interval, and how many intervals lay wholly below the
true value), and the count `pipeline.metrics.bootstrap.COVERED_SPEAKERS[metric]` follows
from: the smallest measured count from which (at it and every larger count measured) every
model's coverage is at least `RULE`. With `--pairs`, the same for a detection pair's
relative-drop, gap and `line` residual intervals (`PAIRS`: a validation and a test list of
`--speakers` speakers each, or a validation list of `--val-speakers`). With `--variance`, the
gap's variance across draws against the mean `gap_var` the speaker and the trial bootstrap
report (what the detectors take as a pair's sampling variance).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from pipeline.metrics.bootstrap import UNITS, bootstrap_ci
from pipeline.metrics.cllr import cllr_of_bins
from pipeline.metrics.detection import percentile_interval, relative_drop, wilson_interval
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


# the intervals `bootstrap_ci` gives: each one's label and how its true value is printed
SHOWN = {"eer": ("EER", lambda v: f"{100 * v:.2f} %"), "min_cllr": ("min Cllr", lambda v: f"{v:.3f}")}
METRICS = tuple(SHOWN)


def truths(model: str, draws: int, seed: int = 12345) -> dict[str, float]:
    """ROCCH-EER and min Cllr of the model's population: every trial's speaker effects drawn anew."""
    rng = np.random.default_rng(seed)
    kind, mu, goats = MODELS[model]
    tar = mu + SD["a"] * effects(rng, kind, draws) - GOAT_SHIFT * (rng.random(draws) < goats) + rng.normal(size=draws)
    non = sum(SD[k] * effects(rng, kind, draws) for k in "bcd") + rng.normal(size=draws)
    groups = group_scores(tar, non)
    bins = pav_bins(groups)
    return {"eer": float(rocch_eer(bins, groups.n_target, groups.n_nontarget)),
            "min_cllr": float(cllr_of_bins(bins, groups.n_target, groups.n_nontarget))}


def coverage(model: str, speakers: int, replications: int, truth: dict[str, float], *, utterances: int = 16,
             n_resamples: int = 1000, seed: int = 0, unit: str = "speakers") -> dict[str, tuple[int, int]]:
    """Per metric, how many of `replications` intervals (resampling `unit`) contain its
    `truth`, and how many lie wholly below it."""
    rng = np.random.default_rng([seed, speakers])
    counts = {metric: [0, 0] for metric in METRICS}
    for _ in range(replications):
        scores = trial_list(rng, model, speakers, utterances)
        tar, non = scores.pop("tar"), scores.pop("non")
        found = bootstrap_ci(tar, non, n_resamples, unit, **(scores if unit == "speakers" else {}))
        for metric, interval in (("eer", found.eer), ("min_cllr", found.min_cllr)):
            counts[metric][0] += interval.low <= truth[metric] <= interval.high
            counts[metric][1] += interval.high < truth[metric]
    return {metric: (hits, below) for metric, (hits, below) in counts.items()}


PAIRS = {  # label -> (validation model, test model) of a detection pair's two trial lists
    "matched (EER_val, EER_test ≈ 20 %)": ("normal, EER ≈ 20 %", "normal, EER ≈ 20 %"),
    "mismatched (EER_val ≈ 5 %, EER_test ≈ 20 %)": ("normal, EER ≈ 5 %", "normal, EER ≈ 20 %"),
}
LINE_SLOPES = (0.5, 1.5)  # `line`'s residual EER_val - (a + b·EER_test) at slopes b ≠ 1 (b = 1 is the gap's)
# a pair's intervals from its EER replicates: name -> its value from (EER_val, EER_test); a line's
# intercept shifts interval and true value alike, so it is left out
DERIVED = {"relative_drop": lambda val, test: relative_drop(test, val), "gap": lambda val, test: test - val,
           **{f"line_residual_{b:g}": lambda val, test, b=b: val - b * test for b in LINE_SLOPES}}


def pair_draws(pair: str, speakers: int, replications: int, rng, *, utterances: int, n_resamples: int,
               val_speakers: int | None = None, units: tuple[str, ...] = ("speakers",)):
    """Each of `replications` draws of a detection pair (`PAIRS[pair]`'s validation list of
    `val_speakers` or `speakers` speakers, then its test list of `speakers`): per list, {unit:
    `bootstrap_ci`'s result resampling that unit} (seed 0, as the confidence stage bootstraps
    every list, so the lists' replicates pair by index)."""
    for _ in range(replications):
        lists = []
        for model, count in zip(PAIRS[pair], (val_speakers or speakers, speakers)):
            scores = trial_list(rng, model, count, utterances)
            tar, non = scores.pop("tar"), scores.pop("non")
            lists.append({unit: bootstrap_ci(tar, non, n_resamples, unit, **(scores if unit == "speakers" else {}))
                          for unit in units})
        yield lists


def pair_coverage(pair: str, speakers: int, replications: int, truth: dict[str, float], *, utterances: int = 16,
                  n_resamples: int = 1000, seed: int = 0,
                  val_speakers: int | None = None) -> dict[str, tuple[int, int]]:
    """Per derived interval of a detection pair whose validation and test lists have
    `speakers` each (the validation list `val_speakers` when given; `PAIRS[pair]`'s models),
    how many of `replications` contain the true value in `truth` and how many lie wholly below
    it. The intervals are detection's: percentile intervals of `DERIVED`'s values (the relative
    drop, the gap EER_test - EER_val, `line`'s residual) over the two lists' paired replicates."""
    rng = np.random.default_rng([seed, speakers, 1] if val_speakers is None else [seed, val_speakers, speakers, 1])
    counts = {name: [0, 0] for name in DERIVED}
    for lists in pair_draws(pair, speakers, replications, rng, utterances=utterances, n_resamples=n_resamples,
                            val_speakers=val_speakers):
        replicates = [found["speakers"].eer_replicates for found in lists]
        for name, value in DERIVED.items():
            low, high = percentile_interval([x for x in map(value, *replicates) if x is not None], 0.95)
            counts[name][0] += low <= truth[name] <= high
            counts[name][1] += high < truth[name]
    return {name: (hits, below) for name, (hits, below) in counts.items()}


def gap_variances(pair: str, speakers: int, replications: int, *, utterances: int = 16, n_resamples: int = 1000,
                  seed: int = 0) -> dict[str, float]:
    """The variance of a detection pair's gap EER_test - EER_val across `replications` draws
    of `PAIRS[pair]` (`speakers` per list), and the mean `gap_var` each bootstrap unit reports
    (detection's: the variance of the paired replicates' differences).

    >>> found = gap_variances("matched (EER_val, EER_test ≈ 20 %)", 4, 3, n_resamples=50)
    >>> sorted(found)
    ['speakers', 'trials', 'true']
    """
    rng = np.random.default_rng([seed, speakers, 2])
    gaps, reported = [], {unit: [] for unit in UNITS}
    for val, test in pair_draws(pair, speakers, replications, rng, utterances=utterances, n_resamples=n_resamples,
                                units=UNITS):
        gaps.append(test["speakers"].eer.estimate - val["speakers"].eer.estimate)
        for unit in UNITS:
            reported[unit].append(np.var(np.subtract(test[unit].eer_replicates, val[unit].eer_replicates), ddof=1))
    return {"true": float(np.var(gaps, ddof=1)), **{unit: float(np.mean(v)) for unit, v in reported.items()}}


def variance_report(args) -> None:
    """Print, per speaker count and pair, the gap's true standard deviation and each bootstrap
    unit's mean reported variance as a share of the true one."""
    start, rows = time.time(), []
    for count in args.speakers:
        for pair in PAIRS:
            found = gap_variances(pair, count, args.replications, utterances=args.utterances,
                                  n_resamples=args.resamples, seed=args.seed)
            rows.append([str(count), pair, f"{100 * np.sqrt(found['true']):.2f}",
                         *(f"{found[unit] / found['true']:.2f}" for unit in UNITS)])
            print(" | ".join(rows[-1]), flush=True)
    print(markdown_table(["speakers per list", "pair", "gap's true sd (points)",
                          *(f"gap_var / true variance, unit={unit}" for unit in UNITS)], rows))
    print(f"{args.replications} draws per row (the true variance's relative standard error ≈ "
          f"{np.sqrt(2 / (args.replications - 1)):.2f}), {time.time() - start:.0f} s")


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


def report(columns: dict[str, dict[str, float]], measure, labels: dict[str, tuple[str, object]], first: str,
           args) -> None:
    """Measure and print one coverage table per interval: `columns` maps each column (a model
    or a pair) to its intervals' true values, `measure(column, count, truth)` gives
    {interval: (hits, below)}, `labels` each interval's label and how a true value is printed."""
    start = time.time()
    tables: dict[str, dict[int, dict[str, float]]] = {key: {} for key in labels}
    rows: dict[str, list[list[str]]] = {key: [] for key in labels}
    for count in args.speakers:
        cells = {key: [str(count)] for key in labels}
        for column, truth in columns.items():
            for key, (hits, below) in measure(column, count, truth).items():
                low, high = wilson_interval(hits, args.replications)
                tables[key].setdefault(count, {})[column] = hits / args.replications
                cells[key].append(f"{hits / args.replications:.3f} [{low:.3f}, {high:.3f}] ({below} below)")
        for key in labels:
            rows[key].append(cells[key])
            print(key, " | ".join(cells[key]), flush=True)
    for key, (label, shown) in labels.items():
        print(f"\n{label}:")
        print(markdown_table([first, *(f"{c} (true {shown(truth[key])})" for c, truth in columns.items())], rows[key]))
        print(f"smallest count from which every {label} coverage ≥ {RULE}: {marker(tables[key])}")
    print(f"{args.replications} replications per cell, {time.time() - start:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speakers", type=int, nargs="+", default=[*range(2, 9), 10, 12, 16, 20, 24, 32, 40, 60, 80])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--replications", type=int, default=150)
    parser.add_argument("--utterances", type=int, default=16)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--truth", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unit", default="speakers", choices=["speakers", "trials"],
                        help="what the bootstrap resamples (detect.bootstrap.unit)")
    parser.add_argument("--pairs", action="store_true",
                        help="the relative-drop, gap and line residual intervals of detection pairs instead "
                             "(`PAIRS`; --speakers per list)")
    parser.add_argument("--val-speakers", type=int, help="with --pairs: the validation list's speakers "
                                                           "(default: as many as the test list's, --speakers)")
    parser.add_argument("--variance", action="store_true", help="the pairs' gap variance each bootstrap unit "
                                                                "reports against the true one, instead")
    args = parser.parse_args()
    if args.val_speakers is not None and not args.pairs:
        parser.error("--val-speakers is the validation list of --pairs: give --pairs too")
    options = {"utterances": args.utterances, "n_resamples": args.resamples, "seed": args.seed}
    if args.variance:
        variance_report(args)
    elif args.pairs:
        eer = {m: truths(m, args.truth)["eer"] for m in {m for models in PAIRS.values() for m in models}}
        columns = {pair: {name: value(eer[val], eer[test]) for name, value in DERIVED.items()}
                   for pair, (val, test) in PAIRS.items()}
        report(columns, lambda pair, count, truth: pair_coverage(pair, count, args.replications, truth,
                                                                 val_speakers=args.val_speakers, **options),
               {key: (key, lambda v: f"{v:.3f}") for key in DERIVED},
               "speakers per list" if args.val_speakers is None else
               f"test speakers per list (validation {args.val_speakers})", args)
    else:
        report({m: truths(m, args.truth) for m in args.models},
               lambda model, count, truth: coverage(model, count, args.replications, truth, unit=args.unit, **options),
               SHOWN, "speakers per gender", args)


if __name__ == "__main__":
    main()
