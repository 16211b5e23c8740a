"""Figures of the privacy metrics (matplotlib, Agg canvas, written atomically).

- `similarity_matrices_figure`: voice similarity matrices in the papers' block layout,
  OO | OP over PO | PP, with PO = OP transposed (noe2020 Fig. 1, noe2022 Fig. 5);
- `ece_profiles_figure`: ZEBRA ECE profiles (noe2022 Figs. 7, 10);
- `det_figure`: DET curves on probit axes, with the ROC convex hull and the ROCCH-EER;
- `eer_matrix_figure`: EER of every attacker system x evaluated system (panariello2025 Table 1);
- `detection_figure`: EER_val against EER_test with the matched line, its one-sided
  prediction bound and the flagged pairs (panariello2025 Fig. 2).

Each takes results of `pipeline.metrics` and a path; the file type follows the suffix.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy.stats import norm

from pipeline.fileio import atomic_path
from pipeline.metrics.dcf import DetCurve
from pipeline.metrics.detection import Line
from pipeline.metrics.similarity import SimilarityResult
from pipeline.metrics.zebra import EceProfile

DET_TICKS = np.array([0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9])
DET_POINTS = 20000


def save_figure(figure: Figure, path: str | Path) -> Path:
    """Write `figure` to `path` (format from the suffix) atomically, 150 dpi, tight box."""
    FigureCanvasAgg(figure)
    path = Path(path)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format=path.suffix.lstrip(".") or "png", bbox_inches="tight", dpi=150)
    return path


def similarity_matrices_figure(result: SimilarityResult, path: str | Path,
                               variant: str = "geometric_mean", title: str | None = None) -> Path:
    """Heat map of [[M_OO, M_OP], [M_OP^T, M_PP]]; speakers in `result.speakers` order."""
    matrices = result.matrices[variant]
    n = len(result.speakers)
    block = np.block([[matrices["oo"], matrices["op"]], [matrices["op"].T, matrices["pp"]]])
    figure = Figure(figsize=(6.4, 5.6))
    axes = figure.add_subplot()
    image = axes.imshow(np.ma.masked_invalid(block), vmin=0, vmax=1, cmap="viridis", interpolation="nearest")
    axes.axhline(n - 0.5, color="white", linewidth=1.5)
    axes.axvline(n - 0.5, color="white", linewidth=1.5)
    ticks = [n / 2 - 0.5, 3 * n / 2 - 0.5]
    axes.set_xticks(ticks, ["O", "P"])
    axes.set_yticks(ticks, ["O", "P"])
    axes.tick_params(length=0)
    figure.colorbar(image, ax=axes, label="voice similarity")
    scores = "calibrated" if result.calibrated else "raw"
    axes.set_title(title or f"Voice similarity ({variant.replace('_', ' ')}, {scores} scores)")
    return save_figure(figure, path)


def ece_profiles_figure(profiles: Mapping[str, EceProfile], path: str | Path,
                        title: str | None = None, show_actual: bool = False) -> Path:
    """ECE against logit(prior): perfect privacy (black) and one PAV-calibrated profile per
    label; with `show_actual`, the profile of the scores as given (thin, dashed)."""
    figure = Figure(figsize=(6.4, 4.4))
    axes = figure.add_subplot()
    first = next(iter(profiles.values()))
    axes.plot(first.prior_log_odds, first.reference, color="black", linewidth=2, label="perfect privacy")
    for index, (label, profile) in enumerate(profiles.items()):
        colour = f"C{index % 10}"
        axes.plot(profile.prior_log_odds, profile.calibrated, color=colour, linewidth=1.5, label=label)
        if show_actual and profile.actual is not None:
            axes.plot(profile.prior_log_odds, profile.actual, color=colour, linewidth=0.8, linestyle="--")
    axes.set_xlabel(r"logit($\pi$)")
    axes.set_ylabel("ECE [bits]")
    axes.set_ylim(0, 1.05)
    axes.legend(fontsize="small")
    axes.set_title(title or "ZEBRA: empirical cross-entropy profiles")
    return save_figure(figure, path)


def det_figure(curves: Mapping[str, DetCurve], path: str | Path, title: str | None = None,
               limits: tuple[float, float] = (0.001, 0.9)) -> Path:
    """DET curves (probit axes, rates in %) with the ROCCH dashed and the EER marked."""
    low, high = norm.ppf(limits[0]), norm.ppf(limits[1])
    figure = Figure(figsize=(5.6, 5.6))
    axes = figure.add_subplot()
    for index, (label, curve) in enumerate(curves.items()):
        colour = f"C{index % 10}"
        keep = _thin(len(curve.pfa))
        axes.plot(_probit(curve.pfa[keep], low, high), _probit(curve.pmiss[keep], low, high),
                  color=colour, linewidth=1.2, label=label)
        axes.plot(_probit(curve.hull_pfa, low, high), _probit(curve.hull_pmiss, low, high),
                  color=colour, linewidth=0.8, linestyle="--")
    axes.plot([low, high], [low, high], color="grey", linewidth=0.6, linestyle=":")
    ticks = DET_TICKS[(DET_TICKS >= limits[0]) & (DET_TICKS <= limits[1])]
    labels = [f"{100 * t:g}" for t in ticks]
    axes.set_xticks(norm.ppf(ticks), labels)
    axes.set_yticks(norm.ppf(ticks), labels)
    axes.set_xlim(low, high)
    axes.set_ylim(low, high)
    axes.set_xlabel("false alarm rate [%]")
    axes.set_ylabel("miss rate [%]")
    axes.legend(fontsize="small")
    axes.set_title(title or "DET (dashed: ROC convex hull)")
    return save_figure(figure, path)


def _probit(rates: np.ndarray, low: float, high: float) -> np.ndarray:
    """probit of rates, clipped to the plot so 0 and 1 stay on the frame."""
    with np.errstate(divide="ignore"):
        return np.clip(norm.ppf(rates), low, high)


def _thin(n_points: int) -> np.ndarray:
    """Indices of at most DET_POINTS evenly spread points, ends included."""
    if n_points <= DET_POINTS:
        return np.arange(n_points)
    return np.unique(np.linspace(0, n_points - 1, DET_POINTS).round().astype(np.int64))


def eer_matrix_figure(matrix: np.ndarray, attackers: list[str], evaluated: list[str], path: str | Path,
                      title: str | None = None) -> Path:
    """Heat map of EER (fractions, NaN where missing): rows the attacker's system, columns the
    evaluated system; each cell written in %."""
    matrix = np.asarray(matrix, dtype=float)
    figure = Figure(figsize=(1.6 + 1.1 * len(evaluated), 1.4 + 0.8 * len(attackers)))
    axes = figure.add_subplot()
    image = axes.imshow(np.ma.masked_invalid(100 * matrix), vmin=0, vmax=50, cmap="magma_r", aspect="auto")
    for (i, j), value in np.ndenumerate(matrix):
        if np.isfinite(value):
            axes.text(j, i, f"{100 * value:.1f}", ha="center", va="center",
                      color="white" if value > 0.3 else "black", fontsize="small")
    axes.set_xticks(range(len(evaluated)), evaluated, rotation=30, ha="right")
    axes.set_yticks(range(len(attackers)), attackers)
    axes.set_xlabel("evaluated system (test data)")
    axes.set_ylabel("attacker trained on")
    figure.colorbar(image, ax=axes, label="EER_test [%]")
    axes.set_title(title or "EER_test matrix")
    return save_figure(figure, path)


VERDICT_STYLE = {"trustworthy": ("C0", "o"), "overestimated": ("C3", "v"), "undetermined": ("grey", "s")}


def detection_figure(rows: list[dict], fit: dict, path: str | Path, title: str | None = None) -> Path:
    """EER_val (y) against EER_test (x), in %: trusted pairs (the line's) as green stars, the
    others by verdict, with the fitted line and its one-sided lower prediction bound when
    there is one."""

    def is_trusted(row: dict) -> bool:
        return row.get("role") == "trusted"

    figure = Figure(figsize=(6.4, 5.0))
    axes = figure.add_subplot()
    xs = [r["eer_test"] for r in rows]
    if "slope" in fit:
        line = Line.from_fit(fit)
        low, high = min(xs + [fit["mean_x"]]), max(xs + [fit["mean_x"]])
        pad = 0.1 * (high - low) + 0.01
        grid = np.linspace(max(0.0, low - pad), min(0.5, high + pad) if high < 0.5 else high + pad, 100)
        predicted = line.predict(grid)
        bound = predicted - np.array([line.margin(x, fit["false_alarm"]) for x in grid])
        axes.plot(100 * grid, 100 * predicted, color="C2", linestyle="--", label=f"trusted line ({fit['source']})")
        axes.fill_between(100 * grid, 100 * bound, 100 * predicted, color="C2", alpha=0.15,
                          label=f"{100 * (1 - fit['false_alarm']):g} % one-sided prediction bound")
    for verdict, (colour, marker) in VERDICT_STYLE.items():
        own = [r for r in rows if r.get("verdict") == verdict and not is_trusted(r)]
        if own:
            axes.scatter([100 * r["eer_test"] for r in own], [100 * r["eer_val"] for r in own], color=colour,
                         marker=marker, label=verdict, zorder=3)
    trusted = [r for r in rows if is_trusted(r)]
    if trusted:
        axes.scatter([100 * r["eer_test"] for r in trusted], [100 * r["eer_val"] for r in trusted], color="C2",
                     marker="*", s=120, label="trusted", zorder=3,
                     edgecolors=["C3" if r.get("flag") else "none" for r in trusted])
    for r in rows:
        axes.annotate(f"({r['anonymizer']},{r['attacker_anonymizer']})", (100 * r["eer_test"], 100 * r["eer_val"]),
                      fontsize="x-small", xytext=(3, 3), textcoords="offset points")
    axes.set_xlabel("EER_test [%]")
    axes.set_ylabel("EER_val [%]")
    axes.set_ylim(bottom=max(axes.get_ylim()[0], -1))
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize="small")
    axes.set_title(title or "Overestimation detection: (evaluated, attacker) pairs")
    return save_figure(figure, path)
