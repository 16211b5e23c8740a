"""The VPC 2024 (SpeechBrain) ASV front end, and SpeechBrain ECAPA folders imported and exported.

Folders are built with SpeechBrain's own classes and random weights; `EncoderClassifier`
loads them offline from disk. Tolerance: embeddings agree within 1e-4 of their largest
element (float32 rounding of equivalent summation orders; measured 2.2e-7 on the VPC folder).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from speechbrain.inference.speaker import EncoderClassifier
from speechbrain.lobes.features import Fbank

from pipeline.asv.embed import load_encoder
from pipeline.asv.model import KALDI_FRONTEND, SPEECHBRAIN_FRONTEND, SpeakerEncoder
from pipeline.asv.speechbrain_fbank import SpeechBrainFbank
from pipeline.asv.speechbrain_folder import (
    EMBEDDING_WEIGHTS,
    HYPERPARAMS,
    export_speechbrain_folder,
    load_speechbrain_encoder,
)
from pipeline.core.errors import VpevalError
from pipeline.metrics.results import RunSummary
from tests.helpers import VPC_HYPERPARAMS, encoder_folder, speechbrain_asv_folder, tone

TOLERANCE = 1e-4
LENGTHS = (16000, 12345, 7000, 3201)
SMALL = dict(channels=[16, 16, 16, 16, 48], kernel_sizes=[5, 3, 3, 3, 1], dilations=[1, 2, 3, 4, 1],
             attention_channels=8, se_channels=8, embedding_dim=12)

def audio() -> list[torch.Tensor]:
    return [torch.from_numpy(tone(n / 16000, 110 + 30 * i, seed=i)) for i, n in enumerate(LENGTHS)]


def padded(wavs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    batch = torch.zeros(len(wavs), max(len(w) for w in wavs))
    for row, wav in enumerate(wavs):
        batch[row, :len(wav)] = wav
    return batch, torch.tensor([len(w) / batch.shape[1] for w in wavs])


def speechbrain_embeddings(folder: Path, wavs: list[torch.Tensor]) -> np.ndarray:
    """EncoderClassifier.from_hparams(folder) offline, one utterance at a time (as VPC extracts)."""
    classifier = EncoderClassifier.from_hparams(source=str(folder), savedir=str(folder), run_opts={"device": "cpu"})
    with torch.no_grad():
        return np.stack([classifier.encode_batch(wav[None]).reshape(-1).numpy() for wav in wavs])


def assert_close(ours: np.ndarray, reference: np.ndarray) -> None:
    assert np.abs(ours - reference).max() <= TOLERANCE * np.abs(reference).max()


def test_frontend_matches_speechbrain_fbank_frame_for_frame():
    wavs = audio()
    batch, _ = padded(wavs)
    feats, frames = SpeechBrainFbank(16000, 80)(batch, torch.tensor([len(w) for w in wavs]))
    for row, wav in enumerate(wavs):
        reference = Fbank(n_mels=80)(wav[None])[0]
        assert int(frames[row]) == reference.shape[0] == 1 + len(wav) // 160
        assert torch.allclose(feats[row, :reference.shape[0]], reference, atol=1e-4, rtol=0)


def test_vpc_folder_imports_with_speechbrain_embeddings(tmp_path):
    folder = speechbrain_asv_folder(tmp_path / "vpc_asv")
    encoder = load_speechbrain_encoder(folder)
    assert encoder.architecture["frontend"]["_target_"] == SPEECHBRAIN_FRONTEND
    wavs = audio()
    with torch.no_grad():
        ours = encoder(*padded(wavs)).numpy()  # one ragged batch
    assert_close(ours, speechbrain_embeddings(folder, wavs))


@pytest.mark.parametrize("frontend", [SPEECHBRAIN_FRONTEND, KALDI_FRONTEND])
def test_exported_attacker_loads_in_speechbrain_with_same_embeddings(tmp_path, frontend):
    torch.manual_seed(3)
    encoder = SpeakerEncoder(frontend=frontend, **SMALL).eval()
    attacker = encoder_folder(tmp_path / "attacker", encoder)
    exported = export_speechbrain_folder(load_encoder(attacker, "cpu"), tmp_path / "exported")
    wavs = audio()
    with torch.no_grad():
        ours = encoder(*padded(wavs)).numpy()
    assert_close(ours, speechbrain_embeddings(exported, wavs))
    reimported = load_speechbrain_encoder(exported)  # and back: the same encoder
    assert reimported.architecture == encoder.architecture
    with torch.no_grad():
        assert_close(reimported(*padded(wavs)).numpy(), ours)


def test_import_never_runs_the_yaml(tmp_path):
    folder = speechbrain_asv_folder(tmp_path / "vpc_asv")
    marker = tmp_path / "ran"
    text = (folder / HYPERPARAMS).read_text()
    (folder / HYPERPARAMS).write_text(text + f"\nboom: !apply:pathlib.Path.touch [!new:pathlib.Path ['{marker}']]\n")
    load_speechbrain_encoder(folder)
    assert not marker.exists()


@pytest.mark.parametrize("edit, message", [
    (lambda f: (f / EMBEDDING_WEIGHTS).unlink(), f"{EMBEDDING_WEIGHTS}: missing"),
    (lambda f: (f / HYPERPARAMS).unlink(), f"{HYPERPARAMS}: missing"),
    (lambda f: (f / HYPERPARAMS).write_text(VPC_HYPERPARAMS.replace(
        "speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN", "speechbrain.lobes.models.Xvector.Xvector")),
     "another architecture: embedding_model is speechbrain.lobes.models.Xvector.Xvector"),
    (lambda f: (f / HYPERPARAMS).write_text(VPC_HYPERPARAMS.replace("lin_neurons: 12", "lin_neurons: 10")),
     "embedding_model is from another architecture: 2 shape mismatches [fc.conv.bias: expected (10,) found (12,)"),
    (lambda f: (f / HYPERPARAMS).write_text(VPC_HYPERPARAMS.replace("    std_norm: False\n", "    std_norm: True\n", 1)),
     "mean_var_norm must be sentence-level mean normalisation"),
    (lambda f: (f / HYPERPARAMS).write_text(VPC_HYPERPARAMS.replace("    n_mels: !ref <n_mels>\n",
                                                                     "    n_mels: !ref <n_mels>\n    f_min: 20\n", 1)),
     "compute_features.f_min=20 is not supported"),
    (lambda f: (f / EMBEDDING_WEIGHTS).write_bytes(b"not a checkpoint"), "not a readable torch checkpoint"),
])
def test_bad_folder_is_one_line_naming_the_file(tmp_path, edit, message):
    folder = speechbrain_asv_folder(tmp_path / "vpc_asv")
    edit(folder)
    with pytest.raises(VpevalError) as error:
        load_speechbrain_encoder(folder)
    assert message in str(error.value) and str(folder) in str(error.value) and "\n" not in str(error.value)


def tiny_speechbrain_folder(folder: Path, seed: int) -> Path:
    """ecapa_tiny's architecture with VPC's front end, random weights, as a SpeechBrain folder."""
    from hydra.utils import instantiate

    from tests.helpers import attacker_config

    torch.manual_seed(seed)
    encoder = instantiate(attacker_config("ecapa_tiny").model, frontend=SPEECHBRAIN_FRONTEND)
    return export_speechbrain_folder(encoder, folder)


def test_start_from_copies_weights_of_the_same_architecture_only(tmp_path):
    from hydra.utils import instantiate

    from pipeline.asv.train import start_from
    from tests.helpers import attacker_config

    folder = tiny_speechbrain_folder(tmp_path / "sb", seed=5)
    model = instantiate(attacker_config("ecapa_tiny").model, frontend=SPEECHBRAIN_FRONTEND)
    start_from(model, str(folder))
    reference = load_speechbrain_encoder(folder).state_dict()
    assert all(torch.equal(tensor, reference[name]) for name, tensor in model.state_dict().items())
    kaldi = instantiate(attacker_config("ecapa_tiny").model)
    with pytest.raises(VpevalError, match=r"attacker.init=.*sb: its encoder differs from attacker.model \(frontend"):
        start_from(kaldi, str(folder))


def test_pretrained_attacker_serves_oo_and_lazy_informed_without_training(tmp_path):
    import json

    from pipeline.app.experiment import run_experiment
    from pipeline.core.config import compose

    folder = tiny_speechbrain_folder(tmp_path / "vpc_asv_orig", seed=7)
    data = tmp_path / "data"
    cfg = compose([f"paths.data={data}", "data=synthetic_tiny", "attacker=ecapa_tiny", "device=cpu",
                   "attacks=lazy_informed", "similarity=false", "eval_splits=[dev]", f"attacker.pretrained={folder}"])
    report = run_experiment(cfg, data / "runs" / "pretrained")
    found = RunSummary.from_json(report / "results.json")
    built = {event.stage for event in found.stages if not event.reused}
    assert "import" in built and "train" not in built
    assert {r.attack for r in found.records} == {"OO", "AA-lazy"}
    vpc_rows = (report / "vpc2024" / "asv_orig" / "results_mcadams.csv").read_text().splitlines()
    assert [row.split(",")[1:6] for row in vpc_rows[1:]] == [  # OO then AA-lazy (VPC's aa) per trial list
        ["synth", "dev", g, e, e] for g in ("f", "m") for e in ("original", "anon")]
    assert not (report / "vpc2024" / "asv_anon_mcadams").exists()  # nothing retrained
    imported = next(Path(e.path) for e in found.stages if e.stage == "import")
    assert json.loads((imported / "model.json").read_text())["source"] == str(folder)
    wavs = audio()
    with torch.no_grad():
        assert_close(load_encoder(imported, "cpu")(*padded(wavs)).numpy(), speechbrain_embeddings(folder, wavs))
