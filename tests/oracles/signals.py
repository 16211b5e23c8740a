"""Deterministic speech-like test signals for the anonymiser tests and benchmarks.

A source-filter toy: a glottal pulse train with a moving F0 (voiced stretches) or noise
(unvoiced stretches), through five formant resonators, with a stretch of digital silence.

>>> speech_like(0.5, seed=1).shape
(8000,)
"""
from __future__ import annotations

import numpy as np
import scipy.signal

FORMANTS_HZ = ((700, 80), (1200, 90), (2600, 120), (3500, 200), (4500, 250))


def speech_like(seconds: float, seed: int, sample_rate: int = 16000, f0_hz: float = 140.0) -> np.ndarray:
    """Mono float32 audio peaking at 0.8; `seed` varies F0 level, formants and timing."""
    rng = np.random.default_rng(seed)
    count = int(round(seconds * sample_rate))
    time = np.arange(count) / sample_rate
    f0 = f0_hz * (0.8 + 0.4 * rng.random()) * (1 + 0.2 * np.sin(2 * np.pi * 0.7 * time + 6 * rng.random()))
    phase = np.cumsum(f0 / sample_rate)
    pulses = (np.diff(np.floor(phase), prepend=0.0) > 0).astype(float)
    voiced = np.sin(2 * np.pi * (1.0 + rng.random()) * time + 6 * rng.random()) > -0.3
    source = np.where(voiced, pulses + 0.02 * rng.standard_normal(count), 0.3 * rng.standard_normal(count))
    speech = source
    for frequency, bandwidth in FORMANTS_HZ:
        radius = np.exp(-np.pi * bandwidth / sample_rate)
        angle = 2 * np.pi * frequency * (0.9 + 0.2 * rng.random()) / sample_rate
        speech = scipy.signal.lfilter([1 - radius], [1, -2 * radius * np.cos(angle), radius * radius], speech)
    silence_start = int(count * rng.uniform(0.2, 0.6))
    speech[silence_start:silence_start + count // 10] = 0.0
    peak = np.abs(speech).max(initial=0.0)
    return (0.8 * speech / peak if peak > 0 else speech).astype(np.float32)
