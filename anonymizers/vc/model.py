"""The speaker-embedding voice converter: content + F0 + speaker embedding -> waveform.

`VoiceConverter.analyse` extracts what is kept of an utterance (bottlenecked content, F0 and
voicing on the 10 ms grid); `synthesise` renders it with any speaker embedding and F0 track
through the HiFi-GAN-NSF vocoder. Training reconstructs an utterance from its own analysis
and its own embedding; anonymisation swaps in a pseudo-speaker's embedding and F0 statistics.

A trained model lives in a folder (see `save_voice_converter`)::

    model.json          {"format": "vpeval-vc-model-1", "model": <builder spec>, ...}
    model.pt            weights-only state dict
    speaker_encoder/    the ECAPA-TDNN attacker folder (model.json, model.pt) it was trained with
    pool.pt             target-speaker pool extracted by the recipe (see `anonymizers.vc.pool`)
"""
from __future__ import annotations

import inspect
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from anonymizers.vc.checkpoints import WEIGHTS, load_module, save_module
from anonymizers.vc.content import Content
from anonymizers.vc.generator import FrameDecoder, HiFiGANNSF, SineExcitation
from pipeline.asv.embed import load_encoder
from pipeline.asv.model import SpeakerEncoder
from pipeline.core.errors import VpevalError
from pipeline.core.fileio import atomic_path
from pipeline.data.manifest import file_digest
from pipeline.signal.f0 import YinPitch, num_frames

MODEL_FORMAT = "vpeval-vc-model-1"
SPEAKER_ENCODER = "speaker_encoder"


@dataclass
class Analysis:
    """What an utterance keeps through conversion, on the frame grid."""

    content: Content
    f0: torch.Tensor      # (B, T) Hz, 0 where unvoiced
    voiced: torch.Tensor  # (B, T) bool
    frames: torch.Tensor  # (B,) valid frames


class VoiceConverter(nn.Module):
    """Content encoder + YIN F0 + FrameDecoder + HiFi-GAN-NSF generator.

    Args:
        content: a content encoder module (`VQContentEncoder` or `SSLContentEncoder`).
        speaker_dim: dimension of the speaker embeddings it is conditioned on.
        pitch: `YinPitch` options; decoder: `FrameDecoder` options; generator: `HiFiGANNSF`
            options; excitation: `SineExcitation` options.
    """

    def __init__(self, *, content: nn.Module, speaker_dim: int, sample_rate: int = 16000, hop_length: int = 160,
                 pitch: Mapping[str, Any] | None = None, decoder: Mapping[str, Any] | None = None,
                 generator: Mapping[str, Any] | None = None, excitation: Mapping[str, Any] | None = None):
        super().__init__()
        self.sample_rate, self.hop_length, self.speaker_dim = int(sample_rate), int(hop_length), int(speaker_dim)
        if getattr(content, "hop_length", hop_length) != hop_length:
            raise ValueError(f"content encoder hop_length {content.hop_length} != model hop_length {hop_length}")
        self.content = content
        self.pitch = YinPitch(sample_rate=sample_rate, hop_length=hop_length, **dict(pitch or {}))
        self.decoder = FrameDecoder(content_dim=content.dim, speaker_dim=speaker_dim, **dict(decoder or {}))
        self.generator = HiFiGANNSF(in_channels=self.decoder.channels, **dict(generator or {}))
        if self.generator.hop_length != hop_length:
            raise ValueError(f"generator upsample_rates multiply to {self.generator.hop_length}, not hop_length={hop_length}")
        self.excitation = SineExcitation(sample_rate, **dict(excitation or {}))

    def analyse(self, waves: torch.Tensor, num_samples: torch.Tensor) -> Analysis:
        """(B, N) waveforms + (B,) sample counts -> content, F0 and voicing."""
        content = self.content(waves, num_samples)
        with torch.no_grad():
            f0, voiced = self.pitch(waves, num_samples)
        return Analysis(content, f0, voiced, num_frames(num_samples, self.hop_length))

    def synthesise(self, content: torch.Tensor, f0: torch.Tensor, voiced: torch.Tensor, speaker: torch.Tensor,
                   frames: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        """content (B, T, C), f0/voiced (B, T), speaker (B, D), frames (B,) -> (B, T * hop) waves.
        `noise` (B, T * hop) standard normal drives the unvoiced excitation (drawn when None)."""
        total = content.shape[1]
        mask = torch.arange(total, device=content.device)[None, :] < frames[:, None]
        speaker = F.normalize(speaker.float(), dim=-1).to(content.dtype)
        conditioning = self.decoder(content, f0, voiced & mask, speaker, mask)
        f0_samples = torch.where(voiced & mask, f0, torch.zeros_like(f0)).repeat_interleave(self.hop_length, dim=1)
        if noise is None:
            noise = torch.randn_like(f0_samples)
        excitation = self.excitation(f0_samples, noise).to(conditioning.dtype)
        return self.generator(conditioning, excitation, frames)

    def forward(self, waves: torch.Tensor, num_samples: torch.Tensor, speaker: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reconstruction for training: (B, T * hop) output and the content bottleneck loss."""
        analysis = self.analyse(waves, num_samples)
        output = self.synthesise(analysis.content.features, analysis.f0, analysis.voiced, speaker, analysis.frames)
        return output, analysis.content.loss


def save_voice_converter(folder: str | Path, model: VoiceConverter, spec: Mapping[str, Any],
                         speaker_encoder_dir: str | Path, info: Mapping[str, Any] | None = None) -> Path:
    """Write a model folder: the speaker encoder copied in, weights, then model.json.

    A content encoder's `weights` path (pretrained SSL weights) is dropped from the spec:
    those weights are part of model.pt, so the folder loads without the original file."""
    folder = Path(folder)
    source = Path(speaker_encoder_dir)
    for name in ("model.json", WEIGHTS):
        with atomic_path(folder / SPEAKER_ENCODER / name) as tmp:
            shutil.copyfile(source / name, tmp)
    spec = dict(spec)
    if isinstance(spec.get("content"), Mapping) and spec["content"].get("weights") is not None:
        spec["content"] = {**spec["content"], "weights": None}
    return save_module(folder, model, spec, {
        "format": MODEL_FORMAT, "speaker_encoder": SPEAKER_ENCODER,
        "speaker_encoder_sha256": file_digest(folder / SPEAKER_ENCODER / WEIGHTS), **dict(info or {})})


def model_pitch(model: Mapping[str, Any]) -> YinPitch:
    """The F0 tracker of the voice converter that `model` (model.json's `model`) builds, without
    building it (what a target pool's key depends on)."""
    defaults = inspect.signature(VoiceConverter).parameters
    return YinPitch(sample_rate=model.get("sample_rate", defaults["sample_rate"].default),
                    hop_length=model.get("hop_length", defaults["hop_length"].default),
                    **dict(model.get("pitch") or {}))


def load_voice_converter(folder: str | Path, device: torch.device | str) -> tuple[VoiceConverter, SpeakerEncoder, dict]:
    """(model, its speaker encoder, model.json) from a model folder, in eval mode on `device`."""
    folder = Path(folder)
    model, spec = load_module(folder, MODEL_FORMAT, VoiceConverter, "voice-conversion model", device)
    encoder_dir = folder / spec.get("speaker_encoder", SPEAKER_ENCODER)
    encoder_weights = encoder_dir / WEIGHTS
    if not encoder_weights.is_file():
        raise VpevalError(f"{encoder_dir}: the model's speaker encoder is missing (model.json, model.pt)")
    if file_digest(encoder_weights) != spec.get("speaker_encoder_sha256"):
        raise VpevalError(f"{encoder_weights}: not the speaker encoder {folder} was trained with (sha256 differs)")
    encoder = load_encoder(encoder_dir, device)
    if encoder.embedding_dim != model.speaker_dim:
        raise VpevalError(f"{encoder_dir}: {encoder.embedding_dim}-d embeddings, the model expects {model.speaker_dim}")
    return model, encoder, spec
