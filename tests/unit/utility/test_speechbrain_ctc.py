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

pytest.importorskip("speechbrain")
transformers = pytest.importorskip("transformers")

CHARACTERS = ["<blank>", " ", "'", *"ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
HIDDEN = 16
HPARAMS = f"""\
sample_rate: 16000
blank_index: 0
wav2vec2_hub: facebook/wav2vec2-large-960h-lv60-self   # what SpeechBrain's folder names; set by overrides
wav2vec2: !new:speechbrain.lobes.models.huggingface_transformers.wav2vec2.Wav2Vec2
    source: !ref <wav2vec2_hub>
    output_norm: True
    freeze: True
    save_path: wav2vec2_checkpoints
enc: !new:speechbrain.lobes.models.VanillaNN.VanillaNN
    input_shape: [null, null, {HIDDEN}]
    activation: !name:torch.nn.LeakyReLU
    dnn_blocks: 1
    dnn_neurons: {HIDDEN}
ctc_lin: !new:speechbrain.nnet.linear.Linear
    input_size: {HIDDEN}
    n_neurons: {len(CHARACTERS)}
log_softmax: !new:speechbrain.nnet.activations.Softmax
    apply_log: True
asr_model: !new:torch.nn.ModuleList
    - [!ref <enc>, !ref <ctc_lin>]
tokenizer: !new:speechbrain.dataio.encoder.CTCTextEncoder
encoder: !new:speechbrain.nnet.containers.LengthsCapableSequential
    wav2vec2: !ref <wav2vec2>
    enc: !ref <enc>
    ctc_lin: !ref <ctc_lin>
    log_softmax: !ref <log_softmax>
decoding_function: !name:speechbrain.decoders.ctc_greedy_decode
    blank_id: !ref <blank_index>
modules:
    encoder: !ref <encoder>
pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer
    loadables:
        wav2vec2: !ref <wav2vec2>
        asr: !ref <asr_model>
        tokenizer: !ref <tokenizer>
"""


def encoder_asr_folder(folder: Path) -> Path:
    """A random-weight wav2vec2 CTC EncoderASR folder; the Hugging Face model its yaml starts from
    in `wav2vec2_hub/` (config, feature extractor, weights that wav2vec2.ckpt replaces)."""
    from speechbrain.dataio.encoder import CTCTextEncoder
    from speechbrain.lobes.models.VanillaNN import VanillaNN
    from speechbrain.nnet.linear import Linear

    folder.mkdir(parents=True)
    (folder / "hyperparams.yaml").write_text(HPARAMS)
    torch.manual_seed(0)
    config = transformers.Wav2Vec2Config(hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=32, conv_dim=(8, 8), conv_kernel=(10, 3),
                                         conv_stride=(5, 2), num_conv_pos_embeddings=16,
                                         num_conv_pos_embedding_groups=2)
    transformers.Wav2Vec2Model(config).save_pretrained(folder / "wav2vec2_hub")  # the hub model VPC's yaml names
    wav2vec2 = transformers.Wav2Vec2Model(config)  # other weights: the fine-tuned ones, in wav2vec2.ckpt
    transformers.Wav2Vec2FeatureExtractor(do_normalize=True, return_attention_mask=True).save_pretrained(
        folder / "wav2vec2_hub")
    torch.save({f"model.{k}": v for k, v in wav2vec2.state_dict().items()}, folder / "wav2vec2.ckpt")
    enc = VanillaNN(input_shape=[None, None, HIDDEN], activation=torch.nn.LeakyReLU, dnn_blocks=1,
                    dnn_neurons=HIDDEN)
    ctc_lin = Linear(input_size=HIDDEN, n_neurons=len(CHARACTERS))
    torch.save(torch.nn.ModuleList([enc, ctc_lin]).state_dict(), folder / "asr.ckpt")
    tokenizer = CTCTextEncoder()
    tokenizer.update_from_iterable(CHARACTERS[1:])
    tokenizer.insert_blank(index=0)
    tokenizer.save(folder / "tokenizer.ckpt")
    return folder


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
    found = transcribe.load(transcribe.run(ctc_config(folder), manifest, Cache(tmp_path / "cache")), manifest)
    assert found == {u: " ".join(by_hand(folder, read_audio(p, 16000)).split()) for u, p in paths.items()}


def test_a_folder_whose_hub_is_not_local_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = encoder_asr_folder(tmp_path / "asr")
    cfg = compose(["data=synthetic_tiny", "asr=speechbrain_ctc", f"asr.folder={folder}"]).asr
    with pytest.raises(VpevalError, match=r"asr: not a SpeechBrain ASR folder for .*\.EncoderASR: "):
        instantiate(without(cfg, "name"))
