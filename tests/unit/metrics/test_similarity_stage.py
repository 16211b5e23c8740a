"""The similarity stage: all-pairs OO / OP / PP trial tables from fake embeddings, their
files as `vpeval metrics` reads them, and the metrics written beside them."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.core.cache import Cache
from pipeline.core.fileio import write_lines
from pipeline.data.manifest import Utterance, write_manifest
from pipeline.metrics import read_scores, similarity_metrics
from pipeline.metrics.similarity import SimilarityResult
from pipeline.stages import similarity

# two speakers, three utterances each; anonymised = original rotated, so own versions differ
SPEAKERS = ["s1", "s1", "s1", "s2", "s2", "s2"]
IDS = ["s1-a", "s1-b", "s1-c", "s2-a", "s2-b", "s2-c"]
ORIGINAL = np.array([[1.0, 0.1, 0.0], [0.9, 0.2, 0.1], [1.0, 0.0, 0.2],
                     [0.0, 1.0, 0.1], [0.1, 0.9, 0.0], [0.2, 1.0, 0.1]])
ANONYMIZED = ORIGINAL[:, [1, 2, 0]] + 0.05


def test_pair_counts_and_scores():
    tables = similarity.trial_tables(ORIGINAL, ANONYMIZED)
    n = len(IDS)
    assert {name: len(t[2]) for name, t in tables.items()} == {"oo": n * (n - 1) // 2, "op": n * (n - 1),
                                                                 "pp": n * (n - 1) // 2}
    for name in ("oo", "pp"):  # unordered pairs of distinct segments, each once
        a, b, _ = tables[name]
        assert (a < b).all() and len(set(zip(a, b))) == len(a)
    a, b, scores = tables["op"]
    assert (a != b).all()  # no utterance against its own anonymised version
    assert len(set(zip(a, b))) == len(a) and {(0, 1), (1, 0)} <= set(zip(a, b))  # ordered: O side a
    o = ORIGINAL / np.linalg.norm(ORIGINAL, axis=1, keepdims=True)
    p = ANONYMIZED / np.linalg.norm(ANONYMIZED, axis=1, keepdims=True)
    k = list(zip(a, b)).index((1, 4))
    assert scores[k] == pytest.approx(o[1] @ p[4])
    with pytest.raises(ValueError, match="differ"):
        similarity.trial_tables(ORIGINAL, ANONYMIZED[:-1])


def fake_extraction(folder, embeddings, ids=IDS):
    """An extract-stage folder: `embeddings` row i is utterance `ids[i]`."""
    folder.mkdir()
    np.save(folder / "embeddings.npy", embeddings.astype(np.float32))
    write_lines(folder / "ids.txt", ids)
    return folder


def test_stage_writes_tables_readable_by_metrics(tmp_path):
    manifest = write_manifest(tmp_path / "trials.jsonl", [
        Utterance(id=u, speaker=s, gender="f", path=f"/x/{u}.wav", duration=1.0) for u, s in zip(IDS, SPEAKERS)])
    cache = Cache(tmp_path / "cache")
    original = fake_extraction(tmp_path / "o", ORIGINAL)
    # the anonymised extraction lists the same ids in another order: rows are matched by id
    order = [5, 3, 1, 0, 2, 4]
    anonymized = fake_extraction(tmp_path / "p", ANONYMIZED[order], [IDS[i] for i in order])

    folder = similarity.run(original, anonymized, manifest, cache)
    files = {name: read_scores(folder / f"{name}.txt") for name in ("oo", "op", "pp")}
    assert all(f.format == "table" for f in files.values())
    op = files["op"].table
    assert len(op.score) == 30 and not (op.segment_a == op.segment_b).any()
    assert (files["oo"].table.speaker_a == files["oo"].table.speaker_b).sum() == 6  # target pairs
    k = next(i for i in range(30) if (op.segment_a[i], op.segment_b[i]) == ("s1-b", "s2-b"))
    o, p = ORIGINAL[1], ANONYMIZED[4]
    assert op.score[k] == pytest.approx(o @ p / np.linalg.norm(o) / np.linalg.norm(p), abs=1e-6)

    stored = similarity.load(folder)
    expected = similarity_metrics(*(f.table for f in files.values())).as_dict()
    assert stored["deid"] == expected["deid"] and stored["g_vd"] == expected["g_vd"]
    assert stored["n_trials"] == {"oo": 15, "op": 30, "pp": 15} and stored["scoring"] == "cosine"
    rebuilt = SimilarityResult.from_dict(stored)
    assert rebuilt.speakers == ["s1", "s2"] and rebuilt.matrices["geometric_mean"]["op"].shape == (2, 2)
    assert json.loads(json.dumps(rebuilt.as_dict()))["matrices"] == stored["matrices"]

    assert similarity.run(original, anonymized, manifest, cache) == folder
    assert [e.reused for e in cache.events] == [False, True]
