"""Stage 7 — detect: is a privacy estimate overestimated? EER_val against EER_test.

panariello2025 (§4, Fig. 2): an attacker trained on data anonymised as the evaluation data
(a *matched* pair: attacker system = evaluated system) gives an (EER_test, EER_val) point on
one line across systems. A mismatched attacker has learnt its own system: its EER_val, on
held-out data of its own training set, stays low while its EER_test is high, so the point
lies *below* the matched line (EER_val lower than the line predicts for its EER_test) and
the privacy it reports is overestimated.

Method, per evaluated (attacker, evaluation data) pair:

1. EER_val (the attacker's validation split) and EER_test (mean of the female and male
   test trials, as VPC averages them), with bootstrap intervals (`pipeline.metrics`).
2. A least-squares line EER_val = a + b·EER_test on the matched pairs of anonymised data:
   those of the sweep, or those of a reference CSV the user gives. A matched pair that is
   itself one of the sweep's fit points is judged against the line fitted without it
   (leave-one-out), so it is judged as a new pair would be.
3. Residual r = EER_val - (a + b·EER_test) and margin m = t_{1-α, n-2} · s ·
   sqrt(1 + 1/n + (x - x̄)² / Sxx), the one-sided prediction bound of the line at false-alarm
   rate α (s: residual standard deviation, n fit points). Under the linear-Gaussian model
   of matched pairs a new matched pair has r < -m with probability exactly α; a pair with
   r < -m is flagged "overestimated", otherwise "trustworthy". No line (fewer than 3 fit
   points, or all at one EER_test) gives "undetermined" with the reason.

`run` returns one row per attack of an experiment; `assess` judges any list of pairs
(`pipeline.aggregate` calls it on every pair of a sweep).
"""
from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

from pipeline.errors import VpevalError, input_error

ORIGINAL = "original"
MIN_POINTS = 3
TRUSTWORTHY, OVERESTIMATED, UNDETERMINED = "trustworthy", "overestimated", "undetermined"
REFERENCE_COLUMNS = ("eer_test", "eer_val")


@dataclass(frozen=True)
class Line:
    """Least-squares line EER_val = intercept + slope · EER_test and what its prediction
    interval needs: fit size, residual standard deviation, mean and spread of EER_test."""

    intercept: float
    slope: float
    n: int
    residual_std: float
    mean_x: float
    sxx: float

    def predict(self, x: float) -> float:
        return self.intercept + self.slope * x

    def margin(self, x: float, false_alarm: float) -> float:
        """One-sided prediction bound below the line at `x`: a new matched pair falls
        below predict(x) - margin with probability `false_alarm`."""
        quantile = float(student_t.ppf(1 - false_alarm, self.n - 2))
        return quantile * self.residual_std * math.sqrt(1 + 1 / self.n + (x - self.mean_x) ** 2 / self.sxx)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_fit(cls, fit: dict) -> "Line":
        """The line of a detection fit record (`as_dict` plus other keys)."""
        return cls(**{field.name: fit[field.name] for field in fields(cls)})


def fit_line(points: list[tuple[float, float]]) -> Line | str:
    """The line through (eer_test, eer_val) points, or the reason there is none."""
    if len(points) < MIN_POINTS:
        return (f"{len(points)} matched pair(s) of anonymised data; the line needs at least {MIN_POINTS}: "
                "run a sweep of matched systems (recipes/mismatch_full) or give detect.reference=<csv>")
    x, y = (np.asarray(v, dtype=float) for v in zip(*points))
    sxx = float(((x - x.mean()) ** 2).sum())
    if sxx <= 0:
        return "every matched pair has the same EER_test: no line can be fitted"
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / sxx)
    intercept = float(y.mean() - slope * x.mean())
    residuals = y - (intercept + slope * x)
    std = math.sqrt(float((residuals ** 2).sum()) / (len(x) - 2))
    return Line(intercept, slope, len(x), std, float(x.mean()), sxx)


def read_reference(path: str | Path) -> list[tuple[float, float]]:
    """(eer_test, eer_val) pairs of a CSV with columns eer_test and eer_val (fractions in
    [0, 1]; other columns, e.g. a label, are kept out); at least 3 rows."""
    path = Path(path)
    if not path.is_file():
        raise input_error(path, "reference file of matched pairs not found (detect.reference)")
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in REFERENCE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise input_error(path, f"missing column(s) {', '.join(missing)}; the header must name "
                                    "eer_test and eer_val (EERs as fractions)", line=1)
        points = []
        for line, row in enumerate(reader, start=2):
            try:
                x, y = (float(row[c]) for c in REFERENCE_COLUMNS)
            except (TypeError, ValueError):
                raise input_error(path, "eer_test and eer_val must be numbers", line=line) from None
            if not (0 <= x <= 1 and 0 <= y <= 1):
                raise input_error(path, f"EERs are fractions in [0, 1], got eer_test={x}, eer_val={y} "
                                        "(write 0.27, not 27)", line=line)
            points.append((x, y))
    if len(points) < MIN_POINTS:
        raise input_error(path, f"{len(points)} matched pair(s); a reference line needs at least "
                                f"{MIN_POINTS}: add matched (eer_test, eer_val) rows")
    return points


def is_matched(pair: dict) -> bool:
    """A matched pair of anonymised data: the attacker trained on the evaluated system."""
    return pair["anonymizer"] == pair["attacker_anonymizer"] != ORIGINAL


def _mean_interval(records: list[dict]) -> list | None:
    """Interval of the mean EER of independent conditions from their percentile intervals:
    the distances below and above each estimate add in quadrature (female and male trials
    share no speaker, so their resamples are independent)."""
    intervals = [eer_interval(r) for r in records]
    if not intervals or any(i is None for i in intervals):
        return None
    k = len(records)
    mean = sum(r["eer"] for r in records) / k
    below = math.sqrt(sum((r["eer"] - low) ** 2 for r, (low, _) in zip(records, intervals))) / k
    above = math.sqrt(sum((high - r["eer"]) ** 2 for r, (_, high) in zip(records, intervals))) / k
    return [max(0.0, mean - below), min(1.0, mean + above)]


def pairs(records: list[dict], test_split: str = "test") -> list[dict]:
    """One (EER_val, EER_test) row per attack of an experiment that has both."""
    rows = []
    for attack in dict.fromkeys(r["attack"] for r in records):
        own = {r["set"]: r for r in records if r["attack"] == attack}
        tests = [own[s] for s in (f"{test_split}_f", f"{test_split}_m") if s in own]
        if "val" not in own or not tests:
            continue
        val = own["val"]
        eer_test = sum(r["eer"] for r in tests) / len(tests)
        rows.append({
            "attack": attack,
            "anonymizer": tests[0]["anonymizer"],
            "attacker_anonymizer": val["attacker_anonymizer"],
            "eer_val": val["eer"],
            "eer_val_ci": eer_interval(val),
            "eer_test": eer_test,
            "eer_test_ci": _mean_interval(tests),
            **{f"eer_{r['set']}": r["eer"] for r in tests},
            "relative_gap": (eer_test - val["eer"]) / val["eer"] if val["eer"] > 0 else None,
        })
    return rows


def eer_interval(record: dict) -> list | None:
    """[low, high] of a record's EER bootstrap interval, None when it has none."""
    low, high = record.get("eer_ci_low"), record.get("eer_ci_high")
    return None if low is None or high is None else [low, high]


def assess(rows: list[dict], *, reference: list[tuple[float, float]] | None = None,
           false_alarm: float = 0.05) -> tuple[list[dict], dict]:
    """Judge every pair; returns (rows with residual, margin, flag, verdict, reason; the fit).

    The line is fitted on `reference` when given, else on the matched pairs of `rows`."""
    if not 0 < false_alarm < 0.5:
        raise VpevalError(f"detect.false_alarm must lie in (0, 0.5), got {false_alarm}")
    matched = [i for i, r in enumerate(rows) if is_matched(r)]
    if reference is not None:
        source, points = "reference", list(reference)
    else:
        source, points = "matched pairs", [(rows[i]["eer_test"], rows[i]["eer_val"]) for i in matched]
    line = fit_line(points)
    judged = []
    for i, row in enumerate(rows):
        own_line = line
        if reference is None and i in matched and isinstance(line, Line):
            rest = [(rows[j]["eer_test"], rows[j]["eer_val"]) for j in matched if j != i]
            own_line = fit_line(rest)
            if isinstance(own_line, str):
                own_line = (f"a matched pair is judged against the line of the other matched pairs, "
                            f"and only {len(rest)} remain; at least {MIN_POINTS} are needed")
        judged.append({**row, **_judge(row, own_line, false_alarm)})
    fit = {"source": source, "false_alarm": false_alarm, "n_points": len(points),
           **(line.as_dict() if isinstance(line, Line) else {"reason": line})}
    return judged, fit


def _judge(row: dict, line: Line | str, false_alarm: float) -> dict:
    empty = {"predicted_eer_val": None, "residual": None, "margin": None, "flag": False}
    if row["anonymizer"] == ORIGINAL:
        return {**empty, "verdict": UNDETERMINED,
                "reason": "no anonymisation (reference condition): no privacy estimate to judge"}
    if isinstance(line, str):
        return {**empty, "verdict": UNDETERMINED, "reason": line}
    predicted = line.predict(row["eer_test"])
    residual = row["eer_val"] - predicted
    margin = line.margin(row["eer_test"], false_alarm)
    flag = residual < -margin
    where = "below" if residual < 0 else "above"
    reason = (f"EER_val {100 * abs(residual):.2f} points {where} the matched line; the "
              f"{100 * (1 - false_alarm):g} % prediction bound allows {100 * margin:.2f} below")
    return {"predicted_eer_val": predicted, "residual": residual, "margin": margin, "flag": bool(flag),
            "verdict": OVERESTIMATED if flag else TRUSTWORTHY, "reason": reason}


def run(records: list[dict], test_split: str = "test", reference: str | Path | None = None,
        false_alarm: float = 0.05) -> tuple[list[dict], dict]:
    """Detection rows of one experiment (one per attack with validation and test records)
    and the fit they were judged against."""
    points = read_reference(reference) if reference else None
    return assess(pairs(records, test_split), reference=points, false_alarm=false_alarm)
