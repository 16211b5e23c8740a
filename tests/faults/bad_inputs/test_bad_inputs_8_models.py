"""Bad inputs: VoicePrivacy model folders and score files."""
from pathlib import Path

from pipeline.core.fileio import write_lines
from tests.faults.bad_inputs.catalogue import cli_message, raised, record, vpeval
from tests.helpers import VPC_HYPERPARAMS, speechbrain_asv_folder


def test_speechbrain_folder_of_another_architecture(tmp_path):
    from pipeline.asv.speechbrain_folder import load_speechbrain_encoder

    folder = speechbrain_asv_folder(tmp_path / "asv_orig", hyperparams=VPC_HYPERPARAMS.replace(
        "speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN", "speechbrain.lobes.models.Xvector.Xvector"))
    record("sb-architecture", "SpeechBrain model folder (`attacker.pretrained` / `init`) of another architecture",
           "attacker import (hyperparams.yaml parsed, never run)", raised(load_speechbrain_encoder, folder), tmp_path,
           "hyperparams.yaml", "another architecture", "Xvector")


def test_speechbrain_folder_missing_its_weights(tmp_path):
    from pipeline.asv.speechbrain_folder import load_speechbrain_encoder

    folder = speechbrain_asv_folder(tmp_path / "asv_orig")
    (folder / "embedding_model.ckpt").unlink()
    record("sb-missing-file", "SpeechBrain model folder without `embedding_model.ckpt`", "attacker import",
           raised(load_speechbrain_encoder, folder), tmp_path, "embedding_model.ckpt", "missing")


def test_speechbrain_checkpoint_that_does_not_fit(tmp_path):
    from pipeline.asv.speechbrain_folder import load_speechbrain_encoder

    folder = speechbrain_asv_folder(tmp_path / "asv_orig", hyperparams=VPC_HYPERPARAMS.replace(
        "lin_neurons: 12", "lin_neurons: 192"))
    record("sb-tensors", "SpeechBrain checkpoint whose tensors do not fit its hyperparams.yaml", "attacker import",
           raised(load_speechbrain_encoder, folder), tmp_path, "embedding_model.ckpt", "shape mismatches")


def test_vpc_score_file_with_a_trials_file_that_does_not_match(tmp_path):
    scores = write_lines(tmp_path / "scores", ["e1 u1 2.0", "e1 u2 -1.0", "e2 u1 0.5", "e2 u2 1.5"])
    trials = write_lines(tmp_path / "trials", ["e1 u1 target", "e1 u2 nontarget", "e2 u2 target", "e2 u1 nontarget"])
    message = cli_message(vpeval("metrics", str(scores), "--trials", str(trials), tmp=tmp_path))
    record("vpc-trials-mismatch", "VPC 3-field score file whose trials file lists other trials (`--trials`)",
           "CLI (exit 2, score reader)", message, tmp_path, "scores:3", "trials", "line for line")


def test_wavlm_checkpoint_of_the_wrong_size_stops_before_any_stage(tmp_path):
    from tests.helpers import wavlm_hf_folder

    wavlm = wavlm_hf_folder(tmp_path / "wavlm_base")  # hidden size 32, 2 layers; ecapa_ssl needs WavLM-Large
    message = cli_message(vpeval("data=synthetic_tiny", "attacker=ecapa_ssl", f"attacker.model.wavlm={wavlm}",
                                 "attacker.finetune=false", "device=cpu", f"paths.data={tmp_path / 'data'}", tmp=tmp_path))
    record("wavlm-size", "WavLM checkpoint (`attacker.model.wavlm`) of another size than `ecapa_ssl`'s",
           "config check (the attacker's encoder is built before any stage)", message, tmp_path, "wavlm_base",
           "hidden size 32 with 2 layers", "channels[0]=1024")
    assert not (tmp_path / "data" / "corpora").exists() and not list((tmp_path / "data" / "cache").glob("*/*"))


def test_wavlm_checkpoint_with_foreign_keys(tmp_path):
    import torch

    from pipeline.asv.wavlm import load_wavlm
    from tests.helpers import wavlm_hf_folder, wavlm_microsoft_file

    path = wavlm_microsoft_file(tmp_path / "WavLM-Large.pt", wavlm_hf_folder(tmp_path / "hf"))
    checkpoint = torch.load(path)
    checkpoint["model"]["decoder.proj.weight"] = torch.zeros(2)
    torch.save(checkpoint, path)
    record("wavlm-keys", "WavLM checkpoint (Microsoft `.pt`) with keys WavLM does not have", "attacker model build",
           raised(load_wavlm, path), tmp_path, "WavLM-Large.pt", "unexpected keys", "decoder.proj.weight")


def test_wavlm_truncated_safetensors(tmp_path):
    """Regression (issue 38): safetensors' "incomplete metadata, file not fully covered" named no file."""
    from pipeline.asv.wavlm import load_wavlm
    from tests.helpers import wavlm_hf_folder

    folder = wavlm_hf_folder(tmp_path / "wavlm")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    record("wavlm-truncated", "a WavLM folder whose `model.safetensors` is truncated (an interrupted copy)",
           "attacker model build", raised(load_wavlm, folder), tmp_path, "wavlm/model.safetensors", "truncated")


def vpc_ser_copy(tmp_path):
    """The fold-model fixture (tests/fixtures/vpc_ser) to break, and its emotion=vpc_ser settings."""
    import shutil

    from pipeline.core.config import compose
    from tests.helpers import FIXTURES

    vpc = Path(shutil.copytree(FIXTURES / "vpc_ser", tmp_path / "vpc"))
    return vpc, compose(["emotion=vpc_ser", f"emotion.folder={vpc / 'exp' / 'ser'}",
                         f"+emotion.overrides.wav2vec2_hub={vpc / 'wav2vec2_hub'}"]).emotion


def test_fold_models_with_data_without_spk2fold(tmp_path):
    from pipeline.core.cache import Cache
    from pipeline.stages import emotion

    vpc, settings = vpc_ser_copy(tmp_path)
    (vpc / "data" / "IEMOCAP_dev" / "spk2fold").unlink()
    prepared = emotion.prepare(vpc / "data" / "IEMOCAP_dev", Cache(tmp_path / "cache"))
    message = raised(emotion.run, settings, prepared / "manifest.jsonl", Cache(tmp_path / "cache"),
                     emotion.load_folds(prepared))
    record("emotion-no-folds", "VPC's SER fold models (`emotion.folder` with `fold_<n>/`) and an `emotion.data` "
           "dir without `spk2fold`", "emotion stage (before any audio is read)", message, tmp_path, "exp/ser",
           "fold models", "spk2fold")


def test_spk2fold_naming_a_fold_without_a_model(tmp_path):
    from pipeline.core.cache import Cache
    from pipeline.stages import emotion

    vpc, settings = vpc_ser_copy(tmp_path)
    folds = vpc / "data" / "IEMOCAP_dev" / "spk2fold"
    folds.write_text(folds.read_text().replace("Ses03M 3", "Ses03M 5"))
    prepared = emotion.prepare(vpc / "data" / "IEMOCAP_dev", Cache(tmp_path / "cache"))
    message = raised(emotion.run, settings, prepared / "manifest.jsonl", Cache(tmp_path / "cache"),
                     emotion.load_folds(prepared))
    record("emotion-fold-model", "`spk2fold` naming a fold that `emotion.folder` has no `fold_<n>` for",
           "emotion stage (before any audio is read)", message, tmp_path, "exp/ser", "fold 5", "fold_1, fold_2, fold_3")


def test_spk2fold_without_a_speaker(tmp_path):
    from pipeline.core.cache import Cache
    from pipeline.stages import emotion

    vpc, _ = vpc_ser_copy(tmp_path)
    folds = vpc / "data" / "IEMOCAP_dev" / "spk2fold"
    folds.write_text(folds.read_text().replace("Ses02F 2\n", ""))
    message = raised(emotion.prepare, vpc / "data" / "IEMOCAP_dev", Cache(tmp_path / "cache"))
    record("emotion-speaker-fold", "`spk2fold` of `emotion.data` without one of its speakers",
           "emotion data preparation", message, tmp_path, "IEMOCAP_dev/spk2fold", "Ses02F", "no fold")


def test_spk2fold_with_a_speaker_in_two_folds(tmp_path):
    from pipeline.core.cache import Cache
    from pipeline.stages import emotion

    vpc, _ = vpc_ser_copy(tmp_path)
    folds = vpc / "data" / "IEMOCAP_dev" / "spk2fold"
    folds.write_text(folds.read_text() + "Ses02F 3\n")
    message = raised(emotion.prepare, vpc / "data" / "IEMOCAP_dev", Cache(tmp_path / "cache"))
    record("emotion-two-folds", "`spk2fold` listing a speaker in two folds", "emotion data preparation", message,
           tmp_path, "IEMOCAP_dev/spk2fold:7", "Ses02F", "fold 3", "fold 2")


def emotion2vec_copy(tmp_path):
    """The emotion2vec fixture (tests/fixtures/vpc_emotion2vec) to break, its emotion=emotion2vec
    settings and its prepared original data."""
    import shutil

    from pipeline.core.cache import Cache
    from pipeline.core.config import compose
    from pipeline.stages import emotion
    from tests.helpers import FIXTURES

    vpc = Path(shutil.copytree(FIXTURES / "vpc_emotion2vec", tmp_path / "vpc"))
    settings = compose(["emotion=emotion2vec", f"emotion.folder={vpc / 'emotion2vec'}"]).emotion
    return vpc, settings, emotion.prepare(vpc / "data" / "emodata_track2_dev", Cache(tmp_path / "cache"))


def test_emotion2vec_folder_without_its_weights(tmp_path):
    from pipeline.core.cache import Cache
    from pipeline.stages import emotion

    vpc, settings, prepared = emotion2vec_copy(tmp_path)
    (vpc / "emotion2vec" / "model.pt").unlink()
    message = raised(emotion.run, settings, prepared / "manifest.jsonl", Cache(tmp_path / "cache"))
    record("emotion2vec-folder", "`emotion=emotion2vec` with an `emotion.folder` that lacks FunASR's `model.pt`",
           "emotion stage (before FunASR loads)", message, tmp_path, "emotion2vec", "no model.pt")


def test_emotion2vec_weights_missing_a_parameter(tmp_path):
    import torch

    from pipeline.core.cache import Cache
    from pipeline.stages import emotion

    vpc, settings, prepared = emotion2vec_copy(tmp_path)
    saved = torch.load(vpc / "emotion2vec" / "model.pt")
    del saved["model"]["modality_encoders.AUDIO.project_features.2.weight"]
    torch.save(saved, vpc / "emotion2vec" / "model.pt")
    message = raised(emotion.run, settings, prepared / "manifest.jsonl", Cache(tmp_path / "cache"))
    record("emotion2vec-weights", "an emotion2vec `model.pt` without one of the model's weights (FunASR leaves it "
           "random and prints a warning)", "emotion stage (model load, before any audio is read)", message,
           tmp_path, "emotion2vec/model.pt", "project_features.2.weight", "random")
