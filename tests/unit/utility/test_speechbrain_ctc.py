"""VPC 2026 Track 1's recogniser: a SpeechBrain wav2vec2 CTC folder (EncoderASR) loaded offline
by asr=speechbrain_ctc, here with random weights saved by SpeechBrain's and transformers' classes
in the layout of SpeechBrain's asr-wav2vec2-librispeech (hyperparams.yaml, wav2vec2.ckpt,
asr.ckpt, tokenizer.ckpt; the wav2vec2 config in a local folder named by `wav2vec2_hub`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline.core.cache import Cache
from pipeline.core.config import compose, instantiate, without
from pipeline.core.errors import VpevalError
from pipeline.data.audio import read_audio, write_audio
from pipeline.data.manifest import Utterance, write_manifest
from pipeline.stages import transcribe
from tests.helpers import CTC_CHARACTERS as CHARACTERS
from tests.helpers import CTC_HIDDEN as HIDDEN
from tests.helpers import encoder_asr_folder

pytest.importorskip("speechbrain")
transformers = pytest.importorskip("transformers")

def by_hand(folder: Path, wave: np.ndarray) -> str:
    """Greedy CTC transcript computed from the saved weights with plain torch: wav2vec2 (input and
    output layer-normalised, as SpeechBrain's frozen wrapper with output_norm), the DNN, the CTC
    layer, then argmax, repeats merged, blanks dropped."""
    from speechbrain.dataio.encoder import CTCTextEncoder
    from speechbrain.lobes.models.VanillaNN import VanillaNN
    from speechbrain.nnet.linear import Linear

    wav2vec2 = transformers.Wav2Vec2Model(transformers.Wav2Vec2Config.from_pretrained(folder / "wav2vec2_hub"))
    wav2vec2.load_state_dict({k.removeprefix("model."): v for k, v in torch.load(folder / "wav2vec2.ckpt").items()})
    wav2vec2.eval()
    heads = torch.nn.ModuleList([VanillaNN(input_shape=[None, None, HIDDEN], activation=torch.nn.LeakyReLU,
                                           dnn_blocks=1, dnn_neurons=HIDDEN),
                                 Linear(input_size=HIDDEN, n_neurons=len(CHARACTERS))])
    heads.load_state_dict(torch.load(folder / "asr.ckpt"))
    heads.eval()
    with torch.no_grad():
        x = torch.as_tensor(wave)[None]
        hidden = wav2vec2(torch.nn.functional.layer_norm(x, x.shape)).last_hidden_state
        best = heads[1](heads[0](torch.nn.functional.layer_norm(hidden, hidden.shape[-1:]))).argmax(-1)[0].tolist()
    labels = CTCTextEncoder()
    labels.load(folder / "tokenizer.ckpt")
    assert labels.ind2lab[0] == "<blank>"
    merged = [t for i, t in enumerate(best) if (i == 0 or t != best[i - 1]) and t != 0]
    return "".join(labels.ind2lab[t] for t in merged)


def waves() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [(0.1 * rng.standard_normal(n)).astype(np.float32) for n in (16000, 24000)]


def ctc_config(folder: Path, *extra: str):
    return compose(["data=synthetic_tiny", "asr=speechbrain_ctc", f"asr.folder={folder}",
                    f"+asr.overrides.wav2vec2_hub={folder / 'wav2vec2_hub'}", *extra]).asr


def test_encoder_asr_folder_transcribes_as_its_weights_say(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = encoder_asr_folder(tmp_path / "asr")
    recogniser = instantiate(without(ctc_config(folder), "name"))
    expected = [by_hand(folder, wave) for wave in waves()]
    assert [recogniser.transcribe([wave])[0] for wave in waves()] == expected
    assert all(len(text) > 10 for text in expected)  # random weights still emit characters


def test_transcribe_stage_with_the_ctc_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = encoder_asr_folder(tmp_path / "asr")
    paths = {f"u{i}": str(write_audio(tmp_path / "audio" / f"u{i}.flac", wave, 16000))
             for i, wave in enumerate(waves())}
    manifest = write_manifest(tmp_path / "manifest.jsonl", [Utterance(id=u, speaker="s1", gender="f", path=p,
                                                                      duration=1.0) for u, p in paths.items()])
    alone = ctc_config(folder, "asr.batch_size=1")  # each utterance unpadded, as by_hand computes it
    found = transcribe.load(transcribe.run(alone, manifest, Cache(tmp_path / "cache")), manifest)
    assert found == {u: by_hand(folder, read_audio(p, 16000)) for u, p in paths.items()}  # the recogniser's spaces


def test_a_folder_whose_hub_is_not_local_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = encoder_asr_folder(tmp_path / "asr")
    cfg = compose(["data=synthetic_tiny", "asr=speechbrain_ctc", f"asr.folder={folder}"]).asr
    with pytest.raises(VpevalError, match=r"asr: not a SpeechBrain ASR folder for .*\.EncoderASR: "):
        instantiate(without(cfg, "name"))
