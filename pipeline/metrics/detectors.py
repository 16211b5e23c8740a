"""What matched pairs predict of a pair's EER_val, and how far below it a flag needs.

A detector is fitted on the trusted matched pairs of one calibration set (one group and
seed) and, for any (EER_test, EER_val) pair, gives the EER_val the matched pairs predict
(`predict`) and the one-sided margin below it that a matched pair crosses with probability
`false_alarm` (`margin`). Three models, `detect.method`:

- `gap` (default): the gap g = EER_test - EER_val of matched pairs is δ + u + e, u the
  system's own offset (between-system variance τ²), e the pair's sampling error, of variance
  v its two-way speaker bootstrap variance. With s² the trusted gaps' sample variance, v̄
  their mean bootstrap variance and v the judged pair's own, the margin is
  t(1-α; n-1)·sqrt(v + max(s² - v̄, 0) + max(s², v̄)/n): the pair's own sampling variance
  (which grows with its EER), the between-system variance by moments, and the variance of
  the mean gap, floored at the sampling variance so that trusted gaps that happen to agree
  cannot make the interval narrower than sampling allows. For v = v̄ and s² ≥ v̄ it is the
  exact one-sided prediction bound of a new gap under iid N(δ, σ²) gaps; otherwise wider.
  With validation speakers unseen in training (`split.holdout=unseen`, the default) a
  matched attacker meets its evaluation data's distribution on both sides, so δ is near 0.
- `gap_re`: random effects with each point's own sampling variance v (the bootstrap
  variance of its gap): g_j = δ + u_j + e_j, u ~ N(0, τ²) between systems, e_j ~ N(0, v_j).
  δ and τ² by DerSimonian-Laird; margin t(1-α; n-1)·sqrt(h·(v + τ² + Var δ)), h the modified
  Hartung-Knapp factor max(1, Σ w_j (g_j - δ)² / (n-1)) with w_j = 1/(v_j + τ²): the
  trusted gaps' spread about δ in units of their predicted variance, never below 1. The t
  quantile and h pay for τ², which 3-5 points often estimate as 0 (a normal quantile on
  the DerSimonian-Laird variance alone had 7-10 % false alarms at α = 5 % once τ reached
  the sampling deviation; docs/detection.md has the simulation).
- `line`: panariello2025's picture, EER_val = a + b·EER_test by least squares, margin
  t(1-α; n-2)·s·sqrt(1 + 1/n + (x - x̄)²/Sxx) (the one-sided prediction bound).

Each model's `as_dict` is the detection fit record, and `from_fit` rebuilds it (figures).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import numpy as np
from scipy.stats import t as student_t

from pipeline.metrics.bootstrap import MIN_SPEAKERS

SAME_GAP = 1e-6  # trusted gaps closer than this (EER fraction) are the same: replicates are rounded to 1e-6


@dataclass(frozen=True)
class Point:
    """One matched pair as a model sees it: EER_test, EER_val, the sampling variance of its
    gap and the speakers behind it (None when unknown)."""

    eer_test: float
    eer_val: float
    gap_var: float | None = None
    speakers: int | None = None  # the fewest speakers the bootstrap of its EER_val or EER_test resampled

    @property
    def gap(self) -> float:
        return self.eer_test - self.eer_val


@dataclass(frozen=True)
class GapModel:
    """`gap`: matched gaps around δ (`mean_gap`), their sample standard deviation `gap_std`
    and the trusted pairs' mean bootstrap variance `mean_var`."""

    n: int
    mean_gap: float
    gap_std: float
    mean_var: float
    method = "gap"
    min_points = 2

    @classmethod
    def fit(cls, points: list[Point]) -> "GapModel | str":
        if any(p.gap_var is None or p.gap_var <= 0 for p in points):
            return ("gap needs every trusted pair's bootstrap variance (its EER replicates; a CSV's gap_var column, "
                    "which `vpeval aggregate` writes)")
        gaps = np.array([p.gap for p in points])
        if np.ptp(gaps) < SAME_GAP:
            return (f"every trusted pair has the same gap EER_test - EER_val ({100 * gaps[0]:.2f} points; coarse EERs "
                    "from few trials?): their spread between systems cannot be estimated; use more test speakers "
                    "and trials, or other trusted systems")
        return cls(len(gaps), float(gaps.mean()), float(gaps.std(ddof=1)), float(np.mean([p.gap_var for p in points])))

    def predict(self, eer_test: float) -> float:
        return eer_test - self.mean_gap

    def margin(self, eer_test: float, false_alarm: float, gap_var: float | None = None) -> float:
        """t(1-α; n-1)·sqrt(v + max(s² - v̄, 0) + max(s², v̄)/n), v the judged pair's bootstrap
        variance (v̄ when unknown, as for the band of a figure)."""
        own = self.mean_var if gap_var is None else gap_var
        spread = self.gap_std ** 2
        variance = own + max(spread - self.mean_var, 0.0) + max(spread, self.mean_var) / self.n
        return float(student_t.ppf(1 - false_alarm, self.n - 1)) * math.sqrt(variance)

    def describe(self) -> str:
        return (f"matched gap EER_test - EER_val = {100 * self.mean_gap:.2f} points, standard deviation "
                f"{100 * self.gap_std:.2f} over {self.n} trusted pairs ({self.n - 1} degrees of freedom), their "
                f"sampling standard deviation {100 * math.sqrt(self.mean_var):.2f} beside each judged pair's own")


@dataclass(frozen=True)
class RandomGapModel:
    """`gap_re`: δ (`mean_gap`), between-system variance `tau2`, Var δ (`mean_var`) and the
    modified Hartung-Knapp factor `hartung_knapp` (at least 1)."""

    n: int
    mean_gap: float
    tau2: float
    mean_var: float
    typical_var: float  # the trusted points' mean sampling variance (the band drawn in figures)
    hartung_knapp: float
    method = "gap_re"
    min_points = 2

    @classmethod
    def fit(cls, points: list[Point]) -> "RandomGapModel | str":
        if any(p.gap_var is None or p.gap_var <= 0 for p in points):
            return "gap_re needs every trusted pair's bootstrap variance (its EER replicates)"
        gaps, variances = np.array([p.gap for p in points]), np.array([p.gap_var for p in points])
        weights = 1 / variances
        pooled = float((weights * gaps).sum() / weights.sum())
        q = float((weights * (gaps - pooled) ** 2).sum())
        tau2 = max(0.0, (q - (len(gaps) - 1)) / float(weights.sum() - (weights ** 2).sum() / weights.sum()))
        star = 1 / (variances + tau2)
        mean_gap = float((star * gaps).sum() / star.sum())
        spread = float((star * (gaps - mean_gap) ** 2).sum()) / (len(gaps) - 1)
        return cls(len(gaps), mean_gap, tau2, float(1 / star.sum()), float(variances.mean()), max(1.0, spread))

    def predict(self, eer_test: float) -> float:
        return eer_test - self.mean_gap

    def margin(self, eer_test: float, false_alarm: float, gap_var: float | None = None) -> float:
        """t(1-α; n-1)·sqrt(h·(v + τ² + Var δ)), v the judged pair's bootstrap variance (the
        trusted pairs' mean when unknown)."""
        own = self.typical_var if gap_var is None else gap_var
        variance = self.hartung_knapp * (own + self.tau2 + self.mean_var)
        return float(student_t.ppf(1 - false_alarm, self.n - 1)) * math.sqrt(variance)

    def describe(self) -> str:
        return (f"matched gap EER_test - EER_val = {100 * self.mean_gap:.2f} points over {self.n} trusted pairs, "
                f"between-system standard deviation {100 * math.sqrt(self.tau2):.2f} beside each pair's own "
                f"bootstrap variance, Hartung-Knapp factor {self.hartung_knapp:.2f} ({self.n - 1} degrees of freedom)")


@dataclass(frozen=True)
class Line:
    """`line`: least squares EER_val = intercept + slope · EER_test and what its prediction
    interval needs: fit size, residual standard deviation, mean and spread of EER_test."""

    intercept: float
    slope: float
    n: int
    residual_std: float
    mean_x: float
    sxx: float
    method = "line"
    min_points = 3

    @classmethod
    def fit(cls, points: list[Point]) -> "Line | str":
        x, y = (np.array(v, dtype=float) for v in zip(*((p.eer_test, p.eer_val) for p in points)))
        if np.ptp(x) == 0:  # not Sxx <= 0: the mean of equal values can differ from them by rounding
            return "every trusted pair has the same EER_test: no line can be fitted"
        sxx = float(((x - x.mean()) ** 2).sum())
        slope = float(((x - x.mean()) * (y - y.mean())).sum() / sxx)
        intercept = float(y.mean() - slope * x.mean())
        residuals = y - (intercept + slope * x)
        std = math.sqrt(float((residuals ** 2).sum()) / (len(x) - 2))
        if std < SAME_GAP:
            return ("every trusted pair lies on one line (coarse EERs from few trials?): no residual spread to "
                    "bound a prediction; use more test speakers and trials, or other trusted systems")
        return cls(intercept, slope, len(x), std, float(x.mean()), sxx)

    def predict(self, eer_test: float) -> float:
        return self.intercept + self.slope * eer_test

    def margin(self, eer_test: float, false_alarm: float, gap_var: float | None = None) -> float:
        """One-sided prediction bound below the line at `eer_test`: a new matched pair falls
        below predict(x) - margin with probability `false_alarm`."""
        quantile = float(student_t.ppf(1 - false_alarm, self.n - 2))
        return quantile * self.residual_std * math.sqrt(1 + 1 / self.n + (eer_test - self.mean_x) ** 2 / self.sxx)

    def describe(self) -> str:
        return (f"line EER_val = {self.intercept:.4f} + {self.slope:.4f} · EER_test, residual standard deviation "
                f"{100 * self.residual_std:.2f} points over {self.n} trusted pairs")


MODELS = {model.method: model for model in (GapModel, RandomGapModel, Line)}
Model = GapModel | RandomGapModel | Line


def fit_model(method: str, points: list[Point]) -> Model | str:
    """The `method` model of trusted `points`, or the reason there is none."""
    model = MODELS[method]
    if len(points) < model.min_points:
        return (f"{len(points)} trusted pair(s); method {method} needs at least {model.min_points}: run a sweep "
                "of the matched systems named in detect.trusted (recipes/mismatch_full) or give "
                "detect.trusted=<csv>")
    few = sorted({p.speakers for p in points if p.speakers is not None and p.speakers < MIN_SPEAKERS})
    if few:
        return (f"a trusted pair's EER comes from {few[0]} speaker(s), fewer than the {MIN_SPEAKERS} the speaker "
                "bootstrap needs: its sampling variance is unknown; use more test and validation speakers")
    return model.fit(points)


def as_fit(model: Model) -> dict:
    """The fit record of a model (its parameters and `method`)."""
    return {"method": model.method, **asdict(model)}


def from_fit(fit: dict) -> Model:
    """The model of a fit record (`as_fit` plus other keys)."""
    model = MODELS[fit.get("method", "line")]
    return model(**{field.name: fit[field.name] for field in fields(model)})
