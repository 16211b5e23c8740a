"""Stage 6b — confidence: bootstrap interval of one score file's EER (for detection).

Speakers are resampled with replacement (all trials of a drawn enrolment speaker kept), so
trials of one speaker stay together; see `pipeline.metrics.bootstrap_ci`. Output folder:
`confidence.json` with `eer_ci_low`, `eer_ci_high` (fractions), the settings used and
`eer_replicates` (the EER of every resample, for the intervals of detection's derived
quantities).
"""
from __future__ import annotations

import json
from pathlib import Path

from pipeline.cache import Cache
from pipeline.data.manifest import file_digest
from pipeline.fileio import write_json
from pipeline.metrics import bootstrap_ci, read_scores

VERSION = 2


def run(scores: Path, cache: Cache, *, n_resamples: int = 1000, confidence: float = 0.95,
        unit: str = "speakers", seed: int = 0) -> dict:
    """{"eer_ci_low", "eer_ci_high", "eer_ci_level", "eer_replicates"} of `scores`."""
    params = {"n_resamples": n_resamples, "confidence": confidence, "unit": unit, "seed": seed}
    out = cache.build("confidence", params, {"scores": file_digest(scores)},
                      lambda out: _build(out, Path(scores), **params), VERSION)
    return json.loads((out / "confidence.json").read_text())


def _build(out: Path, scores: Path, **params) -> dict:
    table = read_scores(scores)
    result = bootstrap_ci(table.target_scores, table.nontarget_scores, tar_speakers=table.target_speakers,
                          non_speakers=table.nontarget_speakers, **params)
    interval = {"eer_ci_low": result.eer.low, "eer_ci_high": result.eer.high, "eer_ci_level": params["confidence"],
                "eer_replicates": [round(e, 6) for e in result.eer_replicates]}
    write_json(out / "confidence.json", interval)
    return interval
