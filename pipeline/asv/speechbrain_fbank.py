"""Batched SpeechBrain `Fbank` (the VoicePrivacy 2024 ASV front end) in torch, on the input's device.

VPC 2024's ECAPA hyperparameters feed `speechbrain.lobes.features.Fbank(n_mels=80)` with its
defaults: a centred STFT (400-point FFT, 25 ms periodic Hamming window, 10 ms hop, zero
padding at both ends, so `1 + samples // 160` frames), the power spectrum, SpeechBrain's
triangular mel filters between 0 Hz and Nyquist, 10·log10 clamped at 1e-10 and at 80 dB
below the utterance's maximum. This module computes the same frames and values for a padded
batch: each utterance's maximum is taken over its own frames only, so an utterance's
features do not depend on what it is batched with. The per-sentence mean normalisation
(`InputNormalization(norm_type="sentence", std_norm=False)`) is the encoder's
`normalise_mean`, shared with the Kaldi front end.
"""
from __future__ import annotations

import torch
from speechbrain.processing.features import Filterbank
from torch import nn


class SpeechBrainFbank(nn.Module):
    """(B, N) waveforms + (B,) sample counts -> (B, F, n_mels) dB fbank + (B,) frame counts.

    >>> fbank = SpeechBrainFbank(16000, 80)
    >>> feats, frames = fbank(torch.zeros(2, 16000), torch.tensor([16000, 8000]))
    >>> feats.shape, frames.tolist()
    (torch.Size([2, 101, 80]), [101, 51])
    """

    def __init__(self, sample_rate: int = 16000, n_mels: int = 80, *, n_fft: int = 400,
                 win_length_ms: float = 25.0, hop_length_ms: float = 10.0, top_db: float = 80.0,
                 amin: float = 1e-10):
        super().__init__()
        self.n_fft = n_fft
        self.window_size = int(round(sample_rate / 1000.0 * win_length_ms))  # as speechbrain's STFT rounds
        self.window_shift = int(round(sample_rate / 1000.0 * hop_length_ms))
        self.top_db = top_db
        self.amin = amin
        # SpeechBrain's own filter matrix: its Filterbank without the log, applied to an identity spectrum.
        filters = Filterbank(n_mels=n_mels, log_mel=False, f_min=0, f_max=sample_rate // 2, n_fft=n_fft,
                             sample_rate=sample_rate)
        with torch.no_grad():
            mel_banks = filters(torch.eye(n_fft // 2 + 1)[None])[0]
        self.register_buffer("window", torch.hamming_window(self.window_size), persistent=False)
        self.register_buffer("mel_banks", mel_banks.contiguous(), persistent=False)

    def num_frames(self, num_samples: torch.Tensor) -> torch.Tensor:
        """Frames per utterance of a centred STFT."""
        return 1 + torch.div(num_samples, self.window_shift, rounding_mode="floor")

    def forward(self, wavs: torch.Tensor, num_samples: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type=wavs.device.type, enabled=False):
            spectrum = torch.stft(wavs.float(), self.n_fft, self.window_shift, self.window_size, self.window,
                                  center=True, pad_mode="constant", normalized=False, onesided=True,
                                  return_complex=True)
            power = torch.view_as_real(spectrum).pow(2).sum(-1).transpose(1, 2)
            feats = 10.0 * torch.log10((power @ self.mel_banks).clamp(min=self.amin))
            frames = self.num_frames(num_samples)
            valid = torch.arange(feats.shape[1], device=feats.device)[None, :] < frames[:, None]
            loudest = feats.masked_fill(~valid[:, :, None], float("-inf")).amax(dim=(1, 2))
            feats = torch.maximum(feats, (loudest - self.top_db)[:, None, None])
        return feats, frames
