"""Stage 6 — evaluate: every privacy metric of one score file (one condition).

Output folder: `metrics.json`, the `pipeline.metrics.summary` of the file's target and
non-target scores. The metric set grows in `pipeline.metrics`; this stage never changes.
"""
from __future__ import annotations

import json
from pathlib import Path

from pipeline.cache import Cache
from pipeline.data.manifest import file_digest
from pipeline.fileio import write_json
from pipeline.metrics import read_scores, summary



def run(scores: Path, cache: Cache) -> dict:
    """Metrics of `scores` (an `enroll test score target|nontarget` file)."""
    out = cache.build("evaluate", {}, {"scores": file_digest(scores)}, lambda out: _build(out, Path(scores)), code=__name__)
    return json.loads((out / "metrics.json").read_text())


def _build(out: Path, scores: Path) -> dict:
    table = read_scores(scores)
    metrics = summary(table.target_scores, table.nontarget_scores)
    write_json(out / "metrics.json", metrics)
    return {"eer": metrics["eer"]}
