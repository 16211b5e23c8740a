"""False alarms of the detectors when their model is wrong, by simulation, no audio.

`simulate.py` draws sweeps from the detector's own model, which can only agree with it.
Here each case draws the detection rows of n trusted matched pairs and one new matched pair
(the negative) from another model, and judges them with `pipeline.metrics.detection.assess`
(`--method`, the default `gap` unless given; α = 5 %, no column test); the column case draws five equally strong
attackers scored on the same trials and judges them with the column test alone. Sampling
standard deviation σ = 3 points per gap, δ = 1 point, EER_test ~ U(0.1, 0.4) unless the case
says otherwise; each row's `gap_var` is what the two-way speaker bootstrap would report.

    python recipes/detection_power/misspecified.py [--draws 2000] [--seed 0] [--method gap|gap_re|line]

Prints one row per case: false alarms (flags of the new matched pair, or columns with any
attacker flagged) in % with the 95 % Wilson interval and counts, how often the verdict
was `undetermined`, and how often a new pair whose gap exceeds its matched value by exactly
`detect.tolerance` (5 points) was called `trustworthy` (at most α if the verdict's "1 − α
confidence" holds; the same draws, the new gap moved).
"""
from __future__ import annotations

import argparse
from collections.abc import Iterator

import numpy as np

from pipeline.metrics.detection import TRUSTWORTHY, UNDETERMINED, Settings, Trusted, assess, wilson_interval
from pipeline.metrics.detectors import MODELS
from pipeline.report.tables import markdown_table

SIGMA = 0.03  # sampling standard deviation of a gap (EER fraction)
DELTA = 0.01  # the matched gap EER_test - EER_val
GRID = 0.025  # coarse EERs: a 2.5-point grid (40 target trials)
TOLERANCE = Settings.tolerance  # detect.tolerance's default
BINOMIAL_TRIALS = 283  # effective trials per EER: a gap's sd is σ at EER 15 %, 3.9 points at 30 %


def own(rng, n):
    """The detector's own model: gaps δ + e, e ~ N(0, σ_j²), σ_j in [0.7σ, 1.3σ] and known."""
    sigmas = SIGMA * rng.uniform(0.7, 1.3, n + 1)
    return rng.uniform(0.1, 0.4, n + 1), DELTA + rng.normal(0, sigmas), sigmas ** 2


def identical(rng, n):
    """Every trusted gap exactly δ (zero spread); the new pair's gap δ + N(0, σ²)."""
    gaps = np.append(np.full(n, DELTA), DELTA + rng.normal(0, SIGMA))
    return rng.uniform(0.1, 0.4, n + 1), gaps, np.full(n + 1, SIGMA ** 2)


def coarse(rng, n):
    """EER_test and EER_val rounded to a 2.5-point grid (few trials): trusted gaps often equal."""
    eer_test, gaps, variances = own(rng, n)
    return np.round(eer_test / GRID) * GRID, np.round(gaps / GRID) * GRID, variances


def correlated(rho):
    def draw(rng, n):
        """Trusted sampling errors equicorrelated (ρ), the new pair's independent."""
        errors = np.sqrt(rho) * rng.normal() + np.sqrt(1 - rho) * rng.normal(size=n)
        gaps = DELTA + SIGMA * np.append(errors, rng.normal())
        return rng.uniform(0.1, 0.4, n + 1), gaps, np.full(n + 1, SIGMA ** 2)
    return draw


def offset(shift):
    def draw(rng, n):
        """The new system's matched gap `shift` σ wider than the trusted ones' (another family;
        narrower when negative: what the `trustworthy` verdict must survive)."""
        eer_test, gaps, variances = own(rng, n)
        gaps[-1] += shift * SIGMA
        return eer_test, gaps, variances
    return draw


def binomial(rng, n):
    """Sampling variance grows with the EER (binomial, 283 effective trials per EER); trusted
    EER_test ~ U(0.05, 0.25), the new pair's 0.30."""
    eer_test = np.append(rng.uniform(0.05, 0.25, n), 0.30)
    variances = 2 * eer_test * (1 - eer_test) / BINOMIAL_TRIALS
    return eer_test, DELTA + rng.normal(0, np.sqrt(variances)), variances


def heavy_tails(rng, n):
    """Sampling errors t with 3 degrees of freedom, scaled to variance σ²."""
    gaps = DELTA + SIGMA * rng.standard_t(3, n + 1) / np.sqrt(3)
    return rng.uniform(0.1, 0.4, n + 1), gaps, np.full(n + 1, SIGMA ** 2)


def between(ratio):
    def draw(rng, n):
        """A between-system offset u ~ N(0, (ratio·σ)²) beside the sampling error, which the
        bootstrap variance does not see (gap_re's failure case)."""
        eer_test, gaps, variances = own(rng, n)
        return eer_test, gaps + rng.normal(0, ratio * SIGMA, n + 1), variances
    return draw


def underestimated(ratio):
    def draw(rng, n):
        """Every pair's bootstrap variance reported `ratio` times the true one (trials resampled,
        not speakers: 0.28-0.32 measured, `coverage.py --variance`)."""
        eer_test, gaps, variances = own(rng, n)
        return eer_test, gaps, variances * ratio
    return draw


CASES = {  # label -> (draw, trusted pairs n)
    "the detector's own model": (own, 4),
    "trusted gaps identical (zero spread)": (identical, 4),
    "EERs on a 2.5-point grid (coarse, few trials)": (coarse, 4),
    "trusted gaps correlated, ρ = 0.5": (correlated(0.5), 4),
    "trusted gaps correlated, ρ = 0.8": (correlated(0.8), 4),
    "new system's gap offset by 0.5σ": (offset(0.5), 4),
    "new system's gap offset by 1σ": (offset(1.0), 4),
    "new system's gap offset by -0.5σ": (offset(-0.5), 4),
    "new system's gap offset by -1σ": (offset(-1.0), 4),
    "binomial sampling, new pair at 30 % EER, 3 trusted": (binomial, 3),
    "binomial sampling, new pair at 30 % EER, 5 trusted": (binomial, 5),
    "heavy tails (t, 3 df), 5 trusted": (heavy_tails, 5),
    "between-system spread τ = σ": (between(1.0), 4),
    "between-system spread τ = 2σ": (between(2.0), 4),
    "bootstrap variance half the true one": (underestimated(0.5), 4),
    "bootstrap variance 0.3 of the true one (trials resampled)": (underestimated(0.3), 4),
}


def rows_of(eer_test, gaps, variances) -> list[dict]:
    """Detection rows: trusted s0..s{n-1}, then the new matched pair `new`."""
    names = [f"s{i}" for i in range(len(gaps) - 1)] + ["new"]
    return [{"attack": "AA", "anonymizer": name, "attacker_anonymizer": name, "eer_test": float(x),
             "eer_val": float(x - g), "gap": float(g), "gap_var": float(v), "relative_drop": None}
            for name, x, g, v in zip(names, eer_test, gaps, variances)]


def new_pairs(case: str, draws: int, seed: int, method: str, excess: float = 0.0) -> Iterator[dict]:
    """The judged row of the new pair in each of `draws` sweeps of `case` (judged by `method`),
    its gap `excess` wider than the case draws it."""
    draw, n = CASES[case]
    rng = np.random.default_rng(seed)
    trusted, settings = Trusted(systems=tuple(f"s{i}" for i in range(n))), Settings(method=method, column=False)
    for _ in range(draws):
        eer_test, gaps, variances = draw(rng, n)
        gaps[-1] += excess
        judged, _ = assess(rows_of(eer_test, gaps, variances), trusted=trusted, settings=settings)
        yield judged[-1]


def false_alarms(case: str, draws: int, seed: int, method: str = "gap") -> tuple[int, int]:
    """(flags, undetermined verdicts) of the new matched pair over `draws` sweeps of `case`,
    judged by `method`."""
    flags = undetermined = 0
    for row in new_pairs(case, draws, seed, method):
        flags += row["flag"]
        undetermined += row["verdict"] == UNDETERMINED
    return flags, undetermined


def wrongly_trusted(case: str, draws: int, seed: int, method: str = "gap") -> int:
    """`trustworthy` verdicts of a new pair whose gap exceeds a matched one's by exactly
    detect.tolerance (5 points), over `draws` sweeps of `case`."""
    return sum(row["verdict"] == TRUSTWORTHY for row in new_pairs(case, draws, seed, method, TOLERANCE))


def column_of_equals(rng, attackers: int = 5, replicates: int = 1000) -> list[dict]:
    """Rows of `attackers` equally strong attackers scored on one evaluated system's trials:
    a shared speaker draw (sd 3 points, in the estimates and, paired, in the replicates) and
    each attacker's own error (sd 1 point)."""
    shared_replicates = rng.normal(0, 0.03, replicates)
    rows = []
    for k in range(attackers):
        observed = 0.2 + rng.normal(0, 0.01)
        rows.append({"attack": "AA", "anonymizer": "x", "attacker_anonymizer": f"a{k}", "enroll": "anonymized",
                     "trials": "anonymized", "eer_test": observed, "eer_val": observed - DELTA, "gap": DELTA,
                     "gap_var": None, "relative_drop": None,
                     "eer_test_replicates": list(observed + shared_replicates + rng.normal(0, 0.01, replicates))})
    return rows


def column_false_alarms(columns: int, seed: int) -> int:
    """Columns of five equally strong attackers in which the column test flagged any."""
    rng = np.random.default_rng(seed)
    flagged = 0
    for _ in range(columns):
        judged, _ = assess(column_of_equals(rng), trusted=Trusted(problem="none"), settings=Settings())
        flagged += any(r["flag"] for r in judged)
    return flagged


def rate(successes: int, n: int) -> str:
    low, high = wilson_interval(successes, n)
    return f"{100 * successes / n:.1f} [{100 * low:.1f}, {100 * high:.1f}] ({successes}/{n})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--method", default="gap", choices=list(MODELS))
    args = parser.parse_args(argv)
    rows = []
    for case, (_, n) in CASES.items():
        flags, undetermined = false_alarms(case, args.draws, args.seed, args.method)
        trusted = wrongly_trusted(case, args.draws, args.seed, args.method)
        rows.append([case, n, rate(flags, args.draws), f"{100 * undetermined / args.draws:.1f}",
                     rate(trusted, args.draws)])
    rows.append(["column test, 5 equally strong attackers: any flagged (per column)", "–",
                 rate(column_false_alarms(args.draws, args.seed), args.draws), "–", "–"])
    print(f"{args.draws} simulated sweeps per row, seed {args.seed}, σ = {100 * SIGMA:g} points, detector "
          f"{args.method} (false_alarm 0.05; the column test as by default); % with 95 % Wilson intervals")
    print(markdown_table(["case", "trusted pairs n", "false alarms %", "undetermined %",
                          "trustworthy at excess = tolerance %"], rows))


if __name__ == "__main__":
    main()
