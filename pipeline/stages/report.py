"""Stage 8 — report: `results.json` (machine-readable) and `report.md` in the run folder.

results.json: {"config_hash", "records": [one per attack x evaluation set], "detection": [...],
"stages": [what each stage did]}. report.md: the same numbers as tables.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.fileio import write_json, write_text
from pipeline.report.tables import markdown_table, percent


def run(out: Path, *, config_hash: str, config_summary: dict, records: list[dict],
        detection: list[dict], stages: list[dict]) -> Path:
    """Write the report folder `out`; returns it."""
    out = Path(out)
    write_json(out / "results.json", {"config_hash": config_hash, "config": config_summary,
                                      "records": records, "detection": detection, "stages": stages})
    write_text(out / "report.md", render(config_hash, config_summary, records, detection, stages))
    return out


def render(config_hash: str, config_summary: dict, records: list[dict], detection: list[dict],
           stages: list[dict]) -> str:
    settings = markdown_table(["setting", "value"], [[k, v] for k, v in config_summary.items()])
    results = markdown_table(
        ["attack", "set", "anonymizer", "attacker trained on", "EER %", "EER (VPC thr.) %", "Cllr",
         "min Cllr", "# target", "# non-target"],
        [[r["attack"], r["set"], r["anonymizer"], r["attacker_anonymizer"], percent(r["eer"]),
          percent(r["eer_threshold"]), r["cllr"], r["min_cllr"], r["n_target"], r["n_nontarget"]]
         for r in records])
    gaps = markdown_table(
        ["attack", "attacker trained on", "EER_val %", "EER_test %", "relative gap"],
        [[d["attack"], d["attacker_anonymizer"], percent(d["eer_val"]), percent(d["eer_test"]),
          "–" if d["relative_gap"] is None else f"{100 * d['relative_gap']:+.1f} %"] for d in detection])
    built = [s for s in stages if not s["reused"]]
    activity = (f"{len(built)} stage outputs built, {len(stages) - len(built)} reused from the cache "
                f"({sum(s['seconds'] for s in built):.0f} s of stage work).")
    return "\n\n".join([
        f"# vpeval report\n\nConfig hash `{config_hash}`. {activity}",
        "## Settings\n\n" + settings,
        "## Privacy metrics\n\nEER is the ROCCH-EER (BOSARIS); the VPC column is the threshold-sweep "
        "EER of the VPC 2024 toolkit. Cllr and min Cllr in bits.\n\n" + results,
        "## Validation vs test EER\n\nEER_test is the mean of the female and male test trials. An "
        "attacker whose EER_test lies far above its EER_val may overestimate privacy "
        "(panariello2025).\n\n" + gaps,
    ]) + "\n"
