"""A run's report folder (`pipeline.stages.report`): results.json and its CSV tables, report.md
and report.html with their figures, the answer first; the sections are reused by the sweep's
aggregate report (`pipeline.app.aggregate`)."""
from __future__ import annotations

import logging
from dataclasses import fields, is_dataclass
from pathlib import Path

import numpy as np

from pipeline.core.fileio import write_text
from pipeline.core.cache import StageEvent
from pipeline.core.layout import RESULTS
from pipeline.core.vocabulary import ORIGINAL
from pipeline.metrics.bootstrap import COVERED_SPEAKERS, MIN_SPEAKERS, coverage_note, few_speakers_note
from pipeline.metrics.detection import (
    OVERESTIMATED,
    UNDETERMINED,
    calibration_set,
    drop_interval_problem,
    fewest_speakers,
)
from pipeline.metrics.detectors import from_fit
from pipeline.metrics.registry import sections
from pipeline.metrics.results import ConditionResult, JudgedPair, RunConfig, RunSummary
from pipeline.report.document import Section, render_html, render_markdown, results_csv
from pipeline.report.reidentification import reidentification_sections
from pipeline.report.tables import fixed, percent
from pipeline.report.utility import (
    emotion_rows,
    semi_informed_points,
    speech_lost,
    speech_lost_sections,
    utility_rows,
    utility_section,
)
from pipeline.report.verdicts import summary_text

log = logging.getLogger(__name__)
VERDICTS = "Verdicts"  # the title of the report's first answer section
SIMILARITY_VARIANT = "geometric_mean"  # the variant drawn (noe2022 eq. 6); both are tabulated


def write_run_report(out: Path, summary: RunSummary, *, similarity: dict[str, dict] | None = None,
                     curves: list[dict] | None = None) -> Path:
    """Write the report folder `out` of one run's `summary` (its "similarity" and
    "speech_lost" are set here); returns it. `similarity` maps an evaluation set to its
    similarity-stage result (`similarity.load`) with its `folder`; results.json leaves the
    matrices out (they stay in the folder's similarity.json). `curves`: the training curves the
    run wrote (`pipeline.runtime.curves.written`)."""
    out = Path(out)
    similarity = similarity or {}
    records, detection, config, utility = summary.records, summary.detection, summary.config, summary.utility
    if similarity:
        summary.similarity = {name: {k: v for k, v in sim.items() if k != "matrices"} for name, sim in similarity.items()}
        write_text(out / "similarity.csv", results_csv(similarity_rows(similarity)))
    lost = speech_lost(records, utility)
    if utility is not None:
        summary.speech_lost = lost
        write_text(out / "utility.csv", results_csv(utility_rows(utility, config.anonymizer)))
    for flag in lost:
        log.warning("report: %s %s: the anonymised speech looks lost (%s); its privacy figures do not show privacy",
                    flag["attack"], flag["set"], flag["reason"])
    summary.to_json(out / RESULTS.name)
    write_text(out / "results.csv", results_csv([r.row() for r in records]))
    built = [s for s in summary.stages if not s.reused]
    activity = (f"Config hash `{summary.config_hash}`. {len(built)} stage outputs built, "
                f"{len(summary.stages) - len(built)} reused from the cache "
                f"({sum(s.seconds for s in built):.0f} s of stage work).")
    sections = [  # the answer first (warnings, verdicts), then the detail, the settings last
        *speech_lost_sections(lost),
        *detection_sections(detection, summary.detection_fit, out / "figures"),
        *metrics_sections(records, config.backend, out / "figures"),
        *utility_sections(utility, config.anonymizer, detection, out / "figures"),
        *score_sections(summary.score_files, out / "figures"),
        *similarity_sections(similarity, out / "figures"),
        *reidentification_sections(records, out / "figures"),
        *curves_sections(curves or [], summary.stages),
        Section("Settings", activity, tables=[(["setting", "value"], settings_rows(config))]),
    ]
    write_text(out / "report.md", render_markdown("vpeval report", sections, base=out))
    write_text(out / "report.html", render_html("vpeval report", sections))
    return out


def settings_rows(config: RunConfig) -> list[list]:
    """The run's settings, one row each (`detect.*` by their config names)."""
    rows = []
    for f in fields(config):
        value = getattr(config, f.name)
        rows += ([[f"{f.name}.{d.name}", getattr(value, d.name)] for d in fields(value)] if is_dataclass(value)
                 else [[f.name, value]])
    return rows


def curves_sections(curves: list[dict], stages: list[StageEvent]) -> list[Section]:
    """Where to look at the training curves: those of this run's trainings, and the per-epoch
    logs of the attackers reused from the cache (trained, and their curves written, earlier)."""
    reused = [s.path for s in stages if s.stage == "train" and s.reused]
    if not curves and not reused:
        return []
    lines = [f"`{command}`" for command in sorted({c["command"] for c in curves if c.get("command")})]
    if reused:
        logs = ", ".join(f"`{Path(path) / 'training_log.jsonl'}`" for path in reused)
        lines.append(f"Attackers reused from the cache: their per-epoch loss, accuracy, learning rate and "
                     f"validation EER are in {logs}.")
    text = "\n\n".join(lines)
    return [Section("Training curves", text,
                    tables=[(["training", "backend", "where"], [[c["name"], c["backend"], c["location"]]
                                                                 for c in curves])] if curves else [])]


def interval(ci, n_speakers: int | None = None, problem: str | None = None, kind: str = "eer") -> str:
    """`[low, high]` in % of a speaker-bootstrap interval of `kind` (a `COVERED_SPEAKERS`
    key); "–" with the reason when it comes from too few speakers to mean anything (or has
    another `problem`), marked when from fewer speakers than its coverage was measured below 90 %."""
    if not ci:
        return "–"
    problem = problem or few_speakers_note(n_speakers)
    if problem:
        return f"– ({problem})"
    note = coverage_note(n_speakers, kind)
    return f"[{percent(ci[0])}, {percent(ci[1])}]" + (f" ({note})" if note else "")


def metrics_sections(records: list[ConditionResult], backend: str, figures: Path) -> list[Section]:
    """One table per section of the metric list (`pipeline.metrics.registry.METRICS`): every
    column with a header, the EER interval beside the EER; the per-speaker figure."""
    found = []
    for title, columns in sections().items():
        headers, cells = ["attack", "set", "anonymizer", "attacker trained on"], []
        for column in columns:
            headers.append(column.header)
            cells.append(lambda r, column=column: column.format(r.metrics.get(column.key)))
            if column.key == "eer":
                headers.append("EER CI %")
                cells.append(lambda r: interval(r.eer_ci, r.eer_speakers))
        rows = [[r.attack, r.set, r.anonymizer, r.attacker_anonymizer, *(cell(r) for cell in cells)]
                for r in records]
        found.append(Section(title, SECTION_TEXT.get(title, "").format(backend=backend, min_speakers=MIN_SPEAKERS,
                                                                covered_speakers=COVERED_SPEAKERS["eer"])
                             + (COSINE_NOTE if title == "Privacy metrics" and "cosine" in backend else ""),
                             tables=[(headers, rows)], figures=_speaker_figures(records, figures) if title == SPEAKERS else []))
    return found


SPEAKERS = "Per-speaker risk"
COSINE_NOTE = " Cosine scores are not LLRs: their Cllr measures their miscalibration as much as any disclosure."
SECTION_TEXT = {
    "Privacy metrics": (
        "EER is the ROCCH-EER (BOSARIS) with its 95 % two-way speaker-bootstrap interval (enrolment and test "
        "speakers resampled; an interval from fewer than {min_speakers} speakers of a trial list is not shown, one from "
        "fewer than {covered_speakers} is marked: its measured coverage is below 90 %, docs/metrics.md); the VPC "
        "column is the threshold-sweep EER of the VPC 2024 toolkit. Cllr, min Cllr and D_ECE in bits. "
        "Cllr is computed on the uncalibrated {backend} scores read as LLRs, so it includes their miscalibration; "
        "min Cllr (PAV-calibrated) is the calibrated value. Every metric of every condition is in results.csv."),
    SPEAKERS: (
        "Each enrolment speaker's trials on their own: its EER (the VPC threshold sweep, above 50 % when its "
        "targets score below its non-targets) averaged over speakers as is and clipped at 50 %; its share of the "
        "condition's linkability D_sys (the largest shown); its ZEBRA disclosure under the condition's one "
        "calibration (D_ECE in bits, l_w in log10). Least protected speakers: the lowest clipped EER, and the "
        "largest l_w then D_ECE. Every speaker's values are in results.json (`speaker_eers`, `speaker_zebra`)."),
}


def _speaker_figures(records: list[ConditionResult], figures: Path) -> list[Path]:
    """Sorted per-speaker EERs of the test conditions."""
    from pipeline.report.figures import speaker_eer_figure

    conditions = {f"{r.attack}/{r.set}": r.metrics["speaker_eers"] for r in records
                  if r.set.startswith("test") and r.metrics.get("speaker_eers")}
    return [speaker_eer_figure(conditions, figures / "speaker_eer.png")] if conditions else []


def describe_fit(fit: dict) -> str:
    where = ", ".join(part for part in (f"group `{fit['group']}`" if fit.get("group") else "",
                                        f"seed {fit['seed']}" if fit.get("seed") is not None else "") if part)
    where = f"{where[0].upper()}{where[1:]}: " if where else ""
    if "reason" in fit:
        return f"{where}no trusted model: {fit['reason']}."
    alpha = fit.get("band_false_alarm", fit["false_alarm"])
    return (f"{where}{from_fit(fit).describe()} ({fit['source']}); a pair is flagged when its EER_val lies below the "
            f"prediction by more than the one-sided margin at {100 * alpha:g} % "
            + ("(half the false-alarm rate, the column test having the other half). " if alpha < fit["false_alarm"]
               else "(the false-alarm rate). ")
            + "Trusted pairs are judged against the model of the other trusted pairs.")


def with_notes(reason: str | None, notes: list[str] | None) -> str | None:
    """A verdict's reason followed by the row's notes (e.g. an EER_val from one gender)."""
    return "; ".join([reason or "–", *(f"note: {n}" for n in notes)]) if notes else reason


def detection_table(detection: list[JudgedPair]) -> tuple[list[str], list[list]]:
    headers = ["attack", "evaluated", "attacker trained on", "role", "EER_val %", "EER_val CI %", "val trials",
               "EER_test %", "EER_test CI %", "relative drop %", "drop CI %", "residual", "residual CI",
               "margin", "flag needs EER_val below %", "best other attacker (difference, lower bound)", "verdict",
               "reason"]
    if any(d.seed is not None for d in detection):
        headers.insert(3, "seed")
    rows = []
    for d in detection:
        trials = d.val_trials or [None, None]
        of_trials = 0 in (d.val_speakers, d.test_speakers)  # a bootstrap of trials: its intervals carry TRIALS_NOTE
        column, fewest = d.column, 0 if of_trials else fewest_speakers(d.row())
        row = [d.attack, d.anonymizer, d.attacker_anonymizer, d.role or "–", percent(d.eer_val),
               interval(d.eer_val_ci, d.val_speakers), "–" if trials[0] is None else f"{trials[0]} / {trials[1]}",
               percent(d.eer_test), interval(d.eer_test_ci, d.test_speakers), percent(d.relative_drop),
               interval(d.relative_drop_ci, fewest, drop_interval_problem(d.row()), "relative_drop"),
               percent(d.residual), interval(d.residual_ci, fewest, kind="gap"), percent(d.margin),
               percent(d.flag_below),
               "–" if not column else (f"{column['other']}: {percent(column['difference'])} "
                                       f"({percent(column['lower_bound'])})"),
               d.verdict, with_notes(d.reason, d.notes)]
        if "seed" in headers:
            row.insert(3, d.seed)
        rows.append(row)
    return headers, rows


def seeds_section(seeds: list[dict]) -> Section:
    """Points run with several seeds: mean ± standard deviation over the seeds."""
    def spread(entry: dict, key: str) -> str:
        mean, std = entry[f"{key}_mean"], entry[f"{key}_std"]
        return "–" if mean is None else f"{percent(mean)} ± {percent(std) if std is not None else '–'}"

    rows = [[e["group"], e["attack"], e["anonymizer"], e["attacker_anonymizer"], len(e["seeds"]),
             spread(e, "eer_val"), spread(e, "eer_test"), spread(e, "relative_drop"), spread(e, "residual"),
             f"{e['flagged']}/{len(e['seeds'])}"] for e in seeds]
    return Section("Seeds", "Points run with several seeds (`-m seed=...`): mean ± standard deviation over the seeds, "
                            "in %; every seed's row is in the detection table.",
                   tables=[(["group", "attack", "evaluated", "attacker trained on", "seeds", "EER_val %", "EER_test %",
                             "relative drop %", "residual %", "flagged"], rows)])


def eer_matrix(detection: list[JudgedPair]) -> tuple[np.ndarray, list[str], list[str]]:
    """EER_test of anonymised pairs: rows the attacker's system, columns the evaluated one; a
    cell run with several seeds holds their mean."""
    own = [d for d in detection if d.anonymizer != ORIGINAL]
    attackers = sorted({_attacker_label(d) for d in own})
    evaluated = sorted({d.anonymizer for d in own})
    cells: dict[tuple[int, int], list[float]] = {}
    for d in own:
        cells.setdefault((attackers.index(_attacker_label(d)), evaluated.index(d.anonymizer)), []).append(d.eer_test)
    matrix = np.full((len(attackers), len(evaluated)), np.nan)
    for (row, column), values in cells.items():
        matrix[row, column] = np.mean(values)
    return matrix, attackers, evaluated


def _attacker_label(row: JudgedPair) -> str:
    """The attacker's system; an attacker on original data is named with its attack (OA and
    AA-lazy share it but not their enrolment data)."""
    system = row.attacker_anonymizer
    return f"{system} ({row.attack})" if system == ORIGINAL else system


def fit_set(fit: dict) -> tuple:
    """The calibration set a fit record belongs to (`pipeline.metrics.detection.calibration_set`)."""
    return fit.get("group", ""), fit.get("seed"), fit.get("anonymization_seed")


def figure_title(fit: dict) -> str | None:
    parts = [fit.get("group") or "", f"seed {fit['seed']}" if fit.get("seed") is not None else ""]
    where = ", ".join(p for p in parts if p)
    return f"Overestimation detection: {where}" if where else None


def matrix_verdicts(detection: list[JudgedPair], attackers: list[str], evaluated: list[str]) -> np.ndarray:
    """The verdict of each cell of `eer_matrix`: its pair's, or where its seeds disagree
    `k/n overestimated` (`0/n flagged` when none is: never the word of a flag); "" where none."""
    found: dict[tuple[int, int], list[str]] = {}
    for d in detection:
        if d.anonymizer != ORIGINAL:
            found.setdefault((attackers.index(_attacker_label(d)), evaluated.index(d.anonymizer)), []).append(
                d.verdict or UNDETERMINED)
    cells = np.full((len(attackers), len(evaluated)), "", dtype=object)
    for (row, column), verdicts in found.items():
        flagged = verdicts.count(OVERESTIMATED)
        if len(set(verdicts)) == 1:
            cells[row, column] = verdicts[0]
        else:
            cells[row, column] = f"{flagged}/{len(verdicts)} " + (OVERESTIMATED if flagged else "flagged")
    return cells


def detection_sections(detection: list[JudgedPair], fits: list[dict], figures: Path,
                       seeds: list[dict] | None = None, note: str = "") -> list[Section]:
    """The verdicts in words with the EER matrix figure (the report's answer; `note` is added
    to its text), then the detection table and scatter, the seeds and the EER matrix table."""
    from pipeline.report.figures import detection_figure, eer_matrix_figure

    matrix, attackers, evaluated = eer_matrix(detection)
    drawn = [detection_figure([d for d in detection if calibration_set(d.row()) == fit_set(fit)], fit,
                              figures / ("detection.png" if i == 0 else f"detection_{i}.png"), title=figure_title(fit))
             for i, fit in enumerate(fits)]
    heat = [eer_matrix_figure(matrix, attackers, evaluated, figures / "eer_matrix.png",
                              verdicts=matrix_verdicts(detection, attackers, evaluated))] if matrix.size else []
    sections = [Section(VERDICTS, summary_text(detection) + (f"\n\n{note}" if note else ""), figures=heat), Section(
        "Overestimation detection (EER_val vs EER_test)",
        "EER_test is the mean of the female and male test trials; EER_val is measured on the attacker's "
        "held-out validation speakers (val trials: target / non-target). Relative drop = (EER_test − EER_val) / "
        "EER_test, as in panariello2025 §3.4 (whose validation speakers were training speakers; with "
        "split.holdout=unseen a matched pair's drop is near 0, not the paper's 60 %). Residual: EER_val minus the "
        "matched pairs' prediction; a flag needs the residual below −margin, i.e. EER_val below the value shown. "
        "Best other attacker: the attacker whose EER_test on the same trials is most surely lower (the column "
        "test; paired bootstrap). Intervals are two-way speaker-bootstrap percentile intervals; a relative-drop "
        "interval is shown as \"–\" with the reason when it tells nothing (an EER from too few speakers, an EER_test "
        "interval reaching 0, or wider than 100 points; results.json keeps it). Verdicts: "
        "overestimated (a test flags), trustworthy (the excess gap is surely below detect.tolerance), not flagged, "
        "undetermined (with the reason). Role: `trusted` pairs (detect.trusted) calibrate, `judged` pairs never "
        "do. " + " ".join(describe_fit(f) for f in fits),
        tables=[detection_table(detection)], figures=drawn)]
    if seeds:
        sections.append(seeds_section(seeds))
    if matrix.size:
        table_rows = [[a, *[percent(v) if np.isfinite(v) else "–" for v in row]] for a, row in zip(attackers, matrix)]
        sections.append(Section("EER matrix (attacker system × evaluated system)",
                                "EER_test in %, rows the attacker's training system, columns the evaluated system; a "
                                "cell run with several seeds shows their mean (each seed's row is in the detection table).",
                                tables=[(["attacker \\ evaluated", *evaluated], table_rows)]))
    return sections


def score_sections(score_files: dict[str, str], figures: Path) -> list[Section]:
    """DET curves and ZEBRA ECE profiles of the test conditions."""
    from pipeline.metrics import det_curve, ece_profile, read_scores
    from pipeline.report.figures import det_figure, ece_profiles_figure

    tests = {label: path for label, path in score_files.items() if "/test_" in label and Path(path).is_file()}
    if not tests:
        return []
    tables = {label: read_scores(path) for label, path in tests.items()}
    det = det_figure({k: det_curve(t.target_scores, t.nontarget_scores) for k, t in tables.items()},
                     figures / "det.png")
    ece = ece_profiles_figure({k: ece_profile(t.target_scores, t.nontarget_scores, actual=False)
                               for k, t in tables.items()}, figures / "ece_profiles.png")
    return [Section("DET curves and ZEBRA profiles",
                    "Test conditions (attack/set).", figures=[det, ece])]


def similarity_rows(similarity: dict[str, dict]) -> list[dict]:
    """One flat row per evaluation set (similarity.csv)."""
    rows = []
    for name, sim in similarity.items():
        row = {"set": name, "folder": sim["folder"], "speakers": len(sim["speakers"]), "calibrated": sim["calibrated"],
               **{f"n_trials_{t}": n for t, n in sim["n_trials"].items()}}
        for variant in sim["deid"]:
            row[f"deid_{variant}"] = sim["deid"][variant]
            row[f"g_vd_{variant}"] = sim["g_vd"][variant]
            row.update({f"d_diag_{t}_{variant}": v for t, v in sim["d_diag"][variant].items()})
        row.update({key: sim[key] for key in ("d_ece_op_oo", "cllr_min_op_oo", "g_dece_pp_oo", "g_cllr_pp_oo")})
        rows.append(row)
    return rows


def similarity_sections(similarity: dict[str, dict], figures: Path) -> list[Section]:
    """Voice similarity metrics per evaluation set and the matrices' figures."""
    if not similarity:
        return []
    from pipeline.metrics.similarity import SimilarityResult
    from pipeline.report.figures import similarity_matrices_figure

    variants = [(name, variant) for name, sim in similarity.items() for variant in sim["deid"]]
    per_variant = [[name, variant, percent(similarity[name]["deid"][variant]), fixed(similarity[name]["g_vd"][variant]),
                    *(fixed(similarity[name]["d_diag"][variant][t], 4) for t in ("oo", "op", "pp"))]
                   for name, variant in variants]
    normalised = [[name, len(sim["speakers"]), *(sim["n_trials"][t] for t in ("oo", "op", "pp")),
                   percent(sim["d_ece_op_oo"]), percent(sim["cllr_min_op_oo"]), fixed(sim["g_dece_pp_oo"]),
                   fixed(sim["g_cllr_pp_oo"])] for name, sim in similarity.items()]
    drawn = [similarity_matrices_figure(SimilarityResult.from_dict(sim), figures / f"similarity_{name}.png",
                                        variant=SIMILARITY_VARIANT, title=f"{name}: OO | OP over PO | PP")
             for name, sim in similarity.items()]
    notes = [f"{name}: {key}: {reason}" for name, sim in similarity.items() for key, reason in sim["notes"].items()]
    return [Section(
        "Voice similarity matrices",
        "Noé et al. 2020 / 2022, as in VPC 2020: each set's trial utterances, original (O) and anonymised by "
        "the evaluated system (P), embedded by the attacker trained on original data; scores are cosines, "
        "OO / OP / PP tables calibrated separately (PAV + Laplace). DeID = 1 − D_diag(OP) / D_diag(OO) "
        "(higher: more de-identified), G_VD = 10 log10(D_diag(PP) / D_diag(OO)) dB (voice distinctiveness, "
        "0 dB: preserved). Figures: the " + SIMILARITY_VARIANT.replace("_", " ") + " variant. Trial tables "
        "and matrices are in each set's folder (results.json, `similarity`)." + ("" if not notes else
                                                                                  " Notes: " + "; ".join(notes)),
        tables=[(["set", "variant", "DeID %", "G_VD dB", "D_diag OO", "D_diag OP", "D_diag PP"], per_variant),
                (["set", "speakers", "# OO", "# OP", "# PP", "D_ECE(OP/OO) %", "Cllr_min(OP/OO) %",
                  "G_DECE(PP/OO) dB", "G_Cllr(PP/OO) dB"], normalised)],
        figures=drawn)]


def utility_sections(utility: dict | None, system: str, detection: list[JudgedPair], figures: Path) -> list[Section]:
    """The utility table beside the privacy table (none when the run measured no utility)."""
    if utility is None:
        return []
    points = semi_informed_points(detection, {system: utility})
    return [utility_section(utility_rows(utility, system), utility.get("skipped", {}), emotion_rows(utility, system),
                            points, figures, [utility.get("pitch", {})],
                            [utility["wer_text"]] if "wer_text" in utility else [])]
