"""Batched Kaldi-style log mel filterbanks in torch, on whatever device the input lives on.

Matches `torchaudio.compliance.kaldi.fbank` with its defaults (25 ms povey window, 10 ms
shift, `snip_edges`, DC removal, pre-emphasis 0.97, power spectrum, no dither) frame by
frame, for a padded batch of waveforms. Waveforms in [-1, 1] are scaled to the 16-bit
integer range first, as Kaldi reads audio, so the log floor sits far below any real signal.
"""
from __future__ import annotations

import torch
from torch import nn
from torchaudio.compliance.kaldi import get_mel_banks

INT16_SCALE = 32768.0


class KaldiFbank(nn.Module):
    """(B, N) waveforms + (B,) sample counts -> (B, F, n_mels) log fbank + (B,) frame counts.

    >>> fbank = KaldiFbank(16000, 80)
    >>> feats, frames = fbank(torch.zeros(2, 16000), torch.tensor([16000, 8000]))
    >>> feats.shape, frames.tolist()
    (torch.Size([2, 98, 80]), [98, 48])
    """

    def __init__(self, sample_rate: int = 16000, n_mels: int = 80, *, frame_length_ms: float = 25.0,
                 frame_shift_ms: float = 10.0, preemphasis: float = 0.97, low_freq: float = 20.0,
                 high_freq: float = 0.0):
        super().__init__()
        self.window_size = int(sample_rate * frame_length_ms / 1000)
        self.window_shift = int(sample_rate * frame_shift_ms / 1000)
        self.fft_size = 1 << (self.window_size - 1).bit_length()
        self.preemphasis = preemphasis
        povey = torch.hann_window(self.window_size, periodic=False, dtype=torch.float64).pow(0.85)
        banks, _ = get_mel_banks(n_mels, self.fft_size, float(sample_rate), low_freq, high_freq, 100.0, -500.0, 1.0)
        banks = nn.functional.pad(banks, (0, 1))  # the Nyquist bin gets no weight, as in Kaldi
        self.register_buffer("window", povey.float(), persistent=False)
        self.register_buffer("mel_banks", banks.float().T.contiguous(), persistent=False)

    def num_frames(self, num_samples: torch.Tensor) -> torch.Tensor:
        """Frames per utterance with `snip_edges` (0 below one window)."""
        frames = 1 + torch.div(num_samples - self.window_size, self.window_shift, rounding_mode="floor")
        return frames.clamp(min=0)

    def forward(self, wavs: torch.Tensor, num_samples: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type=wavs.device.type, enabled=False):
            frames = (wavs.float() * INT16_SCALE).unfold(1, self.window_size, self.window_shift)
            frames = frames - frames.mean(dim=-1, keepdim=True)
            previous = torch.cat([frames[..., :1], frames[..., :-1]], dim=-1)
            frames = (frames - self.preemphasis * previous) * self.window
            power = torch.fft.rfft(frames, n=self.fft_size).abs().pow(2.0)
            mel = power @ self.mel_banks
            feats = mel.clamp(min=torch.finfo(torch.float32).eps).log()
        return feats, self.num_frames(num_samples)
