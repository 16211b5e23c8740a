"""Waveform augmentation of training crops (`attacker.training.augment`).

A list of `_target_` nodes, built once, each a module called as `module(waveforms)` or, when
its forward takes `lengths`, `module(waveforms, lengths)` (SpeechBrain's convention: relative
lengths, all 1 for full crops), returning the waveforms or `(waveforms, lengths)`. They are
applied in order to every training batch, replacing it: VPC 2026's `wav_augment` (SpeechBrain's
`Augmenter` with `parallel_augment: False`, `concat_original: False`, `augment_prob: 1.0` and
min = max augmentations, which it clips to its two: DropFreq then DropChunk on every crop).

The random draws of batch `step` of `epoch` are a pure function of (seed, epoch, step): the
torch (CPU and the batch's CUDA device) and Python `random` generators are seeded for the
call and restored after it, so a resumed run augments every batch as an uninterrupted one,
and training's own random streams are untouched. SpeechBrain's DropFreq and DropChunk draw
on the CPU, so CPU and CUDA runs drop the same bands and chunks.
"""
from __future__ import annotations

import contextlib
import inspect
import random
from typing import Iterator, Sequence

import numpy as np
import torch

from pipeline.core.config import instantiate
from pipeline.core.errors import VpevalError

AUGMENT_STREAM = 2  # the third number of a batch's random key: the crop plan uses (seed, epoch, step)


class Augmentation:
    """`augmentation(wavs, epoch, step)`: the configured augmentations applied in order to a
    (batch, samples) float batch; the identity when the list is empty."""

    def __init__(self, nodes: Sequence, seed: int):
        self.seed = int(seed)
        self.steps = []
        for index, node in enumerate(nodes or ()):
            key = f"attacker.training.augment[{index}]"
            try:
                module = instantiate(node)
            except VpevalError as error:
                raise VpevalError(f"{key}: {error}") from None
            if not callable(module):
                raise VpevalError(f"{key}: {node.get('_target_')} builds a {type(module).__name__}, not a "
                                  "callable augmentation (waveforms[, lengths]) -> waveforms")
            takes_lengths = "lengths" in inspect.signature(getattr(module, "forward", module)).parameters
            self.steps.append((key, module, takes_lengths))

    def __bool__(self) -> bool:
        return bool(self.steps)

    def probe(self, crop_samples: int) -> None:
        """Run once on a silent batch of two crops, so that an augmentation that changes the batch
        stops before any training (the generators are restored after it: training is unchanged)."""
        self(torch.zeros(2, crop_samples), 0, 0)

    @torch.no_grad()
    def __call__(self, wavs: torch.Tensor, epoch: int, step: int) -> torch.Tensor:
        if not self.steps:
            return wavs
        lengths = torch.ones(len(wavs), device=wavs.device)
        with seeded(self.seed, epoch, step, wavs.device):
            for key, module, takes_lengths in self.steps:
                out = module(wavs, lengths) if takes_lengths else module(wavs)
                if isinstance(out, tuple):
                    out, lengths = out
                if not isinstance(out, torch.Tensor) or out.shape != wavs.shape:
                    shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                    raise VpevalError(f"{key}: turned crops of shape {tuple(wavs.shape)} into {shape}; an "
                                      "augmentation must keep every crop (same batch size and length)")
                wavs = out
        return wavs


@contextlib.contextmanager
def seeded(seed: int, epoch: int, step: int, device: torch.device) -> Iterator[None]:
    """Torch (CPU and `device`) and Python random generators seeded from (seed, epoch, step), restored after."""
    key = int(np.random.default_rng([seed, epoch, step, AUGMENT_STREAM]).integers(2**63 - 1))
    devices = [device] if device.type == "cuda" else []
    python_state = random.getstate()
    try:
        with torch.random.fork_rng(devices=devices, device_type="cuda"):
            torch.default_generator.manual_seed(key)
            for cuda in devices:
                with torch.cuda.device(cuda):
                    torch.cuda.manual_seed(key)
            random.seed(key)
            yield
    finally:
        random.setstate(python_state)
