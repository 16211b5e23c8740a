import pytest

from pipeline.core.cache import Cache
from pipeline.core.errors import VpevalError
from pipeline.core.layout import manifest_path, trials_path
from pipeline.data.manifest import read_manifest, read_trials, write_manifest
from pipeline.stages import split
from tests.helpers import split_settings, utterances

SPEAKERS = {"1": "f", "2": "f", "3": "m", "4": "m"}


def run_split(tmp_path, utts, val_fraction=0.1, seed=3, **options):
    manifest = write_manifest(tmp_path / "train.jsonl", utts)
    settings = split_settings(**{"val_fraction": val_fraction, "enroll_utterances": 5, "select_fraction": None,
                                 **options})
    return split.run(settings, manifest, Cache(tmp_path / "cache"), seed=seed)


def reported(out, kind="trials"):
    """The reported validation protocol's trial utterances (`kind="utts"`) or trials, both genders."""
    read = (lambda g: read_manifest(manifest_path(out, f"val_trials_{g}"))) if kind == "utts" else \
        (lambda g: read_trials(trials_path(out, f"val_trials_{g}")))
    return [x for g in "fm" if manifest_path(out, f"val_trials_{g}").is_file() for x in read(g)]


def test_holds_out_ten_percent_per_speaker_with_protocol(tmp_path):
    out = run_split(tmp_path, utterances(SPEAKERS, 60))
    train, val = read_manifest(manifest_path(out, "train")), read_manifest(manifest_path(out, "val"))
    assert len(val) == 24 and len(train) == 216
    assert not {u.id for u in train} & {u.id for u in val}
    enrolls = read_manifest(manifest_path(out, "val_enrolls"))
    trial_utts = reported(out, "utts")
    assert len(enrolls) == 4 * 5 and len(trial_utts) == 4 * 1
    trials = reported(out)
    genders = {u.id: u.gender for u in trial_utts}
    assert all(SPEAKERS[t.enroll] == genders[t.test] for t in trials)
    for g in "fm":  # one list per gender, as the evaluation sets
        assert {SPEAKERS[t.enroll] for t in read_trials(trials_path(out, f"val_trials_{g}"))} == {g}
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


EIGHT = {str(i): "f" if i < 4 else "m" for i in range(8)}


def test_selection_and_reported_protocols_have_disjoint_speakers(tmp_path):
    out = run_split(tmp_path, utterances(EIGHT, 60), select_fraction=0.5)
    speakers = {}
    for part in ("select", "val"):
        trial_utts = reported(out, "utts") if part == "val" else read_manifest(manifest_path(out, f"{part}_trials"))
        utts = read_manifest(manifest_path(out, f"{part}_enrolls")) + trial_utts
        speakers[part] = {u.speaker for u in utts}
        trials = reported(out) if part == "val" else read_trials(trials_path(out, f"{part}_trials"))
        assert {t.enroll for t in trials} == speakers[part] and any(t.target for t in trials)
        assert any(not t.target for t in trials)
    assert not speakers["select"] & speakers["val"] and speakers["select"] | speakers["val"] == set(EIGHT)
    assert sorted(EIGHT[s] for s in speakers["select"]) == ["f", "f", "m", "m"]  # half of each gender
    drawn = [frozenset(split.selection_speakers(split.by_speaker(split.hold_out(utterances(EIGHT, 60), s, 0.1)[1]),
                                                s, 0.5)) for s in range(6)]
    assert len(set(drawn)) > 1 and all(len(d) == 4 for d in drawn)  # the seed draws the speakers


def test_sparse_trials_draw_that_many_per_speaker(tmp_path):
    out = run_split(tmp_path, utterances(EIGHT, 100), sparse_trials={"target": 3, "nontarget": 5})
    trials = reported(out)
    for speaker in EIGHT:
        own = [t for t in trials if t.enroll == speaker]
        assert sum(t.target for t in own) == 3 and sum(not t.target for t in own) == 5
    dense = reported(run_split(tmp_path / "dense", utterances(EIGHT, 100)))
    assert len(dense) == 8 * 4 * 5  # every enrolled speaker x every same-gender trial utterance (5 each)


@pytest.mark.parametrize("options, message", [
    ({"select_fraction": 0.5}, r"the select protocol of 2 validation speaker\(s\) has 2 target and 0 non-target"),
    ({"select_fraction": 1.5}, r"^split.select_fraction=1.5: must be null or a number in \(0, 1\)$"),
    ({"sparse_trials": {"target": 3}}, r"split.sparse_trials.nontarget: required, not set"),  # the typed settings
])
def test_bad_selection_settings_are_named(tmp_path, options, message):
    with pytest.raises(VpevalError, match=message):
        run_split(tmp_path, utterances(SPEAKERS, 60), **options)


def test_list_holdout_draws_from_the_whole_list_and_validates_speakers_with_two(tmp_path):
    utts = utterances(EIGHT, 30)  # 240 utterances; 10 % of the list: 24 held out, 1 to 6 per speaker (seed 3)
    out = run_split(tmp_path, utts, holdout="list")
    train, val = read_manifest(manifest_path(out, "train")), read_manifest(manifest_path(out, "val"))
    assert len(val) == 24 and len(train) == 216 and not {u.id for u in train} & {u.id for u in val}
    held = {s: sum(u.speaker == s for u in val) for s in EIGHT}
    assert len(set(held.values())) > 1  # not a per-speaker share
    validated = {u.speaker for u in read_manifest(manifest_path(out, "val_enrolls"))}
    assert validated == {s for s, n in held.items() if n >= 2} and validated != set(EIGHT)
    assert reported(out, "utts")  # each validated speaker gives a trial
    moved = [u.with_path("/elsewhere/" + u.id) for u in reversed(utts)]
    assert {u.id for u in split.hold_out(moved, 3, 0.1, "list")[1]} == {u.id for u in val}
    assert {u.id for u in split.hold_out(utts, 4, 0.1, "list")[1]} != {u.id for u in val}


def test_unknown_holdout_is_named():
    with pytest.raises(VpevalError, match="^split.holdout=random: must be unseen, speaker or list$"):
        split.hold_out(utterances(SPEAKERS, 10), 1, 0.1, "random")


TWENTY = {str(i): "f" if i < 10 else "m" for i in range(20)}


def test_unseen_holdout_keeps_whole_speakers_out_of_training(tmp_path):
    """The default: validation speakers are never trained on, 6 per gender wanted, at most half."""
    utts = utterances(TWENTY, 8)
    train, val = split.hold_out(utts, seed=1, val_fraction=0.1, holdout="unseen")
    held = {u.speaker for u in val}
    assert not held & {u.speaker for u in train} and len(val) == 8 * len(held)
    assert sorted(TWENTY[s] for s in held) == ["f"] * 5 + ["m"] * 5  # 6 wanted, 5 leave as many to train on
    assert held != {u.speaker for u in split.hold_out(utts, seed=2, val_fraction=0.1, holdout="unseen")[1]}
    out = run_split(tmp_path, utts, holdout="unseen", select_fraction=0.5)
    speakers = {part: {u.speaker for u in read_manifest(manifest_path(out, f"{part}_enrolls"))} for part in ("select", "val")}
    held = {u.speaker for u in read_manifest(manifest_path(out, "val"))}  # run_split's seed is 3
    assert not speakers["select"] & speakers["val"] and speakers["select"] | speakers["val"] == held


def test_named_unseen_speakers_are_held_out_and_too_few_speakers_are_named(tmp_path):
    train, val = split.hold_out(utterances(TWENTY, 4), seed=1, val_fraction=0.1, holdout="unseen",
                                unseen_speakers=["0", "1", "10", "11"])
    assert {u.speaker for u in val} == {"0", "1", "10", "11"}
    with pytest.raises(VpevalError, match="split.holdout=unseen: the attacker's training list has 4 female speaker"):
        split.hold_out(utterances(SPEAKERS | {"5": "f", "6": "f"}, 4), seed=1, val_fraction=0.1, holdout="unseen")
    (tmp_path / "ids.txt").write_text("\ufeff0\n10\n\n")
    assert split.named_speakers(str(tmp_path / "ids.txt")) == ["0", "10"]
    with pytest.raises(VpevalError, match="ids.txt: no speaker id"):
        (tmp_path / "ids.txt").write_text("\n")
        split.named_speakers(str(tmp_path / "ids.txt"))
