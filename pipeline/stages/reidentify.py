"""Stage 6e — reidentify: re-identification beyond the EER of one condition, from embeddings.

From the attacker's embeddings of the condition's enrolment list (the speakers of the
evaluation set's gender) and trial utterances: `singling_out_rate` and `identification_rate`
over the grid of `reidentification.*` (vauquier2025, `pipeline.metrics.legal`; not D<->sys)
and the similarity rank disclosure of the speaker embeddings (`pipeline.metrics.rank_disclosure`).
Output folder: `reidentification.json` with every estimate (interval, chance, per speaker)
and the speakers left out. Keyed by the two extract folders, both manifests and the settings.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pipeline.cache import Cache
from pipeline.data.manifest import file_digest, read_manifest
from pipeline.fileio import write_json
from pipeline.layout import read_embeddings
from pipeline.metrics.legal import Grid, legal_metrics
from pipeline.metrics.rank_disclosure import embedding_rank_disclosure

GRID_KEYS = ("populations", "candidates", "lengths", "calibration_conversations", "runs", "n_resamples", "confidence")


def grid(settings: dict, seed: int) -> Grid:
    """The `reidentification` config section (plain) as the metrics' grid."""
    return Grid(**{k: tuple(settings[k]) if isinstance(settings[k], list) else settings[k] for k in GRID_KEYS},
                seed=seed)


def run(enroll_emb: Path, trial_emb: Path, enrolls: Path, trial_utts: Path, gender: str, settings: dict,
        seed: int, cache: Cache) -> Path:
    """Re-identification metrics of one condition; returns the stage folder."""
    params = {"gender": gender, "seed": seed, **{k: settings[k] for k in (*GRID_KEYS, "rank_disclosure")}}
    inputs = {"enroll": Path(enroll_emb).name, "trials_emb": Path(trial_emb).name,
              "enrolls": file_digest(enrolls), "trial_utts": file_digest(trial_utts)}

    def build(out: Path) -> dict:
        enrolled = [u for u in read_manifest(enrolls) if u.gender == gender]
        tried = read_manifest(trial_utts)
        enroll_vectors, trial_vectors = read_embeddings(enroll_emb), read_embeddings(trial_emb)
        arrays = (np.stack([trial_vectors[u.id] for u in tried]), [u.speaker for u in tried],
                  np.stack([enroll_vectors[u.id] for u in enrolled]), [u.speaker for u in enrolled])
        found = legal_metrics(*arrays, grid(settings, seed))
        if settings["rank_disclosure"]:
            found["rank_disclosure"], found["left_out"]["rank_disclosure"] = embedding_rank_disclosure(*arrays)
        write_json(out / "reidentification.json", found)
        return {"trial_utterances": len(tried), "enrolled_speakers": len({u.speaker for u in enrolled})}

    return cache.build("reidentify", params, inputs, build, code=__name__)


def load(folder: Path) -> dict:
    """The `reidentification.json` of a reidentify-stage folder."""
    return json.loads((Path(folder) / "reidentification.json").read_text())


def columns(found: dict) -> dict:
    """The record columns (results.csv) of a `load`ed result: each rate with its interval
    (`singling_out_rate_N10_L1`, `..._low`, `..._high`; `identification_rate_N<N'>_L<L>`) and
    the rank disclosure in bits (`rank_disclosure_bits`, `..._worst_bits`, and the beta-binomial
    `rank_disclosure_bb_bits`, `..._bb_worst_bits`)."""
    row = {}
    for metric in ("singling_out_rate", "identification_rate"):
        for cell, estimate in found[metric].items():
            n, length = (part.split("=")[1] for part in cell.split(","))
            name = f"{metric}_N{n}_L{length}"
            row.update({name: estimate["value"], f"{name}_low": estimate["low"], f"{name}_high": estimate["high"]})
    row["reidentification_left_out"] = found["left_out"]
    disclosure = found.get("rank_disclosure")
    if disclosure:
        row.update({"rank_disclosure_bits": disclosure["histogram"]["average"],
                    "rank_disclosure_worst_bits": disclosure["histogram"]["worst"],
                    "rank_disclosure_bb_bits": disclosure["beta_binomial"]["average"],
                    "rank_disclosure_bb_worst_bits": disclosure["beta_binomial"]["worst"]})
    return row
