"""`prepared`: the small prepared folder most rows of the bad-input catalogue damage."""
from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core.cache import DONE, PARAMS
from pipeline.core.fileio import write_json
from pipeline.data.audio import write_audio
from pipeline.data.manifest import Trial, Utterance, write_manifest, write_trials
from pipeline.stages.prepare import manifest_path, trials_path
from tests.faults.bad_inputs.catalogue import RATE, SECONDS
from tests.helpers import tone

TRAIN = {"t1": "f", "t2": "m"}
EVAL = {"e1": "f", "e2": "f", "e3": "m", "e4": "m"}


def utt(tmp: Path, uid: str, speaker: str, gender: str) -> Utterance:
    path = tmp / "audio" / f"{uid}.flac"
    if not path.exists():
        write_audio(path, tone(SECONDS, 100 + 7 * len(uid) + sum(map(ord, uid)) % 50), RATE)
    return Utterance(uid, speaker, gender, str(path), SECONDS, RATE)


@pytest.fixture
def prepared(tmp_path) -> Path:
    """A prepare-stage folder (what `validate` reads) that passes validation: 2 training
    speakers; 4 evaluation speakers, each enrolling with one utterance and tried with another."""
    folder = tmp_path / "prepared"
    lists = {"train": [utt(tmp_path, f"{s}-{i}", s, g) for s, g in TRAIN.items() for i in range(2)],
             "test_enrolls": [utt(tmp_path, f"{s}-enr", s, g) for s, g in EVAL.items()]}
    trials = {}
    for g in ("f", "m"):
        speakers = [s for s, sg in EVAL.items() if sg == g]
        lists[f"test_trials_{g}"] = [utt(tmp_path, f"{s}-tri", s, g) for s in speakers]
        trials[g] = [Trial(a, f"{b}-tri", a == b) for a in speakers for b in speakers]
    for name, items in lists.items():
        write_manifest(manifest_path(folder, name), items)
    for g, items in trials.items():
        write_trials(trials_path(folder, f"test_trials_{g}"), items)
    write_json(folder / PARAMS, {"stage": "prepare", "params": {"sample_rate": RATE}})
    write_json(folder / DONE, {"summary": {"eval_sets": ["test"]}})
    return folder
