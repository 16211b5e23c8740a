"""Stage 5b — score: trials of one condition with a scoring backend.

The backend (conf/backend) is fitted on the attacker's training embeddings when it needs
them (e.g. mean subtraction, PLDA); a speaker's model comes from its enrolment embeddings
by the backend's `enrol` (cosine: its `enrolment` rule). Output folder: `scores.txt` with
`enroll test score target|nontarget` lines, written before any metric runs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
from omegaconf import DictConfig

from pipeline.asv.scoring import score_trials, write_scores
from pipeline.core.cache import Cache
from pipeline.core.config import instantiate, without
from pipeline.core.layout import read_embeddings
from pipeline.data.manifest import file_digest, read_manifest, read_trials



def run(backend: DictConfig, enroll_emb: Path, trial_emb: Path, enrolls: Path, trials: Path, cache: Cache, *,
        training_emb: Callable[[], tuple[Path, Path]]) -> Path:
    """Score `trials` from extract-stage folders; returns the folder holding scores.txt.

    `training_emb()` returns (extract folder, manifest) of the attacker's training data;
    it is called only when the backend needs fitting, so cosine scoring never pays for it.
    """
    params = without(backend, "name")
    scorer = instantiate(backend)
    training = training_emb() if scorer.needs_fit else None
    inputs = {"enroll": Path(enroll_emb).name, "trials_emb": Path(trial_emb).name,
              "enrolls": file_digest(enrolls), "trials": file_digest(trials)}
    if training is not None:
        inputs["training"] = Path(training[0]).name

    def build(out: Path) -> dict:
        if training is not None:
            folder, manifest = training
            embeddings = read_embeddings(folder)
            utts = read_manifest(manifest)
            scorer.fit(np.stack([embeddings[u.id] for u in utts]), [u.speaker for u in utts])
        enroll_utts = read_manifest(enrolls)
        enroll_vectors = read_embeddings(enroll_emb)
        trial_list = read_trials(trials)
        scores = score_trials(scorer, enroll_utts, np.stack([enroll_vectors[u.id] for u in enroll_utts]),
                              read_embeddings(trial_emb), trial_list)
        write_scores(out / "scores.txt", trial_list, scores)
        return {"trials": len(trial_list)}

    return cache.build("score", params, inputs, build, code=__name__) / "scores.txt"
