"""VPC's fold models for the emotion UAR (VPC 2024/2026 Track 1, `evaluate_ser`): each speaker
classified by the SpeechBrain classifier of its fold (`spk2fold`), the checkpoint of each fold
as VPC's `scan_checkpoint` picks it, loaded through the folder's `custom_interface.py`.

`tests/fixtures/vpc_ser` holds random-weight fold models (three folds; fold 1's train_log picks
its epoch 2 of 3, fold 2 has no log, fold 3's names an epoch that is missing), an IEMOCAP-layout
data folder (6 speakers, original and anonymised audio) and what VPC 2026's and VPC 2024's own
evaluate_ser computed on them (`expected.json`; how it was made: tests/fixtures/vpc_ser/README.md)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.app.utility import emotion_recognition
from pipeline.core.cache import Cache
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.data.manifest import read_manifest
from pipeline.metrics.uar import emotion_recall, speaker_recalls
from pipeline.recognition.emotion import EmotionClassifier, best_epoch, fold_checkpoint
from pipeline.stages import emotion
from tests.helpers import FIXTURES, fixture_copy, utility_experiment

pytest.importorskip("speechbrain")
pytest.importorskip("transformers")

FIXTURE = FIXTURES / "vpc_ser"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
KINDS = {"original": "IEMOCAP_dev", "anonymized": "IEMOCAP_dev_anon"}


@pytest.fixture(scope="module")
def vpc(tmp_path_factory) -> Path:
    return fixture_copy(tmp_path_factory, "vpc_ser")


def settings(vpc: Path, models: Path | None = None):
    """emotion=vpc_ser on the fixture, its yaml's hub name pointed at the local hub folder."""
    return compose(["emotion=vpc_ser", f"emotion.folder={models or vpc / 'exp' / 'ser'}",
                    f"emotion.data={vpc / 'data' / 'IEMOCAP_dev'}",
                    f"+emotion.overrides.wav2vec2_hub={vpc / 'wav2vec2_hub'}"]).emotion


def labelled(vpc: Path, cfg, cache: Cache, folds_of=lambda folds: folds) -> dict:
    """Per kind: (truth, predictions, speakers) of the stage on the fixture's two data dirs."""
    found = {}
    for kind, name in KINDS.items():
        prepared = emotion.prepare(vpc / "data" / name, cache)
        truth = emotion.load(prepared, emotion.LABELS)
        speakers = {u.id: u.speaker for u in read_manifest(prepared / "manifest.jsonl")}
        predicted = emotion.load(emotion.run(cfg, prepared / "manifest.jsonl", cache,
                                             folds_of(emotion.load_folds(prepared))))
        found[kind] = ([truth[u] for u in truth], [predicted[u] for u in truth], [speakers[u] for u in truth])
    return found


def per_speaker(truth, predicted, speakers) -> dict[str, dict[str, float]]:
    """VPC's row per speaker: sklearn's macro recall and each true class's recall (ACC_<label>),
    in %, rounded to 3 decimals as evaluate_ser rounds them."""
    names = list(dict.fromkeys(speakers))
    return {name: {"UAR": round(100 * sum(recalls.values()) / (len(recalls) + extra), 3),
                   **{f"ACC_{c}": round(100 * r, 3) for c, r in recalls.items()}}
            for name, (recalls, extra) in zip(names, speaker_recalls(truth, predicted, speakers))}


def rows(found: dict) -> dict:
    return {kind: per_speaker(*labels) for kind, labels in found.items()}


def toolkit_rows(per_speaker: dict) -> dict:
    """A toolkit's per-speaker rows of expected.json without their fold."""
    return {kind: {speaker: {k: v for k, v in row.items() if k != "fold"} for speaker, row in table.items()}
            for kind, table in per_speaker.items()}


EXPECTED_ROWS = toolkit_rows(EXPECTED["per_speaker"])


def test_fold_models_give_vpcs_evaluate_ser_values(vpc, tmp_path):
    cfg = settings(vpc)
    fingerprint = EmotionClassifier.fingerprint_of(cfg)
    assert fingerprint["checkpoints"] == {fold: f"fold_{fold}/{name}" for fold, name in EXPECTED["checkpoints"].items()}
    found = labelled(vpc, cfg, Cache(tmp_path / "cache"))
    assert rows(found) == EXPECTED_ROWS  # every speaker's UAR and class recalls, original and anonymised
    for kind, (truth, predicted, speakers) in found.items():
        uar, recalls = emotion_recall(truth, predicted, speakers, "vpc")
        expected = EXPECTED["evaluate_ser"][kind]  # means of the rounded per-speaker values
        assert 100 * uar == pytest.approx(expected["UAR"], abs=1e-3)
        assert {c: 100 * r for c, r in recalls.items()} == pytest.approx({c: v for c, v in expected.items()
                                                                          if c != "UAR"}, abs=1e-3)


def test_checkpoint_last_gives_vpc_2024s_evaluate_ser_values(vpc, tmp_path):
    """VPC 2024's scan_checkpoint takes each fold's highest epoch (fold 1: CKPT+3, whatever its
    log says); its evaluate_ser, run on the same fixture, is kept in expected.json["vpc2024"]."""
    vpc2024 = EXPECTED["vpc2024"]
    cfg = settings(vpc)
    cfg.checkpoint = "last"
    assert EmotionClassifier.fingerprint_of(cfg)["checkpoints"] == {
        fold: f"fold_{fold}/{name}" for fold, name in vpc2024["checkpoints"].items()}
    found = labelled(vpc, cfg, Cache(tmp_path / "cache"))
    assert rows(found) == toolkit_rows(vpc2024["per_speaker"])
    for kind, labels in found.items():
        uar, recalls = emotion_recall(*labels, "vpc")
        expected = vpc2024["evaluate_ser"][kind]
        assert 100 * uar == pytest.approx(expected["UAR"], abs=1e-3)
        # VPC 2024's mean table has only the ACC columns of the last speaker's row (its loop variable)
        assert {c: 100 * recalls[c] for c in expected if c != "UAR"} == pytest.approx(
            {c: v for c, v in expected.items() if c != "UAR"}, abs=1e-3)
        assert set(expected) - {"UAR"} < set(recalls)


def test_the_fixture_tells_a_wrong_fold_or_checkpoint_apart(vpc, tmp_path):
    """What the test above would see if vpeval classified with one model for all, or took the
    last epoch of fold 1 instead of the one of the lowest valid loss."""
    one_model = labelled(vpc, settings(vpc), Cache(tmp_path / "a"), lambda folds: {s: "1" for s in folds})
    assert rows(one_model) != EXPECTED_ROWS
    last_epoch = tmp_path / "ser"
    shutil.copytree(vpc / "exp" / "ser", last_epoch)
    (last_epoch / "fold_1" / "train_log.txt").unlink()
    assert fold_checkpoint(last_epoch / "fold_1").name == "CKPT+3"
    other = labelled(vpc, settings(vpc, last_epoch), Cache(tmp_path / "b"))
    assert rows(other) != EXPECTED_ROWS
    vpc2024 = settings(vpc)
    vpc2024.checkpoint = "last"  # VPC 2024's rule takes CKPT+3 of fold 1 despite its log
    assert EmotionClassifier.fingerprint_of(vpc2024)["checkpoints"]["1"] == "fold_1/CKPT+3"
    assert labelled(vpc, vpc2024, Cache(tmp_path / "c")) == other


def test_the_experiment_step_uses_the_folds_on_both_sides(vpc, tmp_path):
    """emotion_recognition with the anonymised dir as precomputed output: VPC's values, and the
    report says which classifiers."""
    experiment = utility_experiment(["emotion=vpc_ser", "utility.uar_rule=vpc", "anonymizer=precomputed",
                                     f"anonymizer.folder={vpc / 'data'}", "anonymizer.suffix=anon"], tmp_path / "cache")
    experiment.cfg.emotion = settings(vpc)
    experiment = SimpleNamespace(**vars(experiment), evaluated=experiment.cfg.anonymizer, device="cpu",
                                 output_check=None)
    result = {"emotion": {}, "skipped": {}}
    emotion_recognition(experiment, result)
    for kind in KINDS:
        assert 100 * result["emotion"][f"uar_{kind}"] == pytest.approx(EXPECTED["evaluate_ser"][kind]["UAR"], abs=1e-3)
    assert result["emotion"]["models"] == "3 folds (spk2fold)" and result["emotion"]["uar_rule"] == "vpc"


def test_checkpoint_choice_follows_vpcs_scan_checkpoint(tmp_path):
    fold = tmp_path / "fold_1"
    for name in ("CKPT+1", "CKPT+2", "CKPT+10", "CKPT+x", "other"):
        (fold / name).mkdir(parents=True)
    assert fold_checkpoint(fold).name == "CKPT+10"  # no log: the highest epoch, as a number
    log = fold / "train_log.txt"
    log.write_text("epoch: 1, lr: 1e-4 - train loss: 3 - valid loss: 0.5, valid error: 0.2\n"
                   "epoch: 2, lr: 1e-4 - train loss: 2 - valid loss: 0.5, valid error: 0.1\n"
                   "epoch: 10, lr: 1e-4 - train loss: 1 - valid loss: 0.7, valid error: 0.1\n")
    assert best_epoch(log) == 1 and fold_checkpoint(fold).name == "CKPT+1"  # the first of equal losses
    log.write_text("epoch: 3, lr: 1e-4 - train loss: 1 - valid loss: 0.1\n")
    assert fold_checkpoint(fold).name == "CKPT+10"  # the best epoch has no folder
    log.write_text("epoch: 1, lr: 1e-4 - train loss: 1 - valid loss: 0.1\nepoch: 2 - valid loss: .e-\n")
    assert best_epoch(log) is None  # a loss that is not a number: VPC ignores the whole log
    log.write_text("epoch: 2, lr: 1e-4 - train loss: 1 - valid loss: 0.1\n")
    assert fold_checkpoint(fold).name == "CKPT+2" and fold_checkpoint(fold, "last").name == "CKPT+10"  # VPC 2024


def test_a_single_classifier_folder_ignores_spk2fold(vpc, tmp_path):
    single = vpc / "exp" / "ser" / "fold_2" / "CKPT+4"
    assert emotion.fold_models(settings(vpc, single)) == []
    found = labelled(vpc, settings(vpc, single), Cache(tmp_path / "cache"))
    direct = labelled(vpc, settings(vpc), Cache(tmp_path / "folds"), lambda folds: {s: "2" for s in folds})
    assert found == direct  # one folder classifies everyone, whatever spk2fold says
    assert emotion.classifiers(settings(vpc, single), {"s": "1"}) == "one"


def test_fold_layout_errors(vpc, tmp_path):
    with pytest.raises(VpevalError, match=r"not a SpeechBrain emotion folder \(no hyperparams.yaml, and no fold_<n>"):
        EmotionClassifier.fingerprint_of({"folder": str(vpc / "exp")})
    classifier = EmotionClassifier(str(vpc / "exp" / "ser"))
    with pytest.raises(VpevalError, match=r"holds fold models \(1, 2, 3\); emotion.data needs spk2fold"):
        classifier.fold_list(None, 2)
    with pytest.raises(VpevalError, match=r"no model for fold 7 named in spk2fold \(the folder has fold_1, fold_2, "
                                          r"fold_3\)$"):
        classifier.fold_list(["1", "7"], 2)
    empty = tmp_path / "models" / "fold_1"
    empty.mkdir(parents=True)
    with pytest.raises(VpevalError, match=r"fold_1: no checkpoint folder CKPT\+<epoch>"):
        EmotionClassifier(str(empty.parent))


def test_relative_wav_scp_paths_start_where_vpcs_scripts_run(vpc):
    """Regression: relative paths of `$VPC/data/IEMOCAP_dev/wav.scp` (`data/IEMOCAP/wav/...`, read
    by VPC from `$VPC`) were looked up under `$VPC/data`, so VPC's own dirs could not be read."""
    from pipeline.recognition.emotion import read_emotion_data

    utterances, _ = read_emotion_data(vpc / "data" / "IEMOCAP_dev")
    assert (vpc / "data" / "IEMOCAP_dev" / "wav.scp").read_text().split()[1].startswith("data/IEMOCAP/wav/")
    assert all(Path(u.path).parent == vpc / "data" / "IEMOCAP" / "wav" for u in utterances)


def test_each_fold_checkpoint_loads_its_own_wav2vec2_weights(vpc):
    """Regression (the fixture's first version): wav2vec2.ckpt saved without SpeechBrain's `model.`
    prefix was silently not transferred, so every fold ran the hub's weights."""
    import torch

    from pipeline.recognition.asr import load_speechbrain
    from pipeline.recognition.emotion import EMOTION_FOLDER

    cfg = settings(vpc)
    for fold in ("1", "2"):
        folder = vpc / "exp" / "ser" / EXPECTED["checkpoints"][fold].join((f"fold_{fold}/", ""))
        model = load_speechbrain(folder, *EMOTION_FOLDER, cfg.interface, "cpu", dict(cfg.overrides))
        saved = torch.load(folder / "wav2vec2.ckpt")["model.feature_projection.projection.weight"]
        assert torch.equal(model.mods.wav2vec2.model.feature_projection.projection.weight, saved)


def test_a_label_or_fold_listed_twice_with_another_value_is_one_line(vpc, tmp_path):
    """Regression: utt2emo and spk2fold kept the last of two different values silently (a speaker
    in two folds was classified by the second's model)."""
    from pipeline.recognition.emotion import read_emotion_data, read_folds

    data = Path(shutil.copytree(vpc / "data", tmp_path / "data")) / "IEMOCAP_dev"
    folds = data / "spk2fold"
    folds.write_text(folds.read_text() + "Ses01F 2\n")
    with pytest.raises(VpevalError, match=r"spk2fold:7: speaker Ses01F is listed in fold 2 here and in fold 1 at "
                                          r"line 1$"):
        read_folds(data, {"Ses01F"})
    labels = data / "utt2emo"
    first = labels.read_text().splitlines()[0].split()
    labels.write_text(labels.read_text() + f"{first[0]} {'sad' if first[1] != 'sad' else 'ang'}\n")
    with pytest.raises(VpevalError, match=rf"utt2emo:28: utterance {first[0]} is listed as \w+ here and as "
                                          rf"{first[1]} at line 1$"):
        read_emotion_data(data)
