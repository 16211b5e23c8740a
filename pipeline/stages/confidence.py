"""Stage 6b — confidence: bootstrap interval of one score file's EER (for detection).

Speakers are resampled with replacement on both sides of the trials (the two-way bootstrap
of `pipeline.metrics.bootstrap_ci`; the test speakers come from the trial utterances'
manifest). Output folder:
`confidence.json` with `eer_ci_low`, `eer_ci_high` (fractions), the settings used and
`eer_replicates` (the EER of every resample, for the intervals of detection's derived
quantities).
"""
from __future__ import annotations

import json
from pathlib import Path

from pipeline.core.cache import Cache
from pipeline.core.fileio import write_json
from pipeline.data.manifest import file_digest, read_manifest
from pipeline.metrics import bootstrap_ci, read_scores



def run(scores: Path, trial_utts: Path, cache: Cache, *, n_resamples: int = 1000, confidence: float = 0.95,
        unit: str = "speakers", seed: int = 0) -> dict:
    """{"eer_ci_low", "eer_ci_high", "eer_ci_level", "eer_speakers", "eer_replicates"} of
    `scores`, whose test utterances are those of the manifest `trial_utts`."""
    params = {"n_resamples": n_resamples, "confidence": confidence, "unit": unit, "seed": seed}
    out = cache.build("confidence", params, {"scores": file_digest(scores), "trial_utts": file_digest(trial_utts)},
                      lambda out: _build(out, Path(scores), Path(trial_utts), **params), code=__name__)
    return json.loads((out / "confidence.json").read_text())


def _build(out: Path, scores: Path, trial_utts: Path, **params) -> dict:
    table = read_scores(scores, utt2spk={u.id: u.speaker for u in read_manifest(trial_utts)})
    result = bootstrap_ci(table.target_scores, table.nontarget_scores, **table.speaker_sides(), **params)
    interval = {"eer_ci_low": result.eer.low, "eer_ci_high": result.eer.high, "eer_ci_level": params["confidence"],
                "eer_speakers": result.n_speakers,
                "eer_replicates": [round(e, 6) for e in result.eer_replicates]}
    write_json(out / "confidence.json", interval)
    return interval
