"""Voice similarity matrices (noe2020, noe2022 §4) and the metrics derived from them.

Three trial tables feed them: OO (original against original), OP (original side a against
anonymised side b) and PP (anonymised against anonymised). A trial is
(speaker a, segment a, speaker b, segment b, score); target = same speaker.

- Trials comparing a segment with itself (OO, PP) or an utterance with its own
  anonymised version (OP: same segment id on both sides) are left out, as the papers do.
- OO and PP trials are unordered pairs: each pair once (a repeated pair is an error);
  they count for cells (i, j) and (j, i). OP cell (i, j) holds original speaker i against
  anonymised speaker j, so M_OP need not be symmetric (noe2020 §3.2 assumes it is, and VPC
  2022's scripts mirror it: docs/metrics.md, "Against the VoicePrivacy toolkits' own code").
- By default each table is calibrated on its own with PAV and Laplace's rule of
  succession (as VPC 2020 does); `calibrated=False` takes the scores as LLRs.
- Three similarity variants: "sigmoid_mean_llr", sigmoid of the mean LLR (noe2020 eq. 2,
  VPC 2020), and "geometric_mean", the geometric mean of the posteriors sigmoid(LLR)
  (noe2022 eq. 6), both posteriors in [0, 1]; and "mean_llr", the mean LLR itself (nats),
  noe2022 §8's first proposal: the diagonal against the off-diagonal cells compared in the
  log domain, so D_diag = |mean_i L(i, i) - mean_{i != j} L(i, j)| is a difference of
  mean LLRs (speaker-wise averaged: every speaker's cell counts once, whatever its trial
  count), and DeID = 1 - D_OP / D_OO, G_VD = 10 log10(D_PP / D_OO) follow from it. A
  difference of mean LLRs is the log of a ratio of geometric-mean likelihood ratios, so
  the measure stays on the LR scale, where a sigmoid compresses strong evidence towards 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit

from pipeline.core.errors import input_error
from pipeline.metrics.cllr import min_cllr, pav_llrs
from pipeline.metrics.inputs import first_repeat
from pipeline.metrics.zebra import zebra

SETS = ("oo", "op", "pp")
VARIANTS = ("sigmoid_mean_llr", "geometric_mean", "mean_llr")
LOG_DOMAIN = ("mean_llr",)  # variants whose matrices hold LLRs (nats), not posteriors


@dataclass(frozen=True)
class TrialTable:
    """Trials with both speakers and segments; `source` and `lines` locate them in a file."""

    speaker_a: np.ndarray
    segment_a: np.ndarray
    speaker_b: np.ndarray
    segment_b: np.ndarray
    score: np.ndarray
    source: str = "<trial table>"
    lines: np.ndarray | None = None

    @classmethod
    def from_rows(cls, rows, source: str = "<trial table>") -> TrialTable:
        """Build from (speaker_a, segment_a, speaker_b, segment_b, score) tuples."""
        columns = list(zip(*rows)) if rows else [(), (), (), (), ()]
        return cls(*(np.asarray(c, dtype=str) for c in columns[:4]),
                   score=np.asarray(columns[4], dtype=np.float64), source=source)

    def where(self, index: int) -> int | None:
        return int(self.lines[index]) if self.lines is not None else index + 1

    def is_target(self) -> np.ndarray:
        return self.speaker_a == self.speaker_b


@dataclass(frozen=True)
class SimilarityResult:
    """Matrices (speaker order `speakers`), their diagonal dominance, DeID and G_VD per
    variant, and the ZEBRA-based normalised metrics of noe2022 Tables 3-4.

    Values that are undefined (a zero denominator) are None with the reason in `notes`.
    """

    speakers: list[str]
    calibrated: bool
    matrices: dict
    d_diag: dict
    deid: dict
    g_vd: dict
    d_ece: dict
    min_cllr: dict
    d_ece_op_oo: float | None
    cllr_min_op_oo: float | None
    g_dece_pp_oo: float | None
    g_cllr_pp_oo: float | None
    n_trials: dict
    n_excluded: dict
    notes: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """JSON-ready copy: matrices as nested lists; NaN (no trials) as None."""
        out = dict(self.__dict__)
        out["matrices"] = {
            variant: {name: [[_or_none(v) for v in row] for row in matrix] for name, matrix in per_set.items()}
            for variant, per_set in self.matrices.items()
        }
        out["d_diag"] = {variant: {name: _or_none(v) for name, v in per_set.items()}
                         for variant, per_set in self.d_diag.items()}
        return out

    @classmethod
    def from_dict(cls, data: dict) -> SimilarityResult:
        """Inverse of `as_dict` (extra keys ignored): matrices back to arrays, None to NaN."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["matrices"] = {variant: {name: np.array([[np.nan if v is None else v for v in row] for row in m],
                                                      dtype=np.float64).reshape(len(m), -1)
                                       for name, m in per_set.items()}
                             for variant, per_set in data["matrices"].items()}
        known["d_diag"] = {variant: {name: np.nan if v is None else v for name, v in per_set.items()}
                           for variant, per_set in data["d_diag"].items()}
        return cls(**known)


def _or_none(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def similarity_metrics(oo: TrialTable, op: TrialTable, pp: TrialTable,
                       calibrated: bool = True) -> SimilarityResult:
    """Voice similarity matrices, D_diag, DeID, G_VD (every variant) and the normalised
    D_ECE(OP/OO), Cllr_min(OP/OO), G_DECE(PP/OO), G_Cllr(PP/OO)."""
    tables = {"oo": oo, "op": op, "pp": pp}
    kept = {name: _usable_trials(table, unordered=name != "op") for name, table in tables.items()}
    speakers = np.unique(np.concatenate(
        [side[kept[name]] for name, table in tables.items() for side in (table.speaker_a, table.speaker_b)]
    ).astype(str))
    notes: dict = {}
    matrices = {variant: {} for variant in VARIANTS}
    d_ece, cmin = {}, {}
    for name in SETS:
        table, keep = tables[name], kept[name]
        target = table.is_target()[keep]
        scores = table.score[keep]
        tar, non = _classes(table, scores, target)
        d_ece[name] = zebra(tar, non).d_ece
        cmin[name] = min_cllr(tar, non)
        llrs = scores.copy()
        if calibrated:
            llrs[target], llrs[~target] = pav_llrs(tar, non, laplace=True)
        row = np.searchsorted(speakers, table.speaker_a[keep].astype(str))
        col = np.searchsorted(speakers, table.speaker_b[keep].astype(str))
        count, llr_sum, log_posterior_sum = _cell_sums(
            row, col, [np.ones_like(llrs), llrs, -np.logaddexp(0.0, -llrs)], len(speakers),
            symmetric=name != "op")
        with np.errstate(invalid="ignore"):  # 0 / 0 in cells without trials gives NaN
            matrices["sigmoid_mean_llr"][name] = expit(llr_sum / count)
            matrices["geometric_mean"][name] = np.exp(log_posterior_sum / count)
            matrices["mean_llr"][name] = llr_sum / count
        empty = int((count == 0).sum())
        if empty:
            notes[f"matrix_{name}"] = (f"{empty} of {count.size} cells have no trials (NaN); "
                                       "D_diag averages the other cells")
    d_diag = {v: {n: _diagonal_dominance(matrices[v][n]) for n in SETS} for v in VARIANTS}
    deid, g_vd = {}, {}
    for variant in VARIANTS:
        dd = d_diag[variant]
        deid[variant] = _one_minus_ratio(dd["op"], dd["oo"], f"deid_{variant}", "D_diag(M_OO)", notes)
        g_vd[variant] = _gain_db(dd["pp"], dd["oo"], f"g_vd_{variant}", "D_diag(M_PP)", "D_diag(M_OO)", notes)
    return SimilarityResult(
        speakers=speakers.tolist(),
        calibrated=calibrated,
        matrices=matrices,
        d_diag=d_diag,
        deid=deid,
        g_vd=g_vd,
        d_ece=d_ece,
        min_cllr=cmin,
        d_ece_op_oo=_one_minus_ratio(d_ece["op"], d_ece["oo"], "d_ece_op_oo", "D_ECE(OO)", notes),
        cllr_min_op_oo=_one_minus_ratio(1 - cmin["op"], 1 - cmin["oo"], "cllr_min_op_oo",
                                        "1 - Cllr_min(OO)", notes),
        g_dece_pp_oo=_gain_db(d_ece["pp"], d_ece["oo"], "g_dece_pp_oo", "D_ECE(PP)", "D_ECE(OO)", notes),
        g_cllr_pp_oo=_gain_db(1 - cmin["pp"], 1 - cmin["oo"], "g_cllr_pp_oo",
                              "1 - Cllr_min(PP)", "1 - Cllr_min(OO)", notes),
        n_trials={name: int(kept[name].sum()) for name in SETS},
        n_excluded={name: int((~kept[name]).sum()) for name in SETS},
        notes=notes,
    )


def _usable_trials(table: TrialTable, unordered: bool) -> np.ndarray:
    """Mask of trials to use; refuses mismatched columns, bad scores and repeated pairs."""
    n = len(table.score)
    for column in (table.speaker_a, table.segment_a, table.speaker_b, table.segment_b):
        if len(column) != n:
            raise input_error(table.source, f"trial table columns differ in length ({len(column)} vs {n})")
    finite = np.isfinite(table.score)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise input_error(table.source, f"score {table.score[bad]} is not finite", table.where(bad))
    keep = table.segment_a != table.segment_b
    first, second = table.segment_a, table.segment_b
    if unordered:
        first, second = np.where(first <= second, first, second), np.where(first <= second, second, first)
    repeat = first_repeat(first, second)
    if repeat is not None:
        earlier, later = repeat
        kind = "unordered pair" if unordered else "pair"
        raise input_error(
            table.source,
            f"trial {table.segment_a[later]} / {table.segment_b[later]} repeats the {kind} at line {table.where(earlier)}",
            table.where(later),
        )
    return keep


def _classes(table: TrialTable, scores: np.ndarray, target: np.ndarray):
    if not target.any() or target.all():
        missing = "target (same-speaker)" if not target.any() else "non-target"
        raise input_error(table.source, f"no {missing} trials left to calibrate and score")
    return scores[target], scores[~target]


def _cell_sums(row, col, values, n: int, symmetric: bool) -> list[np.ndarray]:
    """Per-cell sums of each array in `values`; symmetric tables fill (i, j) and (j, i)."""
    cells = row * n + col
    mirrored = col * n + row
    out = []
    for value in values:
        total = np.bincount(cells, weights=value, minlength=n * n)
        if symmetric:
            off = row != col
            total += np.bincount(mirrored[off], weights=value[off], minlength=n * n)
        out.append(total.reshape(n, n))
    return out


def _diagonal_dominance(matrix: np.ndarray) -> float:
    """|mean of the diagonal - mean of the off-diagonal cells| (noe2020 eq. 3), NaN cells skipped."""
    diagonal = np.diag(matrix)
    off = matrix[~np.eye(len(matrix), dtype=bool)]
    if np.isnan(diagonal).all() or np.isnan(off).all():
        return float("nan")
    return float(abs(np.nanmean(diagonal) - np.nanmean(off)))


def _one_minus_ratio(numerator: float, denominator: float, key: str, name: str, notes: dict):
    if not np.isfinite(denominator) or not np.isfinite(numerator) or denominator == 0:
        notes[key] = f"undefined: {name} is {denominator}"
        return None
    return float(1 - numerator / denominator)


def _gain_db(numerator: float, denominator: float, key: str, top: str, bottom: str, notes: dict):
    if not (np.isfinite(numerator) and np.isfinite(denominator)) or denominator <= 0 or numerator <= 0:
        notes[key] = f"undefined: 10 log10({top} / {bottom}) with {top} = {numerator}, {bottom} = {denominator}"
        return None
    return float(10 * np.log10(numerator / denominator))
