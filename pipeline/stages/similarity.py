"""Stage 6c — similarity: voice similarity matrices of one evaluation set (noe2020, noe2022 §4).

As in VPC 2020, the voices are compared by an ASV trained on original data (the OO
attacker): the set's trial utterances are embedded in their original and their anonymised
version, and three all-pairs trial tables are scored with the cosine of the embeddings
(the configured backend is not used: it scores speaker models against utterances, these
tables compare utterances with utterances):

- OO: every unordered pair of distinct original utterances;
- PP: every unordered pair of distinct anonymised utterances;
- OP: every (original, anonymised) pair except an utterance with its own anonymised version.

Output folder: `oo.txt`, `op.txt`, `pp.txt` (`speaker_a segment_a speaker_b segment_b score`,
the trial-table format `vpeval metrics oo op pp` reads; side a of OP is original) and
`similarity.json`, `pipeline.metrics.similarity_metrics` of the three files as read back.
Keyed by the two extract folders and the manifest's content.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pipeline.asv.scoring import length_normalise
from pipeline.core.cache import Cache
from pipeline.core.fileio import atomic_path, write_json
from pipeline.core.layout import read_embeddings
from pipeline.core.vocabulary import ANONYMIZED, ORIGINAL
from pipeline.data.manifest import file_digest, read_manifest
from pipeline.metrics import read_scores, similarity_metrics
from pipeline.metrics.similarity import SETS

SCORING = "cosine"


def trial_tables(original: np.ndarray, anonymized: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(row index a, row index b, cosine score) of the OO, OP and PP tables, all pairs at once
    (matrix products). Row i of `original` and of `anonymized` embed the same utterance;
    side a of OP is original.
    """
    if np.shape(original) != np.shape(anonymized):
        raise ValueError(f"original {np.shape(original)} and anonymised {np.shape(anonymized)} embeddings differ")
    o, p = length_normalise(original), length_normalise(anonymized)
    n = len(o)
    upper_a, upper_b = np.triu_indices(n, k=1)
    off_a, off_b = np.nonzero(~np.eye(n, dtype=bool))
    return {"oo": (upper_a, upper_b, (o @ o.T)[upper_a, upper_b]),
            "op": (off_a, off_b, (o @ p.T)[off_a, off_b]),
            "pp": (upper_a, upper_b, (p @ p.T)[upper_a, upper_b])}


def write_table(path: Path, speakers: np.ndarray, ids: np.ndarray, a: np.ndarray, b: np.ndarray,
                scores: np.ndarray) -> Path:
    """One trial table in the five-field format, atomically."""
    columns = np.column_stack([speakers[a], ids[a], speakers[b], ids[b], np.char.mod("%.6f", scores)])
    with atomic_path(path) as tmp:
        np.savetxt(tmp, columns, fmt="%s", delimiter=" ")
    return path


def run(original_emb: Path, anonymized_emb: Path, manifest: Path, cache: Cache) -> Path:
    """Trial tables and similarity metrics of the utterances of `manifest` (original ids and
    speakers; the anonymised version of an utterance keeps its id), from two extract-stage
    folders of the same model; returns the stage folder."""
    inputs = {ORIGINAL: Path(original_emb).name, ANONYMIZED: Path(anonymized_emb).name,
              "manifest": file_digest(manifest)}

    def build(out: Path) -> dict:
        utts = read_manifest(manifest)
        original, anonymized = read_embeddings(original_emb), read_embeddings(anonymized_emb)
        speakers = np.asarray([u.speaker for u in utts])
        ids = np.asarray([u.id for u in utts])
        tables = trial_tables(np.stack([original[u] for u in ids]), np.stack([anonymized[u] for u in ids]))
        for name in SETS:
            write_table(out / f"{name}.txt", speakers, ids, *tables[name])
        result = similarity_metrics(*(read_scores(out / f"{name}.txt").table for name in SETS))
        write_json(out / "similarity.json", {"scoring": SCORING, **result.as_dict()})
        return {"utterances": len(ids), "deid": result.deid, "g_vd": result.g_vd}

    return cache.build("similarity", {"scoring": SCORING, "calibrated": True}, inputs, build, code=__name__)


def load(folder: Path) -> dict:
    """The `similarity.json` of a similarity-stage folder."""
    return json.loads((Path(folder) / "similarity.json").read_text())
