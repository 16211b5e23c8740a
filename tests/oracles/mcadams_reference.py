"""Straightforward per-frame numpy/scipy McAdams: the yardstick for `anonymizers.mcadams`.

Same algorithm and constants as the batched torch version, written the obvious way, one frame
at a time: autocorrelation with `np.correlate`, Levinson-Durbin through
`scipy.linalg.solve_toeplitz`, poles with `np.roots` (eigenvalues of the companion matrix),
`np.poly` for the new LPC and `scipy.signal.lfilter` for residual and resynthesis; with
`lpc="burg"`, `librosa.lpc` itself (a test dependency, imported only then). Used by the
tests and by `benchmarks/bench_mcadams.py`; not by the pipeline.

Known differences of both implementations from the VPC 2024 B2 code (`anonym_v2` in
`anonymise_dir_mcadams_rand_seed.py`), all deliberate, measured in README.md ("McAdams
against the VPC 2024 B2 code", `benchmarks/compare_vpc_mcadams.py`):

- LPC: VPC uses `librosa.lpc` (Burg's method); here `lpc="levinson"` (the default) is the
  autocorrelation method with -90 dB white-noise correction, `lpc="burg"` is librosa's Burg.
- VPC frames only complete frames from sample 0, so its first 10 ms lie under one frame and
  the tail after the last complete frame is silent. Here the signal is padded (10 ms in
  front, up to a full frame at the end) so that every sample lies under two frames.
- VPC uses the symmetric `np.hanning(320)`, whose window pair overlap-adds to 1 only
  approximately (between 0.998 and 1.003, a ripple at 100 Hz); here the periodic Hann
  overlap-adds exactly, so α = 1 reproduces the input.
- VPC adds float32 eps to the samples and to the windowed frames; here r[0] is regularised
  (Levinson) or nothing is (Burg).
- VPC counts a pole as real only when its imaginary part is exactly 0 and does not clip the
  new angle; here |Im| <= REAL_POLE_TOLERANCE is real and the angle is clipped at π (which
  only α > 1 can reach).
- VPC scales the output to full scale; here it keeps the input's peak.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.signal

from anonymizers.mcadams import (
    AUTOCORRELATION_FLOOR,
    LPC_ORDER,
    REAL_POLE_TOLERANCE,
    WHITE_NOISE_CORRECTION,
    analysis_window,
    frame_geometry,
    padded_length,
)


def mcadams_frame(frame: np.ndarray, alpha: float, window: np.ndarray, lpc_order: int = LPC_ORDER,
                  lpc_method: str = "levinson") -> np.ndarray:
    """One raw frame in, one windowed anonymised frame out."""
    windowed = frame * window
    if lpc_method == "burg":
        import librosa

        lpc = librosa.lpc(windowed, order=lpc_order)
    else:
        autocorrelation = np.correlate(windowed, windowed, "full")[len(windowed) - 1:len(windowed) + lpc_order].copy()
        autocorrelation[0] = autocorrelation[0] * (1.0 + WHITE_NOISE_CORRECTION) + AUTOCORRELATION_FLOOR
        lpc = np.concatenate([[1.0], scipy.linalg.solve_toeplitz(autocorrelation[:-1], -autocorrelation[1:])])
    poles = np.roots(lpc)
    poles = np.concatenate([poles, np.zeros(lpc_order - len(poles))])  # np.roots drops zero roots
    angle = np.angle(poles)
    warped = np.abs(poles) * np.exp(1j * np.sign(angle) * np.minimum(np.abs(angle) ** alpha, np.pi))
    new_poles = np.where(np.abs(poles.imag) <= REAL_POLE_TOLERANCE, poles.real, warped)
    new_lpc = np.poly(new_poles).real
    residual = scipy.signal.lfilter(lpc, [1.0], windowed)
    return scipy.signal.lfilter([1.0], new_lpc, residual) * window


def mcadams_reference(wave: np.ndarray, alpha: float, sample_rate: int = 16000,
                      lpc_order: int = LPC_ORDER, lpc_method: str = "levinson") -> np.ndarray:
    """McAdams of one 1-D waveform with coefficient `alpha`; float64 output of the same length.

    >>> mcadams_reference(np.zeros(100), 0.8).shape
    (100,)
    """
    wave = np.asarray(wave, dtype=np.float64)
    win_length, shift = frame_geometry(sample_rate)
    window = analysis_window(win_length, shift)
    num_frames, length = padded_length(len(wave), win_length, shift)
    offset = win_length - shift
    padded = np.zeros(length)
    padded[offset:offset + len(wave)] = wave
    output = np.zeros(length)
    for m in range(num_frames):
        span = slice(m * shift, m * shift + win_length)
        output[span] += mcadams_frame(padded[span], alpha, window, lpc_order, lpc_method)
    output = output[offset:offset + len(wave)]
    peak = np.abs(output).max(initial=0.0)
    return output * (np.abs(wave).max() / peak) if peak > 0 else output
