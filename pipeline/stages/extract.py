"""Stage 5a — extract: speaker embeddings of one manifest with one attacker model.

Output folder: `embeddings.npy` (N x D float32, manifest order) and `ids.txt`; keyed by
the model folder and the manifest's content, so each (model, manifest) pair is embedded once.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.asv.embed import extract_embeddings
from pipeline.cache import Cache
from pipeline.data.manifest import file_digest, read_manifest
from pipeline.fileio import atomic_path, write_lines

VERSION = 1


def run(model: Path, manifest: Path, cache: Cache, *, device: str, extraction: dict) -> Path:
    """Embed the utterances of `manifest` with the attacker in `model` (a train-stage folder).

    `extraction` (batch_seconds, precision, workers) changes speed, not results, so it is
    not part of the folder's key.
    """

    def build(out: Path) -> dict:
        ids, embeddings = extract_embeddings(model, read_manifest(manifest), device=device, **extraction)
        with atomic_path(out / "embeddings.npy") as tmp:
            np.save(tmp, embeddings)
        write_lines(out / "ids.txt", ids)
        return {"utterances": len(ids), "dim": int(embeddings.shape[1])}

    inputs = {"model": Path(model).name, "manifest": file_digest(manifest)}
    return cache.build("extract", {}, inputs, build, VERSION)


def load(folder: Path) -> dict[str, np.ndarray]:
    """Utterance id -> embedding of an extract-stage folder."""
    ids = (Path(folder) / "ids.txt").read_text().split()
    return dict(zip(ids, np.load(Path(folder) / "embeddings.npy")))
