"""Reproducible fixed-length training crops drawn from an audio cache.

An epoch is a seeded shuffle of examples; batch `step` of epoch `epoch` is a pure function
of (seed, epoch, step), so a resumed run (or another rank, later) can produce any batch
without replaying the ones before it.

- `examples_per_epoch: chunks` (SpeechBrain / VPC 2024): an utterance contributes
  max(1, floor(length / crop)) examples per epoch, each a crop at a random position in the
  whole utterance. `utterances`: one crop per utterance per epoch.
- An utterance shorter than the crop is repeated circularly from a random start up to the
  crop length, so every crop is full of speech and training needs no padding masks.
- Batches have exactly `batch_size` crops; the last incomplete batch of an epoch is dropped
  (an epoch with fewer examples than `batch_size` is one smaller batch).
- An encoder with `context_samples` (`ecapa_ssl`'s WavLM) also gets, for every crop, a
  context: a random segment of that many samples of the whole utterance, normalised over the
  whole utterance first, zero-padded when the utterance is shorter (VPC 2026's fine-tuning
  `WavLMFeatureExtractor`); its start is a pure function of (seed, epoch, step) too.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from pipeline.asv.audio_cache import INT16_SCALE
from pipeline.core.schemas import Training, check_of, require

LAYER_NORM_EPS = 1e-5  # torch.nn.functional.layer_norm's, which VPC applies to the waveform


class CropPlan:
    """Which crops make up each batch: `plan.batch(epoch, step) -> (utterance indices, starts)`."""

    def __init__(self, lengths: np.ndarray, crop_samples: int, batch_size: int, seed: int,
                 examples_per_epoch: str = "chunks"):
        require(check_of(Training, "examples_per_epoch"), examples_per_epoch, "attacker.training.examples_per_epoch")
        require(check_of(Training, "batch_size"), batch_size, "attacker.training.batch_size")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.crop_samples = int(crop_samples)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        repeats = (np.maximum(1, self.lengths // self.crop_samples) if examples_per_epoch == "chunks"
                   else np.ones(len(self.lengths), dtype=np.int64))
        self.examples = np.repeat(np.arange(len(self.lengths)), repeats)
        self.steps_per_epoch = max(1, len(self.examples) // self.batch_size)
        self.crops_per_step = min(self.batch_size, len(self.examples))  # the global batch every step has
        self._order: tuple[int, np.ndarray] | None = None  # the last epoch's shuffle, reused by its steps

    def order(self, epoch: int) -> np.ndarray:
        """The shuffled example indices of `epoch`."""
        if self._order is None or self._order[0] != epoch:
            self._order = (epoch, np.random.default_rng([self.seed, epoch]).permutation(len(self.examples)))
        return self._order[1]

    def batch(self, epoch: int, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Utterance indices and crop start samples of batch `step` of `epoch`."""
        if not 0 <= step < self.steps_per_epoch:
            raise IndexError(f"step {step} outside an epoch of {self.steps_per_epoch} steps")
        utterances = self.examples[self.order(epoch)[step * self.batch_size:(step + 1) * self.batch_size]]
        lengths = self.lengths[utterances]
        span = np.where(lengths >= self.crop_samples, lengths - self.crop_samples + 1, lengths)
        starts = np.random.default_rng([self.seed, epoch, step]).integers(0, span)
        return utterances, starts

    def context_starts(self, epoch: int, step: int, utterances: np.ndarray, context_samples: int) -> np.ndarray:
        """Start samples of the contexts of batch `step` of `epoch` (0 where the utterance is
        not longer than the context), uniform as VPC's `_crop_or_pad`."""
        span = np.maximum(self.lengths[utterances] - context_samples + 1, 1)
        return np.random.default_rng([self.seed, epoch, step, 1]).integers(0, span)


def take_crops(audio: np.ndarray, offsets: np.ndarray, utterances: np.ndarray, starts: np.ndarray,
               crop_samples: int) -> np.ndarray:
    """(B, crop_samples) int16 crops; short utterances wrap around (see module doc)."""
    crops = np.empty((len(utterances), crop_samples), dtype=np.int16)
    for row, (utt, start) in enumerate(zip(utterances, starts)):
        begin, end = offsets[utt], offsets[utt + 1]
        if end - begin >= crop_samples:
            crops[row] = audio[begin + start:begin + start + crop_samples]
        else:
            crops[row] = audio[begin:end][(start + np.arange(crop_samples)) % (end - begin)]
    return crops


def take_context(audio: np.ndarray, offsets: np.ndarray, utterances: np.ndarray, starts: np.ndarray,
                 context_samples: int, normalize: bool) -> np.ndarray:
    """(B, context_samples) float32 contexts (see the module doc): each utterance read as
    float32 in [-1, 1], normalised over all of it when `normalize` (torch's `layer_norm`,
    eps 1e-5), cut at `starts` or zero-padded after it."""
    contexts = np.zeros((len(utterances), context_samples), dtype=np.float32)
    for row, (utt, start) in enumerate(zip(utterances, starts)):
        whole = np.asarray(audio[offsets[utt]:offsets[utt + 1]], dtype=np.float32) / INT16_SCALE
        if normalize:
            whole = (whole - whole.mean(dtype=np.float64)) / np.sqrt(whole.var(dtype=np.float64) + LAYER_NORM_EPS)
        segment = whole[start:start + context_samples]
        contexts[row, :len(segment)] = segment
    return contexts


class CropBatches(Dataset):
    """The batches of one epoch as a map-style dataset: item `step` -> (int16 crops, labels),
    plus their float32 contexts when `context` is (context_samples, normalize).

    Meant for `DataLoader(batch_size=None, sampler=range(first_step, len(dataset)))`. The
    audio is memory-mapped lazily in each worker process (the dataset pickles without it).
    `rows` takes one rank's share of every batch (all of it by default).
    """

    def __init__(self, cache_folder: str | Path, offsets: np.ndarray, labels: np.ndarray, plan: CropPlan, epoch: int,
                 rows: slice = slice(None), context: tuple[int, bool] | None = None):
        self.context = context
        self.audio_path = Path(cache_folder) / "audio.npy"
        self.offsets = offsets
        self.labels = labels
        self.plan = plan
        self.epoch = epoch
        self.rows = rows
        self._audio = None

    def __len__(self) -> int:
        return self.plan.steps_per_epoch

    def __getitem__(self, step: int) -> tuple[torch.Tensor, ...]:
        if self._audio is None:
            self._audio = np.load(self.audio_path, mmap_mode="r")
        utterances, starts = self.plan.batch(self.epoch, step)
        batch = (torch.from_numpy(take_crops(self._audio, self.offsets, utterances[self.rows], starts[self.rows],
                                             self.plan.crop_samples)),
                 torch.from_numpy(self.labels[utterances[self.rows]]))
        if self.context is None:
            return batch
        samples, normalize = self.context
        context_starts = self.plan.context_starts(self.epoch, step, utterances, samples)[self.rows]
        contexts = take_context(self._audio, self.offsets, utterances[self.rows], context_starts, samples, normalize)
        return (*batch, torch.from_numpy(contexts))

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_audio": None}
