"""The one interface every anonymisation system implements.

A system receives a batch of waveforms with their utterance ids, speaker ids and sample
rate, and returns one anonymised waveform per input. What every system shares is handled
here, once: the anonymisation level, per-utterance random keys derived from the seed,
device placement and batching size. A system is a subclass plus a YAML file in
`conf/anonymizer/` whose `_target_` names it; nothing else registers it.

Example (a system that only scales the signal)::

    class Quieter(Anonymizer):
        def __init__(self, gain: float = 0.5, **common):
            super().__init__(**common)
            self.gain = gain

        def anonymize(self, batch: Batch) -> list[torch.Tensor]:
            return [w * self.gain for w in batch.waves]
"""
from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pipeline.data.manifest import Utterance
from pipeline.devices import resolve_device
from pipeline.errors import VpevalError

LEVELS = ("utterance", "speaker")


def stable_seed(seed: int, key: str) -> int:
    """A 63-bit seed from the experiment seed and a string key, equal on every machine.

    >>> stable_seed(0, "spk1") == stable_seed(0, "spk1") != stable_seed(1, "spk1")
    True
    """
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


@dataclass
class Batch:
    """Inputs of one `anonymize` call. `seeds[i]` is the random key of utterance i: derived
    from its utterance id at utterance level, from its speaker id at speaker level, so that
    all of a speaker's utterances share one key at speaker level."""

    waves: list[torch.Tensor]
    utt_ids: list[str]
    speaker_ids: list[str]
    seeds: list[int]
    sample_rate: int


class Anonymizer(ABC):
    """Base class. Subclasses implement `anonymize(batch) -> list[Tensor]`.

    Args:
        level: "utterance" (a new pseudo-speaker per utterance) or "speaker" (one per speaker).
        seed: experiment seed; results depend only on it and the ids, not on batching.
        device: "auto", "cpu" or "cuda[:n]".
        batch_seconds: audio seconds per batch handed to `anonymize`.
    """

    sample_rate: int = 16000

    def __init__(self, *, level: str = "utterance", seed: int = 0, device: str = "auto",
                 batch_seconds: float = 300.0):
        if level not in LEVELS:
            raise VpevalError(f"anonymizer.level must be one of {LEVELS}, got {level!r}")
        self.level = level
        self.seed = int(seed)
        self.device = resolve_device(device)
        self.batch_seconds = float(batch_seconds)

    def prepare(self, utterances: Sequence[Utterance]) -> None:
        """Called once by the anonymize stage with every utterance of the manifest (ids,
        speakers, genders, paths) before any batch, e.g. for speaker-level statistics or the
        list of source speakers. Default: nothing."""

    def fingerprint(self) -> dict[str, str]:
        """Digests of the files the system loads (weights, target pools); the anonymize stage
        keys its cached audio on them, so retrained weights at the same path are never
        mistaken for the old ones. Default: none."""
        return {}

    @abstractmethod
    def anonymize(self, batch: Batch) -> list[torch.Tensor]:
        """Return one anonymised 1-D waveform per `batch.waves[i]`, at `batch.sample_rate`."""

    def __call__(self, waves, utt_ids: list[str], speaker_ids: list[str], sample_rate: int) -> list[torch.Tensor]:
        """Anonymise a batch; returns 1-D float32 CPU tensors, one per input."""
        if sample_rate != self.sample_rate:
            raise VpevalError(f"{type(self).__name__} expects {self.sample_rate} Hz audio, got {sample_rate} Hz")
        keys = utt_ids if self.level == "utterance" else speaker_ids
        waves = [torch.as_tensor(w, dtype=torch.float32) for w in waves]
        for utterance, wave in zip(utt_ids, waves):  # checked where they are (host), before the copy
            if not torch.isfinite(wave).all():
                raise VpevalError(f"{type(self).__name__}: utterance {utterance} has non-finite samples (NaN or inf)")
        batch = Batch(
            waves=[wave.to(self.device) for wave in waves],
            utt_ids=list(utt_ids),
            speaker_ids=list(speaker_ids),
            seeds=[stable_seed(self.seed, key) for key in keys],
            sample_rate=sample_rate,
        )
        outputs = self.anonymize(batch)
        if len(outputs) != len(batch.waves):
            raise VpevalError(f"{type(self).__name__} returned {len(outputs)} waveforms for {len(batch.waves)} inputs")
        return [out.detach().float().cpu() for out in outputs]
