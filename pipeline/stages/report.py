"""Stage 8 — report: results files and a human report with figures in the run folder.

- `results.json`: {"config_hash", "config", "records": [one per attack x evaluation set],
  "detection": [one per attack], "detection_fit", "score_files", "stages"};
- `results.csv`: every metric of every condition, one row per record;
- `report.md` and `report.html` (self-contained: figures embedded), figures as PNG files in
  `figures/`: detection scatter, EER matrix, DET curves, ZEBRA ECE profiles.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.fileio import write_json, write_text
from pipeline.report.document import Section, render_html, render_markdown, results_csv
from pipeline.report.tables import percent


def run(out: Path, *, config_hash: str, config_summary: dict, records: list[dict], detection: list[dict],
        fit: dict, stages: list[dict], score_files: dict[str, str] | None = None) -> Path:
    """Write the report folder `out`; returns it."""
    out = Path(out)
    score_files = score_files or {}
    write_json(out / "results.json", {"config_hash": config_hash, "config": config_summary, "records": records,
                                      "detection": detection, "detection_fit": fit, "score_files": score_files,
                                      "stages": stages})
    write_text(out / "results.csv", results_csv(records))
    built = [s for s in stages if not s["reused"]]
    activity = (f"Config hash `{config_hash}`. {len(built)} stage outputs built, {len(stages) - len(built)} "
                f"reused from the cache ({sum(s['seconds'] for s in built):.0f} s of stage work).")
    sections = [
        Section("Settings", activity, tables=[(["setting", "value"], [[k, v] for k, v in config_summary.items()])]),
        metrics_section(records),
        *detection_sections(detection, fit, out / "figures"),
        *score_sections(score_files, out / "figures"),
    ]
    write_text(out / "report.md", render_markdown("vpeval report", sections, base=out))
    write_text(out / "report.html", render_html("vpeval report", sections))
    return out


def interval(ci) -> str:
    return "–" if not ci else f"[{percent(ci[0])}, {percent(ci[1])}]"


def metrics_section(records: list[dict]) -> Section:
    rows = [[r["attack"], r["set"], r["anonymizer"], r["attacker_anonymizer"], percent(r["eer"]),
             interval([r["eer_ci_low"], r["eer_ci_high"]] if r.get("eer_ci_low") is not None else None),
             percent(r["eer_threshold"]), r["cllr"], r["min_cllr"], r.get("linkability"), r.get("d_ece"),
             r.get("zebra_tag"), r["n_target"], r["n_nontarget"]] for r in records]
    return Section(
        "Privacy metrics",
        "EER is the ROCCH-EER (BOSARIS) with its 95 % speaker-bootstrap interval; the VPC column is the "
        "threshold-sweep EER of the VPC 2024 toolkit. Cllr, min Cllr and D_ECE in bits. Every metric of "
        "every condition is in results.csv.",
        tables=[(["attack", "set", "anonymizer", "attacker trained on", "EER %", "EER CI %", "EER (VPC thr.) %",
                  "Cllr", "min Cllr", "linkability", "D_ECE", "ZEBRA tag", "# target", "# non-target"], rows)])


def describe_fit(fit: dict) -> str:
    if "slope" not in fit:
        return f"No matched line: {fit['reason']}."
    return (f"Matched line fitted on {fit['n_points']} {fit['source']}: EER_val = {fit['intercept']:.4f} + "
            f"{fit['slope']:.4f} · EER_test (residual std {100 * fit['residual_std']:.2f} points); a pair is "
            f"flagged when its EER_val lies below the line by more than the one-sided "
            f"{100 * (1 - fit['false_alarm']):g} % prediction bound (false-alarm rate {100 * fit['false_alarm']:g} % "
            "for a matched pair). Matched pairs of the sweep are judged against the line of the others.")


def detection_table(detection: list[dict]) -> tuple[list[str], list[list]]:
    headers = ["attack", "evaluated", "attacker trained on", "EER_val %", "EER_val CI %", "EER_test %",
               "EER_test CI %", "relative gap", "residual", "margin", "verdict", "reason"]
    rows = [[d["attack"], d["anonymizer"], d["attacker_anonymizer"], percent(d["eer_val"]), interval(d.get("eer_val_ci")),
             percent(d["eer_test"]), interval(d.get("eer_test_ci")),
             "–" if d["relative_gap"] is None else f"{100 * d['relative_gap']:+.1f} %",
             percent(d.get("residual")), percent(d.get("margin")), d.get("verdict"), d.get("reason")]
            for d in detection]
    return headers, rows


def eer_matrix(detection: list[dict]) -> tuple[np.ndarray, list[str], list[str]]:
    """EER_test of anonymised pairs: rows the attacker's system, columns the evaluated one."""
    own = [d for d in detection if d["anonymizer"] != "original"]
    attackers = sorted({_attacker_label(d) for d in own})
    evaluated = sorted({d["anonymizer"] for d in own})
    matrix = np.full((len(attackers), len(evaluated)), np.nan)
    for d in own:
        matrix[attackers.index(_attacker_label(d)), evaluated.index(d["anonymizer"])] = d["eer_test"]
    return matrix, attackers, evaluated


def _attacker_label(row: dict) -> str:
    """The attacker's system; an attacker on original data is named with its attack (OA and
    AA-lazy share it but not their enrolment data)."""
    system = row["attacker_anonymizer"]
    return f"{system} ({row['attack']})" if system == "original" else system


def detection_sections(detection: list[dict], fit: dict, figures: Path) -> list[Section]:
    from pipeline.report.figures import detection_figure, eer_matrix_figure

    matrix, attackers, evaluated = eer_matrix(detection)
    sections = [Section(
        "Overestimation detection (EER_val vs EER_test)",
        "EER_test is the mean of the female and male test trials; EER_val is measured on the attacker's "
        "held-out validation split (panariello2025 §4). " + describe_fit(fit),
        tables=[detection_table(detection)], figures=[detection_figure(detection, fit, figures / "detection.png")])]
    if matrix.size:
        table_rows = [[a, *[percent(v) if np.isfinite(v) else "–" for v in row]] for a, row in zip(attackers, matrix)]
        sections.append(Section("EER matrix (attacker system × evaluated system)",
                                "EER_test in %, rows the attacker's training system, columns the evaluated system.",
                                tables=[(["attacker \\ evaluated", *evaluated], table_rows)],
                                figures=[eer_matrix_figure(matrix, attackers, evaluated, figures / "eer_matrix.png")]))
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
                    "Test conditions (attack/set). Voice similarity matrices need all-pairs trial tables: "
                    "`vpeval metrics --help` (recipes/noe2022).", figures=[det, ece])]
