"""Names and layout of stage outputs, the one place every stage and the orchestration read them.

A stage writes its folder through these names and a later stage (or the experiment) finds
files there through them, so no stage imports another to learn where a file lies.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

SKIP_LIST = "skipped.txt"  # prepare: with data.skip_bad, what was dropped, and why
PROBLEM_LIST = "problems.txt"  # prepare: bad input that stopped the stage
EMBEDDINGS = "embeddings.npy"  # extract: N x D float32, in manifest order
EMBEDDING_IDS = "ids.txt"  # extract: the utterance ids of the rows of EMBEDDINGS
RESULTS = Path("report") / "results.json"  # an experiment's records, under its output folder
FAILED = "failed.json"  # a sweep job that stopped: its error line and overrides
LAUNCHED = "launched.json"  # a sweep's launched points, in the multirun folder


def manifest_path(prepared: Path, name: str) -> Path:
    """Utterance list `name` of a prepare- or split-stage folder."""
    return Path(prepared) / "manifests" / f"{name}.jsonl"


def trials_path(prepared: Path, name: str) -> Path:
    """Trial list `name` of a prepare- or split-stage folder."""
    return Path(prepared) / "trials" / f"{name}.txt"


def read_embeddings(folder: Path) -> dict[str, np.ndarray]:
    """Utterance id -> embedding of an extract-stage folder."""
    ids = (Path(folder) / EMBEDDING_IDS).read_text().split()
    return dict(zip(ids, np.load(Path(folder) / EMBEDDINGS)))
