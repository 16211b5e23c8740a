"""Figures of the privacy metrics (matplotlib, Agg canvas, written atomically).

- `similarity_matrices_figure`: voice similarity matrices in the papers' block layout,
  OO | OP over PO | PP, with PO = OP transposed (noe2020 Fig. 1, noe2022 Fig. 5);
- `ece_profiles_figure`: ZEBRA ECE profiles (noe2022 Figs. 7, 10);
- `det_figure`: DET curves on probit axes, with the ROC convex hull and the ROCCH-EER;
- `eer_matrix_figure` (`eer_matrix_plot`): EER of every attacker system x evaluated system (panariello2025 Table 1),
  with each pair's verdict;
- `detection_figure`: EER_val against EER_test with the matched line, its one-sided
  prediction bound and the flagged pairs (panariello2025 Fig. 2); `detection_plot` draws it.

Each takes results of `pipeline.metrics` and a path; the file type follows the suffix.
"""
from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from scipy.stats import norm

from pipeline.core.fileio import atomic_path
from pipeline.metrics.dcf import DetCurve
from pipeline.metrics.detection import NOT_FLAGGED, OVERESTIMATED, TRUSTWORTHY, UNDETERMINED
from pipeline.metrics.detectors import from_fit
from pipeline.metrics.results import JudgedPair
from pipeline.metrics.similarity import LOG_DOMAIN, SimilarityResult
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
    if variant in LOG_DOMAIN:  # mean LLRs (nats): centred on 0, no evidence either way
        finite = np.abs(block[np.isfinite(block)])
        bound = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        scale, label = {"vmin": -bound, "vmax": bound, "cmap": "RdBu_r"}, "mean LLR [nats]"
    else:
        scale, label = {"vmin": 0, "vmax": 1, "cmap": "viridis"}, "voice similarity"
    image = axes.imshow(np.ma.masked_invalid(block), interpolation="nearest", **scale)
    axes.axhline(n - 0.5, color="white", linewidth=1.5)
    axes.axvline(n - 0.5, color="white", linewidth=1.5)
    ticks = [n / 2 - 0.5, 3 * n / 2 - 0.5]
    axes.set_xticks(ticks, ["O", "P"])
    axes.set_yticks(ticks, ["O", "P"])
    axes.tick_params(length=0)
    figure.colorbar(image, ax=axes, label=label)
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


VERDICT_WIDTH = 13  # characters of a matrix cell's verdict per line ("overestimated")


def eer_matrix_figure(matrix: np.ndarray, attackers: list[str], evaluated: list[str], path: str | Path,
                      title: str | None = None, verdicts: np.ndarray | None = None) -> Path:
    """Write `eer_matrix_plot(matrix, attackers, evaluated, title, verdicts)` to `path`."""
    return save_figure(eer_matrix_plot(matrix, attackers, evaluated, title, verdicts), path)


def eer_matrix_plot(matrix: np.ndarray, attackers: list[str], evaluated: list[str], title: str | None = None,
                    verdicts: np.ndarray | None = None) -> Figure:
    """Heat map of EER (fractions, NaN where missing): rows the attacker's system, columns the
    evaluated system; each cell written in %, with its verdict under it when `verdicts` (an
    array of strings of the matrix's shape, "" where none) is given, an overestimated cell
    framed in red."""
    matrix = np.asarray(matrix, dtype=float)
    figure = Figure(figsize=(1.6 + 1.1 * len(evaluated), 1.4 + 0.8 * len(attackers)))
    axes = figure.add_subplot()
    image = axes.imshow(np.ma.masked_invalid(100 * matrix), vmin=0, vmax=50, cmap="magma_r", aspect="auto")
    for (i, j), value in np.ndenumerate(matrix):
        if np.isfinite(value):
            verdict = "" if verdicts is None else str(verdicts[i, j])
            colour = "white" if value > 0.3 else "black"
            axes.text(j, i, f"{100 * value:.1f}", ha="center", va="bottom" if verdict else "center", color=colour,
                      fontsize="small")
            if verdict:  # "1/3 overestimated" on two lines: one is wider than the cell
                axes.text(j, i, textwrap.fill(verdict, VERDICT_WIDTH), ha="center", va="top", color=colour,
                          fontsize="x-small", fontweight="bold" if OVERESTIMATED in verdict else "normal")
            if OVERESTIMATED in verdict:
                axes.add_patch(Rectangle((j - 0.46, i - 0.46), 0.92, 0.92, fill=False, edgecolor=FLAG, linewidth=2.5))
    axes.set_xticks(range(len(evaluated)), evaluated, rotation=30, ha="right")
    axes.set_yticks(range(len(attackers)), attackers)
    axes.set_xlabel("evaluated system (test data)")
    axes.set_ylabel("attacker trained on")
    figure.colorbar(image, ax=axes, label="EER_test [%]")
    axes.set_title(title or ("EER_test matrix" if verdicts is None else "EER_test [%] and verdict"))
    return figure


LABEL_LIMIT = 6
MARKERS = ("o", "s", "D", "^", "v", "P", "X", "h", "<", ">", "p", "d")
# tab20 without its greens (the trusted line's) and reds (the flag's), dark shades first
PALETTE = (0, 2, 8, 10, 12, 14, 16, 18, 1, 3, 9, 11, 13, 15, 17, 19)
FLAG = "red"


def detection_figure(rows: list[JudgedPair], fit: dict, path: str | Path, title: str | None = None) -> Path:
    """Write `detection_plot(rows, fit, title)` to `path`."""
    return save_figure(detection_plot(rows, fit, title), path)


def detection_plot(rows: list[JudgedPair], fit: dict, title: str | None = None) -> Figure:
    """EER_val (y) against EER_test (x), in %, one point per row, with the fitted line and its
    one-sided lower prediction bound when there is one.

    Colour: the attacker's training system; marker: the evaluated system (a star for a trusted
    pair, which is matched); filled and edged in black when trustworthy, pale when not
    flagged, ringed in red when overestimated, hollow when undetermined; thin bars: the
    bootstrap intervals. Up to LABEL_LIMIT points are also
    labelled "(evaluated, attacker)"; the legend sits right of the axes."""
    attackers = sorted({r.attacker_anonymizer for r in rows})
    evaluated = sorted({r.anonymizer for r in rows if r.role != "trusted"})
    colours = dict(zip(attackers, _palette(len(attackers))))
    markers = {system: MARKERS[i % len(MARKERS)] for i, system in enumerate(evaluated)}
    entries: list[tuple] = []  # (legend handle, label); a None handle is a section header
    figure = Figure()
    axes = figure.add_subplot()
    if "reason" not in fit:
        entries += _draw_line(axes, fit, [r.eer_test for r in rows])
    for r in rows:
        _draw_point(axes, r, colours[r.attacker_anonymizer],
                    "*" if r.role == "trusted" else markers[r.anonymizer])
        if len(rows) <= LABEL_LIMIT:
            axes.annotate(f"({r.anonymizer}, {r.attacker_anonymizer})", (100 * r.eer_test, 100 * r.eer_val),
                          fontsize="x-small", xytext=(5, 5), textcoords="offset points")
    if any(r.eer_test_ci or r.eer_val_ci for r in rows):
        entries.append((Line2D([], [], color="dimgrey", linewidth=0.7, alpha=0.5), "bootstrap intervals"))
    entries.append((None, "verdict"))
    entries += [(_verdict_handle(v), v) for v in (TRUSTWORTHY, NOT_FLAGGED, OVERESTIMATED, UNDETERMINED)
                if any(r.verdict == v for r in rows)]
    if any(r.role == "trusted" for r in rows):
        entries.append((_marker_handle("*", markersize=11), "trusted pair (calibrates)"))
    entries += [(None, "attacker trained on"), *((Patch(color=colours[a]), a) for a in attackers)]
    if evaluated:
        entries += [(None, "evaluated system"), *((_marker_handle(markers[e]), e) for e in evaluated)]
    legend = axes.legend([h or Line2D([], [], linestyle="none") for h, _ in entries], [label for _, label in entries],
                         loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize="small",
                         frameon=False)
    for text, (handle, _) in zip(legend.get_texts(), entries):
        if handle is None:
            text.set_fontweight("bold")
    figure.set_size_inches(6.4, max(4.8, 0.18 * len(entries)))
    axes.set_xlabel("EER_test [%]")
    axes.set_ylabel("EER_val [%]")
    axes.set_ylim(bottom=max(axes.get_ylim()[0], -1))
    axes.grid(alpha=0.3)
    axes.set_title(title or "Overestimation detection: (evaluated, attacker) pairs")
    return figure


def _draw_line(axes, fit: dict, xs: list[float]) -> list[tuple]:
    """The matched pairs' prediction of EER_val and its one-sided band over the points'
    EER_test; their legend entries."""
    model = from_fit(fit)
    low, high = min(xs), max(xs)
    pad = 0.1 * (high - low) + 0.01
    grid = np.linspace(max(0.0, low - pad), min(0.5, high + pad) if high < 0.5 else high + pad, 100)
    predicted = np.array([model.predict(x) for x in grid])
    alpha = fit.get("band_false_alarm", fit["false_alarm"])
    bound = predicted - np.array([model.margin(x, alpha) for x in grid])
    (drawn,) = axes.plot(100 * grid, 100 * predicted, color="C2", linestyle="--")
    band = axes.fill_between(100 * grid, 100 * bound, 100 * predicted, color="C2", alpha=0.15)
    return [(drawn, f"matched prediction, {fit['method']} ({fit['source']})"),
            (band, f"{100 * (1 - alpha):g} % one-sided margin")]


def _draw_point(axes, row: JudgedPair, colour, marker: str) -> None:
    """One pair: its intervals as thin bars, the marker filled or hollow by verdict, a red ring
    when overestimated."""
    x, y = 100 * row.eer_test, 100 * row.eer_val
    axes.errorbar(x, y, xerr=_bar(row.eer_test_ci, x), yerr=_bar(row.eer_val_ci, y), fmt="none",
                  ecolor=colour, elinewidth=0.7, alpha=0.5, zorder=2)
    size = 180 if marker == "*" else 50
    hollow = row.verdict == UNDETERMINED
    pale = row.verdict == NOT_FLAGGED
    axes.scatter([x], [y], s=size, marker=marker, facecolors="white" if hollow else [colour],
                 edgecolors=[colour] if hollow or pale else "black", linewidths=1.3 if hollow else 0.5,
                 alpha=0.45 if pale else 1.0, zorder=3)
    if row.verdict == OVERESTIMATED:
        axes.scatter([x], [y], s=2.5 * size + 60, marker="o", facecolors="none", edgecolors=FLAG, linewidths=1.4,
                     zorder=3)


def _bar(interval: list | None, value: float) -> list | None:
    """errorbar's [[below], [above]] of a [low, high] interval (fractions) around `value` (%)."""
    if not interval:
        return None
    return [[max(0.0, value - 100 * interval[0])], [max(0.0, 100 * interval[1] - value)]]


def _marker_handle(marker: str, **style) -> Line2D:
    """A grey legend marker, edged like the points."""
    return Line2D([], [], linestyle="none", marker=marker, markerfacecolor="dimgrey", markeredgecolor="black",
                  markeredgewidth=0.5, **style)


def _verdict_handle(verdict: str):
    """The legend entry of a verdict, drawn on a grey circle."""
    if verdict == UNDETERMINED:
        return Line2D([], [], linestyle="none", marker="o", markerfacecolor="white", markeredgecolor="dimgrey",
                      markeredgewidth=1.3)
    if verdict == OVERESTIMATED:
        return (_marker_handle("o"), Line2D([], [], linestyle="none", marker="o", markersize=13,
                                            markerfacecolor="none", markeredgecolor=FLAG, markeredgewidth=1.4))
    if verdict == NOT_FLAGGED:
        return Line2D([], [], linestyle="none", marker="o", markerfacecolor="dimgrey", markeredgecolor="dimgrey",
                      alpha=0.45)
    return _marker_handle("o")


def _palette(n: int) -> list:
    """`n` distinct colours, none green or red: tab20's sixteen (PALETTE), then viridis."""
    if n <= len(PALETTE):
        return [colormaps["tab20"].colors[i] for i in PALETTE[:n]]
    return [colormaps["viridis"](t) for t in np.linspace(0, 1, n)]


def speaker_eer_figure(conditions: Mapping[str, list[dict]], path: str | Path, clip: float = 0.5) -> Path:
    """Per-speaker EER of each condition (one panel each), speakers sorted from the least
    protected; the 50 % clip, the mean and the mean clipped at 50 % drawn across."""
    count = len(conditions)
    columns = min(count, 2)
    rows = -(-count // columns)
    figure = Figure(figsize=(6.0 * columns, 3.4 * rows))
    for index, (label, speakers) in enumerate(conditions.items()):
        axes = figure.add_subplot(rows, columns, index + 1)
        ordered = sorted(speakers, key=lambda s: (s["eer"], s["speaker"]))
        eers = 100 * np.array([s["eer"] for s in ordered])
        colours = ["C3" if e > 100 * clip else "C0" for e in eers]
        axes.bar(range(len(eers)), eers, color=colours)
        axes.axhline(100 * clip, color="black", linewidth=0.8, linestyle=":", label="50 % (clip)")
        axes.axhline(eers.mean(), color="C1", linewidth=1.2, label=f"mean {eers.mean():.1f} %")
        clipped = np.minimum(eers, 100 * clip).mean()
        axes.axhline(clipped, color="C2", linewidth=1.2, linestyle="--", label=f"clipped mean {clipped:.1f} %")
        axes.set_xticks(range(len(eers)), [s["speaker"] for s in ordered], rotation=90, fontsize="x-small")
        axes.set_ylabel("speaker EER [%]")
        axes.set_xlabel("enrolment speaker (red: EER above 50 %, counted as 50 % in the clipped mean)", fontsize="x-small")
        axes.set_ylim(0, max(100 * clip, float(eers.max())) * 1.08)
        axes.set_title(f"{label}: {len(eers)} speakers, least protected left", fontsize="small")
        axes.legend(fontsize="x-small", loc="upper left")
    figure.tight_layout()
    return save_figure(figure, path)
