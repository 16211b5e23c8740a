"""Stage 8 — report: results files and a human report with figures in the run folder.

- `results.json`: {"config_hash", "config", "records": [one per attack x evaluation set],
  "detection": [one per attack], "detection_fit", "score_files", "stages",
  "similarity": {set: voice similarity metrics}} (when measured);
- `results.csv`: every metric of every condition, one row per record; `similarity.csv`: the
  voice similarity metrics, one row per evaluation set (when measured);
- `utility.csv`: ρF0 and WER per evaluation set and pooled per split, `results.json`
  "utility": everything `pipeline.app.utility.measure` found, skipped metrics with their reasons,
  and "speech_lost": the results whose utility says the anonymised speech was lost (a warning
  section first in the report, `pipeline.report.utility.speech_lost`);
- `report.md` and `report.html` (self-contained: figures embedded), the answer first: a
  warning when the speech was lost, then the verdicts in words with the EER matrix and each
  pair's verdict on it (`pipeline.report.verdicts`), the detail after them and the settings
  last; figures as PNG files in `figures/`: detection scatter, EER matrix, DET curves, ZEBRA
  ECE profiles, voice similarity matrices (`similarity_<set>.png`), privacy against utility
  (`privacy_utility.png`), the test conditions' per-speaker EERs (`speaker_eer.png`),
  singling out and identification rates against N and N' (`reidentification.png`; every
  estimate in the records' `*_detail` columns);
  a "Training curves" section names where the curves of the attackers trained by the run went
  (`pipeline.runtime.curves`) and, for those reused from the cache, their training_log.jsonl.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.report.run_report import write_run_report


def run(out: Path, *, config_hash: str, config_summary: dict, records: list[dict], detection: list[dict],
        fit: list[dict], stages: list[dict], score_files: dict[str, str] | None = None,
        similarity: dict[str, dict] | None = None, utility: dict | None = None,
        curves: list[dict] | None = None) -> Path:
    """Write the report folder `out`; returns it. `similarity` maps an evaluation set to its
    similarity-stage result (`similarity.load`) with its `folder`; `curves`: the training curves
    the run wrote (`pipeline.runtime.curves.written`)."""
    results = {"config_hash": config_hash, "config": config_summary, "records": records, "detection": detection,
               "detection_fit": fit, "score_files": score_files or {}, "stages": stages}
    if utility is not None:
        results["utility"] = utility
    return write_run_report(out, results, similarity=similarity, curves=curves)
