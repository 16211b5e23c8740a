"""Stage 5a — extract: speaker embeddings of one manifest with one attacker model.

Output folder: `embeddings.npy` (N x D float32, manifest order) and `ids.txt`; keyed by
the model folder, the manifest's content and the extraction precision, so each (model,
manifest, precision) is embedded once.
With a team the manifest's length buckets are shared among the ranks (`pipeline.asv.embed`)
and rank 0 writes the files.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from pipeline.asv.embed import extract_embeddings
from pipeline.core.cache import Cache
from pipeline.core.fileio import write_lines, write_npy
from pipeline.core.layout import EMBEDDING_IDS, EMBEDDINGS
from pipeline.core.schemas import Extraction
from pipeline.data.manifest import file_digest, read_manifest
from pipeline.runtime.distributed import World
from pipeline.runtime.team import Team, run_on_ranks


def extract_on_rank(world: World, model: str, manifest: str, out: str, extraction: dict) -> None:
    """This rank's share of the manifest's embeddings; rank 0 writes them all."""
    ids, embeddings = extract_embeddings(model, read_manifest(Path(manifest)), world=world, **extraction)
    if world.is_main:
        write_npy(Path(out) / EMBEDDINGS, embeddings)
        write_lines(Path(out) / EMBEDDING_IDS, ids)


def run(model: Path, manifest: Path, cache: Cache, *, device: str, extraction: Extraction,
        team: Team | None = None) -> Path:
    """Embed the utterances of `manifest` with the attacker in `model` (a train-stage folder),
    on `team`'s ranks when given, else in this process on `device`.

    `extraction` is the typed `attacker.extraction`: its `precision` changes the embeddings
    and keys the folder; batch_seconds, workers, audio_cache and compile change speed, not
    results (length buckets make an embedding its own; compiled code differs by float
    rounding), so they are not part of the key.
    """

    def build(out: Path) -> dict:
        run_on_ranks(team, device, extract_on_rank, model=str(model), manifest=str(manifest), out=str(out),
                     extraction=asdict(extraction))
        return {"utterances": len((out / EMBEDDING_IDS).read_text().split()),
                "dim": int(np.load(out / EMBEDDINGS, mmap_mode="r").shape[1])}

    inputs = {"model": Path(model).name, "manifest": file_digest(manifest)}
    return cache.build("extract", {"precision": extraction.precision}, inputs, build, code=__name__)
