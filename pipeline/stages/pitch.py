"""Stage 6d — pitch: ρF0 of an evaluation set, original against anonymised (VPC 2022).

Each utterance of the original manifest is paired with the utterance of the same id in
the anonymised one; both are read at 16 kHz, tracked (`utility.pitch_tracker`: vpeval's YIN, by
its Viterbi path or frame by frame, or Praat) and correlated (`utility.pitch_rule`: over the
frames voiced in both, or by the VPC 2022 toolkit's rule; `metrics.pitch_correlation`). Output folder: `pitch.json` with the tracker, the
rule, every utterance's ρF0 and the set's mean and standard deviation (as the VPC toolkit
prints them). Keyed by the tracker, the rule and the content of both manifests (the
anonymised one names its own audio folder).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tqdm import tqdm

from pipeline.core.cache import Cache
from pipeline.core.errors import input_error
from pipeline.core.fileio import write_json
from pipeline.core.vocabulary import ANONYMIZED, ORIGINAL
from pipeline.data.audio import read_audio
from pipeline.data.manifest import file_digest, read_manifest
from pipeline.metrics.pitch_correlation import F0_MAX, F0_MIN, FRAME_SECONDS, correlation, praat_version, track

SAMPLE_RATE = 16000


def run(original: Path, anonymized: Path, cache: Cache, tracker: str = "yin_viterbi", rule: str = "voiced") -> Path:
    """ρF0 of every utterance of `original` against its anonymised version, F0 by `tracker`,
    correlated by `rule`; returns the folder."""
    params = {"tracker": tracker, "rule": rule, "f0_min": F0_MIN, "f0_max": F0_MAX, "frame_seconds": FRAME_SECONDS,
              "sample_rate": SAMPLE_RATE}
    if tracker == "praat":  # another Praat may track differently
        params["praat_parselmouth"] = praat_version()

    def build(out: Path) -> dict:
        versions = {u.id: u for u in read_manifest(anonymized)}
        values = {}
        for utt in tqdm(read_manifest(original), desc="pitch correlation", leave=False):
            if utt.id not in versions:
                raise input_error(anonymized, f"no anonymised version of utterance {utt.id}")
            tracks = (track(read_audio(path, SAMPLE_RATE), SAMPLE_RATE, tracker)
                      for path in (utt.path, versions[utt.id].path))
            values[utt.id] = correlation(*tracks, rule)
        result = {"tracker": tracker, "rule": rule, "mean": float(np.mean(list(values.values()))),
                  "std": float(np.std(list(values.values()))), "utterances": values}
        write_json(out / "pitch.json", result)
        return {"mean": result["mean"], "utterances": len(values)}

    return cache.build("pitch", params, {ORIGINAL: file_digest(original), ANONYMIZED: file_digest(anonymized)},
                       build, code=__name__)


def load(folder: Path) -> dict:
    """The `pitch.json` of a pitch-stage folder."""
    return json.loads((Path(folder) / "pitch.json").read_text())
