"""Detection statistics: is a privacy estimate overestimated? EER_val against EER_test.

panariello2025 (§4, Fig. 2): an attacker trained on data anonymised as the evaluation data
(a *matched* pair: attacker system = evaluated system) gives an (EER_test, EER_val) point on
one line across systems. A mismatched attacker has learnt its own system: its EER_val, on
held-out data of its own training set, stays low while its EER_test is high, so the point
lies *below* the matched line (EER_val lower than the line predicts for its EER_test) and
the privacy it reports is overestimated.

Method, per evaluated (attacker, evaluation data) pair:

1. EER_val (the attacker's validation split) and EER_test (mean of the female and male
   test trials, as VPC averages them), with bootstrap intervals (`pipeline.metrics`), and
   the paper's relative drop (EER_test - EER_val) / EER_test (panariello2025: (B3,B3)
   27 % -> 11 % is a 60 % drop) with its bootstrap interval.
2. The line EER_val = a + b·EER_test is fitted by least squares on the *trusted* pairs only
   (`detect.trusted`: the matched pairs of the systems named there, one point per pair, its
   seeds averaged, or the rows of a CSV of matched pairs), within each group of jobs that
   share corpus, attacker configuration and backend. Every other pair is judged against it,
   never used to fit it; a trusted pair is judged against the line of the other trusted
   pairs (leave-one-out), as a new pair would be.
3. Residual r = EER_val - (a + b·EER_test) (below the line: r < 0, with the bootstrap
   interval of r for that line) and margin m = t_{1-α, n-2} · s · sqrt(1 + 1/n +
   (x - x̄)² / Sxx), the one-sided prediction bound of the line at false-alarm rate α (s:
   residual standard deviation, n fit points). Under the linear-Gaussian model of matched
   pairs a new matched pair has r < -m with probability exactly α; a pair with r < -m is
   flagged "overestimated", otherwise "trustworthy". No line (no or bad `detect.trusted`,
   fewer than 3 trusted pairs, all at one EER_test) gives "undetermined" with the reason.

`pairs` builds one row per attack of an experiment; `assess` judges any list of pairs (the
detect stage calls both on one experiment, `pipeline.aggregate` `assess` on every pair of a sweep).
"""
from __future__ import annotations

import csv
import logging
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

from pipeline.errors import VpevalError, input_error

log = logging.getLogger(__name__)
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
        return (f"{len(points)} trusted pair(s); the line needs at least {MIN_POINTS}: run a sweep of the "
                "matched systems named in detect.trusted (recipes/mismatch_full) or give detect.trusted=<csv>")
    x, y = (np.asarray(v, dtype=float) for v in zip(*points))
    sxx = float(((x - x.mean()) ** 2).sum())
    if sxx <= 0:
        return "every trusted pair has the same EER_test: no line can be fitted"
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / sxx)
    intercept = float(y.mean() - slope * x.mean())
    residuals = y - (intercept + slope * x)
    std = math.sqrt(float((residuals ** 2).sum()) / (len(x) - 2))
    return Line(intercept, slope, len(x), std, float(x.mean()), sxx)


@dataclass(frozen=True)
class Trusted:
    """What defines the line (`detect.trusted`): matched systems of the sweep (`systems`) or
    the points of a CSV (`points`, `source` its path); `problem` when it cannot be used."""

    systems: tuple[str, ...] = ()
    points: tuple[tuple[float, float], ...] = ()
    source: str = ""
    problem: str | None = None


def read_trusted(spec) -> Trusted:
    """`detect.trusted`: a list of system names, or the path of a CSV of matched pairs (a
    string). A problem (none given, an unreadable CSV) is logged as one line and kept in
    `problem`, so the report is still written, its verdicts undetermined with that reason."""
    if spec is None or (not isinstance(spec, str) and len(spec) == 0):
        return Trusted(problem="detect.trusted is not set: name the matched systems whose pairs define the "
                               "line (e.g. detect.trusted=[mcadams,mcadams_fixed,xvector]) or give a CSV of "
                               "matched pairs")
    if isinstance(spec, str):
        try:
            return Trusted(points=tuple(read_reference(spec)), source=str(spec))
        except VpevalError as error:
            log.error("detection: %s", error)
            return Trusted(source=str(spec), problem=str(error))
    return Trusted(systems=tuple(str(s) for s in spec), source="trusted systems")


def read_reference(path: str | Path) -> list[tuple[float, float]]:
    """(eer_test, eer_val) pairs of a CSV with columns eer_test and eer_val (fractions in
    [0, 1]; other columns, e.g. a label, are kept out); at least 3 rows."""
    path = Path(path)
    if not path.is_file():
        raise input_error(path, "CSV of trusted matched pairs not found (detect.trusted)")
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
        raise input_error(path, f"{len(points)} matched pair(s); a trusted line needs at least "
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


def pairs(records: list[dict], test_split: str = "test",
          replicates: dict[str, list[float]] | None = None) -> list[dict]:
    """One (EER_val, EER_test) row per attack of an experiment that has both.

    `replicates` maps `<attack>/<set>` to the bootstrap EER replicates of that condition
    (the confidence stage's); with them a row keeps its EER_val and EER_test replicates
    (`eer_val_replicates`, `eer_test_replicates`) and gets the interval of its relative drop."""
    replicates = replicates or {}
    rows = []
    for attack in dict.fromkeys(r["attack"] for r in records):
        own = {r["set"]: r for r in records if r["attack"] == attack}
        tests = [own[s] for s in (f"{test_split}_f", f"{test_split}_m") if s in own]
        if "val" not in own or not tests:
            continue
        val = own["val"]
        eer_test = sum(r["eer"] for r in tests) / len(tests)
        row = {
            "attack": attack,
            "anonymizer": tests[0]["anonymizer"],
            "attacker_anonymizer": val["attacker_anonymizer"],
            "eer_val": val["eer"],
            "eer_val_ci": eer_interval(val),
            "eer_test": eer_test,
            "eer_test_ci": _mean_interval(tests),
            **{f"eer_{r['set']}": r["eer"] for r in tests},
            "relative_drop": relative_drop(eer_test, val["eer"]),
            "relative_drop_ci": None,
        }
        names = [f"{attack}/val", *(f"{attack}/{r['set']}" for r in tests)]
        if all(replicates.get(name) for name in names):
            val_rep, test_rep = paired_replicates([replicates[name] for name in names])
            row["eer_val_replicates"], row["eer_test_replicates"] = val_rep, test_rep
            row["ci_level"] = float(val.get("eer_ci_level", 0.95))
            drops = [relative_drop(x, y) for x, y in zip(test_rep, val_rep)]
            row["relative_drop_ci"] = percentile_interval([d for d in drops if d is not None], row["ci_level"])
        rows.append(row)
    return rows


def relative_drop(eer_test: float, eer_val: float) -> float | None:
    """panariello2025's relative drop of EER_val against EER_test: (EER_test - EER_val) /
    EER_test; None when EER_test is 0."""
    return (eer_test - eer_val) / eer_test if eer_test > 0 else None


def paired_replicates(conditions: list[list[float]]) -> tuple[list[float], list[float]]:
    """(EER_val, EER_test) replicates from the replicates of val and of each test set (their
    mean). The conditions share no speaker, so their resamples are independent; each list
    is shuffled by a fixed permutation before pairing, because the confidence stage draws
    every condition from the same seed."""
    count = min(len(c) for c in conditions)
    shuffled = [np.asarray(c[:count])[np.random.default_rng(k).permutation(count)]
                for k, c in enumerate(conditions)]
    return [round(float(v), 6) for v in shuffled[0]], [round(float(v), 6) for v in np.mean(shuffled[1:], axis=0)]


def percentile_interval(values: list[float], level: float) -> list[float] | None:
    """[low, high] percentile interval of bootstrap replicates at `level`; None without any."""
    if not values:
        return None
    alpha = (1 - level) / 2
    low, high = np.quantile(np.asarray(values, dtype=float), [alpha, 1 - alpha])
    return [float(low), float(high)]


def eer_interval(record: dict) -> list | None:
    """[low, high] of a record's EER bootstrap interval, None when it has none."""
    low, high = record.get("eer_ci_low"), record.get("eer_ci_high")
    return None if low is None or high is None else [low, high]


def point(row: dict) -> tuple:
    """A sweep point: its group, attack and systems (its seeds are repeats of it)."""
    return row.get("group", ""), row["attack"], row["anonymizer"], row["attacker_anonymizer"]


def assess(rows: list[dict], *, trusted: Trusted, false_alarm: float = 0.05) -> tuple[list[dict], list[dict]]:
    """Judge every pair; returns (rows with role, residual, its interval, margin, flag,
    verdict, reason; one fit per group of rows).

    Rows carry their `group` (jobs sharing corpus, attacker configuration and backend; ""
    in a single experiment): each group has its own line, fitted on its trusted pairs (one
    point per pair, the mean of its seeds), or on `trusted.points` for every group."""
    if not 0 < false_alarm < 0.5:
        raise VpevalError(f"detect.false_alarm must lie in (0, 0.5), got {false_alarm}")
    problem = trusted.problem
    in_sweep = {r["anonymizer"] for r in rows if is_matched(r)}
    absent = [s for s in trusted.systems if s not in in_sweep]
    if problem is None and absent:
        problem = (f"detect.trusted names {', '.join(absent)}: no matched pair of it here (matched systems: "
                   f"{', '.join(sorted(in_sweep)) or 'none'})")
        log.error("detection: %s", problem)
    judged, fits = [], []
    for group in dict.fromkeys(r.get("group", "") for r in rows):
        members = [r for r in rows if r.get("group", "") == group]
        is_trusted = lambda r: problem is None and is_matched(r) and r["anonymizer"] in trusted.systems  # noqa: E731
        means = _point_means([r for r in members if is_trusted(r)])
        if problem is not None:
            line, source = problem, trusted.source
        elif trusted.points:
            line, source = fit_line(list(trusted.points)), trusted.source
        else:
            line, source = fit_line(list(means.values())), "trusted pairs"
        for row in members:
            own_line = line
            if not trusted.points and is_trusted(row) and isinstance(line, Line):
                rest = [xy for key, xy in means.items() if key != point(row)]
                own_line = fit_line(rest)
                if isinstance(own_line, str):
                    own_line = (f"a trusted pair is judged against the line of the other trusted pairs, "
                                f"and only {len(rest)} remain; at least {MIN_POINTS} are needed")
            judged.append({**row, "role": "trusted" if is_trusted(row) else "judged",
                           **_judge(row, own_line, false_alarm)})
        n_points = len(trusted.points) if trusted.points else len(means)
        fits.append({"group": group, "source": source, "false_alarm": false_alarm, "n_points": n_points,
                     **(line.as_dict() if isinstance(line, Line) else {"reason": line})})
    if problem is None and trusted.systems and not any("slope" in f for f in fits):
        log.error("detection: no group has a trusted line: %s", fits[0]["reason"] if fits else "no pairs")
    return judged, fits


def _point_means(rows: list[dict]) -> dict[tuple, tuple[float, float]]:
    """(mean EER_test, mean EER_val) of each sweep point's seeds."""
    found: dict[tuple, list[tuple[float, float]]] = {}
    for row in rows:
        found.setdefault(point(row), []).append((row["eer_test"], row["eer_val"]))
    return {key: tuple(float(v) for v in np.mean(xy, axis=0)) for key, xy in found.items()}


def _judge(row: dict, line: Line | str, false_alarm: float) -> dict:
    empty = {"predicted_eer_val": None, "residual": None, "residual_ci": None, "below_line": None,
             "margin": None, "flag": False}
    if row["anonymizer"] == ORIGINAL:
        return {**empty, "verdict": UNDETERMINED,
                "reason": "no anonymisation (reference condition): no privacy estimate to judge"}
    if isinstance(line, str):
        return {**empty, "verdict": UNDETERMINED, "reason": line}
    predicted = line.predict(row["eer_test"])
    residual = row["eer_val"] - predicted
    margin = line.margin(row["eer_test"], false_alarm)
    flag = residual < -margin
    residual_ci = None
    if row.get("eer_val_replicates"):
        residual_ci = percentile_interval([y - line.predict(x) for x, y in
                                           zip(row["eer_test_replicates"], row["eer_val_replicates"])],
                                          row["ci_level"])
    where = "below" if residual < 0 else "above"
    reason = (f"EER_val {100 * abs(residual):.2f} points {where} the trusted line; the "
              f"{100 * (1 - false_alarm):g} % prediction bound allows {100 * margin:.2f} below")
    return {"predicted_eer_val": predicted, "residual": residual, "residual_ci": residual_ci,
            "below_line": bool(residual < 0), "margin": margin, "flag": bool(flag),
            "verdict": OVERESTIMATED if flag else TRUSTWORTHY, "reason": reason}


def seed_summary(rows: list[dict]) -> list[dict]:
    """One row per sweep point with several seeds: the number of seeds, the mean and the
    standard deviation (ddof 1) of EER_val, EER_test, relative drop and residual, and how
    many seeds were flagged."""
    found: dict[tuple, list[dict]] = {}
    for row in rows:
        found.setdefault(point(row), []).append(row)
    summary = []
    for (group, attack, evaluated, attacker), own in found.items():
        if len(own) < 2:
            continue
        entry = {"group": group, "attack": attack, "anonymizer": evaluated, "attacker_anonymizer": attacker,
                 "seeds": [r.get("seed") for r in own], "flagged": sum(bool(r.get("flag")) for r in own)}
        for key in ("eer_val", "eer_test", "relative_drop", "residual"):
            values = [r[key] for r in own if r.get(key) is not None]
            entry[f"{key}_mean"] = float(np.mean(values)) if values else None
            entry[f"{key}_std"] = float(np.std(values, ddof=1)) if len(values) > 1 else None
        summary.append(entry)
    return summary
