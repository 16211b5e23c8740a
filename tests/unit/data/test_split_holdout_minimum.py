"""The unseen holdout leaves each gender enough training speakers (issue 37): the automatic
choice of how many to hold out, the warning below the stated minimum, the refusal below 2,
and the per-gender validation lists the split writes."""
import logging

import pytest

from pipeline.core.cache import Cache
from pipeline.core.errors import VpevalError
from pipeline.core.layout import manifest_path, trials_path
from pipeline.data.manifest import read_trials, write_manifest
from pipeline.stages import split
from tests.helpers import split_settings, utterances


def corpus(female: int, male: int) -> dict[str, str]:
    return {**{f"f{i}": "f" for i in range(female)}, **{f"m{i}": "m" for i in range(male)}}


def held_per_gender(speakers: dict[str, str], **options) -> dict[str, int]:
    _, val = split.hold_out(utterances(speakers, 6), seed=1, val_fraction=0.1, holdout="unseen", **options)
    held = {u.speaker for u in val}
    return {g: sum(speakers[s] == g for s in held) for g in "fm"}


@pytest.mark.parametrize("n, expected", [(40, 9), (20, 9), (12, 6), (11, 5), (9, 4), (8, 4), (7, 4), (6, 4),
                                         (150, 15)])
def test_holds_out_nine_or_a_tenth_but_at_most_half_and_never_below_the_floor(n, expected):
    """Wanted max(9, 10 %): 4 choose the epoch, 5 give a per-gender EER_val whose speaker
    bootstrap means something; at most n // 2 so that as many train; at least 4 (2 select the
    epoch, 2 give a per-gender EER_val) as long as 2 are left to train on."""
    assert split.unseen_count(n, 0.1, 0.5)[0] == expected
    assert n - expected >= split.MIN_TRAIN


def test_floor_follows_select_fraction():
    assert split.unseen_floor(0.5) == 4 and split.unseen_floor(None) == 2 and split.unseen_floor(0.25) == 3
    assert split.unseen_wanted(0.5) == 9 and split.unseen_wanted(None) == 5
    assert split.unseen_count(5, 0.1, None)[0] == 2  # without a selection protocol a gender of 5 holds out 2


def test_warns_below_the_minimum_and_not_above(caplog):
    with caplog.at_level(logging.WARNING, logger=split.__name__):
        assert held_per_gender(corpus(20, 20)) == {"f": 9, "m": 9}
    assert not caplog.records
    with caplog.at_level(logging.WARNING, logger=split.__name__):
        assert held_per_gender(corpus(7, 20)) == {"f": 4, "m": 9}
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith("split.holdout=unseen: 4 of the 7 female training speakers held out unseen")
    assert "the attacker trains on 3 female speaker(s)" in warning


def test_refuses_fewer_than_two_training_speakers_of_a_gender_naming_counts_and_keys():
    with pytest.raises(VpevalError) as raised:
        held_per_gender(corpus(5, 20))
    message = str(raised.value)
    assert "\n" not in message and "5 female speaker(s)" in message and "leaves 1 to train on, below 2" in message
    assert all(key in message for key in ("split.select_fraction=null", "split.holdout=speaker"))
    assert held_per_gender(corpus(5, 20), select_fraction=None) == {"f": 2, "m": 5}  # the key it names works


def test_a_gender_absent_from_the_list_is_not_refused():
    assert held_per_gender(corpus(0, 13)) == {"f": 0, "m": 6}  # 9 wanted, 6 leave as many to train on


def test_named_unseen_speakers_get_the_same_refusal_and_warning(caplog):
    speakers = corpus(4, 20)
    with pytest.raises(VpevalError, match=r"names 3 of the 4 female speakers .* leaving 1 to train on, below 2"):
        split.hold_out(utterances(speakers, 4), 1, 0.1, "unseen", ["f0", "f1", "f2", "m0"])
    with caplog.at_level(logging.WARNING, logger=split.__name__):
        split.hold_out(utterances(speakers, 4), 1, 0.1, "unseen", ["f0", "f1", "m0", "m1"])
    assert [r.getMessage().split(":")[1].strip() for r in caplog.records] == [
        "2 of the 4 female training speakers held out unseen (named in split.unseen_speakers; at least 9 wanted, "
        "and at least as many left to train on)", "2 of the 20 male training speakers held out unseen (named in "
        "split.unseen_speakers; at least 9 wanted, and at least as many left to train on)"]


def run_split(tmp_path, speakers, **options):
    manifest = write_manifest(tmp_path / "train.jsonl", utterances(speakers, 8))
    return split.run(split_settings(**{"val_fraction": 0.1, "enroll_utterances": 3, **options}), manifest,
                     Cache(tmp_path / "cache"), seed=1)


def test_reported_trials_are_written_per_gender_and_a_gender_without_them_is_said(tmp_path, caplog):
    out = run_split(tmp_path / "both", corpus(12, 12), holdout="unseen")
    for g in "fm":
        trials = read_trials(trials_path(out, f"val_trials_{g}"))
        assert {t.enroll[0] for t in trials} == {g} and any(t.target for t in trials) and not all(
            t.target for t in trials)
    assert not manifest_path(out, "val_trials").exists()  # never one pooled list
    with caplog.at_level(logging.WARNING, logger=split.__name__):  # one female training speaker: no female EER_val
        one = run_split(tmp_path / "one", {**corpus(0, 12), "f0": "f"}, holdout="speaker", val_fraction=0.3,
                        select_fraction=None)
    assert manifest_path(one, "val_trials_m").is_file() and not manifest_path(one, "val_trials_f").exists()
    assert any("no female EER_val" in r.getMessage() for r in caplog.records)


def test_warning_logged_once_when_the_experiment_checked_first(tmp_path, caplog):
    """Regression (issue 38): "split.holdout=unseen: 6 of the 13 male training speakers held out..."
    was logged twice per run, by the experiment's check and again by the split stage."""
    manifest = write_manifest(tmp_path / "train.jsonl", utterances(corpus(20, 7), 6))
    settings = split_settings(val_fraction=0.1, holdout="unseen", enroll_utterances=2)
    with caplog.at_level(logging.WARNING, logger=split.__name__):
        split.hold_out(utterances(corpus(20, 7), 6), seed=1, val_fraction=0.1, holdout="unseen")  # the check
        split.run(settings, manifest, Cache(tmp_path / "cache"), seed=1, warned=True)
    assert len([r for r in caplog.records if "held out unseen" in r.getMessage()]) == 1
