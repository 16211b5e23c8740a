"""ZEBRA calibration extension (noe2022 §5.3): how well an adversary's calibration,
trained on one run of a stochastic anonymiser, transfers to a second run.

An adversary trains a calibration c on the scores of run 0 and applies it to the scores of
run 1; C_ECE is D_ECE (noe2022 eq. 13) of those calibrated LLRs, not re-calibrated:
0 means no usable evidence, negative means the calibration misleads (worse than a coin).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import expit

from pipeline.metrics.cllr import cllr
from pipeline.metrics.inputs import ScoreError, UndefinedMetricError, as_scores
from pipeline.metrics.roc import bin_llrs, group_scores, pav_bins
from pipeline.metrics.zebra import d_ece, zebra

CALIBRATIONS = ("linear", "isotonic")


@dataclass(frozen=True)
class LinearCalibration:
    """llr = scale * score + offset (logistic regression in the LLR domain)."""

    scale: float
    offset: float

    def __call__(self, scores) -> np.ndarray:
        return self.scale * np.asarray(scores, dtype=np.float64) + self.offset


@dataclass(frozen=True)
class IsotonicCalibration:
    """Piecewise-linear map through the PAV bins: flat across each bin's score range,
    linear between neighbouring bins, constant beyond the training scores."""

    knots: np.ndarray
    llrs: np.ndarray

    def __call__(self, scores) -> np.ndarray:
        return np.interp(np.asarray(scores, dtype=np.float64), self.knots, self.llrs)


def train_linear_calibration(tar, non) -> LinearCalibration:
    """Affine score-to-LLR map minimising Cllr on (tar, non): prior-weighted logistic
    regression at prior 0.5, as BOSARIS `train_linear_calibration` does.

    Raises `UndefinedMetricError` when the classes do not overlap: the optimum is then
    at infinite scale.
    """
    tar = as_scores(tar, "target").astype(np.float64)
    non = as_scores(non, "non-target").astype(np.float64)
    if non.max() <= tar.min() or tar.max() <= non.min():
        raise UndefinedMetricError(
            "linear calibration: target and non-target training scores do not overlap, "
            "so logistic regression has no finite solution"
        )
    centre = np.concatenate((tar, non)).mean()
    spread = np.concatenate((tar, non)).std()
    tar_std, non_std = (tar - centre) / spread, (non - centre) / spread
    params = _newton_logistic(tar_std, non_std)
    scale = params[0] / spread
    return LinearCalibration(scale=float(scale), offset=float(params[1] - scale * centre))


def _newton_logistic(tar: np.ndarray, non: np.ndarray) -> np.ndarray:
    """Minimise mean softplus(-(a t + b)) + mean softplus(a n + b) by damped Newton steps."""

    def objective(params):
        a, b = params
        return np.logaddexp(0, -(a * tar + b)).mean() + np.logaddexp(0, a * non + b).mean()

    params = np.zeros(2)
    value = objective(params)
    for _ in range(100):
        gradient, hessian = np.zeros(2), np.zeros((2, 2))
        for scores, sign in ((tar, -1.0), (non, 1.0)):
            z = params[0] * scores + params[1]
            slope = expit(sign * z)  # derivative of softplus(sign * z) is sign * slope
            curvature = slope * (1 - slope) / len(scores)
            design = np.stack((scores, np.ones_like(scores)))
            gradient += design @ (sign * slope) / len(scores)
            hessian += (design * curvature) @ design.T
        step = np.linalg.solve(hessian, gradient)
        shrink = 1.0
        while objective(params - shrink * step) > value and shrink > 1e-10:
            shrink /= 2
        params = params - shrink * step
        previous, value = value, objective(params)
        if np.abs(shrink * step).max() < 1e-12 or previous - value <= 1e-16 * abs(previous):
            break
    return params


def train_isotonic_calibration(tar, non) -> IsotonicCalibration:
    """PAV with Laplace's rule of succession on (tar, non), as a map for any score.

    LLRs are logit(p) - log(Nt/Nn) and finite thanks to the pseudo-counts.
    """
    groups = group_scores(tar, non)
    bins = pav_bins(groups, laplace=True)
    llrs = bin_llrs(bins, groups.n_target, groups.n_nontarget)
    n_groups = len(groups.scores)
    # augmented group g (pseudo groups 0 and n_groups + 1) is real group g - 1
    first_real = np.maximum(bins.group_start, 1)
    last_real = np.minimum(np.append(bins.group_start[1:], n_groups + 2) - 1, n_groups)
    holds_real = first_real <= last_real
    low = groups.scores[first_real[holds_real] - 1]
    high = groups.scores[last_real[holds_real] - 1]
    return IsotonicCalibration(
        knots=np.column_stack((low, high)).ravel(), llrs=np.repeat(llrs[holds_real], 2)
    )


def c_ece(train_tar, train_non, test_tar, test_non, method: str = "linear") -> float:
    """Expected calibration distortion C_ECE (bits) of a calibration trained on one run
    and applied to another (noe2022 eqs. 15-16). `method`: "linear" or "isotonic"."""
    calibration = _train(method, train_tar, train_non)
    return d_ece(calibration(as_scores(test_tar, "target")), calibration(as_scores(test_non, "non-target")))


def _train(method: str, tar, non):
    if method == "linear":
        return train_linear_calibration(tar, non)
    if method == "isotonic":
        return train_isotonic_calibration(tar, non)
    raise ScoreError(f"unknown calibration {method!r}; choose from {', '.join(CALIBRATIONS)}")


@dataclass(frozen=True)
class CalibrationExtension:
    """noe2022 Table 2 / Fig. 8 quantities for two runs of one anonymiser.

    D_ECE of each run (oracle calibration), and for each calibration trained on run 0 and
    applied to run 1: C_ECE and the Cllr of the calibrated run-1 LLRs. A None value comes
    with its reason in `notes`.
    """

    d_ece_run0: float
    d_ece_run1: float
    c_ece_linear: float | None
    cllr_linear: float | None
    c_ece_isotonic: float
    cllr_isotonic: float
    notes: dict

    def as_dict(self) -> dict:
        return asdict(self)


def calibration_extension(run0_tar, run0_non, run1_tar, run1_non) -> CalibrationExtension:
    """All calibration-extension metrics: train on run 0, evaluate on run 1."""
    results, notes = {}, {}
    for method in CALIBRATIONS:
        try:
            calibration = _train(method, run0_tar, run0_non)
        except UndefinedMetricError as reason:
            results[method] = (None, None)
            notes[f"c_ece_{method}"] = notes[f"cllr_{method}"] = str(reason)
            continue
        tar_llr = calibration(as_scores(run1_tar, "target"))
        non_llr = calibration(as_scores(run1_non, "non-target"))
        results[method] = (d_ece(tar_llr, non_llr), cllr(tar_llr, non_llr))
    return CalibrationExtension(
        d_ece_run0=zebra(run0_tar, run0_non).d_ece,
        d_ece_run1=zebra(run1_tar, run1_non).d_ece,
        c_ece_linear=results["linear"][0],
        cllr_linear=results["linear"][1],
        c_ece_isotonic=results["isotonic"][0],
        cllr_isotonic=results["isotonic"][1],
        notes=notes,
    )
