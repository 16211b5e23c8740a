"""Speech recognisers for the word error rate (conf/asr): one interface, three back-ends.

- `PocketSphinx`: CMU PocketSphinx 5 with the en-us acoustic model, dictionary and language
  model its PyPI wheel bundles (`pip install vpeval[utility]`), so WER runs offline on a
  fresh machine; much weaker than the neural recognisers VPC uses (its WERs are not VPC's).
- `SpeechBrainASR`: a SpeechBrain pretrained ASR folder (hyperparams.yaml and the files it
  names), e.g. `asr-crdnn-rnnlm-librispeech` as downloaded by its owner.
- `Whisper`: a Whisper model folder saved by `transformers` (`save_pretrained`), loaded with
  `local_files_only` (`pip install vpeval[whisper]`).

Every recogniser takes 16 kHz mono float waveforms and returns raw text; `fingerprint_of(settings)`
names the model for the transcript cache from its settings, without loading it (the
recogniser's config is part of the key too), so a cached transcript never loads the model.

>>> texts = PocketSphinx().transcribe([np.zeros(16000, dtype=np.float32)])
>>> len(texts), type(texts[0])
(1, <class 'str'>)
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

import numpy as np

from pipeline.core.checks import Check, Checked, integer, number, optional, positive
from pipeline.core.errors import VpevalError

SAMPLE_RATE = 16000
ASR_FOLDER, HYPERPARAMS, SPEECHBRAIN_ASR = "asr.folder", "hyperparams.yaml", "SpeechBrain ASR"
WHISPER_FOLDER = ("config.json", "Whisper model")  # what a Whisper folder holds, and its name in errors


def missing_library(library: str, extra: str, key: str) -> VpevalError:
    return VpevalError(f"{key} needs the {library} package: pip install -c constraints.txt -e '.[{extra}]'")


def package_version(library: str, extra: str, key: str) -> str:
    """The installed version of `library`; a missing one is the one line of `missing_library`."""
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        raise missing_library(library, extra, key) from None


def folder_fingerprint(folder: Path) -> dict[str, str]:
    """Every file of a model folder by relative name, size and modification time (model files
    are too big to hash on every run)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return {str(p.relative_to(folder)): f"{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files}


def model_folder(folder: str | None, key: str, needed: str | tuple[str, ...], kind: str) -> Path:
    """The configured model folder (config key `key`), checked: it exists and holds the file(s) `needed`."""
    if not folder:
        raise VpevalError(f"{key}: no model folder given (set {key}=/path/to/folder)")
    path = Path(folder)
    if not path.is_dir():
        raise VpevalError(f"{path}: {key} folder not found")
    missing = [name for name in ((needed,) if isinstance(needed, str) else needed) if not (path / name).is_file()]
    if missing:
        raise VpevalError(f"{path}: not a {kind} folder (no {', '.join(missing)})")
    return path


def speechbrain_folder(folder: str | None, key: str, kind: str, interface: str, device: str,
                       overrides: dict | None = None):
    """(checked folder, model): a SpeechBrain pretrained folder (`hyperparams.yaml`, config key
    `key`) loaded offline by `load_speechbrain`."""
    path = model_folder(folder, key, HYPERPARAMS, kind)
    return path, load_speechbrain(path, key, kind, interface, device, overrides)


def load_speechbrain(path: Path, key: str, kind: str, interface: str, device: str, overrides: dict | None = None):
    """The SpeechBrain pretrained folder `path` loaded offline by `interface`, a class path or
    `<file>.py:<class>` (a Python file in the folder, imported by SpeechBrain's `foreign_class`),
    `overrides` replacing hyperparams.yaml keys (e.g. a hub name the folder's yaml names, pointed
    at a local folder); a folder it cannot load is one line naming it."""
    from hydra.utils import get_class

    source = str(path.resolve())
    options = {"source": source, "savedir": source, "run_opts": {"device": device}, "overrides": dict(overrides or {})}
    module_file, _, classname = interface.rpartition(":")
    try:
        if module_file:
            from speechbrain.inference.interfaces import foreign_class

            if not (path / module_file).is_file():
                raise VpevalError(f"{path}: no {module_file}, the file of interface {interface}")
            return foreign_class(pymodule_file=module_file, classname=classname, **options)
        return get_class(interface).from_hparams(**options)
    except VpevalError:
        raise
    except Exception as error:  # noqa: BLE001  (SpeechBrain raises many kinds for a wrong folder)
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise VpevalError(f"{path}: not a {kind} folder for {interface}: {message}") from None


class Recognizer(ABC):
    """16 kHz waveforms -> text."""

    @abstractmethod
    def transcribe(self, waves: list[np.ndarray]) -> list[str]:
        """One raw transcript per waveform."""

    @classmethod
    @abstractmethod
    def fingerprint_of(cls, settings: Mapping) -> dict:
        """What identifies the model beyond the config (versions, folder contents), from the
        recogniser's settings (its config node as a dict), without loading it."""


class PocketSphinx(Recognizer):
    """CMU PocketSphinx with its bundled en-us model (or the files given)."""

    def __init__(self, hmm: str | None = None, dict: str | None = None, lm: str | None = None):  # noqa: A002
        try:
            from pocketsphinx import Decoder
        except ImportError:
            raise missing_library("pocketsphinx", "utility", "asr=pocketsphinx") from None
        self.decoder = Decoder(samprate=SAMPLE_RATE, loglevel="FATAL", **self.given_files({"hmm": hmm, "dict": dict,
                                                                                            "lm": lm}))

    @staticmethod
    def given_files(settings: Mapping) -> dict[str, str]:
        """The model files set (`hmm`, `dict`, `lm`), each checked to exist."""
        given = {key: settings[key] for key in ("hmm", "dict", "lm") if settings.get(key)}
        for key, value in given.items():
            if not Path(value).exists():
                raise VpevalError(f"{value}: asr.{key} not found")
        return given

    def transcribe(self, waves: list[np.ndarray]) -> list[str]:
        texts = []
        for wave in waves:
            pcm = (np.clip(np.asarray(wave, dtype=np.float64), -1, 1) * 32767).astype(np.int16)
            self.decoder.start_utt()
            self.decoder.process_raw(pcm.tobytes(), full_utt=True)
            self.decoder.end_utt()
            hypothesis = self.decoder.hyp()
            texts.append(hypothesis.hypstr if hypothesis is not None else "")
        return texts

    @classmethod
    def fingerprint_of(cls, settings: Mapping) -> dict:
        return {"pocketsphinx": package_version("pocketsphinx", "utility", "asr=pocketsphinx"),
                **{key: folder_fingerprint(Path(v)) if Path(v).is_dir() else str(Path(v).stat().st_size)
                   for key, v in cls.given_files(settings).items()}}


BATCH_SIZE_CHECK = Check("an integer >= 1 (utterances decoded at once)", integer(1))


class SpeechBrainASR(Recognizer, Checked):
    """A SpeechBrain pretrained ASR folder, loaded by `interface` (default EncoderDecoderASR;
    EncoderASR for a wav2vec2 CTC folder, VPC 2026 Track 1), `overrides` replacing keys of its
    hyperparams.yaml. `batch_size` utterances are decoded at once, zero-padded to the longest
    (VPC's `eval_batchsize`, 8; the transcribe stage forms the batches as VPC does)."""

    settings_checks = {"batch_size": BATCH_SIZE_CHECK}

    def __init__(self, folder: str | None = None, interface: str = "speechbrain.inference.ASR.EncoderDecoderASR",
                 device: str = "cpu", overrides: dict | None = None, batch_size: int = 8):
        import torch

        self.folder, self.model = speechbrain_folder(folder, ASR_FOLDER, SPEECHBRAIN_ASR, interface, device,
                                                     overrides)
        self.device, self.torch, self.batch_size = device, torch, int(batch_size)

    def transcribe(self, waves: list[np.ndarray]) -> list[str]:
        """One batch, each waveform zero-padded to the longest, lengths relative to it in float32
        (VPC's collate_fn: `torch.Tensor(lengths) / longest`)."""
        chunk = [self.torch.as_tensor(np.asarray(w, dtype=np.float32)) for w in waves]
        longest = max(len(w) for w in chunk)
        batch = self.torch.stack([self.torch.nn.functional.pad(w, (0, longest - len(w))) for w in chunk])
        lengths = self.torch.tensor([len(w) for w in chunk], dtype=self.torch.float32) / longest
        with self.torch.no_grad():
            words, _ = self.model.transcribe_batch(batch.to(self.device), lengths.to(self.device))
        return [w if isinstance(w, str) else " ".join(w) for w in words]

    @classmethod
    def fingerprint_of(cls, settings: Mapping) -> dict:
        folder = model_folder(settings.get("folder"), ASR_FOLDER, HYPERPARAMS, SPEECHBRAIN_ASR)
        return {"speechbrain": metadata.version("speechbrain"), "folder": folder_fingerprint(folder)}


class Whisper(Recognizer, Checked):
    """A Whisper model folder saved by transformers (model and processor), loaded in float32 on
    `device`, a batch decoded at once as the folder's generation config says (greedily, for
    OpenAI's). `language` (a name or code the generation config knows) fixes the language; null
    leaves it to the model (English-only `.en` models, or language detection). Audio longer than
    the 30 s window is not cut: with `chunk_length_s` null transformers decodes it window after
    window (long-form); with `chunk_length_s` set (VPC 2026: 30 s, `stride_length_s` 5 s), every
    utterance goes through transformers' speech recognition pipeline as VPC 2026's Whisper
    evaluation calls it (with the pipeline's generation defaults): one longer than that in chunks
    of that length overlapping by twice the stride, their texts merged, shorter ones as a batch.
    The transcribe stage hands it `batch_size` utterances at a time."""

    settings_checks = {"chunk_length_s": Check("null or a number of seconds > 0", optional(positive)),
                       "batch_size": BATCH_SIZE_CHECK}

    @classmethod
    def check_settings(cls, settings, key: str) -> list[str]:
        """Its ranges, and a stride below half the chunk length."""
        found = super().check_settings(settings, key)
        chunk, stride = settings.get("chunk_length_s"), settings.get("stride_length_s")
        if positive(chunk) and number(stride) and not 0 < 2 * stride < chunk:
            found.append(f"{key}.stride_length_s={stride}: must be above 0 and below half of "
                         f"{key}.chunk_length_s={chunk}")
        return found

    def __init__(self, folder: str | None = None, language: str | None = "english", device: str = "cpu",
                 chunk_length_s: float | None = None, stride_length_s: float = 5.0, batch_size: int = 1):
        try:
            import transformers
        except ImportError:
            raise missing_library("transformers", "whisper", "asr=whisper") from None
        import torch

        from pipeline.core.devices import resolve_device

        self.folder = model_folder(folder, ASR_FOLDER, *WHISPER_FOLDER)
        self.device = resolve_device(device)
        try:
            self.processor = transformers.WhisperProcessor.from_pretrained(self.folder, local_files_only=True)
            self.model = transformers.WhisperForConditionalGeneration.from_pretrained(
                self.folder, local_files_only=True, dtype=torch.float32).to(self.device).eval()
        except Exception as error:  # noqa: BLE001  (transformers raises many kinds for a wrong folder)
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise VpevalError(f"{self.folder}: not a Whisper model folder: {message}") from None
        self.options = {} if language is None else {"language": self.language_token(language), "task": "transcribe"}
        self.chunk_length_s, self.stride_length_s, self.batch_size = chunk_length_s, stride_length_s, int(batch_size)
        self.pipeline = None if chunk_length_s is None else transformers.pipeline(
            "automatic-speech-recognition", model=self.model, tokenizer=self.processor.tokenizer,
            feature_extractor=self.processor.feature_extractor, device=self.device)

    def language_token(self, language: str) -> str:
        """`<|en|>` for 'english', 'English' or 'en', checked against the model's languages."""
        from transformers.models.whisper.tokenization_whisper import TO_LANGUAGE_CODE

        generation = self.model.generation_config
        known = getattr(generation, "lang_to_id", None)
        if not known or getattr(generation, "is_multilingual", True) is False:
            raise VpevalError(f"{self.folder}: an English-only Whisper model (its generation_config.json names no "
                              f"languages); set asr.language=null")
        token = f"<|{TO_LANGUAGE_CODE.get(language.lower(), language.lower())}|>"
        if token not in known:
            raise VpevalError(f"asr.language={language!r}: not a language of the Whisper model in {self.folder} "
                              f"(it knows {len(known)}, e.g. {', '.join(list(known)[:5])})")
        return token

    def transcribe(self, waves: list[np.ndarray]) -> list[str]:
        waves = [np.asarray(wave, dtype=np.float32) for wave in waves]
        if self.chunk_length_s is None:
            return self.decode(waves)
        inputs = [{"raw": wave, "sampling_rate": SAMPLE_RATE} for wave in waves]
        longest = self.chunk_length_s * SAMPLE_RATE
        short = [i for i, wave in enumerate(waves) if len(wave) <= longest]
        found = self.pipeline([inputs[i] for i in short], batch_size=len(short), generate_kwargs=self.options) \
            if short else []
        texts = {i: result["text"] for i, result in zip(short, found)}
        for i in sorted(set(range(len(waves))) - set(short)):
            texts[i] = self.pipeline(inputs[i], chunk_length_s=self.chunk_length_s,
                                     stride_length_s=self.stride_length_s, generate_kwargs=self.options)["text"]
        return [texts[i] for i in range(len(waves))]

    def decode(self, waves: list[np.ndarray]) -> list[str]:
        """A batch decoded at once as the generation config says (long-form beyond the 30 s window)."""
        import torch

        beyond_window = max(len(wave) for wave in waves) > self.processor.feature_extractor.n_samples
        inputs = self.processor(waves, sampling_rate=SAMPLE_RATE, return_tensors="pt", return_attention_mask=True,
                                **({"truncation": False, "padding": "longest"} if beyond_window else {}))
        with torch.no_grad():
            tokens = self.model.generate(inputs.input_features.to(self.device),
                                         attention_mask=inputs.attention_mask.to(self.device), **self.options)
        return self.processor.batch_decode(tokens, skip_special_tokens=True)

    @classmethod
    def fingerprint_of(cls, settings: Mapping) -> dict:
        return {"transformers": package_version("transformers", "whisper", "asr=whisper"),
                "folder": folder_fingerprint(model_folder(settings.get("folder"), ASR_FOLDER, *WHISPER_FOLDER))}
