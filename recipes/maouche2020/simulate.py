"""maouche2020 §4: the simulations that need no audio, with `pipeline.metrics`.

- Table 1: eight discrete scores 1..8 whose last three labels change: EER stays 0.25 while
  min Cllr moves (0.50, 0.59, 0.65 in the paper);
- Figure 2: Gaussian scores G_i ~ N(i, sigma_i), i = 1..3, each feeding mated (H) or
  non-mated scores by a key (k1, k2, k3); 5000 mated and 5000 non-mated scores for every
  (sigma_1, sigma_2, sigma_3) in {0.1, 0.5, 1, 1.5}^3; min Cllr against 1 - D<->sys.

    python recipes/maouche2020/simulate.py [--out FIGURE.png] [--per-class 5000] [--seed 0]

Prints both tables (Markdown) and saves the figure.
"""
from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from pipeline.metrics import eer, eer_threshold, linkability, min_cllr
from pipeline.report.figures import save_figure
from pipeline.report.tables import markdown_table

TABLE1 = {  # labels of scores 1..8 (1 = mated H), min Cllr and EER as printed in the paper
    "Case 1": ([0, 0, 1, 0, 1, 0, 1, 1], 0.50, 0.25),
    "Case 2": ([0, 0, 1, 0, 1, 1, 0, 1], 0.59, 0.25),
    "Case 3": ([0, 0, 1, 0, 1, 1, 1, 0], 0.65, 0.25),
}
CASES = {  # keys (k1, k2, k3) of the three Gaussians, 1 = mated
    "mated higher": [(0, 0, 1), (0, 1, 1)],
    "non-mated higher": [(1, 0, 0), (1, 1, 0)],
    "mated in-between": [(0, 1, 0)],
    "non-mated in-between": [(1, 0, 1)],
}
SIGMAS = (0.1, 0.5, 1.0, 1.5)


def table1() -> str:
    rows = []
    for case, (labels, paper_cllr, paper_eer) in TABLE1.items():
        scores, labels = np.arange(1, 9, dtype=float), np.asarray(labels, dtype=bool)
        tar, non = scores[labels], scores[~labels]
        rows.append([case, " ".join("H" if x else "-" for x in labels), f"{min_cllr(tar, non):.2f}", paper_cllr,
                     f"{eer(tar, non):.2f}", f"{eer_threshold(tar, non):.2f}", paper_eer])
    return markdown_table(["case", "labels of 1..8 (H mated)", "min Cllr", "paper", "EER (ROCCH)",
                           "EER (VPC sweep)", "paper"], rows)


def sample(keys, sigmas, per_class: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """per_class mated and non-mated scores, each class split evenly over its Gaussians."""
    out = {0: [], 1: []}
    for label in (0, 1):
        means = [(i + 1, s) for i, (k, s) in enumerate(zip(keys, sigmas)) if k == label]
        counts = np.full(len(means), per_class // len(means))
        counts[: per_class - counts.sum()] += 1
        out[label] = np.concatenate([rng.normal(m, s, n) for (m, s), n in zip(means, counts)])
    return out[1], out[0]


def gaussian_study(per_class: int, seed: int) -> dict[str, np.ndarray]:
    """(min Cllr, 1 - D_sys) of every sigma triple, by case."""
    rng = np.random.default_rng(seed)
    points = {}
    for case, key_sets in CASES.items():
        rows = []
        for keys in key_sets:
            for sigmas in itertools.product(SIGMAS, repeat=3):
                tar, non = sample(keys, sigmas, per_class, rng)
                rows.append((min_cllr(tar, non), 1 - linkability(tar, non)))
        points[case] = np.asarray(rows)
    return points


def figure2(points: dict[str, np.ndarray], path: Path) -> Path:
    figure = Figure(figsize=(5.6, 5.2))
    axes = figure.add_subplot()
    for index, (case, xy) in enumerate(points.items()):
        axes.scatter(xy[:, 1], xy[:, 0], s=10, color=f"C{index}", label=case)
    axes.plot([0, 1], [0, 1], color="grey", linewidth=0.8, linestyle="--")
    axes.set_xlabel(r"1 - $D_{\leftrightarrow}^{sys}$")
    axes.set_ylabel(r"$C_{llr}^{min}$ [bits]")
    axes.set_xlim(0, 1.02)
    axes.set_ylim(0, 1.02)
    axes.legend(fontsize="small")
    axes.set_title("maouche2020 Fig. 2: Gaussian scores")
    return save_figure(figure, path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("figure2.png"))
    parser.add_argument("--per-class", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print("## Table 1: discrete scores\n\n" + table1() + "\n")
    points = gaussian_study(args.per_class, args.seed)
    rows = [[case, len(xy), f"{xy[:, 0].min():.2f}", f"{xy[:, 0].max():.2f}", f"{xy[:, 1].min():.2f}",
             f"{xy[:, 1].max():.2f}", f"{np.abs(xy[:, 0] - xy[:, 1]).mean():.2f}"] for case, xy in points.items()]
    print(f"## Figure 2: Gaussian scores ({args.per_class} mated + {args.per_class} non-mated, seed {args.seed})\n")
    print(markdown_table(["case", "points", "min Cllr min", "min Cllr max", "1-D min", "1-D max",
                          "mean |min Cllr - (1-D)|"], rows) + "\n")
    print(f"figure: {figure2(points, args.out)}")


if __name__ == "__main__":
    main()
