import pytest

from pipeline.cache import Cache
from pipeline.data.manifest import read_manifest, read_trials, write_manifest
from pipeline.errors import VpevalError
from pipeline.stages import split
from pipeline.stages.prepare import manifest_path, trials_path
from tests.helpers import utterances

SPEAKERS = {"1": "f", "2": "f", "3": "m", "4": "m"}


def run_split(tmp_path, utts, val_fraction=0.1, seed=3):
    manifest = write_manifest(tmp_path / "train.jsonl", utts)
    cfg = {"val_fraction": val_fraction, "enroll_utterances": 5}
    from omegaconf import OmegaConf
    return split.run(OmegaConf.create(cfg), manifest, Cache(tmp_path / "cache"), seed=seed)


def test_holds_out_ten_percent_per_speaker_with_protocol(tmp_path):
    out = run_split(tmp_path, utterances(SPEAKERS, 60))
    train, val = read_manifest(manifest_path(out, "train")), read_manifest(manifest_path(out, "val"))
    assert len(val) == 24 and len(train) == 216
    assert not {u.id for u in train} & {u.id for u in val}
    enrolls = read_manifest(manifest_path(out, "val_enrolls"))
    trial_utts = read_manifest(manifest_path(out, "val_trials"))
    assert len(enrolls) == 4 * 5 and len(trial_utts) == 4 * 1
    trials = read_trials(trials_path(out, "val_trials"))
    genders = {u.id: u.gender for u in trial_utts}
    assert all(SPEAKERS[t.enroll] == genders[t.test] for t in trials)
    assert sum(t.target for t in trials) == 4 and len(trials) == 8


def test_split_depends_on_seed_and_ids_only(tmp_path):
    utts = utterances(SPEAKERS, 30)
    a = split.hold_out(utts, seed=1, val_fraction=0.1)[1]
    moved = [u.with_path("/elsewhere/" + u.id) for u in reversed(utts)]
    b = split.hold_out(moved, seed=1, val_fraction=0.1)[1]
    c = split.hold_out(utts, seed=2, val_fraction=0.1)[1]
    assert [u.id for u in a] == [u.id for u in b]
    assert [u.id for u in a] != [u.id for u in c]


def test_fallback_enrols_all_but_one_when_few_held_out(tmp_path):
    out = run_split(tmp_path, utterances(SPEAKERS, 30))  # 3 held out per speaker
    assert len(read_manifest(manifest_path(out, "val_enrolls"))) == 4 * 2


def test_speaker_with_too_few_utterances_is_named(tmp_path):
    with pytest.raises(VpevalError, match="speaker 1 has 8 training utterances"):
        run_split(tmp_path, utterances({"1": "f", "2": "m"}, 8))
