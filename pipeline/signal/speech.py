"""Is it speech? A fast acoustic screen of one waveform (numpy, vectorised over frames).

An anonymiser that writes noise, silence, clicks or a tone instead of speech makes every
attacker fail, and its privacy reads as excellent (issue 38: white noise at -70 dBFS gave
AA EER 44 %, DeID 82-96 %). Speech has two things none of those have together:

- **voicing**: a share of its frames is periodic at a voice's pitch. A frame is voiced when the
  normalised cross-correlation (NCCF, as in RAPT) of its pre-emphasised samples peaks above
  `VOICING` at a lag of 2.5-16.7 ms (F0 60-400 Hz), among the frames within `ACTIVE_DB` of
  the utterance's loud frames. Noise (white, dithered silence) and isolated clicks are not
  periodic; a steady tone is.
- **dynamics**: speech starts and stops (syllables, pauses): the frame energies spread over
  at least `DYNAMICS_DB` (their 95th minus 10th percentile). A steady tone, noise and dither
  are flat.

An utterance is speech when at least `MIN_VOICED` of its frames are voiced and its dynamics
reach `DYNAMICS_DB`. The screen is scale-free (noise at -70 dBFS fails as noise at -10 does).
Time-reversed speech passes: it is voiced and dynamic, its speaker is still there, and
telling it apart needs language, not acoustics (the report's utility flag may catch it where a
WER is computed). Beeps (a tone switched on and off) pass too. Whispering fails (no voicing):
a system that truly outputs it is let through by `output_check.speech=false`. The figures (false refusals on
every shipped anonymiser, detection of each non-speech case) are in docs/robustness.md,
"Output checks", measured by `benchmarks/speech_screen.py`.

>>> rate = 16000
>>> t = np.arange(rate * 2) / rate
>>> vowel = np.sign(np.sin(2 * np.pi * (120 + 20 * t) * t)) * (np.sin(2 * np.pi * 2 * t) > 0)
>>> screen(vowel, rate).speech, screen(np.random.default_rng(0).normal(0, 3e-4, 2 * rate), rate).speech
(True, False)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FRAME_SECONDS = 0.02     # correlation window
HOP_SECONDS = 0.01
F0_RANGE_HZ = (60.0, 400.0)  # lags searched: any voice, McAdams' outputs keep the source's F0
PRE_EMPHASIS = 1.0       # first difference: low-frequency noise and hum are not taken for voicing
VOICING = 0.45           # NCCF peak of a voiced frame (white noise over these lags: about 0.2)
ACTIVE_DB = 35.0         # a frame counts when within this of the 95th percentile frame energy
MIN_VOICED = 0.10        # share of all frames voiced (read speech: 30-60 %)
DYNAMICS_DB = 10.0       # 95th - 10th percentile of frame energies
FLOOR = 1e-12            # energy floor (digital silence): -120 dB


@dataclass(frozen=True)
class Screen:
    """The screen's verdict on one waveform and the two figures it rests on."""

    speech: bool
    voiced: float      # share of frames voiced
    dynamics_db: float  # 95th - 10th percentile of frame energies, dB

    def reason(self) -> str:
        """Why a waveform failed ('' when it passed)."""
        why = [f"{100 * self.voiced:.0f} % voiced frames (< {100 * MIN_VOICED:.0f} %)"] if self.voiced < MIN_VOICED else []
        why += [f"energy spread {self.dynamics_db:.1f} dB (< {DYNAMICS_DB:g})"] if self.dynamics_db < DYNAMICS_DB else []
        return ", ".join(why)


def frames(x: np.ndarray, length: int, hop: int) -> np.ndarray:
    """(n_frames, length) views of `x` every `hop` samples (x zero-padded to at least one frame)."""
    if len(x) < length:
        x = np.pad(x, (0, length - len(x)))
    return np.lib.stride_tricks.sliding_window_view(x, length)[::hop]


def screen(wave: np.ndarray, sample_rate: int) -> Screen:
    """Voiced share and dynamics of `wave` (1-D, any scale) and whether that makes it speech."""
    x = np.asarray(wave, dtype=np.float64).ravel()
    x = np.append(x[:1], x[1:] - PRE_EMPHASIS * x[:-1]) if len(x) else np.zeros(1)
    window, hop = round(FRAME_SECONDS * sample_rate), round(HOP_SECONDS * sample_rate)
    lag_min, lag_max = round(sample_rate / F0_RANGE_HZ[1]), round(sample_rate / F0_RANGE_HZ[0])
    span = frames(x, window + lag_max, hop)                        # each frame and the lags after it
    head = span[:, :window]
    size = 1 << int(np.ceil(np.log2(span.shape[1] + window)))
    cross = np.fft.irfft(np.conj(np.fft.rfft(head, size)) * np.fft.rfft(span, size), size)[:, lag_min:lag_max + 1]
    squares = np.concatenate([np.zeros((len(span), 1)), np.cumsum(span ** 2, axis=1)], axis=1)
    shifted = squares[:, lag_min + window:lag_max + window + 1] - squares[:, lag_min:lag_max + 1]
    energy = squares[:, window]                                    # of the frame itself
    nccf = cross / np.sqrt(np.maximum(energy[:, None] * shifted, FLOOR * FLOOR))
    level = 10 * np.log10(np.maximum(energy / window, FLOOR))
    loud = np.percentile(level, 95)
    voiced = (nccf.max(axis=1) > VOICING) & (level > loud - ACTIVE_DB)
    share, dynamics = float(voiced.mean()), float(loud - np.percentile(level, 10))
    return Screen(speech=share >= MIN_VOICED and dynamics >= DYNAMICS_DB, voiced=share, dynamics_db=dynamics)
