"""Neural vocoder: a HiFi-GAN generator with neural-source-filter (NSF) excitation.

The source (Wang & Yamagishi's hn-NSF, as in VPC B1b and the HiFi-GAN-NSF vocoders) is a sum
of sine harmonics of F0 in voiced samples and Gaussian noise in unvoiced ones, merged by a
learnt linear layer and tanh. The generator (Kong et al. 2020) upsamples frame-rate
conditioning through transposed convolutions and multi-receptive-field residual blocks; at
every stage the excitation, downsampled to that stage's rate by a strided convolution, is
added. `FrameDecoder` turns content, F0 and the speaker embedding into that conditioning.

Padded frames and samples are zeroed before every layer, so an utterance's output does not
depend on what it is batched with.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

LEAKY_SLOPE = 0.1
LOG_F0_CENTRE = math.log(150.0)  # log-F0 feature = log(f0 / 150 Hz) on voiced frames, 0 elsewhere


def length_mask(lengths: torch.Tensor, total: int) -> torch.Tensor:
    """(B, total) float mask of positions below `lengths`."""
    return (torch.arange(total, device=lengths.device)[None, :] < lengths[:, None]).float()


class SineExcitation(nn.Module):
    """(B, N) sample-rate F0 (0 = unvoiced) + (B, N) standard-normal noise -> (B, 1, N) excitation."""

    def __init__(self, sample_rate: int = 16000, harmonics: int = 8, sine_amplitude: float = 0.1,
                 noise_std: float = 0.003):
        super().__init__()
        self.sample_rate, self.harmonics = int(sample_rate), int(harmonics)
        self.sine_amplitude, self.noise_std = float(sine_amplitude), float(noise_std)
        self.merge = nn.Linear(harmonics, 1)

    def forward(self, f0: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=f0.device.type, enabled=False):
            voiced = (f0 > 0).float()
            # phase in cycles, accumulated in float64 so long utterances keep their pitch
            cycles = torch.cumsum(f0.double() / self.sample_rate, dim=1)
            orders = torch.arange(1, self.harmonics + 1, device=f0.device, dtype=torch.float64)
            phase = torch.frac(cycles[..., None] * orders)
            below_nyquist = (f0[..., None] * orders.float() < self.sample_rate / 2).float()
            sines = torch.sin(2 * math.pi * phase).float() * below_nyquist * self.sine_amplitude
            noise_level = voiced * self.noise_std + (1 - voiced) * self.sine_amplitude / 3
            sources = sines * voiced[..., None] + noise.float()[..., None] * noise_level[..., None]
            return torch.tanh(self.merge(sources)).transpose(1, 2)


class ResBlock(nn.Module):
    """HiFi-GAN multi-receptive-field block: pairs of (dilated conv, conv) with residuals."""

    def __init__(self, channels: int, kernel_size: int, dilations: Sequence[int]):
        super().__init__()
        self.dilated = nn.ModuleList(
            weight_norm(nn.Conv1d(channels, channels, kernel_size, dilation=d, padding=d * (kernel_size - 1) // 2))
            for d in dilations)
        self.plain = nn.ModuleList(
            weight_norm(nn.Conv1d(channels, channels, kernel_size, padding=(kernel_size - 1) // 2))
            for _ in dilations)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for dilated, plain in zip(self.dilated, self.plain):
            step = dilated(F.leaky_relu(x, LEAKY_SLOPE) * mask)
            x = x + plain(F.leaky_relu(step, LEAKY_SLOPE) * mask)
        return x * mask


class FrameDecoder(nn.Module):
    """[content, log-F0, voicing, projected speaker embedding] per frame -> (B, channels, T)
    through residual dilated convolutions at the frame rate."""

    def __init__(self, *, content_dim: int, speaker_dim: int, channels: int = 128, speaker_channels: int = 64,
                 layers: int = 3, kernel_size: int = 5):
        super().__init__()
        self.speaker = nn.Linear(speaker_dim, speaker_channels)
        self.input = nn.Conv1d(content_dim + 2 + speaker_channels, channels, kernel_size, padding=kernel_size // 2)
        self.layers = nn.ModuleList(
            nn.Conv1d(channels + speaker_channels, channels, kernel_size, dilation=2 ** i,
                      padding=2 ** i * (kernel_size // 2))
            for i in range(layers))
        self.channels = int(channels)

    def forward(self, content: torch.Tensor, f0: torch.Tensor, voiced: torch.Tensor, speaker: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        """content (B, T, C), f0 and voiced (B, T), speaker (B, D) L2-normalised, mask (B, T)."""
        frames = mask.unsqueeze(1).to(content.dtype)
        log_f0 = torch.where(voiced, f0.clamp_min(1.0).log() - LOG_F0_CENTRE, torch.zeros_like(f0))
        spk = self.speaker(speaker)[..., None].expand(-1, -1, content.shape[1])
        x = torch.cat([content.transpose(1, 2), log_f0[:, None].to(content.dtype),
                       voiced[:, None].to(content.dtype), spk], dim=1)
        h = self.input(x * frames)
        for layer in self.layers:
            h = h + layer(torch.cat([F.leaky_relu(h, LEAKY_SLOPE), spk], dim=1) * frames)
        return h * frames


class HiFiGANNSF(nn.Module):
    """Frame conditioning (B, C, T) + excitation (B, 1, T * hop) -> (B, T * hop) waveform in [-1, 1].

    Args:
        in_channels: conditioning channels (the FrameDecoder's output).
        upsample_rates: their product is the hop length (e.g. 5*4*4*2 = 160 for 10 ms at 16 kHz).
        upsample_kernel_sizes: one per rate, each twice its rate (clean overlap).
        upsample_initial_channel: channels after the input convolution, halved at every stage.
        resblock_kernel_sizes, resblock_dilations: the multi-receptive-field blocks.
    """

    def __init__(self, *, in_channels: int, upsample_rates: Sequence[int] = (5, 4, 4, 2),
                 upsample_kernel_sizes: Sequence[int] = (10, 8, 8, 4), upsample_initial_channel: int = 128,
                 resblock_kernel_sizes: Sequence[int] = (3, 7), resblock_dilations: Sequence[Sequence[int]] = ((1, 3), (1, 3))):
        super().__init__()
        rates, kernels = [int(r) for r in upsample_rates], [int(k) for k in upsample_kernel_sizes]
        if len(rates) != len(kernels) or any(k != 2 * r for r, k in zip(rates, kernels)):
            raise ValueError(f"upsample_kernel_sizes must be twice upsample_rates, got {kernels} for {rates}")
        self.rates = rates
        self.hop_length = math.prod(rates)
        self.conv_pre = weight_norm(nn.Conv1d(in_channels, upsample_initial_channel, 7, padding=3))
        self.ups, self.source_convs, self.blocks = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        channels = upsample_initial_channel
        for i, (rate, kernel) in enumerate(zip(rates, kernels)):
            out = channels // 2
            self.ups.append(weight_norm(nn.ConvTranspose1d(channels, out, kernel, rate, padding=(kernel - rate) // 2)))
            stride = math.prod(rates[i + 1:])
            self.source_convs.append(nn.Conv1d(1, out, 2 * stride, stride, padding=(stride + 1) // 2) if stride > 1
                                     else nn.Conv1d(1, out, 1))
            self.blocks.append(nn.ModuleList(ResBlock(out, k, d)
                                             for k, d in zip(resblock_kernel_sizes, resblock_dilations)))
            channels = out
        self.conv_post = weight_norm(nn.Conv1d(channels, 1, 7, padding=3))

    def forward(self, conditioning: torch.Tensor, excitation: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """conditioning (B, C, T), excitation (B, 1, T * hop), frames (B,) valid frame counts."""
        frame_mask = length_mask(frames, conditioning.shape[2])[:, None]
        x = self.conv_pre(conditioning * frame_mask) * frame_mask
        excitation = excitation * length_mask(frames * self.hop_length, excitation.shape[2])[:, None]
        scale = 1
        for up, source_conv, blocks, rate in zip(self.ups, self.source_convs, self.blocks, self.rates):
            scale *= rate
            total = x.shape[2] * rate
            mask = length_mask(frames * scale, total)[:, None]
            x = up(F.leaky_relu(x, LEAKY_SLOPE))[..., :total] * mask
            x = x + source_conv(excitation)[..., :x.shape[2]] * mask
            x = sum(block(x, mask) for block in blocks) / len(blocks)
        mask = length_mask(frames * self.hop_length, x.shape[2])
        return torch.tanh(self.conv_post(F.leaky_relu(x, LEAKY_SLOPE) * mask[:, None])).squeeze(1) * mask
