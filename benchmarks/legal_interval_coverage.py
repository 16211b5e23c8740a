"""Coverage of the speaker intervals (Student t over speakers) of `singling_out_rate` and `identification_rate`.

Simulation: each replication draws a fresh population of speakers (means ~ N(0, I) times
`--signal`, utterances = mean + N(0, I) noise), `--enrolled` of the `--speakers` test speakers
enrolled with 5 utterances, and computes both rates with their 95 % intervals. The target
value is the rates' expectation over populations, estimated from `--truth` separate
replications; coverage is the share of `--replications` intervals that contain it (with its
binomial standard error).

    python benchmarks/legal_interval_coverage.py                  # seconds on one core
    python benchmarks/legal_interval_coverage.py --replications 1000 --truth 2000
"""
from __future__ import annotations

import argparse
import math

import numpy as np
from tqdm import tqdm

from pipeline.metrics.legal import identification_rate, singling_out_rate


def population(rng, args):
    """(test embeddings, test speakers, enrolment embeddings, enrolled speakers) of one draw."""
    means = args.signal * rng.normal(size=(args.speakers, args.dim))
    names = np.array([f"s{i:03d}" for i in range(args.speakers)])
    test = np.repeat(means, args.utterances, axis=0) + rng.normal(size=(args.speakers * args.utterances, args.dim))
    enrolled = np.repeat(np.arange(args.enrolled), 5)
    enrol = means[enrolled] + rng.normal(size=(len(enrolled), args.dim))
    return test, np.repeat(names, args.utterances), enrol, names[enrolled]


def rates(seed, args):
    data = population(np.random.default_rng(seed), args)
    single, _ = singling_out_rate(*data, population=args.population, length=args.length, runs=args.runs,
                                  seed=seed)
    ident, _ = identification_rate(*data, candidates=args.candidates, length=args.length, runs=args.runs,
                                   seed=seed)
    return single, ident


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speakers", type=int, default=16)
    parser.add_argument("--enrolled", type=int, default=10)
    parser.add_argument("--utterances", type=int, default=20)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--signal", type=float, default=0.35)
    parser.add_argument("--population", type=int, default=8)
    parser.add_argument("--candidates", type=int, default=5)
    parser.add_argument("--length", type=int, default=1)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--replications", type=int, default=300)
    parser.add_argument("--truth", type=int, default=600)
    args = parser.parse_args()
    truth = [rates(10**6 + i, args) for i in tqdm(range(args.truth), desc="expectation")]
    target = {"singling_out_rate": np.mean([s.value for s, _ in truth]),
              "identification_rate": np.mean([i.value for _, i in truth])}
    covered = {name: 0 for name in target}
    for seed in tqdm(range(args.replications), desc="intervals"):
        for name, estimate in zip(target, rates(seed, args)):
            covered[name] += estimate.low <= target[name] <= estimate.high
    for name, hits in covered.items():
        share = hits / args.replications
        print(f"{name}: expectation {target[name]:.4f} (from {args.truth} populations); 95 % interval coverage "
              f"{share:.3f} ± {math.sqrt(share * (1 - share) / args.replications):.3f} over {args.replications}")


if __name__ == "__main__":
    main()
