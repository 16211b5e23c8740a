"""Aggregate a sweep: every job's results under one folder into one report.

A job is a folder holding `report/results.json` (finished) or `failed.json` (it raised; the
error line and its overrides), e.g. the numbered job folders of a Hydra multirun. The
aggregate (`<sweep>/aggregate/` by default) holds:

- `results.json`: the sweep's `pipeline.metrics.results.SweepSummary` (jobs, failed,
  unfinished, records (each with its job), detection (every job's pairs, each with its job,
  seed and group, judged against the trusted line of its group, see `pipeline.stages.detect`),
  detection_fit (one per group), seeds (mean and spread of every point run with several
  seeds)); its JSON Schema is docs/results.schema.json;
- `trusted.csv` (`trusted_1.csv`, ... for further groups): the trusted matched pairs of a
  group, one row per system with its seeds averaged (eer_test, eer_val, gap_var, protocol),
  in the form `detect.trusted=<csv>` reads, to calibrate later runs measured with the same
  protocol (suspects, e.g. speaker-level systems, never go there);
- `results.csv` (every record of every job), `similarity.csv` (the voice similarity
  metrics of every evaluated system and set, when the jobs measured them), `utility.csv`
  (ρF0 and WER of every evaluated system per set and pooled split, when measured),
  `report.md`, `report.html`, `figures/`: the EER matrix (attacker system x evaluated
  system), the EER_val vs EER_test scatter and privacy against utility (`privacy_utility.png`).
  The report leads with the verdicts in words and the EER matrix with each pair's verdict,
  then the detail; the failed points and the job list come last.

`vpeval aggregate DIR` runs it; a multirun runs it after every job (`pipeline.app.sweep`).
Jobs that share corpus, attacker configuration and backend form a group (their
`detection_group`); each group has its own line. A pair computed identically by several jobs
(same group, seed, attack and systems, e.g. OO, shared by every job of a group) is judged
once; every other row of every job is kept (seeds, corpora, attackers, backends), and
voice similarity (one per evaluated system, whatever the attacker) is listed once per
similarity-stage folder, and utility once per evaluated system and corpus.

>>> aggregate(Path("data/runs/mismatch_full-multirun/2026-01-01_00-00-00"))  # doctest: +SKIP
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from pipeline.core.errors import VpevalError, input_error
from pipeline.core.fileio import write_text
from pipeline.core.layout import FAILED, LAUNCHED, RESULTS
from pipeline.metrics.detection import Settings, assess, read_trusted, seed_summary
from pipeline.metrics.detectors import MODELS
from pipeline.metrics.results import JudgedPair, RunSummary, SweepJob, SweepSummary, from_data
from pipeline.report.document import Section, render_html, render_markdown, results_csv
from pipeline.report.run_report import detection_sections, similarity_rows
from pipeline.report.tables import fixed, percent
from pipeline.report.utility import emotion_rows, semi_informed_points, utility_rows, utility_section
from pipeline.report.vpc2026_results import write_combined_results

OUT = "aggregate"


def job_overrides(job: Path) -> list[str]:
    """The Hydra overrides of a job folder (`.hydra/overrides.yaml`), [] when absent."""
    path = job / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return []
    from omegaconf import OmegaConf

    return [str(o) for o in OmegaConf.load(path)]


def find_jobs(sweep: Path) -> tuple[list[tuple[Path, RunSummary]], list[dict]]:
    """(finished jobs with their results, failures) under `sweep`, in path order. A job
    with both files counts by the newer one (a rerun in place replaces one with the other);
    results of an older format, or missing a field, stop it with one line naming the file."""
    folders = {p.parent.parent for p in sweep.rglob(str(RESULTS))} | {p.parent for p in sweep.rglob(FAILED)}
    finished, failed = [], []
    def order(job: Path) -> list[tuple[int, int | str]]:  # numbered jobs in number order, then named folders
        return [(0, int(s)) if s.isdigit() else (1, s) for s in job.relative_to(sweep).parts]

    for job in sorted(folders, key=order):
        if OUT in job.relative_to(sweep).parts:
            continue
        results, failure = job / RESULTS, job / FAILED
        name = str(job.relative_to(sweep))
        if failure.is_file() and (not results.is_file() or failure.stat().st_mtime >= results.stat().st_mtime):
            try:
                info = json.loads(failure.read_text())
            except json.JSONDecodeError:
                info = {"error": f"{failure}: unreadable failure record"}
            failed.append({"job": name, "error": info.get("error", "?"),
                           "overrides": info.get("overrides") or job_overrides(job)})
            continue
        try:
            data = json.loads(results.read_text())
        except json.JSONDecodeError:
            failed.append({"job": name, "error": f"{results}: unreadable results (interrupted?)",
                           "overrides": job_overrides(job)})
            continue
        finished.append((job, from_data(RunSummary, data, results)))
    return finished, failed


DID_NOT_FINISH = ("did not finish: no results and no failed.json (still running, or killed from outside: "
                  "scancel, time limit, out of memory, node lost)")


def unfinished_jobs(sweep: Path, done: set[str]) -> list[dict]:
    """Launched points (`launched.json`, else started job folders with `.hydra/`) that are
    neither finished nor failed; `done` holds the job names that are."""
    launched = sweep / LAUNCHED
    try:
        points = json.loads(launched.read_text())["points"] if launched.is_file() else None
    except (json.JSONDecodeError, KeyError, TypeError):
        points = None
    if points is None:
        started = sorted((p.parent for p in sweep.glob("*/.hydra")), key=lambda p: (not p.name.isdigit(), p.name))
        return [{"job": p.name, "error": DID_NOT_FINISH, "overrides": job_overrides(p)}
                for p in started if p.name not in done]
    return [{"job": str(i), "error": DID_NOT_FINISH, "overrides": overrides}
            for i, overrides in enumerate(points) if str(i) not in done]


def aggregate(sweep: str | Path, out: str | Path | None = None, *, trusted=None,
              detect: dict | None = None) -> Path:
    """Write the aggregate report of the jobs under `sweep`; returns its folder. `trusted`:
    `detect.trusted` (system names or a CSV path; None: the first job's setting);
    `detect`: detection settings (`Settings` fields) that replace the first job's."""
    sweep = Path(sweep)
    if not sweep.is_dir():
        raise input_error(sweep, "no such sweep folder")
    finished, failed = find_jobs(sweep)
    unfinished = unfinished_jobs(sweep, {str(j.relative_to(sweep)) for j, _ in finished} | {f["job"] for f in failed})
    if not finished and not failed and not unfinished:
        raise input_error(sweep, f"no job folder here (none holds {RESULTS} or {FAILED}): give the multirun folder")
    out = Path(out) if out is not None else sweep / OUT
    jobs, records, rows, seen, similarity, measured = [], [], [], set(), [], set()
    utilities: dict[str, dict] = {}  # evaluated system -> its utility results (first job that measured them)
    emotions: list[tuple[str, dict]] = []  # (system, emotion results) of every job, each distinct one once:
    # a sweep over emotion.data (VPC's IEMOCAP dev and test) measures one per job
    settings = None
    for job, results in finished:
        name, config = str(job.relative_to(sweep)), results.config
        jobs.append(SweepJob(name, job_overrides(job), config, results.config_hash))
        records += [replace(r, job=name) for r in results.records]
        if trusted is None and config.detect.trusted:
            trusted = config.detect.trusted
        if settings is None:
            settings = Settings(method=config.detect.method, false_alarm=config.detect.false_alarm,
                                tolerance=config.detect.tolerance, column=config.detect.column)
        for pair in results.detection:
            key = (config.detection_group, config.seed, config.anonymization_seed, pair.attack, pair.anonymizer,
                   pair.attacker_anonymizer)
            if key not in seen:
                seen.add(key)
                rows.append({"job": name, "seed": config.seed, "anonymization_seed": config.anonymization_seed,
                             "group": config.detection_group, "validation_protocol": config.validation_protocol,
                             **pair.measured().row()})
        for row in similarity_rows(results.similarity or {}):
            if row["folder"] not in measured:
                measured.add(row["folder"])
                similarity.append({"job": name, "anonymizer": config.anonymizer, **row})
        if results.utility is not None and config.anonymizer not in utilities:
            utilities[config.anonymizer] = results.utility
        job_emotion = (config.anonymizer, (results.utility or {}).get("emotion") or {})
        if job_emotion[1] and job_emotion not in emotions:
            emotions.append(job_emotion)
    settings = replace(settings or Settings(), **(detect or {}))
    judged_rows, fit = assess(rows, trusted=read_trusted(trusted_spec(trusted)), settings=settings)
    judged = [JudgedPair(**row) for row in judged_rows]
    seeds = seed_summary(judged_rows)
    for i, group in enumerate(dict.fromkeys(r.group for r in judged if r.role == "trusted")):
        write_text(out / ("trusted.csv" if i == 0 else f"trusted_{i}.csv"), results_csv(trusted_points(judged, group)))
    SweepSummary(sweep=str(sweep), jobs=jobs, failed=failed, unfinished=unfinished, records=records, detection=judged,
                 detection_fit=fit, seeds=seeds).to_json(out / "results.json")
    write_text(out / "results.csv", results_csv([r.row() for r in records]))
    if similarity:
        write_text(out / "similarity.csv", results_csv(similarity))
    write_combined_results(out / "vpc2026", [results for _, results in finished])
    utility = [row for system, found in utilities.items() for row in utility_rows(found, system)]
    if utility:
        write_text(out / "utility.csv", results_csv(utility))
    missing = [f"{n} {what}" for n, what in ((len(failed), "failed"), (len(unfinished), "did not finish")) if n]
    note = (f"Of {len(finished) + len(failed) + len(unfinished)} jobs, {' and '.join(missing)}: their pairs are "
            "missing here (listed before the jobs, at the end)." if missing else "")
    # the answer first (verdicts, EER matrix), then the detail, the failed points and the jobs last
    sections = detection_sections(judged, fit, out / "figures", seeds, note)
    if similarity:
        variants = sorted({key[len("deid_"):] for row in similarity for key in row if key.startswith("deid_")})
        sections.append(Section(
            "Voice similarity per evaluated system",
            "DeID (higher: more de-identified) and G_VD (0 dB: voice distinctiveness preserved) of each "
            "evaluated system, from the job named (its report has the matrices); all values in similarity.csv.",
            tables=[(["evaluated", "set", "job", *(f"DeID % ({v})" for v in variants),
                      *(f"G_VD dB ({v})" for v in variants)],
                     [[row["anonymizer"], row["set"], row["job"],
                       *(percent(row.get(f"deid_{v}")) for v in variants),
                       *(fixed(row.get(f"g_vd_{v}")) for v in variants)]
                      for row in similarity])]))
    if utilities:
        skipped = {f"{metric} ({system})": reason for system, found in utilities.items()
                   for metric, reason in found.get("skipped", {}).items()}
        emotion = [row for system, found in emotions for row in emotion_rows({"emotion": found}, system)]
        sections.append(utility_section(utility, skipped, emotion, semi_informed_points(judged, utilities),
                                        out / "figures", [f.get("pitch", {}) for f in utilities.values()],
                                        [f["wer_text"] for f in utilities.values() if "wer_text" in f]))
    if failed:
        sections.append(Section(
            "Failed points",
            "These jobs raised; the rest of the report leaves them out. Rerun the same multirun command "
            "with `hydra.sweep.dir=<this folder>` (or a new folder): finished points reuse every stage "
            "from the cache, so only the failed ones do work.",
            tables=[(["job", "overrides", "error"], [[f["job"], " ".join(f["overrides"]), f["error"]] for f in failed])]))
    if unfinished:
        sections.append(Section(
            "Points that did not finish",
            "These points were launched but left neither results nor a failure record: still running, or "
            "killed from outside (scancel, time limit after the last requeue, out of memory, node lost). Rerun "
            "the multirun with `hydra.sweep.dir=<this folder>` to finish them from the cache.",
            tables=[(["job", "overrides"], [[u["job"], " ".join(u["overrides"])] for u in unfinished])]))
    sections.append(Section(
        "Jobs", f"{len(finished)} finished, {len(failed)} failed, {len(unfinished)} did not finish under {sweep}.",
        tables=[(["job", "overrides", "evaluated", "attacker trained on"],
                 [[j.job, " ".join(j.overrides), j.config.anonymizer, j.config.attacker_anonymizer] for j in jobs])]))
    title = f"vpeval sweep aggregate: {sweep.name}"
    write_text(out / "report.md", render_markdown(title, sections, base=out))
    write_text(out / "report.html", render_html(title, sections))
    return out


def trusted_points(judged: list[JudgedPair], group: str) -> list[dict]:
    """The trusted matched pairs of one group as `detect.trusted=<csv>` reads them: one row per
    system, its seeds averaged (a system is one point of the model, as in the sweep's own
    calibration), the bootstrap variance of the mean gap where every seed has one."""
    rows: dict[str, list[JudgedPair]] = {}
    for row in judged:
        if row.group == group and row.role == "trusted":
            rows.setdefault(row.anonymizer, []).append(row)
    points = []
    for system, own in rows.items():
        variances = [r.gap_var for r in own]
        points.append({"anonymizer": system, "seeds": len(own), "group": group,
                       "eer_test": float(np.mean([r.eer_test for r in own])),
                       "eer_val": float(np.mean([r.eer_val for r in own])),
                       "gap_var": None if None in variances else float(np.sum(variances)) / len(own) ** 2,
                       "protocol": own[0].validation_protocol})
    return points


def trusted_spec(trusted):
    """`detect.trusted` from the command line or a job's report: a CSV path stays a path, a
    comma-separated list of names becomes a list."""
    if trusted is None or not isinstance(trusted, str):
        return trusted
    return trusted if trusted.endswith(".csv") or Path(trusted).is_file() else [s.strip() for s in trusted.split(",")]


def command_line_settings(args: argparse.Namespace) -> dict:
    """The detection settings given on the command line (the jobs' own apply to the rest)."""
    given = {"method": args.method, "false_alarm": args.false_alarm, "tolerance": args.tolerance,
             "column": False if args.no_column else None}
    return {key: value for key, value in given.items() if value is not None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vpeval aggregate", description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", help="folder of a sweep (e.g. a Hydra multirun folder)")
    parser.add_argument("--out", help="report folder (default: <sweep>/aggregate)")
    parser.add_argument("--trusted", help="systems whose matched pairs define the line (comma-separated), or a CSV "
                                          "of matched pairs (eer_test, eer_val); default: the jobs' detect.trusted")
    parser.add_argument("--method", choices=tuple(MODELS), help="val-test model (default: the jobs' detect.method)")
    parser.add_argument("--false-alarm", type=float, help="false-alarm rate of a flag (default: the jobs')")
    parser.add_argument("--tolerance", type=float, help="excess gap below which a pair is trustworthy (default: "
                                                        "the jobs' detect.tolerance)")
    parser.add_argument("--no-column", action="store_true", help="leave out the column test")
    args = parser.parse_args(argv)
    try:
        out = aggregate(args.sweep, args.out, trusted=args.trusted, detect=command_line_settings(args))
    except VpevalError as error:
        print(f"vpeval: error: {error}", file=sys.stderr, flush=True)
        return 2
    print(out)
    return 0
