"""Utility metrics, WER: counting, the transcript cache, recognisers (PocketSphinx, a SpeechBrain
folder and a Whisper folder of random weights) and their bad inputs, and the experiment's WER
step with the offline recogniser on real English speech (original vs McAdams)."""
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from pipeline.core.cache import Cache
from pipeline.core.config import compose, without
from pipeline.core.errors import VpevalError
from pipeline.data.audio import read_audio, write_audio
from pipeline.data.manifest import Utterance, file_digest, read_manifest, write_manifest
from pipeline.metrics.wer import normalise, ratio_interval, word_errors
from pipeline.recognition.asr import PocketSphinx, SpeechBrainASR, Whisper
from pipeline.stages import transcribe
from tests.helpers import ASR_LETTERS as LETTERS
from tests.helpers import FIXTURES, utility_experiment, whisper_folder

get_model_path = pytest.importorskip("pocketsphinx").get_model_path  # the utility extra

SPEECH = FIXTURES / "speech"
RATE = 16000


def speech_manifest(folder: Path, waves: dict[str, np.ndarray] | None = None) -> Path:
    """Manifest of the espeak-ng fixture (or of `waves` written under `folder`), with its texts."""
    texts = dict(line.split(" ", 1) for line in (SPEECH / "text").read_text().splitlines())
    utts = []
    for utt, text in texts.items():
        path = SPEECH / f"{utt}.flac"
        if waves is not None:
            path = write_audio(folder / f"{utt}.flac", waves[utt], RATE)
        utts.append(Utterance(id=utt, speaker="tts", gender="f", path=str(path),
                              duration=len(read_audio(path)) / RATE, text=text))
    return write_manifest(folder / "manifest.jsonl", utts)


# WER

def test_normalisation_and_hand_counted_word_errors():
    assert normalise("It's  seven o'clock, Tom!") == "IT'S SEVEN O'CLOCK TOM"
    counts = word_errors(["the cat sat", "on the mat"], ["the bat sat down", ""])
    assert (counts.substitutions, counts.deletions, counts.insertions, counts.words) == (1, 3, 1, 6)
    assert counts.wer == pytest.approx(5 / 6) and counts.per_utterance == (2, 3)
    assert ratio_interval([1, 2, 3, 0], [3, 3, 3, 3], n_resamples=2000) == pytest.approx((1 / 6, 5 / 6))
    assert ratio_interval([0.5] * 4, [1] * 4) == (0.5, 0.5)
    with pytest.raises(ValueError, match="at least one word"):
        word_errors(["..."], ["x"])


def test_transcripts_are_cached_per_recogniser_and_resume(tmp_path, monkeypatch):
    manifest = speech_manifest(tmp_path)
    cache = Cache(tmp_path / "cache")
    asr = compose(["data=synthetic_tiny"]).asr
    folder = cache.path("transcribe", {"asr": without(asr, *transcribe.LABEL_KEYS)},
                        {"manifests": [file_digest(manifest)], "model": PocketSphinx.fingerprint_of({})},
                        code=transcribe.__name__)
    folder.mkdir(parents=True)
    (folder / transcribe.PARTIAL).write_text("speech1 as resumed\nspeech2 cut by a ki")  # last line incomplete
    built = transcribe.run(asr, manifest, cache)
    assert built == folder
    found = transcribe.load(built, manifest)
    assert found["speech1"] == "as resumed"                                   # not recognised again
    assert found["speech3"] == "we will meet at the station at seven o'clock tomorrow morning"
    assert not (folder / transcribe.PARTIAL).exists()
    assert transcribe.run(asr, manifest, cache) == folder and cache.events[-1].reused

    def load_model(*args, **kwargs):
        raise AssertionError("a cached transcript loaded its recogniser")

    monkeypatch.setattr(PocketSphinx, "__init__", load_model)  # issue 39: a cached list never builds its model
    assert transcribe.run(asr, manifest, cache) == folder
    monkeypatch.undo()
    with pytest.raises(VpevalError, match=r"^asr._target_=no.such.Recogniser: must name an importable model class"):
        transcribe.run(OmegaConf.create({"name": "x", "_target_": "no.such.Recogniser"}), manifest, cache)
    same_model_named = OmegaConf.merge(asr, {"hmm": str(Path(get_model_path()) / "en-us" / "en-us")})
    assert transcribe.run(same_model_named, manifest, cache) != folder       # another recogniser config, another key


ASR_HPARAMS = """n_mels: 20
tokenizer: !new:speechbrain.dataio.encoder.CTCTextEncoder
compute_features: !new:speechbrain.lobes.features.Fbank
    n_mels: !ref <n_mels>
output: !new:speechbrain.nnet.linear.Linear
    input_size: !ref <n_mels>
    n_neurons: 29
log_softmax: !new:speechbrain.nnet.activations.Softmax
    apply_log: True
encoder: !new:speechbrain.nnet.containers.LengthsCapableSequential
    - !ref <compute_features>
    - !ref <output>
    - !ref <log_softmax>
decoding_function: !name:speechbrain.decoders.ctc_greedy_decode
    blank_id: 0
modules:
    encoder: !ref <encoder>
pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer
    loadables:
        encoder: !ref <encoder>
        tokenizer: !ref <tokenizer>
"""


def speechbrain_asr_folder(folder: Path, seed: int = 0) -> Path:
    """A SpeechBrain CTC ASR folder (EncoderASR: Fbank, a linear layer, greedy CTC over letters)
    with random weights, saved by SpeechBrain's own classes."""
    from speechbrain.dataio.encoder import CTCTextEncoder
    from speechbrain.lobes.features import Fbank
    from speechbrain.nnet.activations import Softmax
    from speechbrain.nnet.containers import LengthsCapableSequential
    from speechbrain.nnet.linear import Linear

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hyperparams.yaml").write_text(ASR_HPARAMS)
    torch.manual_seed(seed)
    encoder = LengthsCapableSequential(Fbank(n_mels=20), Linear(input_size=20, n_neurons=29), Softmax(apply_log=True))
    torch.save(encoder.state_dict(), folder / "encoder.ckpt")
    tokenizer = CTCTextEncoder()
    tokenizer.insert_blank(index=0)
    tokenizer.update_from_iterable(list(LETTERS))
    tokenizer.save(folder / "tokenizer.ckpt")
    return folder


def test_speechbrain_asr_folder_transcribes_through_the_stage(tmp_path):
    manifest = speech_manifest(tmp_path)
    model = speechbrain_asr_folder(tmp_path / "asr")
    asr = OmegaConf.merge(compose(["data=synthetic_tiny", "asr=speechbrain"]).asr,
                          {"folder": str(model), "interface": "speechbrain.inference.ASR.EncoderASR"})
    cache = Cache(tmp_path / "cache")
    folder = transcribe.run(asr, manifest, cache)
    found = transcribe.load(folder, manifest)
    direct = SpeechBrainASR(str(model), interface=asr.interface).transcribe([read_audio(SPEECH / "speech1.flac")])
    assert found["speech1"] == " ".join(direct[0].split()) and set(found["speech1"]) <= set(LETTERS)
    speechbrain_asr_folder(model, seed=1)                  # other weights in the same folder: transcribed again
    assert transcribe.run(asr, manifest, cache) != folder


def test_whisper_folder_transcribes_through_the_stage(tmp_path):
    manifest = speech_manifest(tmp_path)
    model = whisper_folder(tmp_path / "whisper")
    asr = compose(["data=synthetic_tiny", "asr=whisper", f"asr.folder='{model}'"]).asr
    cache = Cache(tmp_path / "cache")
    folder = transcribe.run(asr, manifest, cache)
    found = transcribe.load(folder, manifest)
    recognizer = Whisper(str(model))
    waves = [read_audio(SPEECH / f"{utt}.flac") for utt in found]
    direct = recognizer.transcribe(waves)                   # a batch, where the stage gave one at a time
    assert direct == recognizer.transcribe(waves) and all(isinstance(text, str) for text in direct)
    assert list(found.values()) == [" ".join(text.split()) for text in direct]
    assert any(found.values()) and set("".join(found.values())) <= set(LETTERS)
    assert transcribe.run(asr, manifest, cache) == folder and cache.events[-1].reused
    whisper_folder(model, seed=1)                           # other weights in the same folder: transcribed again
    assert transcribe.run(asr, manifest, cache) != folder


def test_whisper_half_precision_folder_and_audio_beyond_one_window(tmp_path, monkeypatch):
    recognizer = Whisper(str(whisper_folder(tmp_path / "whisper", dtype=torch.float16)))  # as whisper-large-v3 ships
    assert recognizer.model.dtype == torch.float32
    short = read_audio(SPEECH / "speech1.flac")
    long = np.concatenate([read_audio(SPEECH / f"speech{i}.flac") for i in (1, 2, 3)] * 3)
    assert len(long) > recognizer.processor.feature_extractor.n_samples       # over the 30 s window
    generate, frames = recognizer.model.generate, []

    def counting_generate(features, attention_mask, **options):
        frames.append((features.shape[-1], attention_mask.sum(-1).tolist()))
        return generate(features, attention_mask=attention_mask, **options)

    monkeypatch.setattr(recognizer.model, "generate", counting_generate)
    texts = recognizer.transcribe([long, short])
    [(total, (long_mask, short_mask))] = frames                       # one batch
    assert total == long_mask == len(long) // 160                      # all of it (10 ms a frame), not cut at 3000
    assert short_mask == pytest.approx(len(short) / 160, abs=1)
    assert all(isinstance(text, str) for text in texts)


def test_missing_transcripts_are_named(tmp_path):
    manifest = speech_manifest(tmp_path)
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / transcribe.TEXT).write_text("speech1 a\n")
    with pytest.raises(VpevalError, match=r"t/text: no transcript for 2 utterance\(s\) of .*manifest.jsonl, first speech2$"):
        transcribe.load(folder, manifest)


def test_recogniser_folders_missing_or_of_the_wrong_kind(tmp_path):
    with pytest.raises(VpevalError, match=r"asr.folder: no model folder given \(set asr.folder="):
        SpeechBrainASR(folder=None)
    with pytest.raises(VpevalError, match=r"nowhere: asr.folder folder not found$"):
        SpeechBrainASR(folder=str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(VpevalError, match=r"empty: not a SpeechBrain ASR folder \(no hyperparams.yaml\)$"):
        SpeechBrainASR(folder=str(tmp_path / "empty"))
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "hyperparams.yaml").write_text("modules: {}\n")
    with pytest.raises(VpevalError, match=r"wrong: not a SpeechBrain ASR folder for .*EncoderDecoderASR: "):
        SpeechBrainASR(folder=str(wrong))
    with pytest.raises(VpevalError, match=r"empty: not a Whisper model folder \(no config.json\)$"):
        Whisper(folder=str(tmp_path / "empty"))
    (wrong / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(VpevalError, match=r"wrong: not a Whisper model folder: "):
        Whisper(folder=str(wrong))
    with pytest.raises(VpevalError, match=r"missing.dict: asr.dict not found$"):
        PocketSphinx(dict=str(tmp_path / "missing.dict"))


def test_whisper_language_the_model_lacks_and_no_transformers(tmp_path, monkeypatch):
    model = whisper_folder(tmp_path / "whisper")
    with pytest.raises(VpevalError, match=r"^asr.language='french': not a language of the Whisper model in .*whisper "
                                          r"\(it knows 1, e.g. <\|en\|>\)$"):
        Whisper(str(model), language="french")
    assert Whisper(str(model), language="EN").options == {"language": "<|en|>", "task": "transcribe"}
    config = json.loads((model / "generation_config.json").read_text())
    del config["lang_to_id"]                                # as the English-only whisper-*.en models ship it
    (model / "generation_config.json").write_text(json.dumps(config))
    with pytest.raises(VpevalError, match=r"whisper: an English-only Whisper model .* set asr.language=null$"):
        Whisper(str(model))
    with pytest.raises(VpevalError, match=r"^device='cuda:99' requested but "):
        Whisper(str(model), device="cuda:99")
    assert isinstance(Whisper(str(model), language=None).transcribe([read_audio(SPEECH / "speech1.flac")])[0], str)
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(VpevalError, match=r"^asr=whisper needs the transformers package: pip install .*\[whisper\]"):
        Whisper(str(model))


# The experiment's WER step on real speech

def test_wer_step_pools_a_split_with_intervals_and_names_untranscribed_utterances(tmp_path):
    from anonymizers.mcadams import McAdams
    from pipeline.app.utility import word_error_rates

    original = speech_manifest(tmp_path / "o")
    texts = [line.split(" ", 1)[0] for line in (SPEECH / "text").read_text().splitlines()]
    waves = McAdams(alpha=0.6, seed=0, device="cpu")([torch.from_numpy(read_audio(SPEECH / f"{u}.flac")) for u in texts],
                                                    texts, ["tts"] * len(texts), RATE)
    anonymized = speech_manifest(tmp_path / "a", {u: w.numpy() for u, w in zip(texts, waves)})
    experiment = utility_experiment(["data=vpc", "detect.bootstrap.n_resamples=200"], tmp_path / "cache")
    lists, sets, result = {"test_f": {"original": original, "anonymized": anonymized}}, {"test_f": ("test", "x")}, \
        {"sets": {"test_f": {}}, "splits": {}}
    word_error_rates(experiment, lists, sets, result)
    found, pooled = result["sets"]["test_f"], result["splits"]["test"]
    assert found["words"] == 35
    assert found["wer_original"] < 0.6                          # measured 0.40 (espeak-ng en-us+f2, pocketsphinx 5.1.1)
    assert found["wer_anonymized"] > found["wer_original"] + 0.2  # measured 0.97 at McAdams alpha 0.6
    assert pooled["wer_original"] == found["wer_original"]               # one set: pooled is the same count
    low, high = pooled["wer_anonymized_ci"]
    assert low <= pooled["wer_anonymized"] <= high and low < high
    utts = read_manifest(original)
    write_manifest(original, [u if u.id != "speech2" else replace(u, text="") for u in utts])
    with pytest.raises(VpevalError, match=r"o/manifest.jsonl: 1 of 3 utterances have no reference transcript, "
                                          r"first speech2$"):
        word_error_rates(experiment, lists, sets, result)
    with pytest.raises(VpevalError, match=r"^the built-in synthetic corpus has no words"):
        word_error_rates(utility_experiment(["data=synthetic_tiny"], tmp_path / "cache"), lists, sets, result)
