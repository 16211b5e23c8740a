"""Detection statistics: is a privacy estimate overestimated? EER_val against EER_test.

panariello2025 (§3.4, Fig. 2): an attacker whose training data differs from the evaluation
data (a mismatch, full, partial or hidden) does well on held-out data of its own training
distribution (EER_val) and badly on the evaluation data (EER_test): its EER_test, the
privacy it reports, is overestimated. vpeval's validation speakers are unseen in training
by default (`split.holdout=unseen`), so for a matched attacker both EERs measure the same
thing, new speakers of the data it was trained on, and the gap EER_test - EER_val stays
near the matched pairs' gap; a mismatch widens it.

Per evaluated (attacker, evaluation data) pair (`pairs`): EER_val, EER_test (mean of the
female and male test trials, as VPC averages them), the gap and its bootstrap variance,
the paper's relative drop (EER_test - EER_val) / EER_test, all with bootstrap intervals.

`assess` judges every pair, two tests at most:

1. **val-test** (`detect.method`, `pipeline.metrics.detectors`): the trusted matched pairs
   (`detect.trusted`: systems of the sweep, or a CSV of matched pairs measured with the same
   validation protocol) of one calibration set (jobs of one group and seed: a line per
   seed) predict a pair's EER_val from its EER_test; a pair whose EER_val lies below the
   prediction by more than the one-sided margin is flagged. A trusted pair is judged against
   the model of the other trusted pairs (leave-one-out), as a new pair would be.
2. **column** (`detect.column`): where other attackers were scored on the same evaluation
   data (same group, seed, evaluated system, enrolment and trial data: a sweep's column, or
   AA beside AA-lazy), a pair whose EER_test is above another attacker's by a margin its
   paired bootstrap replicates exclude (one-sided, Bonferroni over every ordered pair of the
   column's attackers: family-wise) is flagged: a better attack exists, so this privacy
   estimate is too high.

When both apply each runs at α/2, so a matched pair is flagged with probability at most
`detect.false_alarm` = α. Verdicts: `overestimated` (a test flags); `trustworthy` when the
opposite test supports it (the pair's excess gap over the matched pairs' is below
`detect.tolerance` at the same confidence); `not flagged` otherwise, with the EER_val a
flag would have needed (`flag_below`); `undetermined` with the reason (no trusted model,
no anonymisation, an imported attacker whose training data is unknown, or insufficient
power: no EER_val >= 0 could have been flagged).
"""
from __future__ import annotations

import csv
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import norm

from pipeline.core.errors import VpevalError, input_error
from pipeline.core.schemas import Detect, check_of, require
from pipeline.core.vocabulary import ORIGINAL
from pipeline.metrics.bootstrap import MIN_SPEAKERS
from pipeline.metrics.detectors import MODELS, Model, Point, as_fit, fit_model
from pipeline.metrics.results import ConditionResult, DetectionPair

log = logging.getLogger(__name__)
TRUSTWORTHY, NOT_FLAGGED, OVERESTIMATED, UNDETERMINED = "trustworthy", "not flagged", "overestimated", "undetermined"
VERDICTS = (TRUSTWORTHY, NOT_FLAGGED, OVERESTIMATED, UNDETERMINED)
REFERENCE_COLUMNS = ("eer_test", "eer_val", "protocol")


@dataclass(frozen=True)
class Trusted:
    """What calibrates the val-test test (`detect.trusted`): matched systems of the sweep
    (`systems`) or the points of a CSV (`points`, measured with validation `protocol`,
    `source` its path); `problem` when it cannot be used."""

    systems: tuple[str, ...] = ()
    points: tuple[Point, ...] = ()
    protocol: str | None = None
    source: str = ""
    problem: str | None = None


def read_trusted(spec) -> Trusted:
    """`detect.trusted`: a list of system names, or the path of a CSV of matched pairs (a
    string). A problem (none given, an unreadable CSV) is logged as one line and kept in
    `problem`, so the report is still written, its verdicts undetermined with that reason."""
    if spec is None or (not isinstance(spec, str) and len(spec) == 0):
        return Trusted(problem="detect.trusted is not set: name the matched systems whose pairs calibrate the "
                               "detector (e.g. detect.trusted=[mcadams,mcadams_fixed,xvector]) or give a CSV of "
                               "matched pairs")
    if isinstance(spec, str):
        try:
            points, protocol = read_reference(spec)
            return Trusted(points=tuple(points), protocol=protocol, source=str(spec))
        except VpevalError as error:
            log_once(logging.ERROR, ("csv", str(spec)), f"detection: {error}")
            return Trusted(source=str(spec), problem=str(error))
    return Trusted(systems=tuple(str(s) for s in spec), source="trusted pairs")


def read_reference(path) -> tuple[list[Point], str]:
    """(points, validation protocol) of a CSV of matched pairs: columns eer_test and eer_val
    (fractions in [0, 1]) and protocol (the `validation_protocol` of the runs that measured
    them, one for all rows; `vpeval aggregate` writes such a file, `trusted.csv`); optional
    gap_var (for `gap_re`); other columns, e.g. a label, are ignored."""
    path = Path(path)
    if not path.is_file():
        raise input_error(path, "CSV of trusted matched pairs not found (detect.trusted)")
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in REFERENCE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise input_error(path, f"missing column(s) {', '.join(missing)}; the header must name eer_test, "
                                    "eer_val (EERs as fractions) and protocol (the runs' validation_protocol)", line=1)
        points, protocols = [], set()
        for line, row in enumerate(reader, start=2):
            try:
                x, y = (float(row[c]) for c in REFERENCE_COLUMNS[:2])
                gap_var = float(row["gap_var"]) if row.get("gap_var") else None
            except (TypeError, ValueError):
                raise input_error(path, "eer_test, eer_val and gap_var must be numbers", line=line) from None
            if not (0 <= x <= 1 and 0 <= y <= 1):
                raise input_error(path, f"EERs are fractions in [0, 1], got eer_test={x}, eer_val={y} "
                                        "(write 0.27, not 27)", line=line)
            points.append(Point(x, y, gap_var))
            protocols.add(row["protocol"])
    if len(protocols) > 1:
        raise input_error(path, f"rows measured with {len(protocols)} validation protocols "
                                f"({'; '.join(sorted(protocols))}); one model needs one protocol")
    if not points:
        raise input_error(path, "no matched pair: add (eer_test, eer_val, protocol) rows")
    return points, protocols.pop()


def is_matched(pair: dict) -> bool:
    """A matched pair of anonymised data: the attacker trained on the evaluated system."""
    return pair["anonymizer"] == pair["attacker_anonymizer"] != ORIGINAL


def _mean_interval(records: list[ConditionResult]) -> list | None:
    """Interval of the mean EER of independent conditions from their percentile intervals:
    the distances below and above each estimate add in quadrature (female and male trials
    share no speaker, so their resamples are independent)."""
    intervals = [r.eer_ci for r in records]
    if not intervals or any(i is None for i in intervals):
        return None
    k = len(records)
    mean = sum(r.eer for r in records) / k
    below = math.sqrt(sum((r.eer - low) ** 2 for r, (low, _) in zip(records, intervals))) / k
    above = math.sqrt(sum((high - r.eer) ** 2 for r, (_, high) in zip(records, intervals))) / k
    return [max(0.0, mean - below), min(1.0, mean + above)]


GENDER_NAMES = {"f": "female", "m": "male"}


def pairs(records: list[ConditionResult], test_split: str = "test",
          replicates: dict[str, list[float]] | None = None) -> list[DetectionPair]:
    """One (EER_val, EER_test) pair per attack of an experiment that has both.

    EER_val is measured as EER_test is: the mean of the female and male validation EERs
    (`val_f`, `val_m`), its interval from theirs (`_mean_interval`); a gender without
    validation trials leaves the other's EER, said in the pair's `notes`, never a pooled EER.
    `replicates` maps `<attack>/<set>` to the bootstrap EER replicates of that condition
    (the confidence stage's); with them a pair keeps its EER_val and EER_test replicates,
    the variance of its gap and the interval of its relative drop. A pair keeps the val
    records' `attacker_origin`, `imported` and `protocol_problem` (why its EER_val cannot be
    judged, if so). `val_speakers` is the fewest speakers of a gender's validation bootstrap."""
    replicates = replicates or {}
    found = []
    for attack in dict.fromkeys(r.attack for r in records):
        own = {r.set: r for r in records if r.attack == attack}
        tests = [own[s] for s in (f"{test_split}_f", f"{test_split}_m") if s in own]
        vals = [own[s] for s in ("val_f", "val_m") if s in own]
        if not vals or not tests:
            continue
        eer_val = sum(r.eer for r in vals) / len(vals)
        eer_test = sum(r.eer for r in tests) / len(tests)
        val_speakers = [r.eer_speakers for r in vals]
        pair = DetectionPair(
            attack=attack, anonymizer=tests[0].anonymizer, attacker_anonymizer=vals[0].attacker_anonymizer,
            enroll=tests[0].enroll, trials=tests[0].trials,
            eer_val=eer_val, eer_val_ci=_mean_interval(vals), eer_test=eer_test, eer_test_ci=_mean_interval(tests),
            eer_by_set={r.set: r.eer for r in (*vals, *tests)},
            gap=eer_test - eer_val, relative_drop=relative_drop(eer_test, eer_val),
            val_trials=[_total(vals, "n_target"), _total(vals, "n_nontarget")],
            val_speakers=None if None in val_speakers else min(val_speakers),
            test_speakers=min((r.eer_speakers for r in tests if r.eer_speakers is not None), default=None),
            attacker_origin=vals[0].attacker_origin or "trained", imported=vals[0].imported,
            protocol_problem=vals[0].protocol_problem, notes=_val_notes(vals))
        names = [*(f"{attack}/{r.set}" for r in vals), *(f"{attack}/{r.set}" for r in tests)]
        if all(replicates.get(name) for name in names):
            val_rep, test_rep = paired_replicates([replicates[name] for name in names], n_val=len(vals))
            pair.eer_val_replicates, pair.eer_test_replicates = val_rep, test_rep
            pair.ci_level = float(vals[0].eer_ci_level or 0.95)
            pair.gap_var = float(np.var(np.subtract(test_rep, val_rep), ddof=1)) if len(val_rep) > 1 else None
            drops = [relative_drop(x, y) for x, y in zip(test_rep, val_rep)]
            pair.relative_drop_ci = percentile_interval([d for d in drops if d is not None], pair.ci_level)
        found.append(pair)
    return found


def _total(records: list[ConditionResult], key: str) -> int | None:
    values = [r.metrics.get(key) for r in records]
    return None if None in values else sum(values)


def _val_notes(vals: list[ConditionResult]) -> list[str]:
    """What a reader of EER_val must know: a gender without validation trials."""
    if len(vals) > 1:
        return []
    present = vals[0].set[-1]
    absent = "m" if present == "f" else "f"
    return [f"EER_val is the {GENDER_NAMES[present]} validation EER only: no {GENDER_NAMES[absent]} validation "
            f"trials (no {GENDER_NAMES[absent]} validation speakers, or one), while EER_test averages both genders"]


def relative_drop(eer_test: float, eer_val: float) -> float | None:
    """panariello2025's relative drop of EER_val against EER_test: (EER_test - EER_val) /
    EER_test; None when EER_test is 0."""
    return (eer_test - eer_val) / eer_test if eer_test > 0 else None


DROP_MAX_WIDTH = 1.0  # a relative-drop interval wider than 100 points tells nothing


def drop_interval_problem(row: dict) -> str | None:
    """Why a row's relative-drop interval carries no information (the report prints "–" and
    this; results.json keeps the numbers), None when it does: an EER from fewer than
    `MIN_SPEAKERS` speakers of a gender; an EER_test interval that reaches 0, where the drop
    (EER_test - EER_val) / EER_test is unbounded; an interval wider than `DROP_MAX_WIDTH`.

    >>> drop_interval_problem({"relative_drop_ci": [-3.0, 0.9], "eer_test_ci": [0.05, 0.2]})
    'uninformative: 390 points wide'
    """
    ci = row.get("relative_drop_ci")
    if not ci:
        return None
    speakers = fewest_speakers(row)
    if speakers is not None and speakers < MIN_SPEAKERS:
        return f"too few speakers ({speakers})"
    test = row.get("eer_test_replicates")
    low = percentile_interval(test, row.get("ci_level", 0.95))[0] if test else (row.get("eer_test_ci") or [1.0])[0]
    if low <= 0:
        return "uninformative: the EER_test interval reaches 0"
    if ci[1] - ci[0] > DROP_MAX_WIDTH:
        return f"uninformative: {100 * (ci[1] - ci[0]):.0f} points wide"
    return None


def paired_replicates(conditions: list[list[float]], n_val: int = 1) -> tuple[list[float], list[float]]:
    """(EER_val, EER_test) replicates: the mean of the first `n_val` conditions' replicates
    (the validation genders) and of the others (the test sets). The conditions share no
    speaker, so their resamples are independent; each list is shuffled by a fixed
    permutation before pairing, because the confidence stage draws every condition from the
    same seed. The permutation depends on the position among the test sets (or among the
    validation genders) and the count only, so two attackers' test replicates of one
    evaluation set stay paired."""
    count = min(len(c) for c in conditions)
    seeds = [[7001, k] if k else 0 for k in range(n_val)] + list(range(1, len(conditions) - n_val + 1))
    shuffled = [np.asarray(c[:count])[np.random.default_rng(seed).permutation(count)]
                for seed, c in zip(seeds, conditions)]
    return ([round(float(v), 6) for v in np.mean(shuffled[:n_val], axis=0)],
            [round(float(v), 6) for v in np.mean(shuffled[n_val:], axis=0)])


def percentile_interval(values: list[float], level: float) -> list[float] | None:
    """[low, high] percentile interval of bootstrap replicates at `level`; None without any."""
    if not values:
        return None
    alpha = (1 - level) / 2
    low, high = np.quantile(np.asarray(values, dtype=float), [alpha, 1 - alpha])
    return [float(low), float(high)]


def point(row: dict) -> tuple:
    """A sweep point: its group, attack and systems (its seeds are repeats of it)."""
    return row.get("group", ""), row["attack"], row["anonymizer"], row["attacker_anonymizer"]


def calibration_set(row: dict) -> tuple:
    """The rows one model is fitted on and judges: one group (corpus, attacker, backend,
    validation protocol) and one seed (training and anonymisation)."""
    return row.get("group", ""), row.get("seed"), row.get("anonymization_seed")


def evaluation_data(row: dict) -> tuple | None:
    """Rows scored on the same trials: one calibration set, evaluated system and enrolment /
    trial data (attack kinds); None for a row that does not say which data it was scored on
    (written before rows carried `enroll` and `trials`), which is compared with no other."""
    if "enroll" not in row or "trials" not in row:
        return None
    return (*calibration_set(row), row["anonymizer"], row["enroll"], row["trials"])


@dataclass(frozen=True)
class Settings:
    """`detect.*`: the val-test model, false-alarm rate α, the tolerance of `trustworthy`
    (EER points of excess gap) and whether the column test runs."""

    method: str = "gap"
    false_alarm: float = 0.05
    tolerance: float = 0.05
    column: bool = True

    def __post_init__(self):
        for name in ("method", "false_alarm", "tolerance"):
            require(check_of(Detect, name), getattr(self, name), f"detect.{name}")


def assess(rows: list[dict], *, trusted: Trusted, settings: Settings = Settings()) -> tuple[list[dict], list[dict]]:
    """Judge every pair; returns (rows with role, the val-test fields, column evidence,
    flag, verdict, reason; one fit per calibration set)."""
    problem = trusted.problem or _trusted_problem(rows, trusted)
    is_trusted = lambda r: problem is None and is_matched(r) and r["anonymizer"] in trusted.systems  # noqa: E731
    columns = column_evidence(rows, settings) if settings.column else {}
    from_csv = fit_model(settings.method, list(trusted.points)) if trusted.points and problem is None else None
    judged, fits = [], []
    for key in dict.fromkeys(calibration_set(r) for r in rows):
        members = [(i, r) for i, r in enumerate(rows) if calibration_set(r) == key]
        own_points = {point(r): _as_point(r) for _, r in members if is_trusted(r)}
        protocols = {r.get("validation_protocol") for _, r in members} - {None}
        if problem is not None:
            model = problem
        elif trusted.points and protocols and protocols != {trusted.protocol}:
            model = (f"detect.trusted={trusted.source} was measured with validation protocol '{trusted.protocol}', "
                     f"these pairs with '{', '.join(sorted(protocols))}': re-measure the trusted pairs with this "
                     "protocol")
        else:
            model = from_csv if trusted.points else fit_model(settings.method, list(own_points.values()))
        for index, row in members:
            own_model = model
            if not trusted.points and is_trusted(row) and not isinstance(model, str):
                rest = [p for k, p in own_points.items() if k != point(row)]
                own_model = fit_model(settings.method, rest)
                if isinstance(own_model, str):
                    own_model = (f"a trusted pair is judged against the other trusted pairs, and only {len(rest)} "
                                 f"remain; method {settings.method} needs at least {MODELS[settings.method].min_points}")
            judged.append({**row, "role": "trusted" if is_trusted(row) else "judged",
                           **verdict(row, own_model, columns.get(index), settings)})
        n_points = len(trusted.points) if trusted.points else len(own_points)
        compared = any(i in columns for i, _ in members)  # the val-test then runs at α/2
        fits.append({"group": key[0], "seed": key[1], "anonymization_seed": key[2], "source": trusted.source,
                     "false_alarm": settings.false_alarm, "n_points": n_points,
                     "band_false_alarm": settings.false_alarm / (2 if compared else 1),
                     **(as_fit(model) if not isinstance(model, str) else {"method": settings.method, "reason": model})})
    if problem is None and trusted.systems and all("reason" in f for f in fits):  # as in a run of one system
        log_once(logging.INFO, ("no model", trusted.systems), "detection: no calibration set has a trusted model: "
                 + (fits[0]["reason"] if fits else "no pairs"))
    return judged, fits


LOGGED: set[tuple] = set()  # keys `log_once` has logged in this process (tests/conftest.py clears it)


def log_once(level: int, key: tuple, message: str) -> None:
    """Log `message` the first time this process meets `key`: a sweep's points, run in one
    process, and the aggregate report rebuilt after each of them meet the same condition once
    per point; it is one line per sweep, and each report still gives it as its reason."""
    if key not in LOGGED:
        LOGGED.add(key)
        log.log(level, message)


def _trusted_problem(rows: list[dict], trusted: Trusted) -> str | None:
    """Why `trusted.systems` cannot calibrate (a system with no matched pair, or an imported
    attacker); logged as one line, once per process (`log_once`)."""
    matched = [r for r in rows if is_matched(r)]
    in_sweep = {r["anonymizer"] for r in matched}
    absent = [s for s in trusted.systems if s not in in_sweep]
    imported = sorted({r["anonymizer"] for r in matched if r["anonymizer"] in trusted.systems and r.get("imported")})
    problem = None
    if absent:  # expected in a sweep's every point that lacks a trusted system: INFO, once
        problem = (f"detect.trusted names {', '.join(absent)}: no matched pair of it here (matched systems: "
                   f"{', '.join(sorted(in_sweep)) or 'none'})")
        log_once(logging.INFO, ("absent", trusted.systems), f"detection: {problem}")
    elif imported:
        problem = (f"detect.trusted names {', '.join(imported)}, whose attacker is imported with unknown training "
                   "data: its EER_val may be on speakers it saw, so it cannot calibrate the detector")
        log_once(logging.ERROR, ("imported", tuple(imported)), f"detection: {problem}")
    return problem


def fewest_speakers(row: dict) -> int | None:
    """The fewest speakers the bootstrap of a row's EER_val or EER_test resampled (None when unknown)."""
    return min((row[k] for k in ("val_speakers", "test_speakers") if row.get(k)), default=None)


def _as_point(row: dict) -> Point:
    return Point(row["eer_test"], row["eer_val"], row.get("gap_var"), fewest_speakers(row))


def column_evidence(rows: list[dict], settings: Settings) -> dict[int, dict]:
    """For each row (by index) that shares its evaluation data with other attackers' rows
    with paired EER_test replicates: the other attacker whose EER_test is most surely
    below this one's, the difference, its one-sided lower bound at α/(2k(k+1)) and whether
    that bound is above 0 (`flag`). The column test has α/2 for the whole column, Bonferroni
    over the k(k+1) ordered comparisons of its k+1 attackers, so that no attacker of a column
    of equally strong ones is flagged with probability at least 1 - α/2 (family-wise). The
    bound is the difference less a normal quantile times the standard deviation of the paired
    replicates' differences: a percentile at such a level (0.125 % for 5 attackers) would rest
    on the one or two most extreme of 1000 replicates."""
    by_data: dict[tuple, list[int]] = {}
    for i, row in enumerate(rows):
        if row["anonymizer"] != ORIGINAL and row.get("eer_test_replicates") and evaluation_data(row) is not None:
            by_data.setdefault(evaluation_data(row), []).append(i)
    found = {}
    for indices in by_data.values():
        for i in indices:
            row = rows[i]
            others = [rows[j] for j in indices
                      if j != i and len(rows[j]["eer_test_replicates"]) == len(row["eer_test_replicates"])]
            if not others:
                continue
            comparisons = len(others) * (len(others) + 1)
            level = settings.false_alarm / 2 / comparisons
            quantile = float(norm.ppf(1 - level))
            bounds = [(row["eer_test"] - other["eer_test"] - quantile * float(
                np.std(np.subtract(row["eer_test_replicates"], other["eer_test_replicates"]), ddof=1)), other)
                for other in others]
            bound, best = max(bounds, key=lambda found_bound: found_bound[0])
            found[i] = {"other": f"{best['attacker_anonymizer']} ({best['attack']})",
                        "difference": row["eer_test"] - best["eer_test"], "lower_bound": bound,
                        "comparisons": comparisons, "flag": bound > 0}
    return found


def verdict(row: dict, model: Model | str, column: dict | None, settings: Settings) -> dict:
    """The val-test fields (against `model`, a reason when there is none), the column
    evidence and the verdict of one row."""
    fields = {"predicted_eer_val": None, "residual": None, "residual_ci": None, "below_line": None, "margin": None,
              "flag_below": None, "flag": False, "column": column}
    if row["anonymizer"] == ORIGINAL:
        return {**fields, "verdict": UNDETERMINED,
                "reason": "no anonymisation (reference condition): no privacy estimate to judge"}
    beaten = column is not None and column["flag"]
    beaten_reason = (f"{column['other']} reaches an EER_test {100 * column['difference']:.2f} points lower on the "
                     f"same trials (one-sided lower bound {100 * column['lower_bound']:.2f})") if beaten else ""
    speakers = fewest_speakers(row)
    which = "EER_val" if speakers is not None and row.get("val_speakers") == speakers else "EER_test"
    few = (f"its {which} comes from {speakers} speaker(s), fewer than the {MIN_SPEAKERS} the speaker bootstrap "
           "needs: the sampling variance of its gap is unknown") if speakers is not None and speakers < MIN_SPEAKERS else None
    if few and isinstance(model, str):
        few = f"{few}; and {model}"
    if row.get("imported") or row.get("protocol_problem") or few or isinstance(model, str):
        reason = row.get("imported") or row.get("protocol_problem") or few or model
        return {**fields, "flag": beaten, "verdict": OVERESTIMATED if beaten else UNDETERMINED,
                "reason": beaten_reason if beaten else reason}
    alpha = settings.false_alarm / (2 if column is not None else 1)
    predicted = model.predict(row["eer_test"])
    margin = model.margin(row["eer_test"], alpha, row.get("gap_var"))
    residual = row["eer_val"] - predicted
    fields.update(predicted_eer_val=predicted, residual=residual, below_line=bool(residual < 0), margin=margin,
                  flag_below=predicted - margin)
    if row.get("eer_val_replicates"):
        fields["residual_ci"] = percentile_interval(
            [y - model.predict(x) for x, y in zip(row["eer_test_replicates"], row["eer_val_replicates"])],
            row["ci_level"])
    flagged = residual < -margin
    fields["flag"] = bool(flagged or beaten)
    where = f"{100 * abs(residual):.2f} points {'below' if residual < 0 else 'above'} the matched pairs' prediction"
    if flagged or beaten:
        reasons = [f"EER_val {where}, beyond the {100 * margin:.2f}-point margin"] if flagged else []
        return {**fields, "verdict": OVERESTIMATED, "reason": "; ".join(reasons + ([beaten_reason] if beaten else []))}
    if predicted - margin < 0:
        return {**fields, "verdict": UNDETERMINED,
                "reason": (f"insufficient power: at EER_test {100 * row['eer_test']:.2f} % a flag needs EER_val below "
                           f"{100 * (predicted - margin):.2f} %, which no EER_val reaches (margin {100 * margin:.2f} "
                           "points: more trusted pairs, speakers or trials narrow it)")}
    if -residual + margin < settings.tolerance:
        return {**fields, "verdict": TRUSTWORTHY,
                "reason": (f"EER_val {where}; its excess gap is below {100 * (margin - residual):.2f} points at "
                           f"{100 * (1 - alpha):g} % confidence, within detect.tolerance="
                           f"{100 * settings.tolerance:g}")}
    return {**fields, "verdict": NOT_FLAGGED,
            "reason": f"EER_val {where}; a flag needs EER_val below {100 * (predicted - margin):.2f} %"}


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95 % by default): how a measured
    false-alarm or detection rate is reported.

    >>> [round(v, 4) for v in wilson_interval(2, 40)]
    [0.0138, 0.165]
    """
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


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
