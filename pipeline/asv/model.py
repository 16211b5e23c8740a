"""The attacker's speaker encoder (fbank + ECAPA-TDNN) and its AAM-softmax training head.

The encoder takes raw 16 kHz waveforms, padded into a batch, with SpeechBrain-style relative
lengths (`wav_lens[i]` = samples of utterance i / padded length), and returns one embedding
per utterance. Padding never changes an embedding beyond float tolerance:

- fbank frames and the per-utterance mean normalisation only use each utterance's samples;
- a batch of equal lengths goes through SpeechBrain's `ECAPA_TDNN.forward` unchanged;
- a ragged batch goes through the same layers, but before every convolution wider than one
  frame each utterance's padding is overwritten with the reflection of its own last frames,
  which is exactly what the convolution's reflect padding sees for that utterance alone; the
  squeeze-excitation and attentive-pooling statistics are masked to the valid frames.

>>> encoder = SpeakerEncoder(channels=[16, 16, 48], kernel_sizes=[5, 3, 1], dilations=[1, 2, 1],
...                          attention_channels=8, se_channels=8, embedding_dim=12)
>>> encoder(torch.zeros(2, 8000), torch.tensor([1.0, 0.5])).shape
torch.Size([2, 12])
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.nn.functional as F
from speechbrain.lobes.models.ECAPA_TDNN import (
    ECAPA_TDNN,
    Res2NetBlock,
    SERes2NetBlock,
    TDNNBlock,
)
from speechbrain.nnet.losses import AdditiveAngularMargin, LogSoftmaxWrapper
from torch import nn

from pipeline.asv.encoder import ENCODER_SETTINGS, build_frontend, frontend_spec
from pipeline.core.checks import Checked
from pipeline.core.errors import VpevalError

KALDI_FRONTEND = "pipeline.asv.features.KaldiFbank"
SPEECHBRAIN_FRONTEND = "pipeline.asv.speechbrain_fbank.SpeechBrainFbank"

class SpeakerEncoder(nn.Module, Checked):
    """Waveforms -> speaker embeddings: fbank front end, mean normalisation, ECAPA-TDNN.

    `frontend` is the fbank's `_target_` node (`_partial_`; or its class path), called as
    `cls(sample_rate, n_mels)`: the Kaldi one (`KALDI_FRONTEND`) or SpeechBrain's `Fbank` as
    VPC 2024 uses it (`SPEECHBRAIN_FRONTEND`). One implementation of `encoder.Encoder`.
    """

    settings_checks = ENCODER_SETTINGS

    def __init__(self, *, sample_rate: int = 16000, n_mels: int = 80, frontend: Any = KALDI_FRONTEND,
                 channels: Sequence[int] = (512, 512, 512, 512, 1536),
                 kernel_sizes: Sequence[int] = (5, 3, 3, 3, 1), dilations: Sequence[int] = (1, 2, 3, 4, 1),
                 attention_channels: int = 128, res2net_scale: int = 8, se_channels: int = 128,
                 global_context: bool = True, embedding_dim: int = 192):
        super().__init__()
        channels, kernel_sizes, dilations = list(channels), list(kernel_sizes), list(dilations)
        if not len(channels) == len(kernel_sizes) == len(dilations) or len(channels) < 3:
            raise VpevalError(f"attacker.model: channels, kernel_sizes and dilations need the same length (>= 3), "
                              f"got {len(channels)}, {len(kernel_sizes)}, {len(dilations)}")
        if any(k % 2 == 0 for k in kernel_sizes):
            raise VpevalError(f"attacker.model.kernel_sizes must be odd, got {kernel_sizes}")
        if any(c % res2net_scale for c in channels[1:-1]):
            raise VpevalError(f"attacker.model.channels {channels[1:-1]} must be multiples of "
                              f"res2net_scale={res2net_scale}")
        frontend = frontend_spec(frontend)
        self.architecture = dict(
            sample_rate=int(sample_rate), n_mels=int(n_mels), frontend=frontend, channels=channels,
            kernel_sizes=kernel_sizes, dilations=dilations, attention_channels=int(attention_channels), res2net_scale=int(res2net_scale),
            se_channels=int(se_channels), global_context=bool(global_context), embedding_dim=int(embedding_dim))
        self.sample_rate = int(sample_rate)
        self.embedding_dim = int(embedding_dim)
        self.fbank = build_frontend(frontend, self.sample_rate, int(n_mels))
        self.min_samples, self.frame_hop = self.fbank.window_size, self.fbank.window_shift
        self.ecapa = ECAPA_TDNN(
            n_mels, lin_neurons=embedding_dim, channels=channels, kernel_sizes=kernel_sizes, dilations=dilations,
            attention_channels=attention_channels, res2net_scale=res2net_scale, se_channels=se_channels,
            global_context=global_context, groups=[1] * len(channels))
        self.max_conv_padding = max(d * (k - 1) // 2 for k, d in zip(kernel_sizes, dilations))

    def forward(self, wavs: torch.Tensor, wav_lens: torch.Tensor | None = None) -> torch.Tensor:
        """(B, N) waveforms in [-1, 1], optional (B,) relative lengths -> (B, embedding_dim)."""
        padded = wavs.shape[1]
        if wav_lens is None:  # equal lengths (training crops): no per-utterance checks, no host sync
            num_samples = torch.full((wavs.shape[0],), padded, dtype=torch.long, device=wavs.device)
        else:
            num_samples = torch.round(wav_lens.to(wavs.device, torch.float64) * padded).long()
        if padded < self.fbank.window_size or (
                wav_lens is not None and bool((num_samples < self.fbank.window_size).any())):
            raise ValueError(f"every utterance needs at least {self.fbank.window_size} samples (one fbank frame)")
        feats, num_frames = self.fbank(wavs, num_samples)
        feats = normalise_mean(feats, num_frames)
        if wav_lens is None and feats.shape[1] > self.max_conv_padding:
            return self.ecapa(feats).squeeze(1)
        return self.embed_features(feats, num_frames)

    def embed_samples(self, wavs: torch.Tensor, num_samples: torch.Tensor) -> torch.Tensor:
        """(B, N) waveforms + (B,) sample counts, each at least one fbank window (not checked
        here: no host sync, for extraction, whose lengths are checked on the host) -> embeddings."""
        feats, num_frames = self.fbank(wavs, num_samples)
        return self._ragged_forward(normalise_mean(feats, num_frames), num_frames)

    def embed_features(self, feats: torch.Tensor, num_frames: torch.Tensor) -> torch.Tensor:
        """(B, F, n_mels) normalised features + (B,) frame counts -> (B, embedding_dim)."""
        if bool((num_frames == feats.shape[1]).all()) and feats.shape[1] > self.max_conv_padding:
            return self.ecapa(feats).squeeze(1)
        return self._ragged_forward(feats, num_frames)

    def _ragged_forward(self, feats: torch.Tensor, num_frames: torch.Tensor) -> torch.Tensor:
        """ECAPA_TDNN.forward with per-utterance reflect padding and masked statistics."""
        ecapa = self.ecapa
        x = F.pad(feats.transpose(1, 2), (0, self.max_conv_padding))
        total = x.shape[2]
        fill = ReflectFill(num_frames, total)
        # Half a frame below the count, so that SpeechBrain's `arange < lengths * L` masks are
        # exact whatever the float rounding of lengths * L.
        rel_lens = (num_frames.to(feats.dtype) - 0.5) / total
        outputs = []
        for block in ecapa.blocks:
            if isinstance(block, TDNNBlock):
                x = block(fill(x))
            else:
                x = se_res2net(block, x, rel_lens, fill)
            outputs.append(x)
        x = ecapa.mfa(fill(torch.cat(outputs[1:], dim=1)))
        x = ecapa.asp_bn(ecapa.asp(x, lengths=rel_lens))
        return ecapa.fc(x).squeeze(2)


def normalise_mean(feats: torch.Tensor, num_frames: torch.Tensor) -> torch.Tensor:
    """Subtract each utterance's mean over its valid frames; padded frames become 0."""
    valid = (torch.arange(feats.shape[1], device=feats.device)[None, :] < num_frames[:, None]).unsqueeze(2)
    valid = valid.to(feats.dtype)
    mean = (feats * valid).sum(dim=1, keepdim=True) / num_frames.clamp(min=1).to(feats.dtype)[:, None, None]
    return (feats - mean) * valid


class ReflectFill:
    """Overwrite each utterance's padding with the reflection of its valid frames.

    Frame t >= n of an utterance with n valid frames takes frame 2(n-1) - t (clamped to 0
    for utterances shorter than the padding), as `F.pad(mode="reflect")` would provide.
    """

    def __init__(self, num_frames: torch.Tensor, total: int):
        positions = torch.arange(total, device=num_frames.device)[None, :]
        last = (num_frames - 1)[:, None]
        self.index = torch.where(positions <= last, positions, (2 * last - positions).clamp(min=0))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 2, self.index[:, None, :].expand(-1, x.shape[1], -1))


def se_res2net(block: SERes2NetBlock, x: torch.Tensor, rel_lens: torch.Tensor, fill: ReflectFill) -> torch.Tensor:
    """SERes2NetBlock.forward with reflect-filled inputs to its dilated convolutions."""
    residual = block.shortcut(x) if block.shortcut else x
    x = block.tdnn2(_res2net(block.res2net_block, block.tdnn1(x), fill))
    return block.se_block(x, rel_lens) + residual


def _res2net(block: Res2NetBlock, x: torch.Tensor, fill: ReflectFill) -> torch.Tensor:
    """Res2NetBlock.forward with reflect-filled inputs."""
    outputs = []
    for i, chunk in enumerate(torch.chunk(x, block.scale, dim=1)):
        if i == 0:
            y = chunk
        elif i == 1:
            y = block.blocks[0](fill(chunk))
        else:
            y = block.blocks[i - 1](fill(chunk + y))
        outputs.append(y)
    return torch.cat(outputs, dim=1)


class AAMSoftmaxHead(nn.Module):
    """Cosine classifier over the training speakers with the additive angular margin loss.

    SpeechBrain's `AdditiveAngularMargin` (cos(θ + m) for the target, scaled by s) inside its
    `LogSoftmaxWrapper` (mean cross-entropy), computed in float32 even under autocast.
    """

    def __init__(self, embedding_dim: int, n_speakers: int, *, margin: float = 0.2, scale: float = 30.0):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_speakers, embedding_dim))
        nn.init.xavier_uniform_(self.weight)
        self.loss = LogSoftmaxWrapper(AdditiveAngularMargin(margin=margin, scale=scale))

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (mean loss, (B, n_speakers) cosines without margin)."""
        with torch.autocast(device_type=embeddings.device.type, enabled=False):
            cosines = F.linear(F.normalize(embeddings.float()), F.normalize(self.weight.float()))
            loss = self.loss(cosines.unsqueeze(1), labels.unsqueeze(1))
        return loss, cosines
