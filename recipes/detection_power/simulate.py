"""False-alarm rate and power of the val-test detectors by simulation, no audio.

Every draw builds the detection rows of a sweep from a generative model with a known
mismatch and judges them with `pipeline.metrics.detection.assess`, the code the pipeline
runs (docs/detection.md, "False-alarm rate and power"):

- n trusted matched systems, one more matched system (not trusted: a *new* matched pair,
  the negative) and one mismatched pair (the positive);
- EER_test ~ U(0.1, 0.4); a matched pair's gap EER_test - EER_val = δ + u + e with
  δ = 0.01, u ~ N(0, τ²) the system's own offset, e ~ N(0, σ_s²) sampling noise, σ_s drawn
  in [0.7σ, 1.3σ] per pair and known to the detector (its bootstrap variance); the
  mismatched pair's gap adds Δ.

    python recipes/detection_power/simulate.py [--draws 4000] [--seed 0]

Prints, per method, number of trusted pairs n and τ/σ, the false-alarm rate (Δ = 0) and
the power at Δ = 3σ and 4σ, each with its 95 % Wilson interval; then the `trustworthy`
verdict's error (a pair whose excess gap is exactly `detect.tolerance`, 5 points, called
`trustworthy`: at most α if its "1 − α confidence" holds) and how often a matched pair gets
it; then, for the default `gap` at α/2 (its level beside the column test), the false-alarm
rate conditional on one trusted set: a user has one set, whose own rate can differ from the
average.
"""
from __future__ import annotations

import argparse
from collections.abc import Iterator

import numpy as np

from scipy.stats import norm

from pipeline.metrics.detection import TRUSTWORTHY, Settings, Trusted, assess, wilson_interval
from pipeline.metrics.detectors import Point, fit_model
from pipeline.report.tables import markdown_table

SIGMA = 0.03  # sampling standard deviation of a gap (EER fraction): the built-in sweep's order
DELTA = 0.01
TOLERANCE = Settings.tolerance  # detect.tolerance's default


def rows_of_a_draw(rng, n_trusted: int, tau: float, shift: float, sigma: float = SIGMA) -> list[dict]:
    """The detection rows of one simulated sweep: trusted s0..s{n-1}, the new matched pair
    `new` and the mismatched pair (`new`, `other`) whose gap is `shift` wider."""
    rows = []
    systems = [f"s{i}" for i in range(n_trusted)] + ["new", "other"]
    for system in systems:
        attacker = "other" if system == "other" else system
        evaluated = "new" if system == "other" else system
        own_sigma = sigma * rng.uniform(0.7, 1.3)
        gap = DELTA + rng.normal(0, tau) + rng.normal(0, own_sigma) + (shift if system == "other" else 0.0)
        eer_test = rng.uniform(0.1, 0.4)
        rows.append({"attack": "AA", "anonymizer": evaluated, "attacker_anonymizer": attacker, "eer_test": eer_test,
                     "eer_val": eer_test - gap, "gap": gap, "gap_var": own_sigma ** 2, "relative_drop": None})
    return rows


NEW, MISMATCHED = ("new", "new"), ("new", "other")  # the (evaluated, attacker) pairs judged


def sweeps(method: str, n_trusted: int, tau: float, shift: float, draws: int, seed: int,
           **settings) -> Iterator[dict]:
    """Each of `draws` simulated sweeps judged by `method` (no column test; `settings`: other
    `detect.*` values): its rows by (evaluated, attacker) pair."""
    rng = np.random.default_rng(seed)
    trusted = Trusted(systems=tuple(f"s{i}" for i in range(n_trusted)))
    judge = Settings(method=method, column=False, **settings)
    for _ in range(draws):
        judged, _ = assess(rows_of_a_draw(rng, n_trusted, tau, shift), trusted=trusted, settings=judge)
        yield {(r["anonymizer"], r["attacker_anonymizer"]): r for r in judged}


def flag_rates(method: str, n_trusted: int, tau: float, shift: float, draws: int, seed: int,
               false_alarm: float = 0.05) -> tuple[int, int]:
    """(flags of the new matched pair, flags of the mismatched pair) over `draws` sweeps."""
    negatives = positives = 0
    for pairs in sweeps(method, n_trusted, tau, shift, draws, seed, false_alarm=false_alarm):
        negatives += pairs[NEW]["flag"]
        positives += pairs[MISMATCHED]["flag"]
    return negatives, positives


def trust_rates(method: str, n_trusted: int, tau: float, draws: int, seed: int, tolerance: float = TOLERANCE,
                false_alarm: float = 0.05) -> tuple[int, int]:
    """(`trustworthy` verdicts of the pair whose gap is `tolerance` wider than a matched one's,
    `trustworthy` verdicts of the new matched pair) over `draws` sweeps."""
    wrong = matched = 0
    for pairs in sweeps(method, n_trusted, tau, tolerance, draws, seed, false_alarm=false_alarm, tolerance=tolerance):
        wrong += pairs[MISMATCHED]["verdict"] == TRUSTWORTHY
        matched += pairs[NEW]["verdict"] == TRUSTWORTHY
    return wrong, matched


def conditional_false_alarms(n_trusted: int, false_alarm: float, sets: int, seed: int) -> np.ndarray:
    """P(the new matched pair is flagged | the trusted set) for `sets` trusted sets drawn from
    the model (τ = 0): given the set, the new gap δ + N(0, σ_s²) is integrated exactly, its σ_s
    over a grid of [0.7σ, 1.3σ]. The val-test alone, at any EER_test (no power limit)."""
    rng = np.random.default_rng(seed)
    own_sigmas = SIGMA * np.linspace(0.7, 1.3, 25)
    rates = np.empty(sets)
    for k in range(sets):
        sigmas = SIGMA * rng.uniform(0.7, 1.3, n_trusted)
        gaps = DELTA + rng.normal(0, sigmas)
        model = fit_model("gap", [Point(0.3, 0.3 - g, s ** 2) for g, s in zip(gaps, sigmas)])
        bounds = np.array([model.mean_gap + model.margin(0.3, false_alarm, s ** 2) for s in own_sigmas])
        rates[k] = float(np.mean(norm.sf((bounds - DELTA) / own_sigmas)))
    return rates


def rate(successes: int, n: int) -> str:
    low, high = wilson_interval(successes, n)
    return f"{100 * successes / n:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = []
    for method in ("gap", "gap_re", "line"):
        for n_trusted in (3, 4, 5):
            for tau_ratio in (0.0, 0.5, 1.0, 2.0):
                tau = tau_ratio * SIGMA
                false_alarms, power3 = flag_rates(method, n_trusted, tau, 3 * SIGMA, args.draws, args.seed)
                _, power4 = flag_rates(method, n_trusted, tau, 4 * SIGMA, args.draws, args.seed + 1)
                rows.append([method, n_trusted, f"{tau_ratio:g}", rate(false_alarms, args.draws),
                             rate(power3, args.draws), rate(power4, args.draws)])
    print(f"{args.draws} simulated sweeps per row, seed {args.seed}, sampling sd σ = {100 * SIGMA:g} points, "
          "false_alarm 0.05; % with 95 % Wilson intervals")
    print(markdown_table(["method", "trusted pairs n", "τ/σ", "false alarms %", "power at Δ = 3σ %",
                          "power at Δ = 4σ %"], rows))
    trust = []
    for method in ("gap", "gap_re", "line"):
        for n_trusted in (3, 4, 5):
            for tau_ratio in (0.0, 1.0, 2.0):
                wrong, matched = trust_rates(method, n_trusted, tau_ratio * SIGMA, args.draws, args.seed)
                trust.append([method, n_trusted, f"{tau_ratio:g}", rate(wrong, args.draws), rate(matched, args.draws)])
    print(f"\n`trustworthy` verdicts (detect.tolerance {100 * TOLERANCE:g} points, false_alarm 0.05), %:")
    print(markdown_table(["method", "trusted pairs n", "τ/σ", "excess gap = tolerance (wrongly trusted)",
                          "matched pair (excess 0)"], trust))
    conditional = []
    for n_trusted in (3, 4, 5):
        rates = 100 * conditional_false_alarms(n_trusted, 0.025, args.draws, args.seed)
        conditional.append([n_trusted, f"{rates.mean():.2f}", f"{np.median(rates):.2f}",
                            f"{np.quantile(rates, 0.9):.2f}", f"{rates.max():.1f}"])
    print(f"\nFalse alarms of gap at α/2 = 2.5 % conditional on one trusted set (τ = 0, {args.draws} sets), %:")
    print(markdown_table(["trusted pairs n", "average", "median", "90th percentile", "largest"], conditional))


if __name__ == "__main__":
    main()
