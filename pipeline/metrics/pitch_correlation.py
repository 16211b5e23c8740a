"""Pitch correlation ρF0 (VoicePrivacy 2022): how well anonymisation keeps the intonation.

ρF0 of an utterance is the Pearson correlation between the F0 track of the original and
of its anonymised version, over the frames voiced in both; a set's ρF0 is the mean over its
utterances (VPC 2022 asks for ρF0 > 0.3). As in the VPC 2022 toolkit
(`pitch_correlation.py`): F0 every 10 ms searched in 75-500 Hz, the shorter track linearly
interpolated to the length of the longer, and a frame counts as voiced when its F0 lies in
75-500 Hz after that interpolation; an undefined correlation (fewer than two common voiced
frames, or a constant track: spanning under 1 Hz) is 0, as the toolkit's `fillna(0)` makes it. Where vpeval
differs from the toolkit, see README.md, "Utility".

>>> round(pitch_correlation(np.array([100., 120, 0, 140]), np.array([200., 240, 250, 280])), 6)
1.0
"""
from __future__ import annotations

import numpy as np

F0_MIN = 75.0     # Hz, VPC 2022's pitch floor and voicing rule
F0_MAX = 500.0    # Hz, VPC 2022's pitch ceiling and voicing rule
FRAME_SECONDS = 0.01
# A voiced track spanning less than this is constant (its correlation undefined): on a steady
# 150 Hz tone the tracker's interpolation and its edge frames leave a 0.2 Hz spread, which would
# otherwise give a steady voice a noise-driven correlation; 1 Hz is under the F0 difference
# listeners hear and far under any intonation.
CONSTANT_SPAN_HZ = 1.0


def f0_track(wave: np.ndarray, sample_rate: int) -> np.ndarray:
    """F0 in Hz every 10 ms (0 where unvoiced) by the YIN tracker of `pipeline.signal.f0`,
    searched in 75-500 Hz."""
    import torch

    from pipeline.signal.f0 import YinPitch

    tracker = YinPitch(sample_rate=sample_rate, hop_length=round(FRAME_SECONDS * sample_rate),
                       f0_min=F0_MIN, f0_max=F0_MAX)
    f0, _ = tracker(torch.as_tensor(np.asarray(wave, dtype=np.float32))[None])
    return f0[0].double().numpy()


def stretched(f0: np.ndarray, length: int) -> np.ndarray:
    """`f0` linearly interpolated to `length` frames, first and last frames kept (VPC 2022)."""
    f0 = np.asarray(f0, dtype=np.float64)
    if len(f0) == length or len(f0) < 2:
        return np.resize(f0, length) if len(f0) != length else f0
    return np.interp(np.linspace(0, len(f0) - 1, length), np.arange(len(f0)), f0)


def pitch_correlation(original: np.ndarray, anonymized: np.ndarray) -> float:
    """ρF0 of two F0 tracks (Hz, 0 where unvoiced) of one utterance: Pearson over the frames
    voiced (75-500 Hz) in both after stretching the shorter to the longer; 0 when undefined."""
    length = max(len(original), len(anonymized))
    a, b = stretched(original, length), stretched(anonymized, length)
    both = (a >= F0_MIN) & (a <= F0_MAX) & (b >= F0_MIN) & (b <= F0_MAX)
    a, b = a[both], b[both]
    if len(a) < 2 or np.ptp(a) < CONSTANT_SPAN_HZ or np.ptp(b) < CONSTANT_SPAN_HZ:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])
