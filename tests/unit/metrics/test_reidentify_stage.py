"""The reidentify stage: embeddings of one condition in, every grid cell, rank disclosure and
the record columns out; the enrolment list is cut to the set's gender; the result is cached
on the settings."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.cache import Cache
from pipeline.data.manifest import Utterance, write_manifest
from pipeline.fileio import write_lines
from pipeline.metrics.legal import Grid, legal_metrics
from pipeline.stages import reidentify

SETTINGS = {"enabled": True, "populations": [2, 3], "candidates": [2, 3], "lengths": [1, 2],
            "calibration_conversations": 2, "runs": 2, "n_resamples": 50, "confidence": 0.9, "rank_disclosure": True}


def extraction(folder, ids, embeddings):
    folder.mkdir()
    np.save(folder / "embeddings.npy", embeddings.astype(np.float32))
    write_lines(folder / "ids.txt", ids)
    return folder


def condition(tmp_path, spread):
    """4 female test speakers with 6 utterances, 3 of them enrolled with 2; a male speaker
    enrolled too (left out of a female set's candidates)."""
    rng = np.random.default_rng(0)
    means = rng.normal(size=(5, 8))
    tried = [Utterance(f"f{s}-{i}", f"f{s}", "f", "/x.wav", 1.0) for s in range(4) for i in range(6)]
    enrolled = [Utterance(f"e{s}-{i}", f"f{s}" if s < 3 else "m9", "f" if s < 3 else "m", "/x.wav", 1.0)
                for s in (0, 1, 2, 4) for i in range(2)]
    test = np.repeat(means[:4], 6, axis=0) + spread * rng.normal(size=(24, 8))
    enrol = np.repeat(means[[0, 1, 2, 4]], 2, axis=0) + spread * rng.normal(size=(8, 8))
    paths = (extraction(tmp_path / f"enr{spread}", [u.id for u in enrolled], enrol),
             extraction(tmp_path / f"tri{spread}", [u.id for u in tried], test),
             write_manifest(tmp_path / f"enrolls{spread}.jsonl", enrolled),
             write_manifest(tmp_path / f"trials{spread}.jsonl", tried))
    return paths, (test, [u.speaker for u in tried], enrol[:6], [u.speaker for u in enrolled[:6]])


def test_stage_equals_the_metrics_on_the_same_arrays(tmp_path):
    paths, arrays = condition(tmp_path, 0.3)
    cache = Cache(tmp_path / "cache")
    found = reidentify.load(reidentify.run(*paths, "f", SETTINGS, 7, cache))
    expected = legal_metrics(*arrays, Grid((2, 3), (2, 3), (1, 2), 2, 2, 50, 0.9, seed=7))
    assert found["singling_out_rate"] == expected["singling_out_rate"]
    assert found["identification_rate"] == expected["identification_rate"]
    assert found["rank_disclosure"]["candidates"] == 3  # the male enrolled speaker is no candidate
    assert found["left_out"]["identification_rate,L=1"] == {"test": 1}
    columns = reidentify.columns(found)
    assert columns["identification_rate_N3_L2"] == expected["identification_rate"]["N'=3,L=2"]["value"]
    assert {"singling_out_rate_N2_L1_low", "rank_disclosure_bits", "rank_disclosure_bb_worst_bits",
            "reidentification_left_out"} <= set(columns)


def test_signal_separates_clear_from_noisy_voices(tmp_path):
    """Well-separated speakers are identified and ranked first far more than noisy ones."""
    cache = Cache(tmp_path / "cache")
    clear = reidentify.columns(reidentify.load(reidentify.run(*condition(tmp_path, 0.2)[0], "f", SETTINGS, 1, cache)))
    noisy = reidentify.columns(reidentify.load(reidentify.run(*condition(tmp_path, 5.0)[0], "f", SETTINGS, 1, cache)))
    assert clear["identification_rate_N3_L1"] == pytest.approx(1.0)
    assert noisy["identification_rate_N3_L1"] < 0.8
    assert clear["rank_disclosure_bits"] == pytest.approx(np.log2(3))
    assert noisy["rank_disclosure_bits"] < 0.5 * np.log2(3)


def test_changed_settings_are_not_served_from_the_cache(tmp_path):
    paths, _ = condition(tmp_path, 0.3)
    cache = Cache(tmp_path / "cache")
    first = reidentify.run(*paths, "f", SETTINGS, 7, cache)
    assert reidentify.run(*paths, "f", SETTINGS, 7, cache) == first
    assert reidentify.run(*paths, "f", {**SETTINGS, "runs": 3}, 7, cache) != first
