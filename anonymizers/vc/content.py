"""Content features on the 10 ms frame grid, behind an information bottleneck.

- `VQContentEncoder` (the default, trains offline): per-utterance normalised log-mel frames,
  a small convolution stack, and a vector-quantisation bottleneck (VPC B5/B6 style) that
  keeps what the codebook can say about the phone and drops most of the speaker.
- `SSLContentEncoder`: a frozen self-supervised model (any torchaudio `Wav2Vec2Model`:
  `hubert_base`, `wav2vec2_base`, ...) with weights from a path, one transformer layer's
  output, a trained projection and an optional VQ bottleneck.

Both return `Content(features (B, T, dim), loss, mask)` with T = ceil(N / hop_length); padded
frames are zero, so an utterance's features do not depend on what it is batched with.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
import torchaudio
from torch import nn

from pipeline.runtime.checkpoint import load_checkpoint, load_state_checked
from pipeline.signal.f0 import frame_mask, num_frames


@dataclass
class Content:
    features: torch.Tensor  # (B, T, dim), zero on padded frames
    loss: torch.Tensor      # bottleneck loss (commitment), 0-d
    mask: torch.Tensor      # (B, T) valid frames


class LogMel(nn.Module):
    """(B, N) waveforms -> (B, ceil(N / hop), n_mels) natural-log mel magnitudes, frame t
    centred on sample t * hop (zeros beyond both ends)."""

    def __init__(self, sample_rate: int = 16000, n_fft: int = 1024, win_length: int = 640, hop_length: int = 160,
                 n_mels: int = 80, f_min: float = 0.0, f_max: float | None = None):
        super().__init__()
        self.hop_length = int(hop_length)
        self.spectrogram = torchaudio.transforms.MelSpectrogram(
            sample_rate=sample_rate, n_fft=n_fft, win_length=win_length, hop_length=hop_length, f_min=f_min,
            f_max=f_max, n_mels=n_mels, power=1.0, center=True, pad_mode="constant", norm="slaney",
            mel_scale="slaney")

    def forward(self, waves: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=waves.device.type, enabled=False):
            mel = self.spectrogram(waves.float())
        total = int(num_frames(waves.shape[-1], self.hop_length))
        return mel[..., :total].clamp_min(1e-5).log().transpose(1, 2)


def masked_normalise(feats: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-utterance mean and variance normalisation over valid frames; padded frames 0."""
    weights = mask.unsqueeze(-1).to(feats.dtype)
    count = weights.sum(1, keepdim=True).clamp_min(1)
    mean = (feats * weights).sum(1, keepdim=True) / count
    variance = ((feats - mean).pow(2) * weights).sum(1, keepdim=True) / count
    return (feats - mean) / variance.add(1e-5).sqrt() * weights


class VectorQuantizer(nn.Module):
    """Nearest-codeword quantisation with EMA codebook updates, straight-through gradients,
    a commitment loss, and restarts of codewords left unused (from random batch frames).

    >>> vq = VectorQuantizer(codes=8, dim=4)
    >>> out, loss, index = vq(torch.randn(2, 5, 4), torch.ones(2, 5, dtype=torch.bool))
    >>> out.shape, index.shape
    (torch.Size([2, 5, 4]), torch.Size([2, 5]))
    """

    def __init__(self, codes: int = 64, dim: int = 64, decay: float = 0.99, commitment: float = 0.25,
                 restart_threshold: float = 0.01):
        super().__init__()
        self.decay, self.commitment, self.restart_threshold = float(decay), float(commitment), float(restart_threshold)
        codebook = torch.randn(codes, dim) / dim ** 0.5
        self.register_buffer("codebook", codebook)
        self.register_buffer("cluster_size", torch.ones(codes))
        self.register_buffer("code_sum", codebook.clone())

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, T, dim) + (B, T) mask -> (quantised (B, T, dim), commitment loss, indices (B, T))."""
        flat = x.float().reshape(-1, x.shape[-1])
        distances = (flat.pow(2).sum(1, keepdim=True) - 2 * flat @ self.codebook.T
                     + self.codebook.pow(2).sum(1)[None])
        index = distances.argmin(1)
        quantised = self.codebook[index].view_as(x).to(x.dtype)
        valid = mask.reshape(-1)
        if self.training:
            self._update(flat[valid], index[valid])
        weights = mask.unsqueeze(-1).to(x.dtype)
        loss = ((x - quantised.detach()).pow(2) * weights).sum() / (weights.sum() * x.shape[-1]).clamp_min(1)
        out = x + (quantised - x).detach()
        return out * weights, self.commitment * loss, index.view(mask.shape)

    @torch.no_grad()
    def _update(self, flat: torch.Tensor, index: torch.Tensor) -> None:
        if flat.shape[0] == 0:
            return
        onehot = F.one_hot(index, self.codebook.shape[0]).to(flat.dtype)
        self.cluster_size.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
        self.code_sum.mul_(self.decay).add_(onehot.T @ flat, alpha=1 - self.decay)
        total = self.cluster_size.sum()
        smoothed = (self.cluster_size + 1e-5) / (total + self.codebook.shape[0] * 1e-5) * total
        self.codebook.copy_(self.code_sum / smoothed[:, None])
        dead = self.cluster_size < self.restart_threshold
        if dead.any():
            picks = flat[torch.randint(flat.shape[0], (int(dead.sum()),), device=flat.device)]
            self.codebook[dead] = picks
            self.code_sum[dead] = picks
            self.cluster_size[dead] = 1.0


class MaskedConvStack(nn.Module):
    """Residual 1-D convolutions over frames; padded frames are zeroed before every layer."""

    def __init__(self, in_channels: int, channels: int, layers: int, kernel_size: int = 5):
        super().__init__()
        self.input = nn.Conv1d(in_channels, channels, kernel_size, padding=kernel_size // 2)
        self.layers = nn.ModuleList(nn.Conv1d(channels, channels, kernel_size, padding=kernel_size // 2)
                                    for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(channels) for _ in range(layers))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, in) -> (B, T, channels)."""
        weights = mask.unsqueeze(1).to(x.dtype)
        h = self.input(x.transpose(1, 2) * weights)
        for conv, norm in zip(self.layers, self.norms):
            step = norm(F.gelu(conv(h * weights)).transpose(1, 2)).transpose(1, 2)
            h = h + step
        return (h * weights).transpose(1, 2)


class VQContentEncoder(nn.Module):
    """Log-mel -> convolutions -> linear -> VQ codebook (trained with the vocoder)."""

    def __init__(self, *, sample_rate: int = 16000, hop_length: int = 160, n_mels: int = 80, channels: int = 128,
                 layers: int = 3, kernel_size: int = 5, dim: int = 64, codes: int = 64, commitment: float = 0.25,
                 decay: float = 0.99):
        super().__init__()
        self.hop_length = int(hop_length)
        self.dim = int(dim)
        self.mel = LogMel(sample_rate, hop_length=hop_length, n_mels=n_mels)
        self.convs = MaskedConvStack(n_mels, channels, layers, kernel_size)
        self.project = nn.Linear(channels, dim)
        self.quantizer = VectorQuantizer(codes, dim, decay=decay, commitment=commitment)

    def forward(self, waves: torch.Tensor, num_samples: torch.Tensor) -> Content:
        mel = self.mel(waves)
        mask = frame_mask(num_samples, self.hop_length, mel.shape[1])
        hidden = self.convs(masked_normalise(mel, mask), mask)
        quantised, loss, _ = self.quantizer(self.project(hidden), mask)
        return Content(quantised, loss, mask)


class SSLContentEncoder(nn.Module):
    """A frozen torchaudio `Wav2Vec2Model` (HuBERT / wav2vec 2.0 architecture) -> layer
    `layer` -> LayerNorm -> trained linear projection -> optional VQ, resampled from the
    model's frame rate to the 10 ms grid (nearest frame centre).

    Args:
        ssl_model: the architecture, e.g. `torchaudio.models.hubert_base()` (from config:
            `{_target_: torchaudio.models.hubert_base}`).
        weights: a weights-only state dict of that architecture (`.pt`), e.g. converted once
            with `torchaudio.models.wav2vec2.utils.import_fairseq_model`; None when the
            weights come with a trained voice-conversion checkpoint.
        codes: VQ codebook size; None for no quantisation.
        ssl_hop, ssl_window: the model's frame shift and first-frame span in samples.
    """

    def __init__(self, *, ssl_model: nn.Module, weights: str | None = None, layer: int = 6, dim: int = 64,
                 codes: int | None = 64, commitment: float = 0.25, decay: float = 0.99, hop_length: int = 160,
                 ssl_hop: int = 320, ssl_window: int = 400):
        super().__init__()
        self.ssl = ssl_model
        if weights is not None:
            load_state_checked(self.ssl, load_checkpoint(weights), Path(weights), "SSL model")
        self.ssl.requires_grad_(False)
        self.layer, self.dim, self.hop_length = int(layer), int(dim), int(hop_length)
        self.ssl_hop, self.ssl_window = int(ssl_hop), int(ssl_window)
        width = self.ssl.encoder.transformer.layers[0].final_layer_norm.normalized_shape[0]
        self.norm = nn.LayerNorm(width)
        self.project = nn.Linear(width, dim)
        self.quantizer = VectorQuantizer(codes, dim, decay=decay, commitment=commitment) if codes else None

    def train(self, mode: bool = True):
        super().train(mode)
        self.ssl.eval()  # frozen: dropout and layer drop stay off
        return self

    def _layer_output(self, waves: torch.Tensor, num_samples: torch.Tensor) -> list[torch.Tensor]:
        """One (T_ssl, width) tensor per utterance; equal lengths run as a batch, ragged ones
        one by one (the feature extractor's group norm would see the padding)."""
        with torch.no_grad():
            if bool((num_samples == waves.shape[1]).all()):
                outputs, _ = self.ssl.extract_features(waves, num_layers=self.layer)
                return list(outputs[-1])
            results = []
            for wave, count in zip(waves, num_samples.tolist()):
                outputs, _ = self.ssl.extract_features(wave[None, :count], num_layers=self.layer)
                results.append(outputs[-1][0])
            return results

    def forward(self, waves: torch.Tensor, num_samples: torch.Tensor) -> Content:
        total = int(num_frames(waves.shape[1], self.hop_length))
        mask = frame_mask(num_samples, self.hop_length, total)
        centres = torch.arange(total, device=waves.device) * self.hop_length
        rows = []
        for features in self._layer_output(waves, num_samples):
            index = torch.round((centres - self.ssl_window / 2) / self.ssl_hop).long().clamp(0, features.shape[0] - 1)
            rows.append(features[index])
        hidden = self.project(self.norm(torch.stack(rows)))
        if self.quantizer is None:
            return Content(hidden * mask.unsqueeze(-1), hidden.new_zeros(()), mask)
        quantised, loss, _ = self.quantizer(hidden, mask)
        return Content(quantised, loss, mask)
