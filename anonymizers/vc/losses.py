"""Training losses of the vocoder: multi-resolution STFT, mel L1, and (optional) HiFi-GAN
adversarial training with multi-period and multi-scale discriminators (least-squares GAN
losses and feature matching, Kong et al. 2020)."""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm, weight_norm

from anonymizers.vc.content import LogMel

LEAKY_SLOPE = 0.1


class MultiResolutionSTFTLoss(nn.Module):
    """Spectral convergence + log-magnitude L1, averaged over STFT resolutions
    (Yamamoto et al. 2020). `resolutions`: (n_fft, hop, window) triples."""

    def __init__(self, resolutions: Sequence[Sequence[int]] = ((512, 128, 512), (1024, 256, 1024), (256, 64, 256))):
        super().__init__()
        self.resolutions = [tuple(int(v) for v in r) for r in resolutions]
        for n_fft, _, window in self.resolutions:
            self.register_buffer(f"window_{n_fft}_{window}", torch.hann_window(window), persistent=False)

    def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        total = output.new_zeros(())
        for n_fft, hop, window in self.resolutions:
            win = getattr(self, f"window_{n_fft}_{window}")
            spectra = [torch.stft(x.float(), n_fft, hop, window, win, return_complex=True).abs().clamp_min(1e-7)
                       for x in (output, target)]
            convergence = torch.linalg.norm(spectra[1] - spectra[0]) / torch.linalg.norm(spectra[1]).clamp_min(1e-7)
            log_magnitude = F.l1_loss(spectra[0].log(), spectra[1].log())
            total = total + convergence + log_magnitude
        return total / len(self.resolutions)


class MelLoss(nn.Module):
    """L1 between log-mel spectrograms (HiFi-GAN's reconstruction loss)."""

    def __init__(self, sample_rate: int = 16000, n_fft: int = 1024, hop_length: int = 160, n_mels: int = 80):
        super().__init__()
        self.mel = LogMel(sample_rate, n_fft=n_fft, win_length=n_fft, hop_length=hop_length, n_mels=n_mels)

    def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.l1_loss(self.mel(output), self.mel(target))


class PeriodDiscriminator(nn.Module):
    """HiFi-GAN MPD branch: the waveform folded into (T / period, period) and 2-D convolutions."""

    def __init__(self, period: int, channels: Sequence[int] = (32, 64, 128, 128)):
        super().__init__()
        self.period = period
        widths = [1, *channels]
        self.convs = nn.ModuleList(
            weight_norm(nn.Conv2d(widths[i], widths[i + 1], (5, 1), (3 if i < len(channels) - 1 else 1, 1), (2, 0)))
            for i in range(len(channels)))
        self.post = weight_norm(nn.Conv2d(widths[-1], 1, (3, 1), 1, (1, 0)))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        pad = (-x.shape[-1]) % self.period
        x = F.pad(x, (0, pad), mode="reflect" if pad < x.shape[-1] else "constant")
        return _run_branch(x.view(x.shape[0], 1, -1, self.period), self.convs, self.post)


class ScaleDiscriminator(nn.Module):
    """HiFi-GAN MSD branch: grouped strided 1-D convolutions on a (pooled) waveform."""

    def __init__(self, channels: Sequence[int] = (16, 64, 128, 128), spectral: bool = False):
        super().__init__()
        norm = spectral_norm if spectral else weight_norm
        widths = [1, *channels]
        self.convs = nn.ModuleList([norm(nn.Conv1d(1, channels[0], 15, 1, padding=7))])
        for i in range(1, len(channels)):
            groups = max(1, min(widths[i], widths[i + 1]) // 16)
            self.convs.append(norm(nn.Conv1d(widths[i], widths[i + 1], 41, 4, groups=groups, padding=20)))
        self.post = norm(nn.Conv1d(widths[-1], 1, 3, 1, padding=1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        return _run_branch(x.unsqueeze(1), self.convs, self.post)


def _run_branch(x: torch.Tensor, convs: nn.ModuleList, post: nn.Module) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A discriminator branch: leaky-ReLU convolutions then `post`; (logits, every layer's output)."""
    features = []
    for conv in convs:
        x = F.leaky_relu(conv(x), LEAKY_SLOPE)
        features.append(x)
    x = post(x)
    features.append(x)
    return x.flatten(1), features


class Discriminators(nn.Module):
    """MPD (one branch per period) + MSD (one branch per scale: raw, /2, /4 pooled)."""

    def __init__(self, periods: Sequence[int] = (2, 3, 5, 7, 11), scales: int = 3,
                 period_channels: Sequence[int] = (32, 64, 128, 128), scale_channels: Sequence[int] = (16, 64, 128, 128)):
        super().__init__()
        self.periods = nn.ModuleList(PeriodDiscriminator(int(p), period_channels) for p in periods)
        self.scales = nn.ModuleList(ScaleDiscriminator(scale_channels, spectral=(i == 0)) for i in range(int(scales)))

    def forward(self, x: torch.Tensor) -> list[tuple[torch.Tensor, list[torch.Tensor]]]:
        outputs = [branch(x) for branch in self.periods]
        for i, branch in enumerate(self.scales):
            outputs.append(branch(x if i == 0 else F.avg_pool1d(x.unsqueeze(1), 2 ** i, 2 ** i, padding=0).squeeze(1)))
        return outputs


def discriminator_loss(real: list, fake: list) -> torch.Tensor:
    """Least-squares GAN: real -> 1, fake -> 0, summed over branches."""
    return sum(torch.mean((1 - r) ** 2) + torch.mean(f ** 2) for (r, _), (f, _) in zip(real, fake))


def generator_losses(real: list, fake: list) -> tuple[torch.Tensor, torch.Tensor]:
    """(adversarial loss fake -> 1, feature-matching L1 against the real features)."""
    adversarial = sum(torch.mean((1 - f) ** 2) for f, _ in fake)
    matching = sum(F.l1_loss(ff, rf.detach()) for (_, rfs), (_, ffs) in zip(real, fake) for rf, ff in zip(rfs, ffs))
    return adversarial, matching
