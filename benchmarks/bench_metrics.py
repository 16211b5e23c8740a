"""Time every metric of `pipeline.metrics` on 10^6 and 10^7 trials, and reference
implementations (SpeechBrain's quadratic `EER`, a pure-Python PAV) on the sizes they finish.

    python benchmarks/bench_metrics.py                    # sizes 1e6 1e7, 60 s cap per reference
    python benchmarks/bench_metrics.py --sizes 1e5 --reference-cap 10

Scores: 10 % targets N(2, 1), 90 % non-targets N(0, 1), float64, fixed seed. Each timing is
the best of --repeat runs (wall clock, this process only). "summary (all scalar metrics)"
computes both EERs, Cllr, min Cllr, linkability, D_ECE, l_w and minDCF in one pass over the
sorted scores: that is the figure the <10 s goal on 10^7 trials refers to.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import time

import numpy as np
import scipy

from pipeline.metrics import (
    bootstrap_ci,
    cllr,
    det_curve,
    ece_profile,
    eer,
    eer_threshold,
    linkability,
    min_cllr,
    min_dcf,
    summary,
    zebra,
)

METRICS = {
    "eer (ROCCH)": eer,
    "eer_threshold (VPC sweep)": eer_threshold,
    "cllr": cllr,
    "min_cllr": min_cllr,
    "linkability": linkability,
    "zebra (D_ECE, l_w, tag)": zebra,
    "min_dcf": min_dcf,
    "det_curve": det_curve,
    "ece_profile (201 priors, PAV)": lambda tar, non: ece_profile(tar, non, actual=False),
    "bootstrap (10 trial resamples)": lambda tar, non: bootstrap_ci(tar, non, 10, unit="trials"),
    "summary (all scalar metrics)": summary,
}


def scores(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n_tar = n // 10
    return rng.normal(2.0, 1.0, n_tar), rng.normal(0.0, 1.0, n - n_tar)


def best_time(function, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def naive_pav_min_cllr(tar: np.ndarray, non: np.ndarray) -> float:
    """Textbook PAV in pure Python on the labels sorted by score (targets first on ties)."""
    order = np.argsort(np.concatenate((tar, non)), kind="mergesort")
    labels = (order < len(tar)).tolist()
    sums, widths = [], []
    for label in labels:
        sums.append(float(label))
        widths.append(1)
        while len(sums) > 1 and sums[-2] * widths[-1] >= sums[-1] * widths[-2]:
            total, width = sums.pop(), widths.pop()
            sums[-1] += total
            widths[-1] += width
    n_tar, n_non = len(tar), len(non)
    cost_tar = cost_non = 0.0
    for n_t, width in zip(sums, widths):
        n_n = width - n_t
        if n_t and n_n:
            cost_tar += n_t * np.log1p(n_n * n_tar / (n_t * n_non))
            cost_non += n_n * np.log1p(n_t * n_non / (n_n * n_tar))
    return (cost_tar / n_tar + cost_non / n_non) / (2 * np.log(2))


def run_references(cap: float, max_size: int, seed: int) -> list[str]:
    """Grow the size until the next run would exceed `cap` seconds (quadratic or linear)."""
    lines = []
    import torch
    from speechbrain.utils.metric_stats import EER

    torch.set_num_threads(len(os.sched_getaffinity(0)))
    for name, sizes, exponent, reference, ours in (
        ("SpeechBrain EER (quadratic)", [1_000, 3_000, 10_000, 30_000, 100_000], 2,
         lambda t, n: EER(torch.tensor(t, dtype=torch.float32), torch.tensor(n, dtype=torch.float32))[0],
         lambda t, n: eer_threshold(t.astype(np.float32), n.astype(np.float32))),
        ("pure-Python PAV min Cllr", [10_000, 100_000, 1_000_000, 10_000_000], 1,
         naive_pav_min_cllr, min_cllr),
    ):
        previous = None
        for size in sizes:
            if size > max_size:
                break
            if previous is not None and previous[1] * (size / previous[0]) ** exponent > cap:
                lines.append(f"{name:32s} {size:>10,d}  skipped: predicted "
                             f"{previous[1] * (size / previous[0]) ** exponent:.0f} s > cap {cap:g} s")
                break
            tar, non = scores(size, seed)
            seconds, value = best_time(lambda: reference(tar, non), 1)
            our_seconds, our_value = best_time(lambda: ours(tar, non), 3)
            same = "identical" if value == our_value else f"differs by {abs(value - our_value):.1e}"
            lines.append(f"{name:32s} {size:>10,d}  {seconds:9.3f} s   ours {our_seconds:7.3f} s   ({same})")
            previous = (size, seconds)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7])
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs per timing")
    parser.add_argument("--reference-cap", type=float, default=60.0,
                        help="skip a reference size predicted to take longer (seconds)")
    parser.add_argument("--reference-max-trials", type=int, default=10_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    cores = len(os.sched_getaffinity(0))
    print(f"# vpeval metrics benchmark, {datetime.date.today()}, {platform.processor() or platform.machine()}, "
          f"{cores} usable cores, Python {platform.python_version()}, numpy {np.__version__}, "
          f"scipy {scipy.__version__}, load average {os.getloadavg()[0]:.1f}")
    for size in (int(s) for s in args.sizes):
        tar, non = scores(size, args.seed)
        print(f"\n## {size:,d} trials ({len(tar):,d} target, {len(non):,d} non-target), best of {args.repeat}")
        total = 0.0
        for name, metric in METRICS.items():
            seconds, _ = best_time(lambda: metric(tar, non), args.repeat)
            if not name.startswith(("summary", "bootstrap", "det_curve", "ece_profile")):
                total += seconds
            print(f"{name:34s} {seconds:8.3f} s")
        print(f"{'sum of the separate scalar metrics':34s} {total:8.3f} s")
    print(f"\npeak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("\n## reference implementations (same score distribution)")
    for line in run_references(args.reference_cap, args.reference_max_trials, args.seed):
        print(line)


if __name__ == "__main__":
    main()
