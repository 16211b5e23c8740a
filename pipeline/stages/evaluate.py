"""Stage 6 — evaluate: every privacy metric of one condition.

Output folder: `metrics.json`, every metric of `pipeline.metrics.registry.METRICS` on the
condition's score file, with the speakers of its trials (from the trial manifest) and, when
given, the enrolment and trial embeddings with their speakers. The key holds each metric's
version, and the code digest covers every metric module the list imports: a changed metric
is never served from an old cache. The metric set grows in `pipeline.metrics`; this stage never changes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.core.cache import Cache
from pipeline.core.fileio import write_json
from pipeline.core.layout import read_embeddings
from pipeline.data.manifest import file_digest, read_manifest
from pipeline.metrics.contract import Embeddings
from pipeline.metrics.registry import METRICS, metric_settings, metric_versions
from pipeline.metrics.scorefiles import read_scores
from pipeline.metrics.summary import condition_of, evaluate


@dataclass(frozen=True)
class EmbeddingSources:
    """Extract-stage folders of a condition's enrolment and trial utterances, with their manifests."""

    enroll_emb: Path
    enrolls: Path
    trial_emb: Path
    trial_utts: Path

    def key(self) -> dict:
        return {"enroll_emb": Path(self.enroll_emb).name, "enrolls": file_digest(self.enrolls),
                "trial_emb": Path(self.trial_emb).name, "trial_utts": file_digest(self.trial_utts)}

    def load(self) -> Embeddings:
        enrolls, trials = read_manifest(self.enrolls), read_manifest(self.trial_utts)
        enroll_vectors, trial_vectors = read_embeddings(self.enroll_emb), read_embeddings(self.trial_emb)
        return Embeddings(enroll=np.stack([enroll_vectors[u.id] for u in enrolls]),
                          enroll_speakers=np.asarray([u.speaker for u in enrolls]),
                          trial=np.stack([trial_vectors[u.id] for u in trials]),
                          trial_speakers=np.asarray([u.speaker for u in trials]))


def params(metrics=METRICS, settings: dict | None = None) -> dict:
    """The stage's settings: every metric's version, the metrics' settings when given, and what
    the metrics built from the config were built with (the re-identification grid)."""
    built = metric_settings(metrics)
    return {"metrics": metric_versions(metrics), **({"settings": dict(settings)} if settings else {}),
            **({"built_with": built} if built else {})}


def run(scores: Path, cache: Cache, *, trial_utts: Path | None = None,
        embeddings: EmbeddingSources | None = None, settings: dict | None = None, metrics=METRICS) -> dict:
    """Metrics of `scores` (an `enroll test score target|nontarget` file); `trial_utts`: the
    manifest naming each test utterance's speaker; `embeddings`: where the embedding-based
    metrics find theirs (without them those metrics are None, with the reason in `notes`);
    `settings`: the metrics' settings (`Condition.settings`, over `DEFAULT_SETTINGS`);
    `metrics`: the list (`registry.metric_list` adds those a config section builds)."""
    inputs = {"scores": file_digest(scores)}
    if trial_utts is not None:
        inputs["trial_utts"] = file_digest(trial_utts)
    if embeddings is not None:
        inputs["embeddings"] = embeddings.key()
    out = cache.build("evaluate", params(metrics, settings), inputs,
                      lambda out: _build(out, Path(scores), trial_utts, embeddings, settings, metrics), code=__name__)
    return json.loads((out / "metrics.json").read_text())


def _build(out: Path, scores: Path, trial_utts: Path | None, embeddings: EmbeddingSources | None,
           settings: dict | None, metrics) -> dict:
    speakers = {u.id: u.speaker for u in read_manifest(trial_utts)} if trial_utts is not None else None
    condition = condition_of(read_scores(scores, utt2spk=speakers), settings,
                             embeddings=embeddings.load() if embeddings is not None else None)
    found = evaluate(condition, metrics)
    write_json(out / "metrics.json", found)
    return {"eer": found["eer"]}
