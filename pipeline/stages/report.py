"""Stage 8 — report: results files and a human report with figures in the run folder.

- `results.json`: the run's `pipeline.metrics.results.RunSummary` (`format_version`, config
  hash, config with the detection settings, records: one per attack x evaluation set with its
  re-identification grid cells, detection: one pair per attack, detection_fit, score_files,
  stages, similarity: {set: voice similarity metrics} when measured); its JSON Schema is
  docs/results.schema.json;
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

from pipeline.metrics.results import RunSummary
from pipeline.report.run_report import write_run_report


def run(out: Path, summary: RunSummary, *, similarity: dict[str, dict] | None = None,
        curves: list[dict] | None = None) -> Path:
    """Write the report folder `out` of the run's `summary`; returns it. `similarity` maps an
    evaluation set to its similarity-stage result (`similarity.load`) with its `folder`;
    `curves`: the training curves the run wrote (`pipeline.runtime.curves.written`)."""
    return write_run_report(out, summary, similarity=similarity, curves=curves)
